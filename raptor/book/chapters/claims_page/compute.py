"""The claims page's table: all 25 claims with every chapter's verdict, and the thresholds of
ours the chapters set."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from raptor.book.chapters import names, science
from raptor.book.chapters.claims_page.spec import NAME, Spec
from raptor.book.claims import Threshold, gather
from raptor.planning import Plan


@dataclass
class Result:
    table: pd.DataFrame


def compute(spec: Spec, plan: Plan | None = None, *, claims_dir: str = "claims") -> Result:
    """All 25 claims with every chapter's verdict (``claims_dir`` relative to ``book/``); no
    model is asked for, so a ``plan`` stands in for nothing."""
    return Result(gather(claims_dir))


def ours_thresholds() -> dict[str, Threshold]:
    """Every threshold of ours (``[ours]``, with its reason) in the other chapters' modules, keyed
    ``<chapter>.<name>``."""
    found = {}
    for name in names():
        if name == NAME:
            continue
        package = science(name)
        for module in (package.compute, package.claims, package.figures):
            found.update({f"{name}.{attr}": t for attr, t in vars(module).items()
                          if isinstance(t, Threshold) and t.source.startswith("[ours]")})
    return found
