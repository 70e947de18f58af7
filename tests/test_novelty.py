import numpy as np
import pytest

from raptor.novelty import coverage, kernel, novelty, novelty_peaks


def blocks(sizes, within=0.9, across=0.2):
    """A phase matrix with planted blocks of ``sizes``."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return np.where(labels[:, None] == labels[None, :], within, across)


def test_kernel_is_a_tapered_checkerboard():
    K = kernel(2)
    assert K.shape == (4, 4)
    assert (K[:2, :2] > 0).all() and (K[2:, 2:] > 0).all() and (K[:2, 2:] < 0).all()
    np.testing.assert_allclose(K, K.T)
    np.testing.assert_allclose(K, K[::-1, ::-1])


def test_novelty_matches_an_explicit_sum():
    rng = np.random.default_rng(0)
    S = rng.uniform(size=(9, 9))
    w, b = 2, 4  # the place between layers 3 and 4 (0-based)
    total = weight = 0.0
    for i in range(2 * w):
        for j in range(2 * w):
            si, sj = b - w + i, b - w + j
            sign = 1 if (i < w) == (j < w) else -1
            taper = np.exp(-0.5 * ((i - w + 0.5) / w) ** 2 - 0.5 * ((j - w + 0.5) / w) ** 2)
            total += sign * taper * S[si, sj]
            weight += taper
    assert novelty(S, w)[b - 1] == pytest.approx(total / weight)


@pytest.mark.parametrize("sizes", [(7, 3, 2), (4, 4, 4), (2, 5, 5), (9, 3), (4, 3, 3, 2)])
def test_planted_boundaries_are_the_peaks(sizes):
    S = blocks(sizes) + np.random.default_rng(1).normal(0, 0.01, (12, 12))
    assert novelty_peaks(S) == list(np.cumsum(sizes)[:-1])


def test_a_smooth_decay_has_no_interior_peak():
    idx = np.arange(12)
    S = np.exp(-np.abs(idx[:, None] - idx[None, :]) / 4)
    scores = novelty(S)
    assert np.isnan(scores[[0, -1]]).all()  # the kernel does not fit at places 1 and 11
    np.testing.assert_allclose(scores[1:-1], scores[1])  # translation invariance
    noisy = S + np.random.default_rng(0).normal(0, 0.002, S.shape)
    assert novelty_peaks(S) == novelty_peaks((noisy + noisy.T) / 2) == []


def test_coverage_counts_the_places_near_a_peak():
    assert coverage([6], 12, 1) == pytest.approx(3 / 11)
    assert coverage([1, 11], 12, 1) == pytest.approx(4 / 11)
    assert coverage([], 12, 1) == 0.0


def test_a_phase_shorter_than_the_kernel_at_an_end_is_found_one_place_in():
    """A kernel of half-width 2 does not fit at places 1 and L − 1: a one-block phase at an end
    shows where it first fits, one place in (within the one layer C2 allows)."""
    assert novelty_peaks(blocks((1, 6, 5))) == [2, 7]
    assert novelty_peaks(blocks((5, 6, 1))) == [5, 10]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="square"):
        novelty(np.ones((3, 4)))
    with pytest.raises(ValueError, match="half_width"):
        kernel(0)
