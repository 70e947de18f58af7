"""Chapter *Finding the phases*: exact max-cut vs hierarchical bisection, and stability (App. A.1,
Figs. 2–3; C2)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.claims import Claim, Threshold, claim
from raptor.book.profiles import PAPER_TEACHER, SMOKE_TEACHER
from raptor.book.spec import TeacherSpec, nested, require
from raptor.experiment import trajectories_of, weights_path
from raptor.phases import Partition
from raptor.similarity import layer_similarity, phase_matrix
from raptor.structure import boundary_shift, subset_stability
from raptor.teachers import DINOV2_B, load_pretrained

NAME = "finding-phases"
NOTEBOOK = "chapters/finding_phases.ipynb"
DINOV2 = "DINOv2-B"


@dataclass(frozen=True)
class Spec:
    """Teachers with each rate in ``p_values`` (first seed), the first rate with every seed.

    ``eps_values`` are the hierarchical bisection's stopping thresholds; ``image_counts`` the
    subset sizes of the stability test. ``dinov2_weights`` (a local file of
    ``vit_base_patch14_reg4_dinov2.lvd142m``) with ``imagenet_root`` adds DINOv2-B.
    """

    teacher: TeacherSpec = nested(TeacherSpec)
    p_values: tuple[float, ...] = (0.0, 0.3)
    teacher_seeds: tuple[int, ...] = (0, 1)
    n_images: int = 1000
    k_values: tuple[int, ...] = (2, 3, 4)
    eps_values: tuple[float, ...] = (0.2, 0.1, 0.09)
    image_counts: tuple[int, ...] = (10, 25, 50, 100, 250, 1000)
    n_resamples: int = 10
    dinov2_weights: str | None = None
    imagenet_root: str | None = None

    def __post_init__(self) -> None:
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
        require(any(1 <= n <= self.n_images for n in self.image_counts)
                and all(n >= 1 for n in self.image_counts), "image_counts",
                f"counts ≥ 1, at least one ≤ n_images = {self.n_images}", self.image_counts)
        require(self.n_resamples >= 1, "n_resamples", "≥ 1", self.n_resamples)
        require(self.dinov2_weights is None or self.imagenet_root is not None, "imagenet_root",
                "an ImageFolder root when dinov2_weights is given", self.imagenet_root)

    @property
    def counts(self) -> list[int]:
        """The image counts the stability test can use (at most ``n_images``)."""
        return [n for n in self.image_counts if n <= self.n_images]


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, n_images=64, k_values=(2, 3),
                            image_counts=(16, 64), n_resamples=3)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, n_images=10_000,
                            image_counts=(100, 300, 1000, 3000, 10_000))


@dataclass
class TeacherPhases:
    """One teacher's phase matrix (blocks' outputs, tokens {cls, mean patch}) and its max-cuts."""

    label: str
    p: float | None  # None: DINOv2-B
    seed: int
    accuracy: float
    S: np.ndarray
    cuts: dict[int, Partition]


@dataclass
class Result:
    spec: Spec
    teachers: list[TeacherPhases]
    comparison: list[dict[str, object]]
    seed_shift: dict[int, int]
    stability: dict[int, dict[int, float]]


def _phases(label: str, p: float | None, seed: int, accuracy: float, S: np.ndarray,
            k_values: Sequence[int]) -> TeacherPhases:
    return TeacherPhases(label, p, seed, accuracy, S, {k: phases.maxcut(S, k) for k in k_values})


def hierarchical_vs_dp(label: str, S: np.ndarray, eps_values: Sequence[float]
                       ) -> list[dict[str, object]]:
    """One row per ``eps``: the hierarchical bisection and the exact DP with as many segments."""
    rows = []
    for eps in eps_values:
        h = phases.hierarchical_maxcut(S, eps)
        dp = phases.maxcut(S, len(h.clusters))
        rows.append({
            "teacher": label, "eps": eps, "k": len(h.clusters),
            "hierarchical": phases.format_partition(h.partition) if h.contiguous
            else " | ".join(",".join(str(i + 1) for i in c) for c in h.clusters),
            "contiguous": h.contiguous,
            "objective (hier.)": round(phases.in_segment_weight(S, h.partition), 4)
            if h.contiguous else None,
            "DP": phases.format_partition(dp),
            "objective (DP)": round(phases.in_segment_weight(S, dp), 4)})
    return rows


def compute(spec: Spec) -> Result:
    """Phase matrices and max-cuts per teacher, DP vs hierarchical, and C2's stability."""
    dinov2 = weights_path(spec.dinov2_weights)
    t, seed0 = spec.teacher, spec.teacher_seeds[0]
    images, labels = t.eval_images(spec.n_images)
    runs = sorted({(p, seed0) for p in spec.p_values}
                  | {(spec.p_values[0], s) for s in spec.teacher_seeds})
    teachers, reference = [], None
    for p, s in runs:
        model, record = t.get_teacher(p, seed=s)
        traj, groups = trajectories_of(model, images, labels)
        S = phase_matrix(layer_similarity(traj, groups))
        teachers.append(_phases(f"p={p}, seed={s}", p, s, record["val"][-1]["acc"], S,
                                spec.k_values))
        if (p, s) == (spec.p_values[0], seed0):
            reference = (traj, groups)
    if dinov2 is not None:
        imagenet = dataclasses.replace(t, dataset="imagenet", data_root=spec.imagenet_root,
                                       img_size=224)
        d_images, d_labels = imagenet.eval_images(min(spec.n_images, 1000))
        model = load_pretrained(DINOV2_B, dinov2, img_size=224, num_classes=0)
        traj, groups = trajectories_of(model, d_images, d_labels, batch_size=50)
        teachers.append(_phases(DINOV2, None, 0, math.nan,
                                phase_matrix(layer_similarity(traj, groups)), spec.k_values))
    comparison = [row for te in teachers for row in hierarchical_vs_dp(te.label, te.S,
                                                                       spec.eps_values)]
    plain = {te.seed: te.cuts for te in teachers if te.p == spec.p_values[0]}
    seed_shift = {k: max(boundary_shift(plain[seed0][k], plain[s][k]) for s in spec.teacher_seeds)
                  for k in spec.k_values}
    stability = subset_stability(*reference, spec.k_values, spec.counts, spec.n_resamples)
    return Result(spec, teachers, comparison, seed_shift, stability)


def maxcut_figure(result: Result) -> plt.Figure:
    """Max-cut boundaries for each k, first seed's teachers and DINOv2-B (Figs. 2–3, left)."""
    s = result.spec
    shown = [te for te in result.teachers if te.seed == s.teacher_seeds[0] or te.p is None]
    fig, axes = plt.subplots(len(shown), len(s.k_values),
                             figsize=(3 * len(s.k_values), 2.8 * len(shown)), squeeze=False)
    for r, te in enumerate(shown):
        L = te.S.shape[0]
        for c, k in enumerate(s.k_values):
            ax = axes[r, c]
            ax.imshow(te.S, cmap="magma", vmax=1.0)
            plotting.draw_partition(ax, te.cuts[k])
            ax.set_title(f"{DINOV2 if te.p is None else f'p={te.p}'}  k={k}\n"
                         f"{phases.format_partition(te.cuts[k])}", fontsize=9)
            ax.set_xticks(range(0, L, 2), range(1, L + 1, 2))
            ax.set_yticks(range(0, L, 2), range(1, L + 1, 2))
    fig.tight_layout()
    return fig


def stability_figure(result: Result) -> plt.Figure:
    """Fraction of image subsets whose max-cut equals the full-data cut, per image count."""
    s = result.spec
    curves = {f"k={k}": list(row.values()) for k, row in result.stability.items()}
    ax = plotting.layer_curves(curves, xlabel="images used",
                               ylabel="fraction equal to the full-data cut",
                               title=f"p={s.p_values[0]}, seed {s.teacher_seeds[0]}")
    counts = list(next(iter(result.stability.values())))
    ax.set_xticks(range(len(counts)), counts)
    return ax.figure


def paper_partitions() -> pd.DataFrame:
    """DINOv2-B's published partitions (§3, Table 1; the authors' hierarchical bisection)."""
    parts = paper.DINOV2_B_PARTITIONS.values()
    return pd.DataFrame({"k": list(paper.DINOV2_B_PARTITIONS),
                         "paper (hierarchical)": [phases.format_partition(p) for p in parts],
                         "repeats n_j": [phases.partition_to_repeats(p) for p in parts]})


MAX_SHIFT = Threshold(1, "[ours] the paper shows boundaries on the visible blocks (Figs. 2–3) "
                         "without a tolerance; one layer allows a tie between neighbours")
STABLE_SHARE = Threshold(0.9, "[ours] a partition is stable when ≥ 90% of image subsets "
                              "reproduce it")


def images_needed(stability: dict[int, dict[int, float]]) -> dict[int, int | None]:
    """Per k, the fewest images from which every larger count is stable (``STABLE_SHARE``)."""
    return {k: next((n for n in row if all(g >= STABLE_SHARE.value
                                            for m, g in row.items() if m >= n)), None)
            for k, row in stability.items()}


def c2_boundaries_stable(seed_shift: dict[int, int], reproduced: dict[int, float], *,
                         images: int, teacher_seeds: Sequence[int], n_resamples: int) -> Claim:
    """C2: boundaries move ≤ ``MAX_SHIFT`` layers across seeds, and ``images`` images reproduce
    the cut in ≥ ``STABLE_SHARE`` of subsets (``reproduced``: k -> share)."""
    shift = max(seed_shift.values())
    return claim(
        "C2", paper="max-cut boundaries align with the visible blocks (Figs. 2–3)",
        ours=f"largest boundary shift across seeds {shift} layer(s); cut at {images} images "
             "reproduced in " + ", ".join(f"k={k}: {f:.0%}" for k, f in reproduced.items()),
        holds=shift <= MAX_SHIFT.value
        and all(f >= STABLE_SHARE.value for f in reproduced.values()),
        detail=f"teacher seeds {list(teacher_seeds)}; {n_resamples} resamples per image count; "
               f"holds if boundaries move ≤ {MAX_SHIFT.value:g} layer across seeds and subsets "
               "reproduce the cut")


def claims(result: Result) -> list[Claim]:
    s = result.spec
    last = max(s.counts)
    reproduced = {k: result.stability[k][last] for k in s.k_values}
    return [c2_boundaries_stable(result.seed_shift, reproduced, images=last,
                                 teacher_seeds=s.teacher_seeds, n_resamples=s.n_resamples)]
