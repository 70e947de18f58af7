"""The spec of the chapter *Depth as a dynamical system*: its parameters, checked without the
science's imports, and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from raptor.book.profiles import (DISTILL, PAPER_DISTILL, PAPER_TEACHER, PAPER_TRAIN, SMOKE_DISTILL,
                                  SMOKE_TEACHER, SMOKE_TRAIN, TEACHER, TRAIN)
from raptor.book.spec import Machine, nested, require, require_data, require_seeds
from raptor.catalog import dataset_info
from raptor.config import DistillConfig, TeacherConfig, TrainConfig
from raptor.paper import BASIN_CLASSES, DMD_RANK

NAME = "dynamics"
NOTEBOOK = "chapters/dynamics.ipynb"


@dataclass(frozen=True)
class Spec:
    """For each seed in ``seeds``, the teacher trained with stochastic depth ``p``, its max-cut
    into ``k`` phases and its Raptor. ``n_classes``: classes whose cls paths the PCA shows
    (Fig. 8 left); ``eps``: the perturbation's size (Fig. 10); ``dmd_rank``: the exact DMD's
    rank r (Fig. 12 right)."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p: float = TEACHER.p
    seeds: tuple[int, ...] = (0, 1, 2)
    k: int = 3
    distill: DistillConfig = nested(DISTILL)
    n_images: int = 1000
    n_classes: int = BASIN_CLASSES
    eps: float = 0.5
    dmd_rank: int = DMD_RANK
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        depth = self.teacher.depth
        require(depth >= 2, "L", "≥ 2 (a flow needs two layers)", depth)
        require(0 <= self.p < 1, "p", "in [0, 1)", self.p)
        require_seeds(self.seeds)
        require(1 <= self.k <= depth, "k", f"in [1, L = {depth}]", self.k)
        require(self.n_images >= 2, "n_images", "≥ 2", self.n_images)
        classes = dataset_info(self.train.dataset).num_classes
        require(1 <= self.n_classes <= classes, "n_classes", f"in [1, {classes}]",
                self.n_classes)
        require(math.isfinite(self.eps) and self.eps != 0, "eps", "a finite non-zero number",
                self.eps)
        require(self.dmd_rank >= 1, "dmd_rank", "≥ 1", self.dmd_rank)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, distill=SMOKE_DISTILL,
                            seeds=(0,), n_images=64, k=2, n_classes=3)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, distill=PAPER_DISTILL,
                            n_images=2_000)
