"""C1's test of phases: the partition chosen where the blocks are, at every k, and the smallest
block step the test can see in each model (paper §2, Fig. 1, App. A.1; the test is [ours]).

The paper finds phases by the max-cut of the layer–layer similarity ``S`` (App. A.1) and shows
them by eye (Fig. 1). A smooth decay of similarity with depth also gets a max-cut, so the test
asks whether ``S`` has blocks that a smooth decay lacks: it fits the warped-decay null
(:func:`raptor.structure.warped_decay_null`: a monotone decay along a smoothly warped depth axis)
and looks for blocks in the residual ``S − W``:

* **Where the blocks are.** At each k of :data:`K_TRIED` the contiguous partition with the highest
  contrast (mean inside minus across) *on the residual* is chosen — not the max-cut of ``S``,
  which the decay dominates and which prefers balanced segments.
* **Cross-fitted.** The images are split in two halves; each half's null is fitted on that half,
  the partition chosen on one half's residual is measured on the other's, and the two are
  averaged, so noise cannot create excess (under a smooth ``S`` the excess has mean ≈ 0).
* **Every k, corrected.** The claim is "phases at some k": a percentile bootstrap over images
  (within halves) gives each k's interval at the Bonferroni level ``1 − (1 − level) / m`` for the
  ``m`` k's tried; the largest excess lies between the largest lower and the largest upper end.
  It holds when some k's lower end clears the threshold, fails when every k's upper end is
  at or below it.
* **Its power, per model.** :attr:`PhaseTest.d_star` is the smallest *step* the test detects with
  probability :data:`POWER`: a step ``d`` multiplies the null's similarity by ``1 − d`` across
  each boundary of a planted partition (a drop of similarity by the fraction ``d``), planted into
  the model's own fitted null with its own image-level noise (each image's deviation from the
  mean matrix). A verdict that fails reads "no block step of ``d_star`` or more".

What the null absorbs. The Box-Cox warp at λ = −3 puts most of the depth axis between the first
two (or last two) layers, so a step at the end of depth — a last phase of one layer — is in the
null's family and invisible; a phase of two layers at an end needs a larger step than one inside
(:mod:`raptor.controls`, ``tests/test_phase_test.py``). A *plateau* — a run of nearly equal layers
whose decay changes rate abruptly at one layer, with no step — is deliberately a phase: the paper
describes phases as "near-stationary behavior that is reset at phase transitions" (§4), the
behaviour of one tied block applied repeatedly, and the warped null holds only smooth changes of
rate.

:func:`phase_test` takes per-image trajectories with their token groups, per-image phase
matrices (:func:`~raptor.structure.image_phase_matrices`) or one published matrix (no images:
no cross-fit, no interval, the step ``d_star`` without noise).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, pairwise

import numpy as np
import torch

from raptor.stats import Threshold, versus
from raptor.paper import DINOV2_B_DEPTH, DINOV2_B_PARTITIONS, Partition
from raptor.phases import validate_partition
from raptor.structure import Warp, best_warp, image_phase_matrices, warped_decay_null
from raptor.trajectories import TokenGroups

K_TRIED = (2, 3, 4)  # the k's of the paper (§3): the claim is phases at one of them
POWER = 0.8  # d_star: the step detected with this probability [ours, the conventional 80%]
STEP_RANGE = (0.002, 0.95)  # the steps d_star is searched between (log bisection)
BISECTIONS = 10  # halvings of the log range: d_star found to within 0.6 % of itself

EXCESS_MIN = Threshold(0.01, "[ours] the paper shows blocks by eye (Fig. 1) without a test; "
                             "0.01 of mean cosine similarity is 1% of the similarity colour scale, "
                             "the least a block must stand out from the depth decay to be seen")



def paper_partition(L: int, k: int = 3) -> Partition:
    """DINOv2-B's partition of Table 1 at ``k`` (7 | 3 | 2 at k = 3) scaled to ``L`` blocks:
    each boundary at the same fraction of depth, rounded, every phase at least one block."""
    if L < k:
        raise ValueError(f"need L ≥ k = {k}, got {L}")
    bounds = [start * L / DINOV2_B_DEPTH for start, _ in DINOV2_B_PARTITIONS[k][1:]]
    cuts: list[int] = []
    for i, b in enumerate(bounds):
        cuts.append(min(max(round(b), (cuts[-1] if cuts else 0) + 1), L - (k - 1 - i)))
    return tuple(pairwise((0, *cuts, L)))


@functools.cache
def _inside(L: int, k: int) -> tuple[tuple[Partition, ...], np.ndarray, np.ndarray]:
    """Every contiguous k-partition of ``L`` layers, the indicator ``(P, L·L)`` of its inside
    off-diagonal pairs and their counts."""
    parts = tuple(tuple(pairwise((0, *cuts, L))) for cuts in combinations(range(1, L), k - 1))
    masks = np.zeros((len(parts), L, L))
    for i, p in enumerate(parts):
        for start, stop in p:
            masks[i, start:stop, start:stop] = 1
    masks[:, np.arange(L), np.arange(L)] = 0
    masks = masks.reshape(len(parts), -1)
    return parts, masks, masks.sum(1)


def contrasts(M: np.ndarray, k: int) -> tuple[tuple[Partition, ...], np.ndarray]:
    """The contrast (mean inside minus across, off-diagonal pairs) of ``M`` for every contiguous
    k-partition: :func:`raptor.structure.contrast` of each, at once."""
    L = len(M)
    parts, masks, n_in = _inside(L, k)
    M = (M + M.T) / 2
    inside = masks @ M.ravel()
    total, n_total = M.sum() - np.trace(M), L * (L - 1)
    return parts, inside / n_in - (total - inside) / (n_total - n_in)


def residual(S: np.ndarray, warp: Warp | None = None) -> np.ndarray:
    """``S`` minus its warped-decay null (along ``warp``, else the best): what a smooth decay of
    similarity leaves."""
    return S - warped_decay_null(S, warp=warp)


def _crossfit(A: np.ndarray, B: np.ndarray, ks: Sequence[int],
              reference: Mapping[int, Partition]) -> tuple[np.ndarray, np.ndarray]:
    """Per k the excess of the partition chosen on each half's residual measured on the other's,
    averaged; and per reference partition its contrast on both residuals, averaged. The warp is
    chosen on both halves together (one exponent: a flip between two warps would split the
    bootstrap in two), the decay fitted on each. With ``A is B`` (a single matrix) the chosen
    partition's contrast on it: not cross-fitted."""
    warp = best_warp((A + B) / 2)
    RA = residual(A, warp)
    RB = RA if B is A else residual(B, warp)
    chosen, fixed = [], []
    for k in ks:
        parts, a = contrasts(RA, k)
        b = a if B is A else contrasts(RB, k)[1]
        chosen.append((b[a.argmax()] + a[b.argmax()]) / 2)
    for k, p in reference.items():
        parts, a = contrasts(RA, k)
        b = a if B is A else contrasts(RB, k)[1]
        i = parts.index(p)
        fixed.append((a[i] + b[i]) / 2)
    return np.array(chosen), np.array(fixed)


def _interval(boots: np.ndarray, level: float) -> tuple[float, float]:
    if boots.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


@dataclass(frozen=True)
class KExcess:
    """One k: ``cut`` chosen on all images' residual, ``excess`` cross-fitted (the partition
    chosen on one half of the images, measured on the other), ``boots`` its bootstrap values
    (empty for a published matrix)."""

    k: int
    cut: Partition
    excess: float
    boots: np.ndarray = field(repr=False, compare=False)

    def interval(self, level: float) -> tuple[float, float]:
        """The percentile bootstrap interval at ``level`` (NaN without images)."""
        return _interval(self.boots, level)


@dataclass(frozen=True)
class PhaseTest:
    """C1's test on one model: per k of :data:`K_TRIED` its :class:`KExcess`; per reference
    partition (the paper's) its excess on the residual (no choice, so no cross-fit needed) and
    bootstrap values; ``d_star`` the smallest step detected with probability :data:`POWER`
    (``inf``: none up to 0.95) at ``planted``; ``steps`` the visible steps, one minus the
    similarity of adjacent layers; ``fit_rmse`` the root mean square of all images' residual."""

    per_k: dict[int, KExcess]
    reference: dict[int, tuple[Partition, float, np.ndarray]]
    d_star: float
    planted: Partition
    steps: np.ndarray = field(repr=False, compare=False)
    fit_rmse: float
    threshold: float
    n_images: int

    def level_k(self, level: float) -> float:
        """Each k's interval level inside the family of k's tried (Bonferroni)."""
        return 1 - (1 - level) / len(self.per_k)

    def best(self) -> KExcess:
        """The k with the largest excess."""
        return max(self.per_k.values(), key=lambda e: e.excess)

    @property
    def excess(self) -> float:
        """"Phases at some k": the largest excess over the k's."""
        return self.best().excess

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """"Phases at some k": the interval of the largest excess over the k's, from each k's
        interval at the corrected level (all hold together with probability ≥ ``level``, so the
        largest lies between the largest lower and the largest upper end)."""
        ends = [e.interval(self.level_k(level)) for e in self.per_k.values()]
        return max(lo for lo, _ in ends), max(hi for _, hi in ends)

    def verdict(self, level: float = 0.95) -> str:
        """holds / does not hold / inconclusive: :meth:`interval` against ``threshold`` (:func:`raptor.stats.versus`); a published matrix has no verdict."""
        return versus(*self.interval(level), self.threshold)

    def reference_interval(self, k: int, level: float = 0.95) -> tuple[float, float]:
        """The reference partition's interval at ``level`` (one partition: no correction)."""
        return _interval(self.reference[k][2], level)


def _check(data: np.ndarray | torch.Tensor, groups: TokenGroups | None) -> np.ndarray:
    """Per-image phase matrices ``(N, L, L)`` from ``data`` (or a published ``(1, L, L)``)."""
    if isinstance(data, torch.Tensor) and data.ndim == 4:
        if groups is None:
            raise ValueError("trajectories (N, L+1, T, D) need their token groups")
        return image_phase_matrices(data, groups)
    arr = np.asarray(data, dtype=float)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or not np.isfinite(arr).all():
        raise ValueError(f"need trajectories (N, L+1, T, D), per-image matrices (N, L, L) or "
                         f"one matrix (L, L), finite; got shape {arr.shape}")
    if 1 < len(arr) < 8:
        raise ValueError(f"need at least 8 images (two halves to cross-fit), got {len(arr)}")
    return arr


def _boundaries(partition: Partition, L: int) -> np.ndarray:
    """``(L, L)``: how many of the partition's boundaries lie between layers l and m."""
    phase = np.zeros(L, dtype=int)
    for i, (start, stop) in enumerate(partition):
        phase[start:stop] = i
    return np.abs(phase[:, None] - phase[None, :])


def _halves(rng: np.random.Generator, n: int, resample: bool) -> list[np.ndarray]:
    order = rng.permutation(n)
    halves = [order[: n // 2], order[n // 2:]]
    return [h[rng.integers(0, len(h), len(h))] for h in halves] if resample else halves


def _power(null: np.ndarray, deviations: list[tuple[np.ndarray, np.ndarray]], across: np.ndarray,
           d: float, ks: Sequence[int], level_k: float, threshold: float) -> float:
    """The share of replicates in which the test detects the step ``d`` planted into ``null``;
    a replicate's lower bound is its excess minus the gap between the replicates' median and
    their lower percentile (the bootstrap a test on it would give)."""
    planted = null * (1 - d) ** across
    if not deviations:  # a published matrix: no noise
        return float(_crossfit(planted, planted, ks, {})[0].max() > threshold)
    e = np.array([_crossfit(planted + a, planted + b, ks, {})[0] for a, b in deviations])
    gap = np.median(e, axis=0) - np.quantile(e, (1 - level_k) / 2, axis=0)
    return float(np.mean(((e - gap) > threshold).any(axis=1)))


def smallest_step(per_image: np.ndarray, planted: Partition, *, ks: Sequence[int] | None = None,
                  level: float = 0.95, threshold: float = EXCESS_MIN.value, reps: int = 100,
                  seed: int = 0) -> float:
    """d*: the smallest step ``d`` — similarity multiplied by ``1 − d`` across each boundary of
    ``planted`` — that :func:`phase_test` detects with probability :data:`POWER`, planted into
    the warped-decay null of the images' mean matrix with the images' own deviations from it
    (``reps`` replicates, resampled within random halves, the same for every d), the k's ``ks``
    tried as :func:`phase_test` tries them; ``inf`` if
    none up to ``STEP_RANGE[1]``. Bisection on a log scale over :data:`STEP_RANGE`."""
    S = per_image.mean(0)
    ks = tuple(k for k in K_TRIED if k < len(S)) if ks is None else tuple(ks)
    null = warped_decay_null(S)
    across = _boundaries(validate_partition(planted, len(S)), len(S))
    deviations = []
    if len(per_image) > 1:
        rng = np.random.default_rng(seed)
        dev = per_image - S
        deviations = [tuple(dev[h].mean(0) for h in _halves(rng, len(dev), True))
                      for _ in range(reps)]
    level_k = 1 - (1 - level) / len(ks)

    def detected(d: float) -> bool:
        return _power(null, deviations, across, d, ks, level_k, threshold) >= POWER

    low, high = STEP_RANGE
    if not detected(high):
        return math.inf
    if detected(low):
        return low
    for _ in range(BISECTIONS):
        mid = math.sqrt(low * high)
        low, high = (low, mid) if detected(mid) else (mid, high)
    return high


def phase_test(data: np.ndarray | torch.Tensor, groups: TokenGroups | None = None, *,
               ks: Sequence[int] | None = None, reference: Mapping[int, Partition] | None = None,
               planted: Partition | None = None, n_boot: int = 200, power_reps: int = 100,
               threshold: float = EXCESS_MIN.value, seed: int = 0) -> PhaseTest:
    """C1's test (see the module): ``data`` per-image trajectories ``(N, L+1, T, D)`` with
    ``groups``, per-image phase matrices ``(N, L, L)``, or one published matrix ``(L, L)``.

    ``ks``: the k's tried (default those of :data:`K_TRIED` below ``L``); ``reference``:
    partitions judged beside the chosen ones, by k (default: the paper's
    DINOv2-B partitions scaled to the depth, :func:`paper_partition`); ``planted``: where
    ``d_star`` plants its steps (default the paper's k = 3 partition, 7 | 3 | 2 at 12 blocks);
    ``power_reps = 0`` skips ``d_star`` (NaN). ``n_boot`` resamples of the images within each
    half, seeded by ``seed``.
    """
    per_image = _check(data, groups)
    N, L = per_image.shape[:2]
    ks = tuple(k for k in K_TRIED if k < L) if ks is None else tuple(ks)
    if not ks or not all(2 <= k < L for k in ks) or len(set(ks)) != len(ks):
        raise ValueError(f"each k must be distinct and in [2, L − 1 = {L - 1}], got {list(ks)}")
    if N > 1 and n_boot < 10:
        raise ValueError(f"need n_boot ≥ 10, got {n_boot}")
    if power_reps < 0:
        raise ValueError(f"need power_reps ≥ 0, got {power_reps}")
    reference = {k: paper_partition(L, k) for k in ks} if reference is None else \
        {k: validate_partition(p, L) for k, p in reference.items()}
    planted = paper_partition(L, min(3, max(ks))) if planted is None else \
        validate_partition(planted, L)
    S = per_image.mean(0)
    R = residual(S)
    cuts = {}
    for k in ks:
        parts, values = contrasts(R, k)
        cuts[k] = parts[int(values.argmax())]
    rng = np.random.default_rng(seed)
    if N == 1:
        chosen, fixed = _crossfit(S, S, ks, reference)
        boots = np.empty((0, len(ks) + len(reference)))
    else:
        halves = _halves(rng, N, False)
        chosen, fixed = _crossfit(*(per_image[h].mean(0) for h in halves), ks, reference)
        boots = np.array([np.concatenate(_crossfit(
            *(per_image[h[rng.integers(0, len(h), len(h))]].mean(0) for h in halves),
            ks, reference)) for _ in range(n_boot)])
    per_k = {k: KExcess(k, cuts[k], float(chosen[i]), boots[:, i]) for i, k in enumerate(ks)}
    refs = {k: (p, float(fixed[i]), boots[:, len(ks) + i])
            for i, (k, p) in enumerate(reference.items())}
    d_star = math.nan if power_reps == 0 and N > 1 else smallest_step(
        per_image, planted, ks=ks, threshold=threshold, reps=power_reps, seed=seed)
    upper = np.triu_indices(L, 1)
    return PhaseTest(per_k, refs, d_star, planted, 1 - np.diagonal(S, 1),
                     float(np.sqrt(np.mean(R[upper] ** 2))), threshold, N)
