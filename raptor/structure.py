"""Is a phase partition real and stable? Statistics behind claims C1 and C2 (paper §2, Figs. 1–3).

A max-cut always returns *some* partition, and a similarity that merely decays smoothly with
depth gets even cuts with a positive inside-minus-across contrast. Block structure is what a
smooth decay lacks; the *block excess* of a partition is its contrast on ``S`` minus its contrast
on a null matrix without blocks, measured over a ladder of three nulls [ours]:

* :func:`stationary_null`: the Toeplitz matrix of ``S``'s diagonal means (``S[l, m]`` a function
  of ``|l − m|`` only); :func:`block_excess` is the excess over it.
* :func:`image_growth_nulls` (*random walk*): the similarity of a residual stream with the norms
  observed whose every update is orthogonal to it, ``cos(x_l, x_m) = ‖x_l‖ / ‖x_m‖`` for
  ``‖x_l‖ ≤ ‖x_m‖``: what uncorrelated updates give. It needs the trajectories, not the matrix.
  It is not a "no blocks" null: a stream that stays put within phases and jumps orthogonally at
  their boundaries (the textbook block matrix) *is* such a stream, so its excess is 0.
* :func:`warped_decay_null` (*warped decay*): the least-squares fit of ``S`` by a similarity that
  falls monotonically with distance along a smoothly warped depth axis. It contains the
  stationary decays and the random walks with constant, power-law or geometric update norms, and
  cannot make a step inside depth. C1's test (:mod:`raptor.phase_test`) chooses the partition
  on the residual over it; on synthetic streams the max-cut's excess over it passes textbook
  phases of three kinds and fails random walks, Toeplitz matrices and smooth decays
  (:mod:`raptor.controls`, ``tests/test_controls.py``).

:func:`phase_excess` measures the max-cut's excess over each null, cross-fitted over two halves of
the images (the cut chosen on one half, measured on the other, so noise cannot create excess),
with bootstrap intervals over images, the max-cut's agreement across resamples and its exact rank
among all ``C(L−1, k−1)`` contiguous partitions (:func:`contrast_rank`); :func:`matrix_excess`
the same ladder, without intervals, for a published matrix. :func:`boundary_shift` and
:func:`subset_stability`: whether max-cut boundaries move between seeds or image subsets (C2).
"""


from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, pairwise
from typing import Any

import numpy as np
import torch
from scipy.optimize import isotonic_regression, minimize_scalar

from raptor.phases import Partition, maxcut, validate_partition
from raptor.similarity import EPS, block_contrast, layer_similarity, phase_matrix
from raptor.trajectories import TokenGroups

MAX_PARTITIONS = 200_000  # enumerating more contiguous partitions than this is refused
#: The Box-Cox exponents λ of the warped depth axis tried by :func:`warped_decay_null`, on the
#: depth counted from the first block and from the last: from strongly saturating (λ = −3: the
#: first layers counted far apart, the later ones close) through the log axis of a random walk
#: (λ = 0) and plain depth (λ = 1) to strongly accelerating (λ = 4).
WARP_EXPONENTS = tuple(round(v, 2) for v in np.linspace(-3.0, 4.0, 36))
WARP_ORIGINS = ("first", "last")  # the block the warped depth is counted from
NULLS = ("stationary", "random walk", "warped decay")  # the ladder, weakest first
JUDGED_NULL = "warped decay"  # the null C1 is judged against


def contrast(S: np.ndarray, partition: Partition) -> float:
    """Mean similarity inside the partition's blocks minus across them (off-diagonal pairs)."""
    inside, across = block_contrast(np.asarray(S, dtype=float), partition)
    return inside - across


def stationary_null(S: np.ndarray) -> np.ndarray:
    """The Toeplitz matrix of the diagonal means of ``(S + Sᵀ) / 2``: depth decay, no blocks."""
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] < 2:
        raise ValueError(f"S must be a square matrix with at least 2 layers, got {S.shape}")
    sym = (S + S.T) / 2
    lag = np.array([np.diagonal(sym, o).mean() for o in range(len(S))])
    idx = np.arange(len(S))
    return lag[np.abs(idx[:, None] - idx[None, :])]


def block_excess(S: np.ndarray, partition: Partition) -> float:
    """The partition's contrast on ``S`` minus on :func:`stationary_null` ``(S)``."""
    return contrast(S, partition) - contrast(stationary_null(S), partition)


@functools.lru_cache(maxsize=4096)
def _warp_ties(L: int, lam: float, from_end: bool) -> tuple[np.ndarray, np.ndarray]:
    """For the upper-triangle pairs of ``L`` layers in row-major order, the index of their
    distance on the axis ``g_λ`` (of the depth counted from the last block if ``from_end``)
    among the distinct distances (ascending), and each one's count."""
    layer = np.arange(1, L + 1, dtype=float)
    if from_end:
        layer = layer[::-1]
    g = np.log(layer) if lam == 0 else (layer ** lam - 1) / lam
    upper = np.triu_indices(L, 1)
    distance = np.round(np.abs(g[:, None] - g[None, :])[upper] / np.ptp(g), 9)
    _, inverse = np.unique(distance, return_inverse=True)
    return inverse, np.bincount(inverse)


Warp = tuple[float, bool]  # a Box-Cox exponent λ of WARP_EXPONENTS and whether from the last block


def _warp_fit(pairs: np.ndarray, L: int, lam: float, from_end: bool) -> tuple[float, np.ndarray]:
    """The isotonic fit of the upper-triangle ``pairs`` along the axis ``g_λ``: (SSE, fit)."""
    inverse, counts = _warp_ties(L, lam, from_end)
    f = isotonic_regression(np.bincount(inverse, pairs) / counts, weights=counts,
                            increasing=False).x[inverse]
    return float(((pairs - f) ** 2).sum()), f


def _pairs(S: np.ndarray) -> np.ndarray:
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] < 3:
        raise ValueError(f"S must be a square matrix with at least 3 layers, got {S.shape}")
    return ((S + S.T) / 2)[np.triu_indices(len(S), 1)]


def best_warp(S: np.ndarray, origins: Sequence[str] = WARP_ORIGINS) -> Warp:
    """The warp of :func:`warped_decay_null`: the exponent λ (the best of :data:`WARP_EXPONENTS`,
    refined between its neighbours by a bounded scalar search) and the origin (``True``: from
    the last block) whose monotone decay fits ``S`` best."""
    if not origins or not set(origins) <= set(WARP_ORIGINS):
        raise ValueError(f"origins must be some of {WARP_ORIGINS}, got {origins}")
    pairs, L = _pairs(S), len(S)
    sse = {}
    for from_end in (origin == "last" for origin in origins):
        # every fifth exponent, then every one within four steps of the best: 16 fits a
        # direction instead of 36, the whole grid's fit on every control, 20 resamples of each
        # and DINOv2-B's matrix
        coarse = {i: _warp_fit(pairs, L, WARP_EXPONENTS[i], from_end)[0]
                  for i in range(0, len(WARP_EXPONENTS), 5)}
        best = min(coarse, key=coarse.__getitem__)
        fine = range(max(best - 4, 0), min(best + 5, len(WARP_EXPONENTS)))
        sse |= {(WARP_EXPONENTS[i], from_end): coarse.get(i) if i in coarse else
                _warp_fit(pairs, L, WARP_EXPONENTS[i], from_end)[0] for i in fine}
    lam, from_end = min(sse, key=sse.__getitem__)
    # between the grid's exponents: a smooth decay whose exponent falls between two of them
    # would leave its misfit in the residual as block excess
    step = WARP_EXPONENTS[1] - WARP_EXPONENTS[0]
    refined = minimize_scalar(lambda v: _warp_fit(pairs, L, round(float(v), 4), from_end)[0],
                              bounds=(max(lam - step, WARP_EXPONENTS[0]),
                                      min(lam + step, WARP_EXPONENTS[-1])), method="bounded",
                              options={"xatol": 0.005})
    if refined.fun < sse[lam, from_end]:
        return round(float(refined.x), 4), from_end
    return lam, from_end


def warped_decay_null(S: np.ndarray, origins: Sequence[str] = WARP_ORIGINS, *,
                      warp: Warp | None = None) -> np.ndarray:
    """The least-squares fit of ``(S + Sᵀ) / 2`` by ``W[l, m] = f(|g(l) − g(m)|)``, ``f``
    non-increasing (isotonic regression) and ``g`` a smooth monotone warp of depth: the Box-Cox
    transform ``(d^λ − 1) / λ`` (``log d`` at λ = 0) of the block number ``d`` counted from the
    first block or from the last (``origins``), λ in the range of :data:`WARP_EXPONENTS`
    (:func:`best_warp`), or ``warp`` given (fitted elsewhere) [ours].

    λ = 1 holds every monotone stationary decay; λ = 0 from the first block the random walk with
    equal update norms (``cos = √(l / m)``). A smooth warp puts some pair inside a block farther
    apart than some pair across it, so a monotone ``f`` cannot reproduce a step inside depth:
    blocks stay in ``S − W``. At λ = −3 most of the axis lies between the first two (or last two)
    blocks, so a step that sets one end block apart is in the family (:mod:`raptor.phase_test`).
    """
    pairs, L = _pairs(S), len(S)
    lam, from_end = best_warp(S, origins) if warp is None else warp
    upper = np.triu_indices(L, 1)
    W = np.ones((L, L))
    W[upper] = _warp_fit(pairs, L, lam, from_end)[1]
    W.T[upper] = W[upper]
    return W


def contiguous_partitions(L: int, k: int) -> list[Partition]:
    """All ``C(L−1, k−1)`` contiguous k-partitions of ``L`` layers, in lexicographic order."""
    if not 1 <= k <= L:
        raise ValueError(f"k must be in [1, L = {L}], got {k}")
    if math.comb(L - 1, k - 1) > MAX_PARTITIONS:
        raise ValueError(f"C({L - 1}, {k - 1}) partitions exceed {MAX_PARTITIONS}")
    return [tuple(pairwise((0, *cuts, L))) for cuts in combinations(range(1, L), k - 1)]


@dataclass(frozen=True)
class Rank:
    """Rank 1 = the highest contrast; ``rank`` counts the partitions with a strictly higher one."""

    rank: int
    total: int


def contrast_rank(S: np.ndarray, partition: Partition) -> Rank:
    """The partition's exact contrast rank among all contiguous partitions with as many blocks."""
    partition = validate_partition(partition, len(S))
    everyone = [contrast(S, p) for p in contiguous_partitions(len(S), len(partition))]
    mine = contrast(S, partition)
    return Rank(1 + sum(c > mine + 1e-12 for c in everyone), len(everyone))


def _phase_tokens(traj: torch.Tensor, groups: TokenGroups) -> list[torch.Tensor]:
    """The phase matrix's tokens, ``(N, L+1, 1, D)`` each: cls and the mean patch (App. A.1)."""
    parts = []
    if groups.cls.stop > groups.cls.start:
        parts.append(traj[:, :, groups.cls].double())
    if groups.patches.stop > groups.patches.start:
        parts.append(traj[:, :, groups.patches].double().mean(dim=2, keepdim=True))
    if not parts:
        raise ValueError("need a cls token or patches")
    return parts


def image_phase_matrices(traj: torch.Tensor, groups: TokenGroups) -> np.ndarray:
    """One phase matrix per image, ``(N, L, L)``: their mean over images is
    ``phase_matrix(layer_similarity(traj, groups))`` (blocks' outputs, tokens {cls, mean patch})."""
    mats = []
    for x in _phase_tokens(traj, groups):
        u = x / x.norm(dim=-1, keepdim=True).clamp_min(EPS)
        mats.append(torch.einsum("nltd,nmtd->nlm", u, u) / x.shape[2])
    return torch.stack(mats).mean(0)[:, 1:, 1:].numpy()


def image_growth_nulls(traj: torch.Tensor, groups: TokenGroups) -> np.ndarray:
    """Per image, ``(N, L, L)``, the phase matrix of a residual stream with the same norms whose
    every update is orthogonal to it: ``min(‖x_l‖, ‖x_m‖) / max(‖x_l‖, ‖x_m‖)`` (if
    ``x_m = x_l + u`` with ``u ⟂ x_l``, ``cos(x_l, x_m) = ‖x_l‖ / ‖x_m‖``) [ours]."""
    mats = []
    for x in _phase_tokens(traj, groups):
        r = x.norm(dim=-1).clamp_min(EPS)  # (N, L+1, T)
        a, b = r[:, :, None], r[:, None, :]
        mats.append((torch.minimum(a, b) / torch.maximum(a, b)).mean(-1))
    return torch.stack(mats).mean(0)[:, 1:, 1:].numpy()


@dataclass(frozen=True)
class NullExcess:
    """The max-cut's block excess over one null, with its bootstrap interval (NaN without)."""

    excess: float
    low: float = math.nan
    high: float = math.nan


@dataclass(frozen=True)
class PhaseExcess:
    """C1's statistic for one model and k: is its max-cut more than a smooth decay's?

    ``cut`` is the max-cut of all images' matrix, ``null_cut`` that of its stationary null;
    ``excess`` the cross-fitted block excess over the warped-decay null (:data:`JUDGED_NULL`)
    with its bootstrap interval ``[low, high]`` at ``level``; ``agreement`` the share of
    resamples whose max-cut equals ``cut``; ``rank`` the cut's contrast rank among all
    contiguous partitions; ``ladder`` the excess over each null of :data:`NULLS` computed (the
    random walk needs trajectories); ``fit_rmse`` how far all images' matrix lies from its
    warped-decay fit (root mean square over pairs of layers): how well a smooth decay describes it.
    """

    k: int
    cut: Partition
    null_cut: Partition
    excess: float
    low: float
    high: float
    level: float
    agreement: float
    rank: Rank
    ladder: Mapping[str, NullExcess] = field(default_factory=dict)
    fit_rmse: float = math.nan


def _nulls(S: np.ndarray, growth: np.ndarray | None) -> dict[str, np.ndarray]:
    """Each null of :data:`NULLS` for the matrix ``S`` (the random walk from ``growth``)."""
    nulls = {"stationary": stationary_null(S), "random walk": growth,
             "warped decay": warped_decay_null(S)}
    return {name: null for name, null in nulls.items() if null is not None}


def _crossfit(A: np.ndarray, B: np.ndarray, GA: np.ndarray | None, GB: np.ndarray | None,
              ks: Sequence[int]) -> dict[int, tuple[dict[str, float], Partition]]:
    """Per k of ``ks``: the excess of each half's max-cut measured on the other half (each
    half's nulls fitted on that half, once for every k), averaged, per null; and ``A + B``'s
    cut."""
    nulls_a, nulls_b = _nulls(A, GA), _nulls(B, GB)
    out = {}
    for k in ks:
        cut_a, cut_b = maxcut(A, k), maxcut(B, k)
        out[k] = ({name: (contrast(B - nulls_b[name], cut_a) + contrast(A - nulls_a[name], cut_b))
                   / 2 for name in nulls_a}, maxcut((A + B) / 2, k))
    return out


def _fit_rmse(S: np.ndarray) -> float:
    upper = np.triu_indices(len(S), 1)
    return float(np.sqrt(np.mean((S - warped_decay_null(S))[upper] ** 2)))


def phase_excess(per_image: np.ndarray, k: int, **kwargs: Any) -> PhaseExcess:
    """:func:`phase_excesses` at one ``k``."""
    return phase_excesses(per_image, (k,), **kwargs)[k]


def phase_excesses(per_image: np.ndarray, ks: Sequence[int], *,
                   growth: np.ndarray | None = None, n_boot: int = 200, level: float = 0.95,
                   seed: int = 0) -> dict[int, PhaseExcess]:
    """:class:`PhaseExcess` for each k of ``ks`` from per-image phase matrices ``(N, L, L)``
    (:func:`image_phase_matrices`) and, optionally, their random-walk nulls
    (:func:`image_growth_nulls`, same shape).

    The images are split at random into two halves; each bootstrap resample draws images with
    replacement within each half and recomputes both cuts and both halves' nulls, so the
    interval covers the selection of the cut and the fit of the null as well as the noise of
    the images. Under a null expected ``S`` the excess over it has mean 0 whatever the noise,
    because the cut is never measured on the images it came from. The resamples do not depend on
    k, so every k shares them and their nulls: each k's result is that of a call for it alone.
    """
    per_image = np.asarray(per_image, dtype=float)
    if per_image.ndim != 3 or per_image.shape[1] != per_image.shape[2] or len(per_image) < 4 \
            or per_image.shape[1] < 3:
        raise ValueError(f"per_image must be (N ≥ 4, L ≥ 3, L), got {per_image.shape}")
    if growth is not None and np.shape(growth) != per_image.shape:
        raise ValueError(f"growth must have per_image's shape {per_image.shape}, "
                         f"got {np.shape(growth)}")
    if not ks or not all(1 <= k <= per_image.shape[1] for k in ks):
        raise ValueError(f"k must be in [1, L = {per_image.shape[1]}], got {list(ks)}")
    if n_boot < 10 or not 0 < level < 1:
        raise ValueError(f"need n_boot ≥ 10 and level in (0, 1), got {n_boot}, {level}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(per_image))
    halves = [order[: len(order) // 2], order[len(order) // 2:]]

    def means(idx: list[np.ndarray]) -> tuple[np.ndarray | None, ...]:
        return (*(per_image[i].mean(0) for i in idx),
                *((None, None) if growth is None else (growth[i].mean(0) for i in idx)))

    S = per_image.mean(0)
    cuts = {k: maxcut(S, k) for k in ks}
    estimates = _crossfit(*means(halves), ks)
    boots = {k: {name: [] for name in estimates[k][0]} for k in ks}
    same = dict.fromkeys(ks, 0)
    for _ in range(n_boot):
        resampled = _crossfit(*means([h[rng.integers(0, len(h), len(h))] for h in halves]), ks)
        for k, (excess, resampled_cut) in resampled.items():
            for name, value in excess.items():
                boots[k][name].append(value)
            same[k] += resampled_cut == cuts[k]
    q = [(1 - level) / 2, (1 + level) / 2]
    rmse, stationary = _fit_rmse(S), stationary_null(S)
    out = {}
    for k in ks:
        ladder = {name: NullExcess(float(value), *map(float, np.quantile(boots[k][name], q)))
                  for name, value in estimates[k][0].items()}
        judged = ladder[JUDGED_NULL]
        out[k] = PhaseExcess(k, cuts[k], maxcut(stationary, k), judged.excess, judged.low,
                             judged.high, level, same[k] / n_boot, contrast_rank(S, cuts[k]),
                             ladder, rmse)
    return out


def matrix_excess(S: np.ndarray, k: int) -> PhaseExcess:
    """The ladder of :func:`phase_excess` for a matrix published without per-image matrices
    (DINOv2-B's, :func:`raptor.paper.dinov2b_block_similarity`): its max-cut's excess over the
    stationary and warped-decay nulls of ``S`` itself — not cross-fitted, no interval (NaN), no
    random walk (it needs trajectories)."""
    S = np.asarray(S, dtype=float)
    cut = maxcut(S, k)
    ladder = {name: NullExcess(contrast(S - null, cut))
              for name, null in _nulls(S, None).items()}
    return PhaseExcess(k, cut, maxcut(stationary_null(S), k), ladder[JUDGED_NULL].excess,
                       math.nan, math.nan, math.nan, math.nan, contrast_rank(S, cut), ladder,
                       _fit_rmse(S))


def boundaries(partition: Partition) -> tuple[int, ...]:
    """The inner boundaries of a partition (the starts of blocks 2..k)."""
    return tuple(start for start, _ in partition[1:])


def boundary_shift(a: Partition, b: Partition) -> int:
    """The largest move of any boundary between two partitions with the same number of blocks."""
    if len(a) != len(b):
        raise ValueError(f"partitions have {len(a)} and {len(b)} blocks")
    return max((abs(x - y) for x, y in zip(boundaries(a), boundaries(b))), default=0)


def subset_stability(traj: torch.Tensor, groups: TokenGroups, k_values: Sequence[int],
                     image_counts: Sequence[int], n_resamples: int, seed: int = 0
                     ) -> dict[int, dict[int, float]]:
    """Fraction of random image subsets (proper subsets) whose max-cut equals the one from all
    images.

    Returns ``{k: {n: fraction}}`` over ``n_resamples`` subsets of ``n`` images (without
    replacement) from the ``N`` images of ``traj``.
    """
    N = traj.shape[0]
    if any(not 1 <= n < N for n in image_counts):
        raise ValueError(f"image_counts must lie in [1, {N}) (subsets, not the whole set), "
                         f"got {list(image_counts)}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    full = phase_matrix(layer_similarity(traj, groups))
    reference = {k: maxcut(full, k) for k in k_values}
    gen = torch.Generator().manual_seed(seed)
    hits = {k: {n: 0 for n in image_counts} for k in k_values}
    for n in image_counts:
        for _ in range(n_resamples):
            idx = torch.randperm(N, generator=gen)[:n]
            S = phase_matrix(layer_similarity(traj[idx], groups))
            for k in k_values:
                hits[k][n] += maxcut(S, k) == reference[k]
    return {k: {n: h / n_resamples for n, h in row.items()} for k, row in hits.items()}
