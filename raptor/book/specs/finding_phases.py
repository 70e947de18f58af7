"""The spec of the chapter *Finding the phases*: its parameters, checked without the science's
imports, and its profiles (:mod:`raptor.book.chapters.finding_phases` computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raptor.book.profiles import (PAPER_TEACHER, PAPER_TRAIN, SMOKE_TEACHER, SMOKE_TRAIN, TEACHER,
                                  TRAIN)
from raptor.book.pretrained import Pretrained
from raptor.book.spec import Machine, nested, require, require_data
from raptor.config import TeacherConfig, TrainConfig

NAME = "finding-phases"
NOTEBOOK = "chapters/finding_phases.ipynb"


@dataclass(frozen=True)
class Spec:
    """Teachers with each rate in ``p_values`` (first seed), the first rate with every seed;
    ``eps_values``: the bisection's stopping thresholds; ``image_counts``: the stability test's
    subset sizes; ``pretrained`` with its ``weights`` adds a timm ViT (DINOv2-B: Figs. 2–3)."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p_values: tuple[float, ...] = (TEACHER.p, 0.0)
    teacher_seeds: tuple[int, ...] = (0, 1, 2)
    n_images: int = 1000
    k_values: tuple[int, ...] = (2, 3, 4)
    eps_values: tuple[float, ...] = (0.2, 0.1, 0.09)
    image_counts: tuple[int, ...] = (10, 25, 50, 100, 250, 500)
    n_resamples: int = 40  # the fewest for which all subsets agreeing clears STABLE_SHARE
    pretrained: Pretrained = nested(Pretrained)
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train)
        require(len(self.p_values) >= 1 and all(0 <= p < 1 for p in self.p_values), "p_values",
                "a non-empty list of rates in [0, 1)", self.p_values)
        require(len(self.teacher_seeds) >= 1 and all(s >= 0 for s in self.teacher_seeds),
                "teacher_seeds", "a non-empty list of seeds ≥ 0", self.teacher_seeds)
        require(self.n_images >= 1, "n_images", "≥ 1", self.n_images)
        L = self.teacher.depth
        require(len(self.k_values) >= 1 and all(1 <= k <= L for k in self.k_values), "k_values",
                f"a non-empty list of k in [1, L = {L}]", self.k_values)
        require(len(self.eps_values) >= 1 and all(0 < e < 1 for e in self.eps_values),
                "eps_values", "a non-empty list in (0, 1)", self.eps_values)
        require(len(self.image_counts) >= 1
                and all(1 <= n < self.n_images for n in self.image_counts), "image_counts",
                f"subset sizes in [1, n_images = {self.n_images}) (a subset, not the whole set)",
                self.image_counts)
        require(self.n_resamples >= 1, "n_resamples", "≥ 1", self.n_resamples)

    def require_model(self) -> None:
        """The check that needs torch and timm: the pretrained ViT against its weights file."""
        self.pretrained.require_model()


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, n_images=64,
                            k_values=(2, 3), image_counts=(16, 32), n_resamples=3)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, n_images=10_000,
                            image_counts=(100, 300, 1000, 3000, 5000))
