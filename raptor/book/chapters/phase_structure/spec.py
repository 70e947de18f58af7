"""The spec of the chapter *Emergent phase structure*: its parameters, checked without the science's
imports, and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raptor.book.profiles import (PAPER_TEACHER, PAPER_TRAIN, SMOKE_TEACHER, SMOKE_TRAIN, TEACHER,
                                  TRAIN)
from raptor.book.pretrained import Pretrained
from raptor.book.spec import Machine, nested, require, require_data
from raptor.config import TeacherConfig, TrainConfig

NAME = "phase-structure"
NOTEBOOK = "chapters/phase_structure.ipynb"


@dataclass(frozen=True)
class Spec:
    """Teachers for each stochastic-depth rate in ``p_values`` and seed in ``teacher_seeds``, and
    untrained ones; ``pretrained`` with its ``weights`` adds a timm ViT on its ``images``
    (DINOv2-B on ImageNet: Fig. 1); ``control_images``: each synthetic control's images."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p_values: tuple[float, ...] = (0.0, TEACHER.p)
    teacher_seeds: tuple[int, ...] = (0, 1, 2)
    n_images: int = 1000
    k: int = 3
    n_boot: int = 200
    control_images: int = 200
    pretrained: Pretrained = nested(Pretrained)
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train)
        require(all(0 <= p < 1 for p in self.p_values), "p_values", "rates in [0, 1)",
                self.p_values)
        require(len(self.teacher_seeds) >= 1 and all(s >= 0 for s in self.teacher_seeds),
                "teacher_seeds", "a non-empty list of seeds ≥ 0", self.teacher_seeds)
        require(self.n_images >= 8, "n_images", "≥ 8", self.n_images)
        require(2 <= self.k < self.teacher.depth, "k", f"in [2, L − 1 = {self.teacher.depth - 1}]",
                self.k)
        require(self.n_boot >= 10, "n_boot", "≥ 10", self.n_boot)
        require(self.control_images >= 8, "control_images", "≥ 8", self.control_images)

    def require_model(self) -> None:
        """The check that needs torch and timm: the pretrained ViT against its weights file."""
        self.pretrained.require_model()


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, teacher_seeds=(0, 1),
                            n_images=64, k=2, n_boot=20, control_images=40)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN,
                            p_values=(0.0, 0.2, 0.4, 0.6), n_images=10_000)
