"""The spec of the chapter *Finding the phases*: its parameters, checked without the science's
imports, and its profiles (its ``compute`` module computes it)."""

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
    subset sizes, ``n_resamples`` disjoint subsets of each drawn from ``held_out`` evaluation
    images beyond the chapter's ``n_images`` (independent draws); ``pretrained`` with its
    ``weights`` adds a timm ViT (DINOv2-B: Figs. 2–3)."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p_values: tuple[float, ...] = (TEACHER.p, 0.0)
    teacher_seeds: tuple[int, ...] = (0, 1, 2)
    n_images: int = 1000
    k_values: tuple[int, ...] = (2, 3, 4)
    eps_values: tuple[float, ...] = (0.2, 0.1, 0.09)
    image_counts: tuple[int, ...] = (10, 25, 50, 100, 200)
    n_resamples: int = 40  # the fewest for which all subsets agreeing clears STABLE_SHARE
    held_out: int = 9000  # the rest of Fashion-MNIST's 10,000 test images: the subsets' pool
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
        require(len(self.image_counts) >= 1 and all(n >= 1 for n in self.image_counts),
                "image_counts", "a non-empty list of subset sizes ≥ 1", self.image_counts)
        require(self.n_resamples >= 1, "n_resamples", "≥ 1", self.n_resamples)
        require(self.held_out >= 1, "held_out", "≥ 1", self.held_out)
        require(self.n_resamples * max(self.image_counts) <= self.held_out, "image_counts",
                f"sizes whose largest, times n_resamples = {self.n_resamples}, is at most "
                f"held_out = {self.held_out} (disjoint subsets)", self.image_counts)

    def require_model(self) -> None:
        """The check that needs torch and timm: the pretrained ViT against its weights file."""
        self.pretrained.require_model()


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, n_images=64,
                            k_values=(2, 3), image_counts=(16, 32), n_resamples=3, held_out=96)
# CIFAR-100's 10,000 test images: half for the cuts, half held out for 40 subsets of up to 125
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, n_images=5_000,
                            image_counts=(25, 50, 100, 125), held_out=5_000)
