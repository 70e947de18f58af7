"""The spec of the chapter *Scaling Raptor to foundation models*: its parameters, checked without
the science's imports, and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raptor.book.profiles import (DISTILL, PAPER_DISTILL, PAPER_TEACHER, PAPER_TRAIN, SMOKE_DISTILL,
                                  SMOKE_TEACHER, SMOKE_TRAIN, TEACHER, TRAIN)
from raptor.book.spec import (Machine, input_files, nested, require, require_data,
                              require_seeds)
from raptor.config import DistillConfig, TeacherConfig, TrainConfig

NAME = "scaling"
NOTEBOOK = "chapters/scaling.ipynb"


@dataclass(frozen=True)
class Spec:
    """For each seed in ``seeds``, a teacher (rate ``p``), a Raptor per k in ``k_values`` and
    Table 2's ladder at ``ladder_k``. ``pipeline_results``: ``results.json`` files of
    ``raptor.dinov2.pipeline`` runs (the paper's DINOv2-B distillation) to list beside this run."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p: float = TEACHER.p
    seeds: tuple[int, ...] = (0, 1, 2)
    k_values: tuple[int, ...] = (2, 3, 4)
    ladder_k: int = 3
    distill: DistillConfig = nested(DISTILL)
    n_images: int = 1000
    probe_images: int = 2000
    pipeline_results: tuple[str, ...] = input_files()
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        L = self.teacher.depth
        require(0 <= self.p < 1, "p", "a rate in [0, 1)", self.p)
        require_seeds(self.seeds)
        require(len(self.k_values) >= 1 and all(1 <= k <= L for k in self.k_values), "k_values",
                f"a non-empty list of block counts in [1, L = {L}]", self.k_values)
        require(self.ladder_k in self.k_values, "ladder_k",
                f"one of k_values = {list(self.k_values)}", self.ladder_k)
        require(self.n_images >= 1, "n_images", "≥ 1", self.n_images)
        require(self.probe_images >= 1, "probe_images", "≥ 1", self.probe_images)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, distill=SMOKE_DISTILL,
                            seeds=(0,), n_images=64, probe_images=128)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, distill=PAPER_DISTILL,
                            n_images=10_000, probe_images=50_000)
