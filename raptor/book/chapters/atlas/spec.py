"""The spec of the chapter *Where do phases appear?*: its parameters, checked without the science's
imports, and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from raptor import atlas_design
from raptor.book.spec import require

NAME = "atlas"
NOTEBOOK = "chapters/atlas.ipynb"
REPOSITORY = atlas_design.RESULTS.parents[1]


@dataclass(frozen=True)
class Spec:
    """The cells stored in ``results`` (a folder; relative paths from the repository's root),
    C1's test on each at every k of ``k_values`` with ``n_boot`` resamples; the figures and the
    verdicts show ``k``."""

    results: str = "results/atlas"
    k_values: tuple[int, ...] = (2, 3, 4)
    k: int = 3
    n_boot: int = 200

    def __post_init__(self) -> None:
        require(len(self.k_values) >= 1 and all(2 <= k < min(atlas_design.DEPTHS)
                                                 for k in self.k_values), "k_values",
                f"a non-empty list of k in [2, {min(atlas_design.DEPTHS) - 1}]", self.k_values)
        require(self.k in self.k_values, "k", f"one of k_values {list(self.k_values)}", self.k)
        require(self.n_boot >= 10, "n_boot", "≥ 10", self.n_boot)
        require((self.folder / atlas_design.MANIFEST).is_file(), "results",
                f"a folder holding the atlas's {atlas_design.MANIFEST} (`python -m raptor atlas` "
                f"writes it)", self.results)

    @property
    def folder(self) -> Path:
        return REPOSITORY / self.results  # an absolute ``results`` stays itself


SMOKE = dataclasses.replace(Spec(), k_values=(3,), n_boot=20)
PAPER = Spec()
