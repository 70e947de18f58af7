"""Is a phase partition real and stable? Statistics behind claims C1 and C2 (paper §2, Figs. 1–3).

A max-cut always returns *some* partition, and a similarity that merely decays smoothly with
depth — ``S[l, m]`` a function of ``|l − m|`` only — gets even cuts with a positive inside-minus-
across contrast. Block structure is what such a *stationary* matrix lacks:

* :func:`stationary_null`: the Toeplitz matrix of ``S``'s diagonal means; :func:`block_excess`:
  a partition's contrast on ``S`` minus its contrast on that null (0 for every partition of a
  stationary ``S``).
* :func:`image_growth_nulls` [ours]: a second null, the similarity the residual stream would
  have if every block added an update orthogonal to it, with the norms observed —
  ``cos(x_l, x_m) = ‖x_l‖ / ‖x_m‖`` for ``‖x_l‖ ≤ ‖x_m‖``. Not stationary: where the norm grows
  fast the similarity drops, and late layers whose norm has stopped growing look like a block.
  On Fashion-MNIST an untrained ViT's residual stream is close to it (uncorrelated updates).
* :func:`phase_excess`: the max-cut's excess over the stronger of the two nulls, cross-fitted
  over two halves of the images (the cut chosen on one half, measured on the other, so noise
  cannot create excess), with a bootstrap interval over images, the max-cut's agreement across
  resamples, and its exact rank among all ``C(L−1, k−1)`` contiguous partitions
  (:func:`contrast_rank`).
* :func:`boundary_shift` and :func:`subset_stability`: whether max-cut boundaries move between
  teachers trained with different seeds, or on subsets of the images (C2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations, pairwise

import numpy as np
import torch

from raptor.phases import Partition, maxcut, validate_partition
from raptor.similarity import EPS, block_contrast, layer_similarity, phase_matrix
from raptor.trajectories import TokenGroups

MAX_PARTITIONS = 200_000  # enumerating more contiguous partitions than this is refused


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
class PhaseExcess:
    """C1's statistic for one model and k: is its max-cut more than a smooth decay's?

    ``cut`` is the max-cut of all images' matrix, ``null_cut`` that of its stationary null;
    ``excess`` the cross-fitted block excess over the stronger null (the smaller of ``stationary``
    and ``growth``, the excesses over each) with its bootstrap interval ``[low, high]`` at
    ``level``; ``agreement`` the share of resamples whose max-cut equals ``cut``; ``rank`` the
    cut's contrast rank among all contiguous partitions. Without a growth null ``growth`` is NaN
    and the excess is over the stationary null alone.
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
    stationary: float = math.nan
    growth: float = math.nan


def _crossfit(A: np.ndarray, B: np.ndarray, GA: np.ndarray | None, GB: np.ndarray | None,
              k: int) -> tuple[float, float, Partition]:
    """Excess of each half's max-cut measured on the other half, averaged, over the stationary
    null and over the growth nulls ``GA``, ``GB`` (NaN without); and ``A + B``'s cut."""
    cut_a, cut_b = maxcut(A, k), maxcut(B, k)
    stationary = (block_excess(B, cut_a) + block_excess(A, cut_b)) / 2
    growth = math.nan if GA is None or GB is None else \
        (contrast(B - GB, cut_a) + contrast(A - GA, cut_b)) / 2
    return stationary, growth, maxcut((A + B) / 2, k)


def _stronger(stationary: float, growth: float) -> float:
    return stationary if math.isnan(growth) else min(stationary, growth)


def phase_excess(per_image: np.ndarray, k: int, *, growth: np.ndarray | None = None,
                 n_boot: int = 200, level: float = 0.95, seed: int = 0) -> PhaseExcess:
    """:class:`PhaseExcess` from per-image phase matrices ``(N, L, L)``
    (:func:`image_phase_matrices`) and, optionally, their growth nulls
    (:func:`image_growth_nulls`, same shape).

    The images are split at random into two halves; each bootstrap resample draws images with
    replacement within each half and recomputes both cuts, so the interval covers the selection
    of the cut as well as the noise of the images. Under a null expected ``S`` the excess over it
    has mean 0 whatever the noise, because the cut is never measured on the images it came from.
    """
    per_image = np.asarray(per_image, dtype=float)
    if per_image.ndim != 3 or per_image.shape[1] != per_image.shape[2] or len(per_image) < 4:
        raise ValueError(f"per_image must be (N ≥ 4, L, L), got {per_image.shape}")
    if growth is not None and np.shape(growth) != per_image.shape:
        raise ValueError(f"growth must have per_image's shape {per_image.shape}, "
                         f"got {np.shape(growth)}")
    if not 1 <= k <= per_image.shape[1]:
        raise ValueError(f"k must be in [1, L = {per_image.shape[1]}], got {k}")
    if n_boot < 10 or not 0 < level < 1:
        raise ValueError(f"need n_boot ≥ 10 and level in (0, 1), got {n_boot}, {level}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(per_image))
    halves = [order[: len(order) // 2], order[len(order) // 2:]]

    def means(idx: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        return (*(per_image[i].mean(0) for i in idx),
                *((None, None) if growth is None else (growth[i].mean(0) for i in idx)))

    S = per_image.mean(0)
    cut = maxcut(S, k)
    stationary, grown, _ = _crossfit(*means(halves), k)
    boots, same = [], 0
    for _ in range(n_boot):
        ex_s, ex_g, resampled_cut = _crossfit(
            *means([h[rng.integers(0, len(h), len(h))] for h in halves]), k)
        boots.append(_stronger(ex_s, ex_g))
        same += resampled_cut == cut
    low, high = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return PhaseExcess(k, cut, maxcut(stationary_null(S), k), _stronger(stationary, grown),
                       float(low), float(high), level, same / n_boot, contrast_rank(S, cut),
                       float(stationary), float(grown))


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
