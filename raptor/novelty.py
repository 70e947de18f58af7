"""Phase boundaries found without the max-cut: Foote's novelty on a self-similarity matrix.

A checkerboard kernel slid along the diagonal of a layer-by-layer similarity matrix scores each
place between two layers by how much more alike the layers on each side are among themselves
than across it (J. Foote, "Automatic audio segmentation using a measure of audio novelty", ICME
2000 — the detector music-structure analysis has used for segment boundaries since). Its peaks
are boundaries found locally, from the matrix's structure near each place, while the max-cut
(App. A.1) chooses all boundaries at once by a global objective: where the cut's boundaries sit on
novelty peaks more often than boundaries placed at random would, it marks edges visible in the
matrix (C2).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import find_peaks

#: The kernel's half-width in layers [ours]: the shortest phase of the paper's DINOv2-B partitions
#: scaled to 12 blocks is 2 layers (7 | 3 | 2, §3), so a wider kernel would straddle it.
HALF_WIDTH = 2
#: A peak's least prominence [ours]: C1's threshold, the least a block must stand out from the
#: similarity around it to be seen (0.01 of cosine similarity); smaller peaks are noise.
PROMINENCE = 0.01


def kernel(half_width: int = HALF_WIDTH) -> np.ndarray:
    """The ``2w × 2w`` checkerboard kernel: +1 on the two diagonal quadrants (within a side), −1
    off them (across), tapered by a Gaussian of standard deviation ``w`` about the centre."""
    if half_width < 1:
        raise ValueError(f"half_width must be ≥ 1, got {half_width}")
    offsets = np.arange(2 * half_width) - half_width + 0.5
    side = np.sign(offsets)
    taper = np.exp(-0.5 * (offsets / half_width) ** 2)
    return np.outer(side * taper, side * taper)


def novelty(S: np.ndarray, half_width: int = HALF_WIDTH) -> np.ndarray:
    """Foote's novelty of ``S`` ``(L, L)`` at each place ``b = 1..L−1`` between layers ``b−1`` and
    ``b`` (0-based; index ``b − 1`` of the result): the kernel's weighted sum over ``S`` divided
    by its total weight, NaN where the kernel does not fit inside the matrix (``b < w`` or
    ``b > L − w``: a cut kernel weighs one side's similarity more than the other's)."""
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] < 2 * half_width:
        raise ValueError(f"need a square matrix of at least 2 × half_width = {2 * half_width} "
                         f"layers, got shape {S.shape}")
    L, K, w = S.shape[0], kernel(half_width), half_width
    scores = np.full(L - 1, np.nan)
    for b in range(w, L - w + 1):
        scores[b - 1] = float((K * S[b - w:b + w, b - w:b + w]).sum() / np.abs(K).sum())
    return scores


def novelty_peaks(S: np.ndarray, half_width: int = HALF_WIDTH) -> list[int]:
    """The boundaries the novelty finds: its peaks (:func:`scipy.signal.find_peaks`) of
    prominence at least :data:`PROMINENCE`, as places ``1..L−1`` (numbered as
    :func:`raptor.structure.boundaries` numbers a partition's), sorted."""
    scores = novelty(S, half_width)
    inside = np.flatnonzero(np.isfinite(scores))
    x = scores[inside]
    # padded with its lowest value, so that the first and last places can be peaks
    found, _ = find_peaks(np.concatenate([[x.min()], x, [x.min()]]), prominence=PROMINENCE)
    return [int(inside[i - 1]) + 1 for i in found]


def coverage(peaks: list[int], length: int, tol: int) -> float:
    """The share of the places ``1..length−1`` within ``tol`` of one of ``peaks``: the chance that
    a boundary placed at random lies near a peak (each of a random partition's boundaries is
    uniform over the places)."""
    places = np.arange(1, length)
    return float(np.mean([any(abs(b - p) <= tol for p in peaks) for b in places]))
