"""Small statistics behind the claims checks: trends, correlations with intervals, change points,
accuracy intervals and a logistic-vs-linear fit.

Claims are tested statistically, not by eye: "rises with p" is a rank correlation with an interval,
"is associated with" a correlation with a confidence interval, "jumps at the phase boundaries" the
alignment of the largest changes of a curve with the max-cut boundaries.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as st
from scipy.optimize import curve_fit
import statsmodels.api as sm
from statsmodels.stats.proportion import proportion_confint

HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"


@dataclass(frozen=True)
class Threshold:
    """A number a verdict compares against, and where it comes from.

    ``source`` quotes the paper (section, figure or table) or starts with ``[ours]`` and gives
    the reason.
    """

    value: float
    source: str

    def __post_init__(self) -> None:
        if not self.source.strip():
            raise ValueError("a threshold needs a source: the paper's words or '[ours] <reason>'")


def versus(low: float, high: float, threshold: float, *, above: bool = True,
           against: float | None = None) -> str:
    """The verdict of "the number exceeds ``threshold``" (``above=False``: stays below it) from
    its interval ``[low, high]``: ``holds`` / ``does not hold`` when the whole interval lies on
    one side, ``inconclusive`` when it spans the threshold. ``against``: a second threshold, on
    the other side, that the interval must lie wholly beyond for ``does not hold`` (a band of
    indifference between the two, e.g. ΔAICc within ±2)."""
    against = threshold if against is None else against
    if not low <= high:
        raise ValueError(f"need an interval with low <= high, got [{low}, {high}]")
    if (against > threshold) if above else (against < threshold):
        raise ValueError(f"against ({against}) must lie on the failing side of the threshold "
                         f"({threshold})")
    lo, hi = (low, high) if above else (-high, -low)
    t, f = (threshold, against) if above else (-threshold, -against)
    return HOLDS if lo > t else FAILS if hi <= f else INCONCLUSIVE



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

    @property
    def interval(self) -> Interval:
        """``r`` with its interval, to format (``f"{c.interval:.2f}"``)."""
        return Interval(self.r, self.low, self.high, self.level)


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


def rank_correlation(y: Sequence[float], x: Sequence[float] | None = None, *,
                     level: float = 0.95) -> Correlation:
    """Spearman's ρ of ``y`` with ``x`` (default: its index, i.e. depth) and its ``level``
    interval: Fisher's z with Bonett & Wright's (2000, Psychometrika 65:23) standard error
    ``sqrt((1 + ρ²/2) / (n − 3))``. Needs ``n >= 5``: below that even a perfect ordering is not
    significant at 5% (permutation p = 2/n!), yet its interval would have zero width."""
    _check_level(level)
    t = trend(y, x)
    if t.n < 5:
        raise ValueError(f"need sequences of length >= 5, got {t.n}")
    half = st.norm.ppf(0.5 + level / 2) * np.sqrt((1 + t.rho**2 / 2) / (t.n - 3))
    with np.errstate(divide="ignore"):  # |ρ| = 1: z is infinite, the interval [ρ, ρ]
        z = np.arctanh(t.rho)
    return Correlation(t.rho, float(np.tanh(z - half)), float(np.tanh(z + half)), level, t.n)


def partial_correlation(x: Sequence[float], y: Sequence[float], groups: Sequence[object], *,
                        level: float = 0.95) -> Correlation:
    """Partial correlation of ``x`` and ``y`` given the group as a factor (g levels): the OLS
    ``y ~ x + C(group)`` (statsmodels), ``r = t / sqrt(t² + df)`` from its t statistic of ``x``
    on ``df = n − g − 1`` residual degrees of freedom, the association within groups that a
    variable driving both cannot produce. Its ``level`` interval is Fisher's z with standard error
    ``1 / sqrt(df − 1)`` (Fisher 1924); needs ``n >= g + 3``."""
    _check_level(level)
    x, y, keys = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(groups)
    if x.shape != y.shape or x.shape != keys.shape or x.ndim != 1:
        raise ValueError(f"need three 1-D sequences of equal length, got {x.shape}, {y.shape}, "
                         f"{keys.shape}")
    levels = np.unique(keys)
    if len(x) < len(levels) + 3:
        raise ValueError(f"need n >= groups + 3 = {len(levels) + 3}, got n = {len(x)}")
    factor = (keys[:, None] == levels[None, 1:]).astype(float)  # treatment coding, g − 1 dummies
    covariates = np.column_stack([np.ones_like(x), factor])
    if min(sm.OLS(v, covariates).fit().ssr for v in (x, y)) <= 0:
        raise ValueError("no variation within groups")
    fit = sm.OLS(y, np.column_stack([x, covariates])).fit()
    df = float(fit.df_resid)
    # a perfect fit within groups has no residual: its t is infinite, r = ±1
    r = float(np.sign(fit.params[0])) if fit.ssr <= 0 else \
        float(fit.tvalues[0] / np.sqrt(fit.tvalues[0] ** 2 + df))
    half = st.norm.ppf(0.5 + level / 2) / np.sqrt(df - 1)
    with np.errstate(divide="ignore"):
        z = np.arctanh(r)
    return Correlation(r, float(np.tanh(z - half)), float(np.tanh(z + half)), level, len(x))


def log_slope(y: Sequence[float], x: Sequence[float] | None = None) -> float:
    """Least-squares slope of ``log(y)`` against ``x`` (default: index), ``scipy.stats.linregress``;
    ``y`` must be > 0."""
    y = np.asarray(y, dtype=float)
    if (y <= 0).any():
        raise ValueError("log_slope needs positive values")
    x = np.arange(len(y), dtype=float) if x is None else np.asarray(x, dtype=float)
    return float(st.linregress(x, np.log(y)).slope)


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


def chance_aligned(length: int, boundaries: Sequence[int], tol: int = 1) -> float:
    """The share of ``boundaries`` that :func:`aligned` gives, in expectation, for as many change
    points as boundaries placed at random among the positions ``1..length−1`` of a curve of
    ``length`` values (:func:`change_points` of a curve without structure): exact, the mean over
    every placement, what a simulation of random change points estimates."""
    positions, m = range(1, length), len(boundaries)
    if not 1 <= m <= len(positions):
        raise ValueError(f"need 1 to {len(positions)} boundaries, got {m}")
    draws = itertools.combinations(positions, m)
    return float(np.mean([aligned(points, boundaries, tol) for points in draws]))


@dataclass(frozen=True)
class Interval:
    """An estimate with its ``level`` confidence interval ``[low, high]``; it formats itself:
    ``f"{iv:+.3f}"`` gives ``+0.867 [+0.863, +0.871]`` (any float format spec, ``%`` included),
    the only way an interval is written in the book; without ends (NaN: no images to resample,
    e.g. a published matrix) the estimate alone."""

    estimate: float
    low: float
    high: float
    level: float

    def __format__(self, spec: str) -> str:
        if np.isnan(self.low) or np.isnan(self.high):
            return f"{self.estimate:{spec}}"
        return f"{self.estimate:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def __str__(self) -> str:
        return format(self, ".3g")


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def wilson(acc: float, n: int, *, level: float = 0.95) -> Interval:
    """Wilson score interval of an accuracy ``acc`` measured on ``n`` independent images
    (binomial evaluation noise; exact enough down to a handful of errors, unlike acc ± z·se):
    statsmodels' ``proportion_confint(method="wilson")``, inside [0, 1]."""
    _check_level(level)
    if n < 1 or not 0 <= acc <= 1:
        raise ValueError(f"need n >= 1 and acc in [0, 1], got n={n}, acc={acc}")
    low, high = proportion_confint(acc * n, n, alpha=1 - level, method="wilson")
    return Interval(acc, float(max(0.0, low)), float(min(1.0, high)), level)


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
    mid_at_bound: bool  # the midpoint sits at its bound: the optimum lies at or beyond it

    @property
    def delta_aicc(self) -> float:
        return self.aicc_linear - self.aicc_logistic

    def __call__(self, x: Sequence[float]) -> np.ndarray:
        """The fitted logistic at ``x``."""
        return _logistic(np.asarray(x, dtype=float), self.a, self.b, self.mid, self.scale)


MID_TOL = 1e-3  # a logistic's midpoint within this share of the span of its bound sits at it


def _logistic(t: np.ndarray, a: float, b: float, mid: float, scale: float) -> np.ndarray:
    return a + b / (1 + np.exp(-np.clip((t - mid) / scale, -50, 50)))


def _aicc(rss: float, n: int, k: int) -> float:
    """AICc of a least-squares fit with ``k`` parameters in its mean function and Gaussian
    residuals: the residual variance σ² is estimated too, so the count is ``k + 1`` (Burnham &
    Anderson 2002, §2.2). RSS floored: a perfect fit would make log(0)."""
    k += 1
    return n * np.log(max(rss, 1e-300) / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def sigmoid_vs_linear(y: Sequence[float], x: Sequence[float] | None = None, *,
                      start: SigmoidFit | None = None) -> SigmoidFit:
    """Least-squares logistic (4 parameters and σ²) and line (2 and σ²) through ``y`` (default
    ``x``: index), compared by the small-sample AIC (AICc); needs ``len(y) >= 7`` so AICc is
    defined for both.
    The logistic is fitted from several starting midpoints and the best fit kept, or from
    ``start``'s parameters alone (a warm start: a bootstrap's refit near a fit, several times
    faster; the several starts where it does not converge). Its midpoint is bounded to one span
    beyond the data on either side; a fit there (``mid_at_bound``) has no inflection it can
    place: the curve is one arm of an S, its midpoint not estimated."""
    y = np.asarray(y, dtype=float)
    x = np.arange(len(y), dtype=float) if x is None else np.asarray(x, dtype=float)
    if y.shape != x.shape or y.ndim != 1 or len(y) < 7:
        raise ValueError(f"need two 1-D sequences of equal length >= 7, got {x.shape}, {y.shape}")
    span = max(x.max() - x.min(), 1e-9)
    mid_range = (x.min() - span, x.max() + span)
    cold = [[y.min(), y.max() - y.min() or 1.0, mid, span / 8]
            for mid in np.linspace(x.min(), x.max(), 5)]
    best, rss = None, np.inf
    for p0 in cold if start is None else [[start.a, start.b, start.mid, start.scale]]:
        try:
            p, _ = curve_fit(_logistic, x, y, p0=p0, maxfev=20_000,
                             bounds=([-np.inf, -np.inf, mid_range[0], span / 100],
                                     [np.inf, np.inf, mid_range[1], 10 * span]))
        except RuntimeError:
            continue
        r = float(((_logistic(x, *p) - y) ** 2).sum())
        if r < rss:
            best, rss = p, r
    if best is None and start is not None:
        return sigmoid_vs_linear(y, x)
    if best is None:
        raise ValueError("the logistic fit did not converge from any start")
    line = st.linregress(x, y)
    lin = float(((line.intercept + line.slope * x - y) ** 2).sum())
    n = len(y)
    pinned = min(abs(best[2] - m) for m in mid_range) < MID_TOL * span
    return SigmoidFit(*map(float, best), rss, lin, float(_aicc(rss, n, 4)),
                      float(_aicc(lin, n, 2)), bool(pinned))
