"""Layer–layer similarity of a ViT's residual stream (paper §2, Fig. 1).

``S[l, m]`` is the cosine similarity of each token at layer ``l`` with the *same* token at layer
``m``, averaged over the tokens of a group and over images. Matrices are accumulated batch by
batch, so memory does not depend on the number of images.

Groups: ``cls``, ``registers``, ``patches`` (each token of the group), ``all`` (every token), and
``patch_mean`` (the mean patch token, as in the authors' code for paper App. A.1).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

from raptor.trajectories import TokenGroups

EPS = 1e-12


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(EPS)


class SimilarityAccumulator:
    """Running sums of ``Σ cos(x_l^t, x_m^t)`` per token group; :meth:`result` gives the means."""

    def __init__(self, groups: TokenGroups) -> None:
        self.groups = groups
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}

    def _add(self, name: str, tokens: torch.Tensor) -> None:
        # layers first, then one (L × N·T·D) product: twice as fast as the einsum over (n, t, d)
        u = _unit(tokens.double()).transpose(0, 1).reshape(tokens.shape[1], -1)
        gram = u @ u.T
        self.sums[name] = self.sums.get(name, 0) + gram
        self.counts[name] = self.counts.get(name, 0) + tokens.shape[0] * tokens.shape[2]

    def update(self, traj: torch.Tensor) -> None:
        """Add a batch of trajectories ``(N, L+1, T, D)``."""
        if traj.ndim != 4 or traj.shape[2] != self.groups.num_tokens:
            raise ValueError(f"traj must be (N, L+1, T={self.groups.num_tokens}, D), "
                             f"got {tuple(traj.shape)}")
        for name, s in self.groups.items():
            self._add(name, traj[:, :, s])
        self._add("all", traj)
        if self.groups.patches.stop > self.groups.patches.start:
            self._add("patch_mean", traj[:, :, self.groups.patches].mean(dim=2, keepdim=True))

    def result(self) -> dict[str, np.ndarray]:
        """``{group: S}`` with ``S`` of shape ``(L+1, L+1)``."""
        if not self.sums:
            raise ValueError("no trajectories were added")
        return {k: (v / self.counts[k]).numpy() for k, v in self.sums.items()}


def layer_similarity(trajectories: Iterable[torch.Tensor] | torch.Tensor,
                     groups: TokenGroups) -> dict[str, np.ndarray]:
    """Similarity matrices per group from one trajectory tensor or an iterable of batches.

    Batches may be ``(traj, labels)`` pairs as yielded by
    :func:`raptor.trajectories.iter_trajectories`.
    """
    acc = SimilarityAccumulator(groups)
    batches = [trajectories] if isinstance(trajectories, torch.Tensor) else trajectories
    for batch in batches:
        acc.update(batch[0] if isinstance(batch, tuple) else batch)
    return acc.result()


def mean_offdiagonal(S: np.ndarray) -> float:
    """Mean of ``S[l, m]`` over ``l ≠ m`` (Fig. 4E's "mean layer–layer similarity")."""
    n = S.shape[0]
    if n < 2:
        raise ValueError("S needs at least 2 layers")
    return float((S.sum() - np.trace(S)) / (n * n - n))


def block_contrast(S: np.ndarray, partition: tuple[tuple[int, int], ...]) -> tuple[float, float]:
    """Mean similarity inside the partition's diagonal blocks and across them (claim C1).

    Only off-diagonal pairs count; a partition of single layers has no inside pairs (``nan``).
    """
    inside = np.zeros_like(S, dtype=bool)
    for start, stop in partition:
        inside[start:stop, start:stop] = True
    np.fill_diagonal(inside, False)
    across = ~inside
    np.fill_diagonal(across, False)
    mean_in = float(S[inside].mean()) if inside.any() else float("nan")
    return mean_in, float(S[across].mean()) if across.any() else float("nan")


def phase_matrix(mats: dict[str, np.ndarray]) -> np.ndarray:
    """The matrix the phases are cut from: blocks 1..L, tokens {cls, mean patch} (App. A.1).

    The authors average the similarity of the cls token and of the mean patch token over the
    outputs of the blocks (the embedding, layer 0, left out). Without a cls token the mean patch
    token alone is used.
    """
    parts = [mats[g] for g in ("cls", "patch_mean") if g in mats]
    if not parts:
        raise ValueError(f"need a 'cls' or 'patch_mean' matrix, got groups {sorted(mats)}")
    return np.mean(parts, axis=0)[1:, 1:]
