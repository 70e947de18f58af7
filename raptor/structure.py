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
from collections.abc import Callable, Mapping, Sequence
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


@functools.cache
def _upper(L: int) -> tuple[np.ndarray, np.ndarray]:
    """The upper-triangle pairs of ``L`` layers, row-major (``np.triu_indices(L, 1)``)."""
    return np.triu_indices(L, 1)


@functools.lru_cache(maxsize=4096)
def _warp_ties(L: int, lam: float, from_end: bool) -> tuple[np.ndarray, np.ndarray]:
    """For the upper-triangle pairs of ``L`` layers in row-major order, the index of their
    distance on the axis ``g_λ`` (of the depth counted from the last block if ``from_end``)
    among the distinct distances (ascending), and each one's count."""
    layer = np.arange(1, L + 1, dtype=float)
    if from_end:
        layer = layer[::-1]
    g = np.log(layer) if lam == 0 else (layer ** lam - 1) / lam
    distance = np.round(np.abs(g[:, None] - g[None, :])[_upper(L)] / np.ptp(g), 9)
    _, inverse = np.unique(distance, return_inverse=True)
    return inverse, np.bincount(inverse)


Warp = tuple[float, bool]  # a Box-Cox exponent λ of WARP_EXPONENTS and whether from the last block

#: From this many fits at once, one vectorised pool-adjacent-violators over all of them
#: (:func:`isotonic_decreasing`) instead of scipy's ``isotonic_regression`` per fit, whose cost is
#: mostly its call (``bench/bench_isotonic.py``); and one vectorised bounded search for the
#: refined exponents (:func:`bounded_minimum`) instead of scipy's ``minimize_scalar`` per matrix.
BATCHED_FROM = 48


def isotonic_decreasing(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The non-increasing weighted least-squares fit of each row of ``y`` ``(B, n)`` with the
    positive weights ``w`` (same shape), all rows at once: pool adjacent violators, every
    violating pair of adjacent blocks of every row pooled in one pass (two adjacent blocks out
    of order share their value in the fit, whichever are pooled first), again in the rows that
    still have one. A row shorter than ``n`` is padded at its end with ``−∞`` (any weight): a pad
    never pools, and its fit is ``−∞``."""
    y, w = np.asarray(y, dtype=float), np.asarray(w, dtype=float)
    fit, weighted = y.copy(), y * w
    starts = np.ones(y.shape, dtype=bool)  # where each row's blocks start
    active = np.arange(len(y))
    while active.size:
        m, s = fit[active], starts[active]
        violated = (m[:, 1:] > m[:, :-1]) & s[:, 1:]  # a block's mean above its predecessor's
        hit = violated.any(axis=1)
        active, s, violated = active[hit], s[hit], violated[hit]
        s[:, 1:] &= ~violated
        starts[active] = s
        at = np.flatnonzero(s)
        means = np.add.reduceat(weighted[active].ravel(), at) / np.add.reduceat(
            w[active].ravel(), at)
        fit[active] = np.repeat(means, np.diff(at, append=s.size)).reshape(s.shape)
    return fit


def _warp_fits(pairs: np.ndarray, L: int, warps: Sequence[Warp]) -> tuple[np.ndarray, np.ndarray]:
    """The isotonic fit of each row of the upper-triangle ``pairs`` ``(B, P)`` along the axis of
    its warp: (SSE ``(B,)``, fit ``(B, P)``); one vectorised fit from :data:`BATCHED_FROM` rows."""
    ties = [_warp_ties(L, lam, from_end) for lam, from_end in warps]
    if len(ties) < BATCHED_FROM:
        fit = np.array([isotonic_regression(np.bincount(inverse, p) / counts, weights=counts,
                                            increasing=False).x[inverse]
                        for p, (inverse, counts) in zip(pairs, ties)])
    else:
        B, n = pairs.shape
        inverse = np.array([inverse for inverse, _ in ties])
        at = (np.arange(B)[:, None] * n + inverse).ravel()
        sums = np.bincount(at, pairs.ravel(), B * n).reshape(B, n)
        counts = np.bincount(at, minlength=B * n).reshape(B, n)
        padded = counts == 0  # past each row's distinct distances
        counts[padded] = 1
        fitted = isotonic_decreasing(np.where(padded, -np.inf, sums / counts), counts)
        fit = np.take_along_axis(fitted, inverse, axis=1)
    return ((pairs - fit) ** 2).sum(axis=1), fit


def _pairs(S: np.ndarray) -> np.ndarray:
    """The upper-triangle pairs ``(B, P)`` of ``(S + Sᵀ) / 2`` for each matrix of ``S``
    ``(B, L, L)``."""
    S = np.asarray(S, dtype=float)
    if S.ndim != 3 or S.shape[1] != S.shape[2] or S.shape[1] < 3:
        raise ValueError(f"S must be a square matrix with at least 3 layers, got {S.shape[1:]}")
    return ((S + S.swapaxes(1, 2)) / 2)[:, *_upper(S.shape[1])]


def bounded_minimum(func: Callable[[np.ndarray, np.ndarray], np.ndarray], low: np.ndarray,
                    high: np.ndarray, xatol: float) -> tuple[np.ndarray, np.ndarray]:
    """Brent's bounded minimisation of many scalar functions at once: scipy's
    ``minimize_scalar(method="bounded")`` step for step (the same arithmetic, so the same
    points), each still searching row evaluated together: ``func(rows, x)`` gives the values
    at ``x`` of the functions ``rows``. Returns each function's minimiser and minimum."""
    sqrt_eps, golden_mean = math.sqrt(2.2e-16), 0.5 * (3.0 - math.sqrt(5.0))
    a, b = np.array(low, dtype=float), np.array(high, dtype=float)
    xf = a + golden_mean * (b - a)
    nfc, fulc = xf.copy(), xf.copy()
    rat, e = np.zeros_like(xf), np.zeros_like(xf)
    fx = np.asarray(func(np.arange(len(xf)), xf), dtype=float)
    ffulc, fnfc = fx.copy(), fx.copy()
    num = 1
    while True:
        xm = 0.5 * (a + b)
        tol1 = sqrt_eps * np.abs(xf) + xatol / 3.0
        tol2 = 2.0 * tol1
        act = np.nonzero(np.abs(xf - xm) > (tol2 - 0.5 * (b - a)))[0]
        if not act.size or num >= 500:  # scipy's maxiter
            return xf, fx
        A, Bb, X, Fx, N, Fn, U, Fu = a[act], b[act], xf[act], fx[act], nfc[act], fnfc[act], \
            fulc[act], ffulc[act]
        Xm, T1, T2, E, Rat = xm[act], tol1[act], tol2[act], e[act], rat[act]
        golden = np.abs(E) <= T1
        r = (X - N) * (Fx - Fu)
        q = (X - U) * (Fx - Fn)
        p = (X - U) * q - (X - N) * r
        q = 2.0 * (q - r)
        p = np.where(q > 0.0, -p, p)
        q = np.abs(q)
        r, E = np.where(golden, r, E), np.where(golden, E, Rat)
        parabola = ~golden & (np.abs(p) < np.abs(0.5 * q * r)) & (p > q * (A - X)) & \
            (p < q * (Bb - X))
        with np.errstate(divide="ignore", invalid="ignore"):
            Rat = np.where(parabola, (p + 0.0) / q, Rat)
        x = X + Rat
        edge = parabola & (((x - A) < T2) | ((Bb - x) < T2))
        si = np.sign(Xm - X) + ((Xm - X) == 0)
        Rat = np.where(edge, T1 * si, Rat)
        step = ~parabola
        E = np.where(step, np.where(X >= Xm, A - X, Bb - X), E)
        Rat = np.where(step, golden_mean * E, Rat)
        si = np.sign(Rat) + (Rat == 0)
        x = X + si * np.maximum(np.abs(Rat), T1)
        fu = np.asarray(func(act, x), dtype=float)
        num += 1
        better = fu <= Fx
        A = np.where(better & (x >= X), X, np.where(~better & (x < X), x, A))
        Bb = np.where(better & (x < X), X, np.where(~better & (x >= X), x, Bb))
        second = ~better & ((fu <= Fn) | (N == X))
        third = ~better & ~second & ((fu <= Fu) | (U == X) | (U == N))
        U, Fu = np.where(better | second, N, np.where(third, x, U)), \
            np.where(better | second, Fn, np.where(third, fu, Fu))
        N, Fn = np.where(better, X, np.where(second, x, N)), \
            np.where(better, Fx, np.where(second, fu, Fn))
        X, Fx = np.where(better, x, X), np.where(better, fu, Fx)
        a[act], b[act], xf[act], fx[act], nfc[act], fnfc[act], fulc[act], ffulc[act] = \
            A, Bb, X, Fx, N, Fn, U, Fu
        e[act], rat[act] = E, Rat


def best_warps(S: np.ndarray, origins: Sequence[str] = WARP_ORIGINS) -> list[Warp]:
    """:func:`best_warp` of each matrix of ``S`` ``(B, L, L)``, the fits of all at once."""
    if not origins or not set(origins) <= set(WARP_ORIGINS):
        raise ValueError(f"origins must be some of {WARP_ORIGINS}, got {origins}")
    pairs, L = _pairs(S), np.shape(S)[1]
    directions = [origin == "last" for origin in origins]
    n = len(pairs)

    def sse(rows: Sequence[int], warps: Sequence[Warp]) -> np.ndarray:
        return _warp_fits(pairs[list(rows)], L, warps)[0] if len(rows) else np.empty(0)

    # every fifth exponent, then every one within four steps of the best: 16 fits a direction
    # instead of 36, the whole grid's fit on every control, 20 resamples of each and DINOv2-B's
    coarse_at = range(0, len(WARP_EXPONENTS), 5)
    jobs = [(r, i, fe) for r in range(n) for fe in directions for i in coarse_at]
    values = sse([r for r, _, _ in jobs], [(WARP_EXPONENTS[i], fe) for _, i, fe in jobs])
    coarse = dict(zip(jobs, values))
    fine = {(r, fe): range(max(best - 4, 0), min(best + 5, len(WARP_EXPONENTS)))
            for r in range(n) for fe in directions
            for best in [min(coarse_at, key=lambda i: coarse[r, i, fe])]}
    jobs = [(r, i, fe) for (r, fe), window in fine.items() for i in window
            if (r, i, fe) not in coarse]
    values = sse([r for r, _, _ in jobs], [(WARP_EXPONENTS[i], fe) for _, i, fe in jobs])
    grid = coarse | dict(zip(jobs, values))
    chosen = []
    for r in range(n):
        fits = {(WARP_EXPONENTS[i], fe): grid[r, i, fe] for fe in directions
                for i in fine[r, fe]}
        lam, fe = min(fits, key=fits.__getitem__)
        chosen.append((lam, fe, fits[lam, fe]))
    # between the grid's exponents: a smooth decay whose exponent falls between two of them
    # would leave its misfit in the residual as block excess
    step = WARP_EXPONENTS[1] - WARP_EXPONENTS[0]
    low = [max(lam - step, WARP_EXPONENTS[0]) for lam, _, _ in chosen]
    high = [min(lam + step, WARP_EXPONENTS[-1]) for lam, _, _ in chosen]
    if n < BATCHED_FROM:
        refined = [minimize_scalar(lambda v: sse([r], [(round(float(v), 4), fe)])[0],
                                   bounds=(lo, hi), method="bounded", options={"xatol": 0.005})
                   for r, ((_, fe, _), lo, hi) in enumerate(zip(chosen, low, high))]
        at, fun = [x.x for x in refined], [x.fun for x in refined]
    else:
        at, fun = bounded_minimum(lambda rows, v: sse(rows, [
            (round(float(x), 4), chosen[r][1]) for r, x in zip(rows, v)]), low, high, 0.005)
    return [(round(float(x), 4), fe) if f < best else (lam, fe)
            for (lam, fe, best), x, f in zip(chosen, at, fun)]


def best_warp(S: np.ndarray, origins: Sequence[str] = WARP_ORIGINS) -> Warp:
    """The warp of :func:`warped_decay_null`: the exponent λ (the best of :data:`WARP_EXPONENTS`,
    refined between its neighbours by a bounded scalar search) and the origin (``True``: from
    the last block) whose monotone decay fits ``S`` best."""
    return best_warps(np.asarray(S, dtype=float)[None], origins)[0]


def warped_decay_nulls(S: np.ndarray, warps: Sequence[Warp] | None = None,
                       origins: Sequence[str] = WARP_ORIGINS) -> np.ndarray:
    """:func:`warped_decay_null` of each matrix of ``S`` ``(B, L, L)``, along its warp of
    ``warps`` (else its best), the fits of all at once."""
    S = np.asarray(S, dtype=float)
    pairs, L = _pairs(S), S.shape[1]
    warps = best_warps(S, origins) if warps is None else warps
    upper = _upper(L)
    W = np.ones_like(S)
    W[:, *upper] = _warp_fits(pairs, L, warps)[1]
    W[:, upper[1], upper[0]] = W[:, *upper]
    return W


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
    return warped_decay_nulls(np.asarray(S, dtype=float)[None],
                              None if warp is None else [warp], origins)[0]


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
    upper = _upper(len(S))
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


def subset_stability(reference: Mapping[int, Partition], per_image: np.ndarray,
                     image_counts: Sequence[int], n_resamples: int, seed: int = 0
                     ) -> dict[int, dict[int, float]]:
    """Per k and subset size ``n``, the share of ``n_resamples`` disjoint subsets of ``n`` images
    whose max-cut is ``reference[k]`` (C2): ``per_image`` ``(N, L, L)``, the phase matrices of
    images held out from those that chose the reference, so that every subset is an independent
    draw (a binomial count: a Wilson interval holds). Needs ``n_resamples · n ≤ N``."""
    N = per_image.shape[0]
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if any(n < 1 or n * n_resamples > N for n in image_counts):
        raise ValueError(f"{n_resamples} disjoint subsets of each size in {list(image_counts)} "
                         f"need up to {n_resamples * max(image_counts)} held-out images, got {N}")
    rng = np.random.default_rng(seed)
    hits = {k: dict.fromkeys(image_counts, 0) for k in reference}
    for n in image_counts:
        for idx in rng.permutation(N)[:n * n_resamples].reshape(n_resamples, n):
            S = per_image[idx].mean(0)
            for k, cut in reference.items():
                hits[k][n] += maxcut(S, k) == cut
    return {k: {n: h / n_resamples for n, h in row.items()} for k, row in hits.items()}
