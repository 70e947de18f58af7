import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as hs
from scipy import stats as st

from raptor.stats import (aligned, change_points, correlation, log_slope, partial_correlation,
                          rank_correlation, sigmoid_vs_linear, trend, wilson)


def test_trend_monotone_and_matches_scipy():
    t = trend([1, 2, 3, 5, 8])
    assert t.rho == pytest.approx(1.0) and t.n == 5 and t.p < 0.05
    y, x = [3.0, 1.0, 2.0, 5.0], [0.1, 0.2, 0.3, 0.4]
    ref = st.spearmanr(x, y)
    assert trend(y, x).rho == pytest.approx(ref.statistic)
    assert trend([5, 4, 3]).rho == pytest.approx(-1.0)


def test_correlation_interval_is_fisher_z_and_detects_association():
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = 2 * x + 0.5 * rng.normal(size=200)
    c = correlation(x, y)
    r = np.corrcoef(x, y)[0, 1]
    z, half = np.arctanh(r), st.norm.ppf(0.975) / np.sqrt(200 - 3)
    assert c.r == pytest.approx(r)
    assert (c.low, c.high) == pytest.approx((np.tanh(z - half), np.tanh(z + half)))
    assert c.low > 0.8
    null = correlation(x, rng.normal(size=200))
    assert null.low < 0 < null.high


def test_rank_correlation_is_bonett_wright_fisher_z() -> None:
    y = [1, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 12]
    c = rank_correlation(y)
    rho = st.spearmanr(np.arange(12), y).statistic
    half = st.norm.ppf(0.975) * np.sqrt((1 + rho**2 / 2) / 9)
    assert c.r == pytest.approx(rho) and c.n == 12 and c.level == 0.95
    assert (c.low, c.high) == pytest.approx((np.tanh(np.arctanh(rho) - half),
                                             np.tanh(np.arctanh(rho) + half)))
    # The example: ρ = 0.35 at n = 12 spans 0 (by hand: [−0.298, 0.777]).
    x = np.random.default_rng(4).permutation(12)
    weak = next(y for y in (np.random.default_rng(s).permutation(12) for s in range(500))
                if round(st.spearmanr(x, y).statistic, 2) == 0.35)
    w = rank_correlation(weak, x)
    assert (w.low, w.high) == pytest.approx((-0.298, 0.777), abs=2e-3)
    perfect = rank_correlation([5, 4, 3, 2, 1])
    assert perfect.r == pytest.approx(-1) and perfect.high == pytest.approx(-1)
    with pytest.raises(ValueError, match=">= 5"):
        rank_correlation([1, 2, 3, 4])


def test_rank_correlation_covers_the_population_rho() -> None:
    # Bivariate normal, Pearson 0.5: Spearman's population ρ is (6/π) arcsin(0.5/2).
    rng, rho = np.random.default_rng(0), 0.5
    target = 6 / np.pi * np.arcsin(rho / 2)
    hits = []
    for _ in range(1000):
        x = rng.normal(size=12)
        c = rank_correlation(rho * x + np.sqrt(1 - rho**2) * rng.normal(size=12), x)
        hits.append(c.low <= target <= c.high)
    assert 0.93 < np.mean(hits) < 0.98


def test_partial_correlation_removes_a_shared_driver() -> None:
    rng, rho = np.random.default_rng(1), 0.5
    levels = np.repeat([0.0, 0.15, 0.3, 0.45], 3)
    chol = np.linalg.cholesky([[1, rho], [rho, 1]])
    hits, pooled = [], []
    for _ in range(1000):
        e = rng.normal(size=(12, 2)) @ chol.T
        x, y = 20 * levels + e[:, 0], 30 * levels + e[:, 1]
        c = partial_correlation(x, y, levels)
        hits.append(c.low <= rho <= c.high)
        pooled.append(correlation(x, y).low)
    assert 0.93 < np.mean(hits) < 0.97
    assert np.mean(pooled) > 0.8  # the pooled r mostly measures the driver
    # The oracle: the correlation of the residuals of least squares on the levels' dummies.
    x, y = 20 * levels + rng.normal(size=12), 30 * levels + rng.normal(size=12)
    dummies = (levels[:, None] == np.unique(levels)).astype(float)
    res = [v - dummies @ np.linalg.lstsq(dummies, v, rcond=None)[0] for v in (x, y)]
    c = partial_correlation(x, y, levels)
    assert c.r == pytest.approx(np.corrcoef(*res)[0, 1])
    half = st.norm.ppf(0.975) / np.sqrt(12 - 4 - 2)
    assert c.high == pytest.approx(np.tanh(np.arctanh(c.r) + half))
    driven = partial_correlation(levels + 1e-3 * rng.normal(size=12),
                                 levels + 1e-3 * rng.normal(size=12), levels)
    assert driven.low < 0 < driven.high  # r ≈ 1 pooled, nothing within levels
    with pytest.raises(ValueError, match="groups \\+ 3"):
        partial_correlation(x[:4], y[:4], levels[:4])  # 2 levels need n >= 5


@settings(max_examples=30, deadline=None)
@given(hs.floats(-3, 3), hs.floats(0.1, 5))
def test_log_slope_recovers_exponential_rate(rate, scale):
    x = np.arange(8.0)
    assert log_slope(scale * np.exp(rate * x)) == pytest.approx(rate, abs=1e-9)


def test_change_points_and_alignment():
    curve = [0.1, 0.1, 0.1, 0.9, 0.9, 0.3, 0.3]
    assert change_points(curve, 2) == [3, 5]
    assert aligned([3, 5], [3, 6]) == 1.0
    assert aligned([3, 5], [3, 9]) == 0.5
    assert aligned([3], [6], tol=2) == 0.0


@pytest.mark.parametrize("call, match", [
    (lambda: trend([1, 2]), "length"), (lambda: correlation([1, 2, 3], [1, 2, 3]), "length"),
    (lambda: correlation([1, 2, 3, 4], [1, 2, 4, 3], level=1.0), "level"),
    (lambda: log_slope([1, 0, 2]), "positive"), (lambda: change_points([1, 2, 3], 5), "n must"),
    (lambda: aligned([1], []), "boundaries")])
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_wilson_matches_the_closed_form_and_covers():
    iv = wilson(0.8, 1000)
    z = st.norm.ppf(0.975)
    centre = (0.8 + z**2 / 2000) / (1 + z**2 / 1000)
    half = z / (1 + z**2 / 1000) * np.sqrt(0.8 * 0.2 / 1000 + z**2 / 4e6)
    assert (iv.low, iv.high) == pytest.approx((centre - half, centre + half))
    assert iv.low < 0.8 < iv.high and iv.high - iv.low == pytest.approx(0.0496, abs=1e-3)
    edge = wilson(1.0, 20)
    assert edge.high == 1.0 and 0.8 < edge.low < 1.0  # no zero-width interval at 20/20
    # Coverage of the 95% interval over binomial draws is close to 95%.
    rng = np.random.default_rng(0)
    intervals = [wilson(k / 200, 200) for k in rng.binomial(200, 0.7, 2000)]
    hits = [iv.low <= 0.7 <= iv.high for iv in intervals]
    assert 0.93 < np.mean(hits) < 0.97


def test_sigmoid_beats_a_line_only_on_an_s_curve():
    x = np.arange(9.0)
    s = 0.1 + 0.9 / (1 + np.exp(-(x - 4.5) / 0.7))
    fit = sigmoid_vs_linear(s + np.random.default_rng(0).normal(0, 0.005, 9))
    assert fit.delta_aicc > 10 and fit.mid == pytest.approx(4.5, abs=0.2)
    line = 0.2 + 0.1 * x + np.random.default_rng(0).normal(0, 0.01, 9)
    assert sigmoid_vs_linear(line).delta_aicc < 2
    assert not fit.mid_at_bound and fit(x) == pytest.approx(s, abs=0.02)
    # A saturating exponential is one arm of an S: its midpoint sits at the bound (−span).
    arm = sigmoid_vs_linear(1 - 0.9 * np.exp(-x / 2))
    assert arm.mid_at_bound and arm.mid == pytest.approx(-8.0)


def test_sigmoid_warm_start_finds_the_cold_fit():
    """A refit started from a fit (a bootstrap's) reaches the several starts' optimum: on the
    same curve the same fit, on a nearby one the cold fit's."""
    x = np.arange(9.0)
    rng = np.random.default_rng(1)
    s = 0.1 + 0.9 / (1 + np.exp(-(x - 4.5) / 0.7))
    y0 = s + rng.normal(0, 0.01, 9)
    fit = sigmoid_vs_linear(y0)
    same = sigmoid_vs_linear(y0, start=fit)
    assert (same.delta_aicc, same.mid) == pytest.approx((fit.delta_aicc, fit.mid), abs=1e-6)
    for _ in range(5):
        y = s + rng.normal(0, 0.02, 9)
        warm, cold = sigmoid_vs_linear(y, start=fit), sigmoid_vs_linear(y)
        assert warm.delta_aicc == pytest.approx(cold.delta_aicc, abs=1e-6)
        assert warm.mid == pytest.approx(cold.mid, abs=1e-4)


@pytest.mark.parametrize("call, match", [
    (lambda: wilson(0.5, 0), "n >= 1"), (lambda: wilson(1.5, 10), "acc in"),
    (lambda: wilson(0.5, 10, level=0), "level"),
    (lambda: sigmoid_vs_linear([1, 2, 3, 4, 5, 6]), "length >= 7")])
def test_interval_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_aicc_counts_the_residual_variance():
    """ΔAICc with σ² counted (logistic 5 parameters, line 3; Burnham & Anderson 2002): on 13
    layers it is smaller than with σ² left out by the difference of the small-sample terms."""
    x = np.arange(13.0)
    y = 0.1 + 0.9 / (1 + np.exp(-(x - 6) / 1.2)) + np.random.default_rng(2).normal(0, 0.01, 13)
    fit, n = sigmoid_vs_linear(y), 13

    def aicc(rss: float, k: int) -> float:
        return n * np.log(rss / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)

    assert fit.aicc_logistic == pytest.approx(aicc(fit.rss_logistic, 5))
    assert fit.aicc_linear == pytest.approx(aicc(fit.rss_linear, 3))
    omitted = aicc(fit.rss_linear, 2) - aicc(fit.rss_logistic, 4)
    overstated = (2 * 2 * 3 / 10 - 2 * 3 * 4 / 9) - (2 * 4 * 5 / 8 - 2 * 5 * 6 / 7)
    assert omitted - fit.delta_aicc == pytest.approx(overstated)
    assert overstated == pytest.approx(2.1, abs=0.01)


def test_stats_match_the_libraries():
    """wilson is statsmodels' Wilson interval, log_slope scipy's linregress, partial_correlation
    the t of x in an OLS with the group as a factor."""
    from statsmodels.formula.api import ols
    from statsmodels.stats.proportion import proportion_confint
    assert (wilson(0.8, 50).low, wilson(0.8, 50).high) == pytest.approx(
        proportion_confint(40, 50, method="wilson"))
    rng = np.random.default_rng(3)
    x, y = np.arange(10.0), np.exp(rng.normal(size=10))
    assert log_slope(y, x) == pytest.approx(st.linregress(x, np.log(y)).slope)
    levels = np.repeat([0.0, 0.3, 0.6], 4)
    a, b = levels + rng.normal(size=12), levels + rng.normal(size=12)
    fit = ols("b ~ a + C(g)", pd.DataFrame({"a": a, "b": b, "g": levels})).fit()
    t = fit.tvalues["a"]
    assert partial_correlation(a, b, levels).r == pytest.approx(t / np.sqrt(t**2 + 12 - 3 - 1))
