"""Phase discovery: contiguous max-cut on a layer-layer similarity matrix (paper Appendix A.1).

Given an (L, L) similarity matrix ``S`` (e.g. mean cosine similarity between layers), the
edge weights of the layer graph are the distances ``W = 1 - S`` of the symmetrised ``S``. A
*partition* of depth is a tuple of half-open ``(start, stop)`` row ranges, contiguous and
covering ``0..L`` in order; ``n_j = stop - start`` is the repeat count of Raptor block ``j``.

Two solvers, both used in the project (paper App. A.1; Table 1's partitions):

* :func:`maxcut` -- the paper's exact dynamic programme over contiguous partitions, O(k L^2).
* :func:`hierarchical_maxcut` -- the recursive bisection of the authors' code, which produced
  the published DINOv2-B partitions (:data:`raptor.paper.DINOV2_B_PARTITIONS`); its clusters need not be
  contiguous.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numpy.typing import ArrayLike

from raptor.paper import HIERARCHICAL_MIN_SIZE, Partition

_BISECTION_CHUNK = 1 << 14  # colourings evaluated per matrix product in the brute force


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return int(value)


def _weights(S: ArrayLike) -> np.ndarray:
    """Return ``W = 1 - (S + S.T) / 2`` after checking that ``S`` is a finite non-empty square."""
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"S must be a square (L, L) matrix, got shape {S.shape}")
    if S.size == 0:
        raise ValueError("S must not be empty")
    if not np.isfinite(S).all():
        raise ValueError("S must contain only finite values")
    return 1.0 - (S + S.T) / 2.0


def validate_partition(partition: Sequence[Sequence[int]], L: int) -> Partition:
    """Check that ``partition`` is contiguous, non-empty per segment and covers ``0..L``.

    Returns the partition as a tuple of ``(start, stop)`` int pairs; raises ValueError otherwise.
    """
    L = _check_int("L", L, 1)
    try:
        pairs = tuple((a, b) for a, b in partition)
    except (TypeError, ValueError) as err:
        raise ValueError(f"partition must be a sequence of (start, stop) pairs: {err}") from None
    if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for pair in pairs for x in pair):
        raise ValueError(f"partition bounds must be ints, got {pairs}")
    pairs = tuple((int(a), int(b)) for a, b in pairs)
    if not pairs:
        raise ValueError("partition must have at least one segment")
    if pairs[0][0] != 0 or pairs[-1][1] != L:
        raise ValueError(f"partition must cover 0..{L}, got {pairs[0][0]}..{pairs[-1][1]}")
    for (a, b), (c, _) in pairwise(pairs):
        if b != c:
            raise ValueError(f"partition is not contiguous: segment ({a}, {b}) is followed by one starting at {c}")
    if any(b <= a for a, b in pairs):
        raise ValueError(f"partition segments must be non-empty (start < stop), got {pairs}")
    return pairs


def partition_to_repeats(partition: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Repeat counts ``n_j = stop - start`` of the segments (the BRH's ``n_1..n_k``, Sec. 2)."""
    return tuple(int(b) - int(a) for a, b in partition)


def partition_to_blocks(partition: Sequence[Sequence[int]], first_block: int = 1) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` layer numbers as printed in the paper, blocks counted from ``first_block``."""
    return [(int(a) + first_block, int(b) - 1 + first_block) for a, b in partition]


def format_partition(partition: Sequence[Sequence[int]], first_block: int = 1) -> str:
    """Paper notation, e.g. ``((0, 7), (7, 12))`` -> ``"1–7 | 8–12"``; a one-layer segment prints as ``"5"``."""
    return " | ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in partition_to_blocks(partition, first_block))


def in_segment_weight(S: ArrayLike, partition: Sequence[Sequence[int]]) -> float:
    """The DP objective: sum over segments of ``W[start:stop, start:stop].sum()`` (Appendix A.1).

    The whole square block is summed, so each off-diagonal pair counts twice and the diagonal
    ``W[i, i]`` once; the diagonal adds the same constant to every partition.
    """
    W = _weights(S)
    return float(sum(W[a:b, a:b].sum() for a, b in validate_partition(partition, len(W))))


def maxcut(S: ArrayLike, k: int) -> Partition:
    """Exact optimal contiguous k-partition of the layers of ``S`` (Appendix A.1, O(k L^2)).

    Minimises :func:`in_segment_weight` of ``W = 1 - S``, which for contiguous segments is the
    same as maximising the weight of the cut between segments. With the 2-D prefix sum ``P`` of
    ``W`` the weight of segment ``[b, e)`` is ``P[e,e] - P[b,e] - P[e,b] + P[b,b]``; a suffix
    table ``G[t][b]`` (best cost of covering ``[b, L)`` with ``t`` segments) is filled in k
    vectorised steps. The objective is not invariant to adding a constant to ``S`` (that adds
    a multiple of ``sum n_j^2``), but it is to ``S -> 1 - c (1 - S)`` for ``c > 0``.

    Ties: among partitions whose objective is within ``1e-9 * (1 + sum |W|)`` of the optimum, the
    one with the lexicographically smallest boundaries is returned (earliest first boundary,
    then earliest second, ...).
    """
    W = _weights(S)
    L = len(W)
    k = _check_int("k", k, 1, L)
    P = np.zeros((L + 1, L + 1))
    P[1:, 1:] = W.cumsum(0).cumsum(1)
    d = np.diag(P)
    cost = d[:, None] + d[None, :] - P - P.T  # cost[b, e] = weight of segment [b, e)
    cost[np.tri(L + 1, dtype=bool)] = np.inf  # only b < e is a segment
    G = np.full((k + 1, L + 1), np.inf)
    G[0, L] = 0.0
    for t in range(1, k + 1):
        G[t] = (cost + G[t - 1][None, :]).min(axis=1)
    tol = 1e-9 * (1.0 + np.abs(W).sum())
    bounds = [0]
    for t in range(k, 0, -1):
        candidates = cost[bounds[-1]] + G[t - 1]
        bounds.append(int(np.flatnonzero(candidates <= G[t, bounds[-1]] + tol)[0]))
    return tuple(pairwise(bounds))


@dataclass(frozen=True)
class HierarchicalResult:
    """Outcome of :func:`hierarchical_maxcut`.

    Attributes
    ----------
    clusters : sorted index tuples, ordered by their first index.
    contiguous : whether every cluster is a run of consecutive indices.
    partition : the clusters as a contiguous partition when ``contiguous``, else None.
    gains : cut weight of each split performed, in the order performed.
    total_weight : ``sum_{i<j} W[i, j]``, the reference for the ``eps`` threshold.
    """

    clusters: tuple[tuple[int, ...], ...]
    contiguous: bool
    partition: Partition | None
    gains: tuple[float, ...]
    total_weight: float


def _best_bisection(W: np.ndarray) -> tuple[float, np.ndarray]:
    """Exact max-cut of the complete graph ``W`` (m >= 2) by enumerating all 2-colourings.

    Member 0 is fixed on side 0 and both sides must be non-empty. Ties go to the first colouring
    in lexicographic order of the side labels of members 1..m-1, as in the authors' enumeration.
    """
    m = len(W)
    bit_weights = 1 << np.arange(m - 2, -1, -1, dtype=np.int64)  # member 1 is the top bit
    best_gain, best_side = -np.inf, np.zeros(m, dtype=bool)
    for lo in range(1, 1 << (m - 1), _BISECTION_CHUNK):
        codes = np.arange(lo, min(lo + _BISECTION_CHUNK, 1 << (m - 1)), dtype=np.int64)
        X = np.zeros((len(codes), m))
        X[:, 1:] = (codes[:, None] & bit_weights) != 0
        cut = np.einsum("ij,ij->i", X @ W, 1.0 - X)  # sum over i on side 1, j on side 0
        i = int(np.argmax(cut))
        if cut[i] > best_gain:
            best_gain, best_side = float(cut[i]), X[i].astype(bool)
    return best_gain, best_side


def hierarchical_maxcut(
    S: ArrayLike, eps: float, *, min_size: int = HIERARCHICAL_MIN_SIZE, max_bruteforce: int = 20
) -> HierarchicalResult:
    """Recursive max-cut bisection of the authors' code (it gave Table 1's partitions; App. A.1).

    Start with all layers in one cluster. For every cluster with at least ``2 * min_size``
    members, find its exact (not contiguity-constrained) max-cut bisection of ``W = 1 - S`` by
    brute force; split the cluster with the largest gain (ties: smallest first index), and
    stop when that gain is ``<= eps * total_weight``. Interpretation of "minimum cluster size
    2", as in the authors' ``min_size=2``: clusters smaller than ``2 * min_size`` are never
    split, but a bisection's sides are not size-constrained (a 4-cluster may split 1 + 3).
    Because a split never changes another cluster's gain, the final clusters equal those of the
    authors' lazy priority loop; only the order of ``gains`` depends on the greedy order.

    The brute force costs O(2^m m^2) per cluster of size m; a splittable matrix larger than
    ``max_bruteforce`` is refused. The paper used eps = 0.20 / 0.10 / 0.09 for k = 2 / 3 / 4.
    """
    W = _weights(S)
    L = len(W)
    if not isinstance(eps, (float, int, np.floating)) or isinstance(eps, bool) or not 0.0 < eps < 1.0:
        raise ValueError(f"eps must be a number in (0, 1), got {eps!r}")
    min_size = _check_int("min_size", min_size, 1)
    max_bruteforce = _check_int("max_bruteforce", max_bruteforce, 2)
    if L >= 2 * min_size and L > max_bruteforce:
        raise ValueError(
            f"hierarchical_maxcut brute-forces all 2^(m-1) bisections: cluster size {L} exceeds "
            f"max_bruteforce={max_bruteforce}"
        )
    total = float(W[np.triu_indices(L, 1)].sum())
    threshold = eps * total
    clusters: list[tuple[int, ...]] = [tuple(range(L))]
    splits: dict[tuple[int, ...], tuple[float, np.ndarray]] = {}
    gains: list[float] = []
    while True:
        best: tuple[int, ...] | None = None
        for c in sorted(clusters):
            if len(c) >= 2 * min_size:
                if c not in splits:
                    splits[c] = _best_bisection(W[np.ix_(c, c)])
                if best is None or splits[c][0] > splits[best][0]:
                    best = c
        if best is None or splits[best][0] <= threshold:
            break
        gain, side = splits[best]
        members = np.asarray(best)
        clusters.remove(best)
        clusters += [tuple(members[~side].tolist()), tuple(members[side].tolist())]
        gains.append(gain)
    clusters.sort()
    contiguous = all(c[-1] - c[0] + 1 == len(c) for c in clusters)
    partition = tuple((c[0], c[-1] + 1) for c in clusters) if contiguous else None
    return HierarchicalResult(tuple(clusters), contiguous, partition, tuple(gains), total)


def random_partitions(L: int, k: int, n: int, seed: int, exclude: Sequence[Partition] = ()
                      ) -> list[Partition]:
    """``n`` distinct contiguous k-partitions of ``L`` layers, none of ``exclude``, uniform without
    replacement over the ``C(L-1, k-1)`` of them; all that remain when fewer than ``n`` do.

    The paper's baseline for max-cut (Fig. 3) draws random partitions; drawing each at most once
    and leaving out the max-cut itself is [ours]. Each draw picks ``k - 1`` distinct cut points
    among the ``L - 1`` gaps with ``numpy.random.default_rng(seed)``; repeats are drawn again.
    """
    L = _check_int("L", L, 1)
    k = _check_int("k", k, 1, L)
    n = _check_int("n", n, 0)
    seen = {validate_partition(p, L) for p in exclude}
    if any(len(p) != k for p in seen):
        raise ValueError(f"exclude must hold {k}-partitions of L = {L}, got {list(exclude)}")
    n = min(n, math.comb(L - 1, k - 1) - len(seen))
    rng = np.random.default_rng(seed)
    draws: list[Partition] = []
    while len(draws) < n:
        cuts = np.sort(rng.choice(L - 1, size=k - 1, replace=False)) + 1
        part = tuple(pairwise([0, *cuts.tolist(), L]))
        if part not in seen:
            seen.add(part)
            draws.append(part)
    return draws
