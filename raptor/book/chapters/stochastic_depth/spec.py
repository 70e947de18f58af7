"""The spec of the chapter *Stochastic depth and recurrent compressibility*: its parameters, checked
without the science's imports, and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raptor import paper
from raptor.book.profiles import (DISTILL, PAPER_DISTILL, PAPER_TEACHER, PAPER_TRAIN, SMOKE_DISTILL,
                                  SMOKE_TEACHER, SMOKE_TRAIN, TEACHER, TRAIN)
from raptor.book.spec import Machine, nested, require, require_data
from raptor.config import DistillConfig, TeacherConfig, TrainConfig

NAME = "stochastic-depth"
NOTEBOOK = "chapters/stochastic_depth.ipynb"


@dataclass(frozen=True)
class Spec:
    """A teacher per stochastic-depth rate in ``p_values`` and seed, each with a Raptor of ``k``
    blocks distilled on its max-cut partition."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p_values: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6)  # C7's range
    seeds: tuple[int, ...] = (0, 1, 2)
    k: int = 3
    distill: DistillConfig = nested(DISTILL)
    n_images: int = 1000
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        require(len(self.p_values) >= 1 and all(0 <= p < 1 for p in self.p_values), "p_values",
                "a non-empty list of rates in [0, 1)", self.p_values)
        require(len(self.seeds) >= 1 and len(set(self.seeds)) == len(self.seeds), "seeds",
                "a non-empty list of distinct seeds", self.seeds)
        require(1 <= self.k <= self.teacher.depth, "k", f"in [1, L = {self.teacher.depth}]",
                self.k)
        require(self.n_images >= 1, "n_images", "≥ 1", self.n_images)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, distill=SMOKE_DISTILL,
                            n_images=64, seeds=(0,), k=2)
# The paper's rates (Fig. 4); it does not say how many seeds: three, as at cpu [ours].
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, distill=PAPER_DISTILL,
                            n_images=10_000, p_values=paper.SD_RATES)
