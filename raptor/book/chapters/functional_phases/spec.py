"""The spec of the chapter *Are the phases functional?*: its parameters, checked without the
science's imports, and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from raptor import paper
from raptor.book.profiles import (DISTILL, PAPER_DISTILL, PAPER_TEACHER, PAPER_TRAIN, SMOKE_DISTILL,
                                  SMOKE_TEACHER, SMOKE_TRAIN, TEACHER, TRAIN)
from raptor.book.spec import Machine, nested, require, require_data, require_seeds
from raptor.book.chapters.finding_phases.spec import PAPER as FINDING_PAPER, Spec as Finding
from raptor.config import DistillConfig, TeacherConfig, TrainConfig

NAME = "functional-phases"
NOTEBOOK = "chapters/functional_phases.ipynb"

FINDING = Finding()


@dataclass(frozen=True)
class Spec:
    """A teacher with stochastic-depth rate ``p`` per seed in ``seeds``; on each, Raptors with the
    max-cut and ``n_random`` other random partitions (all others where fewer exist) for each k in
    ``k_values``, Raptors of an overfitting run of ``overfit_steps`` on ``overfit_limit`` images
    without weight decay, snapshotted at ``overfit_snapshots``, on the max-cut at ``control_k``,
    and on that max-cut untrained controls and layer swaps of ``swap_counts`` layers, at most
    ``max_swap_sets`` sets each (None: all). C3's accuracies are on ``test_images`` test images
    (all of Fashion-MNIST's 10,000: the paper's measure, where gaps of a tenth of a point between
    partitions are the size of the noise on fewer), R² on the chapter's ``n_images``.

    ``replicates``: max-cut Raptors per seed and k, each distilled from its own initialisation
    and batch order, whose spread is the training-noise floor beside C3's margins (1: none).

    ``planted``: the positive control, a teacher per seed whose blocks are shared within groups
    of these sizes (phases by construction), trained by the same recipe; the claims that
    presuppose phases (C1–C4) are measured on it at ``k = len(planted)`` beside the teachers
    above (None: no control). C2's stability: ``n_subsets`` disjoint subsets of ``subset_images``
    of the test images beyond the chapter's ``n_images``."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    p: float = TEACHER.p
    seeds: tuple[int, ...] = (0, 1, 2)
    # k = 4 (paper.K_VALUES) adds ten Raptors the artifact tier cannot hold under 96 MB beside the rest [ours]
    k_values: tuple[int, ...] = (2, 3)
    n_random: int = paper.RANDOM_PARTITIONS
    replicates: int = 1  # 2 once the artifact tier holds the converged students' replicates
    control_k: int = 3
    distill: DistillConfig = nested(DISTILL)
    n_images: int = 1000
    test_images: int = 10_000
    overfit_limit: int = 500
    overfit_steps: int = 600
    overfit_snapshots: tuple[int, ...] = (50, 150, 300, 600)
    swap_counts: tuple[int, ...] = paper.SWAP_COUNTS
    max_swap_sets: int | None = 20
    # (): DINOv2-B's k = 3 partition (§3, Table 1) scaled to the depth, 7 | 3 | 2 at 12 blocks
    planted: tuple[int, ...] | None = ()
    subset_images: int = max(FINDING.image_counts)  # C2's stability, as chapter 3 judges it
    n_subsets: int = FINDING.n_resamples
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        L = self.teacher.depth
        require(0 <= self.p < 1, "p", "a rate in [0, 1)", self.p)
        require_seeds(self.seeds)
        require(len(self.k_values) > 0 and all(2 <= k <= L for k in self.k_values), "k_values",
                f"a non-empty list of k in [2, L = {L}]", self.k_values)
        require(self.n_random >= 2, "n_random", "≥ 2 (for a standard deviation)", self.n_random)
        require(self.replicates >= 1, "replicates", "≥ 1", self.replicates)
        require(self.control_k in self.k_values, "control_k", f"one of k_values = "
                f"{list(self.k_values)}", self.control_k)
        require(self.n_images >= 1, "n_images", "≥ 1", self.n_images)
        require(self.test_images >= 1, "test_images", "≥ 1", self.test_images)
        require(self.overfit_limit >= 1, "overfit_limit", "≥ 1", self.overfit_limit)
        require(self.overfit_steps >= 1, "overfit_steps", "≥ 1", self.overfit_steps)
        snaps = self.overfit_snapshots
        require(len(snaps) > 0 and list(snaps) == sorted(set(snaps))
                and 1 <= snaps[0] and snaps[-1] <= self.overfit_steps, "overfit_snapshots",
                f"increasing steps in [1, overfit_steps = {self.overfit_steps}]", snaps)
        require(len(self.swap_counts) > 0 and all(1 <= n <= L for n in self.swap_counts),
                "swap_counts", f"a non-empty list of counts in [1, L = {L}]", self.swap_counts)
        require(self.max_swap_sets is None or self.max_swap_sets >= 1, "max_swap_sets",
                "None or ≥ 1", self.max_swap_sets)
        require(self.subset_images >= 1 and self.n_subsets >= 1
                and self.subset_images * self.n_subsets <= self.test_images - self.n_images,
                "subset_images", f"≥ 1, with n_subsets × subset_images ≤ test_images − n_images "
                f"= {self.test_images - self.n_images} (disjoint held-out subsets)",
                self.subset_images)
        if self.planted == ():
            object.__setattr__(self, "planted",
                               tuple(b - a for a, b in paper.paper_partition(L, 3)))
        require(self.planted is None or (sum(self.planted) == L and min(self.planted) >= 1
                                         and len(self.planted) in self.k_values), "planted",
                f"None or group sizes ≥ 1 summing to L = {L}, as many as one of k_values = "
                f"{list(self.k_values)}", self.planted)

    def overfit(self) -> dict[str, object]:
        """The overfitting run's changes to the teacher's training (Fig. 13; the paper reduces
        weight decay, we remove it [ours])."""
        return dict(train_limit=self.overfit_limit, weight_decay=0.0, steps=self.overfit_steps,
                    patience=None, snapshot_steps=self.overfit_snapshots,
                    eval_every=math.gcd(*self.overfit_snapshots))


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, distill=SMOKE_DISTILL,
                            n_images=64, test_images=128, seeds=(0,), k_values=(2,), control_k=2, n_random=2,
                            overfit_limit=128, overfit_steps=20, overfit_snapshots=(10, 20),
                            swap_counts=(1, 2), max_swap_sets=3, planted=(2, 2), replicates=2,
                            subset_images=16, n_subsets=3)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN, distill=PAPER_DISTILL,
                            n_images=FINDING_PAPER.n_images,
                            subset_images=max(FINDING_PAPER.image_counts),
                            k_values=paper.K_VALUES, replicates=2, overfit_limit=5_000,
                            overfit_steps=8_000,
                            overfit_snapshots=(500, 1_000, 2_000, 4_000, 8_000))
