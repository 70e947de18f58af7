"""The spec of the chapter *Raptor*: its parameters, checked without the science's imports, and its
profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raptor.book.profiles import (DISTILL, PAPER_DISTILL, PAPER_TEACHER, PAPER_TRAIN, SMOKE_DISTILL,
                                  SMOKE_TEACHER, SMOKE_TRAIN, TEACHER, TRAIN)
from raptor.book.spec import Machine, nested, require, require_data, require_seeds
from raptor.config import DistillConfig, TeacherConfig, TrainConfig

NAME = "distillation"
NOTEBOOK = "chapters/distillation.ipynb"


@dataclass(frozen=True)
class Spec:
    """For each seed in ``seeds``, a teacher with stochastic depth ``p`` and its Raptors for each
    k in ``k_values``, compared on ``n_images`` validation images; probes train on
    ``probe_images``."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p: float = TEACHER.p
    seeds: tuple[int, ...] = (0, 1, 2)
    k_values: tuple[int, ...] = (2, 3)
    distill: DistillConfig = nested(DISTILL)
    n_images: int = 1000
    probe_images: int = 2000
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        require(0 <= self.p < 1, "p", "a rate in [0, 1)", self.p)
        require_seeds(self.seeds)
        L = self.teacher.depth
        require(len(self.k_values) >= 1 and all(1 <= k <= L for k in self.k_values), "k_values",
                f"a non-empty list of k in [1, L = {L}]", self.k_values)
        require(self.n_images >= 1, "n_images", "≥ 1", self.n_images)
        require(self.probe_images >= 1, "probe_images", "≥ 1", self.probe_images)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, distill=SMOKE_DISTILL,
                            n_images=64, k_values=(2,), probe_images=128, seeds=(0,))
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, distill=PAPER_DISTILL,
                            n_images=10_000, k_values=(2, 3, 4), probe_images=50_000)
