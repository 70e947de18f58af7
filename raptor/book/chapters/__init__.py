"""The book's chapters, one module each: a ``Spec``, ``compute``, figures and ``claims``.

Every chapter module defines ``NAME`` (its name on the command line), ``NOTEBOOK`` (its notebook,
relative to ``book/``), a frozen ``Spec`` whose defaults are the ``cpu`` profile, ``SMOKE`` and
``PAPER`` (the other profiles, as ``dataclasses.replace`` of ``Spec()``), a ``Result``
dataclass, ``compute(spec) -> Result`` and ``claims(result) -> list[Claim]``; one whose claims
run significance tests lists their levels in ``ALPHAS`` (the claims page quotes them).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from raptor import data
from raptor.book.spec import SpecError, from_parameters, notebook_values

# Book order.
MODULES: dict[str, str] = {
    "phase-structure": "phase_structure",
    "atlas": "atlas",
    "finding-phases": "finding_phases",
    "raptor": "raptor",
    "stochastic-depth": "stochastic_depth",
    "functional-phases": "functional_phases",
    "dynamics": "dynamics",
    "scaling": "scaling",
    "analyze": "analyze",
    "claims": "claims_page",
}
PROFILES = ("smoke", "cpu", "paper")


class ChapterError(ValueError):
    """An unknown chapter or profile."""


def chapter(name: str) -> ModuleType:
    """The module of chapter ``name``."""
    if name not in MODULES:
        raise ChapterError(f"unknown chapter {name!r}; valid chapters: {', '.join(MODULES)}")
    return importlib.import_module(f"{__name__}.{MODULES[name]}")


def spec_for(name: str, profile: str):
    """Chapter ``name``'s spec at ``profile``."""
    if profile not in PROFILES:
        raise ChapterError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    mod = chapter(name)
    return {"smoke": mod.SMOKE, "cpu": mod.Spec(), "paper": mod.PAPER}[profile]


def notebook_spec(module: ModuleType, values: Mapping[str, Any]):
    """A chapter notebook's spec: every parameter as the notebook holds it (its ``parameters``
    cell, then what ``python -m raptor run`` injected: the resolved spec whole). ``profile`` only
    names the run; a profile other than ``cpu`` with every parameter at its ``cpu`` value was
    set alone, which would silently run ``cpu``: an error."""
    spec = from_parameters(module.Spec, values, strict=False)
    profile = values.get("profile", "cpu")
    if profile != "cpu" and spec == module.Spec() != spec_for(module.NAME, profile):
        raise SpecError(f"profile {profile!r} was set without its parameters; run "
                        f"`python -m raptor run --profile {profile} --chapter {module.NAME}`, "
                        "which injects them")
    return spec


def launched(name: str) -> dict[str, Any]:
    """Chapter ``name`` launched in a fresh environment (Colab, Binder; its install cell):
    Fashion-MNIST fetched into ``$RAPTOR_DATA`` (default ``~/raptor-data``); returns the
    ``smoke`` profile's parameters, for the notebook's globals."""
    os.environ.setdefault("RAPTOR_DATA", str(Path.home() / "raptor-data"))
    data.get_datasets("fashion-mnist", download=True)
    print("A fresh environment: the `smoke` profile. For the stored book's `cpu` profile, run the "
          "parameters cell above again, then the cells after this one.")
    return {"profile": "smoke", **notebook_values(spec_for(name, "smoke"))}
