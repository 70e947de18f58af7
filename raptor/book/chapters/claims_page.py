"""The claims page: every chapter's verdicts on the paper's 25 claims, gathered."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from raptor.book.claims import Claim, gather

NAME = "claims"
NOTEBOOK = "claims.ipynb"


@dataclass(frozen=True)
class Spec:
    """The claims page has no parameters of its own: it reads what the chapters wrote."""


SMOKE = PAPER = Spec()


@dataclass
class Result:
    table: pd.DataFrame


def compute(spec: Spec, claims_dir: str = "claims") -> Result:
    """All 25 claims with every chapter's verdict (``claims_dir`` relative to ``book/``)."""
    return Result(gather(claims_dir))


def claims(result: Result) -> list[Claim]:
    """The page tests no claim of its own."""
    return []
