import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs
from scipy import stats as st

from raptor.stats import aligned, change_points, correlation, log_slope, trend


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
