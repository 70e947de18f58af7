"""Small statistics behind the claims checks: trends, correlations with intervals, change points.

Claims are tested statistically, not by eye: "rises with p" is a rank correlation with a p-value,
"is associated with" a correlation with a confidence interval, "jumps at the phase boundaries" the
alignment of the largest changes of a curve with the max-cut boundaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st


@dataclass(frozen=True)
class Trend:
    """Spearman's ρ between ``x`` and ``y`` with its two-sided p-value and sample size."""

    rho: float
    p: float
    n: int


def trend(y: Sequence[float], x: Sequence[float] | None = None) -> Trend:
    """Rank correlation of ``y`` with ``x`` (default: its index, i.e. depth)."""
    y = np.asarray(y, dtype=float)
    x = np.arange(len(y), dtype=float) if x is None else np.asarray(x, dtype=float)
    if y.shape != x.shape or y.ndim != 1 or len(y) < 3:
        raise ValueError(f"need two 1-D sequences of equal length >= 3, got {x.shape}, {y.shape}")
    res = st.spearmanr(x, y)
    return Trend(float(res.statistic), float(res.pvalue), len(y))


@dataclass(frozen=True)
class Correlation:
    """Pearson's r with its Fisher-z confidence interval."""

    r: float
    low: float
    high: float
    level: float
    n: int


def correlation(x: Sequence[float], y: Sequence[float], *, level: float = 0.95) -> Correlation:
    """Pearson correlation of ``x`` and ``y`` and its ``level`` interval (Fisher's z, exact
    for bivariate normal data; a bootstrap is unreliable for the few teachers of a sweep)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 4:
        raise ValueError(f"need two 1-D sequences of equal length >= 4, got {x.shape}, {y.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    res = st.pearsonr(x, y)
    ci = res.confidence_interval(confidence_level=level)
    return Correlation(float(res.statistic), float(ci.low), float(ci.high), level, len(x))


def log_slope(y: Sequence[float], x: Sequence[float] | None = None) -> float:
    """Least-squares slope of ``log(y)`` against ``x`` (default: index); ``y`` must be > 0."""
    y = np.asarray(y, dtype=float)
    if (y <= 0).any():
        raise ValueError("log_slope needs positive values")
    x = np.arange(len(y), dtype=float) if x is None else np.asarray(x, dtype=float)
    return float(np.polyfit(x, np.log(y), 1)[0])


def change_points(curve: Sequence[float], n: int) -> list[int]:
    """The ``n`` positions ``i`` with the largest ``|curve[i] - curve[i-1]|``, sorted.

    For a per-transition curve (value ``i`` = transition from layer ``i`` to ``i+1``), position
    ``i`` is the layer where the statistic jumps.
    """
    diffs = np.abs(np.diff(np.asarray(curve, dtype=float)))
    if not 0 <= n <= len(diffs):
        raise ValueError(f"n must be in [0, {len(diffs)}], got {n}")
    return sorted(int(i) + 1 for i in np.argsort(-diffs, kind="stable")[:n])


def aligned(points: Sequence[int], boundaries: Sequence[int], tol: int = 1) -> float:
    """Fraction of ``boundaries`` with a change point within ``tol`` positions."""
    if not boundaries:
        raise ValueError("no boundaries to align with")
    return float(np.mean([any(abs(p - b) <= tol for p in points) for b in boundaries]))
