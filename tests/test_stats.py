import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs
from scipy import stats as st

from raptor.stats import (aligned, bootstrap, bootstrap_mean, change_points, correlation,
                          difference, log_slope, sigmoid_vs_linear, trend, wilson)


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


def test_difference_is_newcombe_and_signs_the_gap():
    d = difference(0.70, 0.80, 1000, 1000)
    assert d.estimate == pytest.approx(0.10) and 0.05 < d.low < 0.1 < d.high < 0.15
    tiny = difference(0.781, 0.788, 1000, 1000)  # the committed C13 gap: 0.7 points
    assert tiny.low < 0 < tiny.high
    assert difference(0.8, 0.7, 1000, 1000).high < 0


def test_bootstrap_mean_is_weighted_and_covers():
    v, w = [1.0, 2.0, 3.0], [1, 1, 2]
    assert bootstrap_mean(v, w).estimate == pytest.approx(9 / 4)
    rng = np.random.default_rng(1)
    iv = bootstrap_mean(rng.normal(0.5, 1.0, 400))
    assert iv.low < 0.5 < iv.high and iv.high - iv.low == pytest.approx(2 * 1.96 / 20, rel=0.2)
    assert bootstrap_mean(rng.normal(0.0, 1.0, 400) + 1).low > 0.5
    assert bootstrap_mean([2.0, 2.0, 2.0]).low == bootstrap_mean([2.0, 2.0, 2.0]).high == 2.0


def test_sigmoid_beats_a_line_only_on_an_s_curve():
    x = np.arange(9.0)
    s = 0.1 + 0.9 / (1 + np.exp(-(x - 4.5) / 0.7))
    fit = sigmoid_vs_linear(s + np.random.default_rng(0).normal(0, 0.005, 9))
    assert fit.delta_aicc > 10 and fit.mid == pytest.approx(4.5, abs=0.2)
    line = 0.2 + 0.1 * x + np.random.default_rng(0).normal(0, 0.01, 9)
    assert sigmoid_vs_linear(line).delta_aicc < 2


@pytest.mark.parametrize("call, match", [
    (lambda: wilson(0.5, 0), "n >= 1"), (lambda: wilson(1.5, 10), "acc in"),
    (lambda: wilson(0.5, 10, level=0), "level"), (lambda: bootstrap_mean([1.0]), ">= 2"),
    (lambda: bootstrap_mean([1.0, 2.0], [1, 0]), "positive"),
    (lambda: bootstrap_mean([1.0, np.nan]), "finite"),
    (lambda: sigmoid_vs_linear([1, 2, 3, 4, 5]), "length >= 6")])
def test_interval_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bootstrap_of_any_statistic_agrees_with_the_mean_one():
    v = np.random.default_rng(2).normal(1.0, 1.0, 300)
    general = bootstrap(lambda idx: float(v[idx].mean()), len(v), n_boot=4000)
    assert general.estimate == pytest.approx(v.mean())
    mean = bootstrap_mean(v)
    assert (general.low, general.high) == pytest.approx((mean.low, mean.high), abs=0.02)
    with pytest.raises(ValueError, match="n >= 2"):
        bootstrap(lambda idx: 0.0, 1)
