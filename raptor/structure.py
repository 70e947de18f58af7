"""Is a phase partition real and stable? Statistics behind claims C1 and C2 (paper §2, Figs. 1–3).

* :func:`contrast_vs_random`: how much more similar layers are inside a partition's blocks than
  across them, compared with random contiguous partitions of the same size (C1).
* :func:`boundary_shift` and :func:`subset_stability`: whether max-cut boundaries move between
  teachers trained with different seeds, or when fewer images are used (C2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from raptor.phases import Partition, maxcut, random_partitions
from raptor.similarity import block_contrast, layer_similarity, phase_matrix
from raptor.trajectories import TokenGroups


@dataclass(frozen=True)
class Contrast:
    """Inside-minus-across similarity of a partition, and of random partitions (mean ± std)."""

    inside: float
    across: float
    random_mean: float
    random_std: float

    @property
    def contrast(self) -> float:
        return self.inside - self.across

    @property
    def z(self) -> float:
        """Standard deviations by which the partition beats random partitions."""
        return (self.contrast - self.random_mean) / max(self.random_std, 1e-12)


def contrast_vs_random(S: np.ndarray, partition: Partition, n_random: int, seed: int = 0
                       ) -> Contrast:
    """Block contrast of ``partition`` on ``S`` vs ``n_random`` random contiguous partitions."""
    if n_random < 2:
        raise ValueError(f"n_random must be >= 2 for a standard deviation, got {n_random}")
    inside, across = block_contrast(S, partition)
    rand = [np.subtract(*block_contrast(S, r))
            for r in random_partitions(S.shape[0], len(partition), n_random, seed)]
    return Contrast(inside, across, float(np.mean(rand)), float(np.std(rand)))


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
    """Fraction of random image subsets whose max-cut equals the one from all images.

    Returns ``{k: {n: fraction}}`` over ``n_resamples`` subsets of ``n`` images (without
    replacement) from the ``N`` images of ``traj``.
    """
    N = traj.shape[0]
    if any(not 1 <= n <= N for n in image_counts):
        raise ValueError(f"image_counts must lie in [1, {N}], got {list(image_counts)}")
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
