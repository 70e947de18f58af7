"""The spec of the chapter *Claims*: its parameters, checked without the science's imports, and its
profiles (its ``compute`` module computes it)."""

from __future__ import annotations

from dataclasses import dataclass


NAME = "claims"
NOTEBOOK = "claims.ipynb"


@dataclass(frozen=True)
class Spec:
    """The claims page has no parameters of its own: it reads what the chapters wrote."""


SMOKE = PAPER = Spec()
