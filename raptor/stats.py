"""Small statistics behind the claims checks: trends, correlations with intervals, change points,
accuracy intervals, bootstrap means and a logistic-vs-linear fit.

Claims are tested statistically, not by eye: "rises with p" is a rank correlation with a p-value,
"is associated with" a correlation with a confidence interval, "jumps at the phase boundaries" the
alignment of the largest changes of a curve with the max-cut boundaries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st
from scipy.optimize import curve_fit


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


@dataclass(frozen=True)
class Interval:
    """An estimate with its ``level`` confidence interval ``[low, high]``."""

    estimate: float
    low: float
    high: float
    level: float


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def wilson(acc: float, n: int, *, level: float = 0.95) -> Interval:
    """Wilson score interval of an accuracy ``acc`` measured on ``n`` independent images
    (binomial evaluation noise; exact enough down to a handful of errors, unlike acc ± z·se)."""
    _check_level(level)
    if n < 1 or not 0 <= acc <= 1:
        raise ValueError(f"need n >= 1 and acc in [0, 1], got n={n}, acc={acc}")
    z = st.norm.ppf(0.5 + level / 2)
    centre = (acc + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * np.sqrt(acc * (1 - acc) / n + z**2 / (4 * n**2))
    return Interval(acc, float(max(0.0, centre - half)), float(min(1.0, centre + half)), level)


def difference(acc_a: float, acc_b: float, n_a: int, n_b: int, *,
               level: float = 0.95) -> Interval:
    """Interval of ``acc_b − acc_a`` for two accuracies on ``n_a``, ``n_b`` images: Newcombe's
    hybrid score interval from the two :func:`wilson` intervals (Newcombe 1998, method 10).

    It treats the two as independent; for two models scored on the same images it is
    conservative (too wide) when their errors are positively correlated.
    """
    a, b = wilson(acc_a, n_a, level=level), wilson(acc_b, n_b, level=level)
    d = acc_b - acc_a
    low = d - np.sqrt((acc_b - b.low) ** 2 + (a.high - acc_a) ** 2)
    high = d + np.sqrt((b.high - acc_b) ** 2 + (acc_a - a.low) ** 2)
    return Interval(float(d), float(low), float(high), level)


def bootstrap_mean(values: Sequence[float], weights: Sequence[float] | None = None, *,
                   level: float = 0.95, n_boot: int = 4000, seed: int = 0) -> Interval:
    """Percentile bootstrap interval of the ``weights``-weighted mean of ``values``, one per
    independent unit (an image, or a batch of images weighted by its size): units are resampled
    with replacement. A paired difference is the bootstrap of per-unit differences."""
    _check_level(level)
    v = np.asarray(values, dtype=float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=float)
    if v.ndim != 1 or w.shape != v.shape or len(v) < 2 or (w <= 0).any():
        raise ValueError(f"need >= 2 values with positive weights of the same shape, got "
                         f"{v.shape} and {w.shape}")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite")
    idx = np.random.default_rng(seed).integers(0, len(v), (n_boot, len(v)))
    means = (v[idx] * w[idx]).sum(1) / w[idx].sum(1)
    tail = (1 - level) / 2
    return Interval(float((v * w).sum() / w.sum()), float(np.quantile(means, tail)),
                    float(np.quantile(means, 1 - tail)), level)


def bootstrap(statistic: Callable[[np.ndarray], float], n: int, *, level: float = 0.95,
              n_boot: int = 1000, seed: int = 0) -> Interval:
    """Percentile bootstrap of ``statistic(idx)`` over ``n`` independent units (images), ``idx``
    the indices of the units drawn with replacement; the estimate is ``statistic(arange(n))``."""
    _check_level(level)
    if n < 2:
        raise ValueError(f"need n >= 2 units to resample, got {n}")
    rng = np.random.default_rng(seed)
    draws = np.array([statistic(rng.integers(0, n, n)) for _ in range(n_boot)], dtype=float)
    tail = (1 - level) / 2
    return Interval(float(statistic(np.arange(n))), float(np.quantile(draws, tail)),
                    float(np.quantile(draws, 1 - tail)), level)


@dataclass(frozen=True)
class SigmoidFit:
    """A logistic ``a + b / (1 + exp(−(x − mid) / scale))`` against a line, by AICc (Gaussian
    residuals; ``delta_aicc`` = line's − logistic's, > 0 favours the logistic)."""

    a: float
    b: float
    mid: float
    scale: float
    rss_logistic: float
    rss_linear: float
    aicc_logistic: float
    aicc_linear: float

    @property
    def delta_aicc(self) -> float:
        return self.aicc_linear - self.aicc_logistic


def _aicc(rss: float, n: int, k: int) -> float:
    # RSS floored: a perfect fit would make log(0); 1e-300 keeps the comparison finite.
    return n * np.log(max(rss, 1e-300) / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def sigmoid_vs_linear(y: Sequence[float], x: Sequence[float] | None = None) -> SigmoidFit:
    """Least-squares logistic (4 parameters) and line (2) through ``y`` (default ``x``: index),
    compared by the small-sample AIC (AICc); needs ``len(y) >= 6`` so AICc is defined for both.
    The logistic is fitted from several starting midpoints and the best fit kept."""
    y = np.asarray(y, dtype=float)
    x = np.arange(len(y), dtype=float) if x is None else np.asarray(x, dtype=float)
    if y.shape != x.shape or y.ndim != 1 or len(y) < 6:
        raise ValueError(f"need two 1-D sequences of equal length >= 6, got {x.shape}, {y.shape}")

    def logistic(t, a, b, mid, scale):
        return a + b / (1 + np.exp(-np.clip((t - mid) / scale, -50, 50)))

    span = max(x.max() - x.min(), 1e-9)
    best, rss = None, np.inf
    for mid in np.linspace(x.min(), x.max(), 5):
        p0 = [y.min(), y.max() - y.min() or 1.0, mid, span / 8]
        try:
            p, _ = curve_fit(logistic, x, y, p0=p0, maxfev=20_000,
                             bounds=([-np.inf, -np.inf, x.min() - span, span / 100],
                                     [np.inf, np.inf, x.max() + span, 10 * span]))
        except RuntimeError:
            continue
        r = float(((logistic(x, *p) - y) ** 2).sum())
        if r < rss:
            best, rss = p, r
    if best is None:
        raise ValueError("the logistic fit did not converge from any start")
    lin = float(((np.polyval(np.polyfit(x, y, 1), x) - y) ** 2).sum())
    n = len(y)
    return SigmoidFit(*map(float, best), rss, lin, float(_aicc(rss, n, 4)),
                      float(_aicc(lin, n, 2)))
