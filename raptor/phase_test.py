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
* **Cross-fitted, over several splits.** The images are split in two halves; on one half the
  warp of the null and then the partition are chosen, and the partition is measured on the other
  half's residual along that warp; the same the other way round, and the two are averaged, so
  noise cannot create excess (under a smooth ``S`` the excess has mean ≈ 0). The excess is the
  mean over :data:`SPLITS` random splits, so that no verdict hangs on one split; the cut reported
  is the one the halves chose most often, with the share of them that chose it.
* **Every k, corrected.** The claim is "phases at some k": a BCa bootstrap over images (Efron &
  Tibshirani 1993, §14.3; ``scipy.stats.bootstrap``'s ``BCa``, the splits kept, the images
  resampled) gives each k's interval at the Bonferroni level ``1 − (1 − level) / m`` for the
  ``m`` k's tried; its bias correction puts the interval about the estimate where the
  percentile interval of a selected statistic lies beside it. The largest excess lies between
  the largest lower and the largest upper end. It holds when some k's lower end clears the
  threshold, fails when every k's upper end is at or below it.
* **Its power, per model.** :attr:`PhaseTest.d_star` is the smallest *step* the test detects with
  probability :data:`POWER`: a step ``d`` multiplies the null's similarity by ``1 − d`` across
  each boundary of a planted partition (a drop of similarity by the fraction ``d``), planted into
  the model's own fitted null with its own image-level noise (each image's deviation from the
  mean matrix), each replicate one split (noisier than the test's :data:`SPLITS`, so ``d_star``
  errs large). A verdict that fails reads "no block step of ``d_star`` or more".

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
from scipy.special import ndtr, ndtri

from raptor.stats import Threshold, versus
from raptor.paper import Partition, paper_partition
from raptor.phases import validate_partition
from raptor.structure import (Warp, best_warps, image_phase_matrices, warped_decay_null,
                              warped_decay_nulls)
from raptor.trajectories import TokenGroups

K_TRIED = (2, 3, 4)  # the k's of the paper (§3): the claim is phases at one of them
POWER = 0.8  # d_star: the step detected with this probability [ours, the conventional 80%]
STEP_RANGE = (0.002, 0.95)  # the steps d_star is searched between (log bisection)
BISECTIONS = 10  # halvings of the log range: d_star found to within 0.6 % of itself
SPLITS = 3  # random halvings the cross-fit is averaged over [ours]: no verdict on one split
GROUPS = 50  # the jackknife of the BCa's acceleration leaves out one of this many image groups
CHUNK = 1000  # matrices cross-fitted at once (the bootstrap's and jackknife's, in chunks)

EXCESS_MIN = Threshold(0.01, "[ours] the paper shows blocks by eye (Fig. 1) without a test; "
                             "0.01 of mean cosine similarity is 1% of the similarity colour scale, "
                             "the least a block must stand out from the depth decay to be seen")



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
    k-partition: :func:`raptor.structure.contrast` of each, at once; of each matrix of a stack
    ``M`` ``(R, L, L)``, ``(R, P)``."""
    M = np.asarray(M, dtype=float)
    L = M.shape[-1]
    parts, masks, n_in = _inside(L, k)
    M = (M + M.swapaxes(-1, -2)) / 2
    inside = M.reshape(*M.shape[:-2], L * L) @ masks.T
    total, n_total = M.sum((-2, -1)) - np.trace(M, axis1=-2, axis2=-1), L * (L - 1)
    return parts, inside / n_in - (total[..., None] - inside) / (n_total - n_in)


def residual(S: np.ndarray, warp: Warp | None = None) -> np.ndarray:
    """``S`` minus its warped-decay null (along ``warp``, else the best): what a smooth decay of
    similarity leaves."""
    return S - warped_decay_null(S, warp=warp)


def _crossfit(A: np.ndarray, B: np.ndarray | None, ks: Sequence[int],
              reference: Mapping[int, Partition]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each pair of halves ``A[r]``, ``B[r]`` (``(R, L, L)`` each): per k the excess of the
    partition chosen on each half's residual measured on the other's residual, averaged, the
    warp of the null chosen on the half that chooses the partition and the decay fitted along
    it on each; per reference partition its contrast on each half's residual along its own
    warp, averaged; per k the indices of the partitions chosen on ``A`` and on ``B``:
    ``(R, len(ks))``, ``(R, len(reference))`` and ``(R, len(ks), 2)``, the fits of all pairs at
    once. With ``B`` None (a single matrix) the chosen partition's contrast on ``A``: not
    cross-fitted."""
    warps_a = best_warps(A)
    RA = A - warped_decay_nulls(A, warps_a)
    if B is None:
        RB = RA_b = RB_a = RA
    else:
        warps_b = best_warps(B)
        RB, RB_a = (B - warped_decay_nulls(B, w) for w in (warps_b, warps_a))
        RA_b = A - warped_decay_nulls(A, warps_b)
    rows = np.arange(len(A))
    chosen, cuts, fixed = [], [], []
    for k in ks:
        on_a, on_b = contrasts(RA, k)[1], contrasts(RB, k)[1]
        cut_a, cut_b = on_a.argmax(1), on_b.argmax(1)
        measured = contrasts(RB_a, k)[1][rows, cut_a] + contrasts(RA_b, k)[1][rows, cut_b]
        chosen.append(measured / 2)
        cuts.append(np.stack([cut_a, cut_b], axis=1))
    for k, p in reference.items():
        i = _inside(A.shape[1], k)[0].index(p)
        fixed.append((contrasts(RA, k)[1][:, i] + contrasts(RB, k)[1][:, i]) / 2)
    return (np.array(chosen).T.reshape(len(A), len(ks)),
            np.array(fixed).T.reshape(len(A), len(reference)),
            np.array(cuts).transpose(1, 0, 2).reshape(len(A), len(ks), 2))


def _split_means(per_image: np.ndarray, weights: np.ndarray, splits: np.ndarray, ks: Sequence[int],
                 reference: Mapping[int, Partition]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_crossfit` averaged over the ``splits`` (``(M, N)``, True in the first half) of
    the images counted by each row of ``weights`` ``(R, N)`` (a bootstrap's or jackknife's
    multiplicities): ``(R, len(ks))``, ``(R, len(reference))`` and the chosen partitions'
    indices ``(R, len(ks), 2 M)``; in chunks of :data:`CHUNK` matrices."""
    N, L = per_image.shape[:2]
    flat = per_image.reshape(N, L * L)
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    per = max(1, CHUNK // len(splits))
    for start in range(0, len(weights), per):
        w = weights[start:start + per]
        halves = [(w * side) @ flat / (w * side).sum(-1, keepdims=True)
                  for side in (splits[:, None, :], ~splits[:, None, :])]  # (M, r, L*L) each
        chosen, fixed, cuts = _crossfit(*(h.reshape(-1, L, L) for h in halves), ks, reference)
        M, r = len(splits), len(w)
        out.append((chosen.reshape(M, r, -1).mean(0), fixed.reshape(M, r, -1).mean(0),
                    cuts.reshape(M, r, len(ks), 2).transpose(1, 2, 0, 3).reshape(r, len(ks), -1)))
    return tuple(np.concatenate(x) for x in zip(*out))  # type: ignore[return-value]


def bca_interval(boots: np.ndarray, estimate: float, jackknife: np.ndarray,
                 level: float) -> tuple[float, float]:
    """The bias-corrected and accelerated bootstrap interval at ``level`` (Efron & Tibshirani
    1993, §14.3, eq. 14.15: ``scipy.stats.bootstrap``'s ``method="BCa"`` step for step, at any
    level from one set of resamples): ``boots`` the bootstrap values, ``jackknife`` the values
    with each image (or group of images) left out, for the acceleration (none: 0). An estimate
    beyond every resample counts as lying half a resample beyond the last (scipy's is NaN there).
    NaN without resamples."""
    if boots.size == 0:
        return math.nan, math.nan
    below = (np.count_nonzero(boots < estimate) + np.count_nonzero(boots <= estimate)) / 2
    z0 = ndtri(np.clip(below, 0.5, len(boots) - 0.5) / len(boots))
    n = len(jackknife)
    u = (n - 1) * (jackknife.mean() - jackknife) if n else np.zeros(1)
    spread = np.sum(u ** 2) / max(n, 1) ** 2
    accel = np.sum(u ** 3) / max(n, 1) ** 3 / 6 / spread ** 1.5 if spread > 0 else 0.0
    z = ndtri((1 - level) / 2)
    ends = [ndtr(z0 + (z0 + s) / (1 - accel * (z0 + s))) for s in (z, -z)]
    low, high = np.quantile(boots, ends)
    return float(low), float(high)


@dataclass(frozen=True)
class KExcess:
    """One k: ``excess`` cross-fitted (the partition chosen on one half of the images, measured
    on the other, averaged over :data:`SPLITS` splits), ``cut`` the partition the halves chose
    most often and ``share`` the share of them that chose it, ``boots`` the excess's bootstrap
    values and ``jackknife`` its values with each group of images left out (empty for a
    published matrix)."""

    k: int
    cut: Partition
    excess: float
    boots: np.ndarray = field(repr=False, compare=False)
    jackknife: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False,
                                  compare=False)
    share: float = 1.0

    def interval(self, level: float) -> tuple[float, float]:
        """The BCa bootstrap interval at ``level`` (:func:`bca_interval`; NaN without images)."""
        return bca_interval(self.boots, self.excess, self.jackknife, level)


@dataclass(frozen=True)
class PhaseTest:
    """C1's test on one model: per k of :data:`K_TRIED` its :class:`KExcess`; per reference
    partition (the paper's) its excess on the residual (no choice, so no cross-fit needed) as a
    :class:`KExcess` (``cut`` the partition); ``d_star`` the smallest step detected with
    probability :data:`POWER` (``inf``: none up to 0.95) at ``planted``; ``steps`` the visible
    steps, one minus the similarity of adjacent layers; ``fit_rmse`` the root mean square of all
    images' residual."""

    per_k: dict[int, KExcess]
    reference: dict[int, KExcess]
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
        return self.reference[k].interval(level)


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


def _halves(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """A random split of ``n`` images into two halves, each resampled within itself."""
    order = rng.permutation(n)
    return [h[rng.integers(0, len(h), len(h))] for h in (order[: n // 2], order[n // 2:])]


def _power(null: np.ndarray, deviations: tuple[np.ndarray, np.ndarray] | None, across: np.ndarray,
           d: float, ks: Sequence[int], level_k: float, threshold: float) -> float:
    """The share of replicates in which the test detects the step ``d`` planted into ``null``;
    a replicate's lower bound is its excess minus the gap between the replicates' median and
    their lower percentile (the bootstrap a test on it would give)."""
    planted = null * (1 - d) ** across
    if deviations is None:  # a published matrix: no noise
        return float(_crossfit(planted[None], None, ks, {})[0].max() > threshold)
    e = np.concatenate([_crossfit(planted + a, planted + b, ks, {})[0] for a, b in zip(
        *(np.array_split(x, -(-len(x) // CHUNK)) for x in deviations))])
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
    deviations = None
    if len(per_image) > 1:
        rng = np.random.default_rng(seed)
        dev = per_image - S
        halves = [[dev[h].mean(0) for h in _halves(rng, len(dev))] for _ in range(reps)]
        deviations = tuple(np.array(h) for h in zip(*halves))
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
    ``power_reps = 0`` skips ``d_star`` (NaN). The :data:`SPLITS` splits and ``n_boot``
    resamples of the images (each image kept in its halves) seeded by ``seed``; the BCa
    interval's acceleration from the jackknife over :data:`GROUPS` random groups of images (over
    the images themselves, as ``scipy.stats.bootstrap``, up to that many).
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
    rng = np.random.default_rng(seed)
    if N == 1:
        chosen, fixed, cuts = (x[0] for x in _crossfit(S[None], None, ks, reference))
        boots = jack = np.empty((0, len(ks) + len(reference)))
    else:
        splits = np.array([np.isin(np.arange(N), rng.permutation(N)[: N // 2])
                           for _ in range(SPLITS)])
        chosen, fixed, cuts = (x[0] for x in _split_means(per_image, np.ones((1, N)), splits, ks,
                                                          reference))
        counts = np.array([np.bincount(rng.integers(0, N, N), minlength=N)
                           for _ in range(n_boot)])
        group = rng.permutation(N) % min(N, GROUPS)
        left_out = (group[None, :] != np.arange(min(N, GROUPS))[:, None]).astype(float)
        boots, jack = (np.concatenate(_split_means(per_image, w, splits, ks, reference)[:2],
                                      axis=1) for w in (counts, left_out))
    parts = {k: _inside(L, k)[0] for k in ks}
    per_k = {}
    for i, k in enumerate(ks):
        chosen_at, times = np.unique(cuts[i], return_counts=True)
        per_k[k] = KExcess(k, parts[k][int(chosen_at[times.argmax()])], float(chosen[i]),
                           boots[:, i], jack[:, i], float(times.max() / times.sum()))
    refs = {k: KExcess(k, p, float(fixed[i]), boots[:, len(ks) + i], jack[:, len(ks) + i])
            for i, (k, p) in enumerate(reference.items())}
    d_star = math.nan if power_reps == 0 and N > 1 else smallest_step(
        per_image, planted, ks=ks, threshold=threshold, reps=power_reps, seed=seed)
    upper = np.triu_indices(L, 1)
    return PhaseTest(per_k, refs, d_star, planted, 1 - np.diagonal(S, 1),
                     float(np.sqrt(np.mean(R[upper] ** 2))), threshold, N)
