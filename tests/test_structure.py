import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from hypothesis import given, settings
from hypothesis import strategies as st

from raptor.paper import dinov2b_block_similarity
from raptor.phases import maxcut
from raptor.similarity import layer_similarity, phase_matrix
from scipy.optimize import isotonic_regression, minimize_scalar

from raptor import controls, structure
from raptor.structure import (block_excess, best_warp, best_warps, boundaries, boundary_shift,
                              bounded_minimum, contiguous_partitions, contrast, contrast_rank,
                              image_growth_nulls, image_phase_matrices, isotonic_decreasing,
                              matrix_excess, phase_excess, phase_excesses, stationary_null,
                              subset_stability, warped_decay_null, warped_decay_nulls, NULLS,
                              WARP_EXPONENTS)
from raptor.trajectories import TokenGroups

Blocks = Callable[..., np.ndarray]  # the planted_blocks fixture


def test_boundaries_and_shift():
    a, b = ((0, 3), (3, 6), (6, 8)), ((0, 4), (4, 6), (6, 8))
    assert boundaries(a) == (3, 6)
    assert boundary_shift(a, b) == 1 and boundary_shift(a, a) == 0
    assert boundary_shift(((0, 8),), ((0, 8),)) == 0
    with pytest.raises(ValueError, match="blocks"):
        boundary_shift(a, ((0, 8),))


def _phased_trajectory(n=40, seed=0):
    """Tokens that keep one direction in layers 1-3 and another in layers 4-6."""
    g = torch.Generator().manual_seed(seed)
    groups = TokenGroups.from_counts(1, 0, 4)
    base = torch.randn(n, 3, groups.num_tokens, 16, generator=g)
    layers = [torch.randn(n, groups.num_tokens, 16, generator=g)]
    for phase in (0, 0, 0, 1, 1, 1, 2, 2):
        layers.append(base[:, phase] + 0.05 * torch.randn(n, groups.num_tokens, 16, generator=g))
    return torch.stack(layers, dim=1), groups


def test_subset_stability_on_planted_phases():
    """Disjoint held-out subsets of a stream with phases give its cut every time; of a stream
    without them (independent layers), rarely."""
    traj, groups = _phased_trajectory(n=80)
    per_image = image_phase_matrices(traj, groups)
    cut = maxcut(per_image[:40].mean(0), 3)
    assert cut == ((0, 3), (3, 6), (6, 8))
    assert subset_stability({3: cut}, per_image[40:], [5, 10], n_resamples=4) == \
        {3: {5: 1.0, 10: 1.0}}
    noise = image_phase_matrices(torch.randn(80, 9, 5, 16, generator=torch.Generator()
                                             .manual_seed(1)), groups)
    share = subset_stability({3: maxcut(noise[:40].mean(0), 3)}, noise[40:], [2], 20)[3][2]
    assert share < 0.5


def test_subset_stability_draws_disjoint_subsets(monkeypatch: pytest.MonkeyPatch):
    """Every image of a size's subsets is used once: the subsets are independent draws."""
    seen = []
    monkeypatch.setattr(structure, "maxcut", lambda S, k: seen.append(S) or ((0, 8),))
    per_image = np.arange(40, dtype=float)[:, None, None] * np.ones((40, 8, 8))
    subset_stability({1: ((0, 8),)}, per_image, [10], 4)
    means = sorted(float(S[0, 0]) for S in seen)
    assert len(means) == 4 and sum(means) * 10 == pytest.approx(sum(range(40)))


def test_subset_stability_errors():
    per_image = np.zeros((10, 8, 8))
    with pytest.raises(ValueError, match="need up to 12 held-out images, got 10"):
        subset_stability({2: ((0, 4), (4, 8))}, per_image, [3, 6], 2)
    with pytest.raises(ValueError, match="n_resamples"):
        subset_stability({2: ((0, 4), (4, 8))}, per_image, [5], 0)


def _decay(L: int, rate: float = 0.15) -> np.ndarray:
    idx = np.arange(L)
    return np.exp(-rate * np.abs(idx[:, None] - idx[None, :]))


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 10), st.floats(0.01, 1.0), st.data())
def test_a_stationary_matrix_has_zero_excess_for_every_partition(L, rate, data):
    S = _decay(L, rate)
    assert np.allclose(stationary_null(S), S)
    k = data.draw(st.integers(2, L - 1))
    for partition in contiguous_partitions(L, k):
        assert block_excess(S, partition) == pytest.approx(0.0, abs=1e-12)
    assert contrast(S, maxcut(S, k)) > 0  # the decay alone gives max-cuts a positive contrast


def test_stationary_null_is_the_toeplitz_of_diagonal_means():
    S = np.array([[1.0, 0.5, 0.1], [0.7, 1.0, 0.3], [0.1, 0.3, 1.0]])
    lag1 = (0.5 + 0.7 + 0.3 + 0.3) / 4
    expected = np.array([[1.0, lag1, 0.1], [lag1, 1.0, lag1], [0.1, lag1, 1.0]])
    np.testing.assert_allclose(stationary_null(S), expected)
    with pytest.raises(ValueError, match="square"):
        stationary_null(np.ones((2, 3)))


def test_a_planted_block_matrix_has_positive_excess(planted_blocks: Blocks):
    S = planted_blocks([3, 3, 2])
    assert block_excess(S, ((0, 3), (3, 6), (6, 8))) > 0.3


@pytest.mark.parametrize("L, k", [(8, 1), (8, 2), (8, 3), (12, 4), (5, 5)])
def test_contiguous_partitions_enumerates_all(L: int, k: int):
    parts = contiguous_partitions(L, k)
    assert len(parts) == len(set(parts)) == math.comb(L - 1, k - 1)
    assert all(p[0][0] == 0 and p[-1][1] == L and len(p) == k for p in parts)


def test_contrast_rank_by_brute_force(planted_blocks: Blocks):
    S = planted_blocks([3, 3, 2], rng=np.random.default_rng(0), noise=0.2)
    planted = ((0, 3), (3, 6), (6, 8))
    assert contrast_rank(S, planted).rank == 1 and contrast_rank(S, planted).total == 21
    worst = min(contiguous_partitions(8, 3), key=lambda p: contrast(S, p))
    assert contrast_rank(S, worst).rank == 21 - sum(
        contrast(S, p) == contrast(S, worst) for p in contiguous_partitions(8, 3)) + 1


def test_image_phase_matrices_average_to_the_phase_matrix():
    traj, groups = _phased_trajectory(n=12)
    per_image = image_phase_matrices(traj, groups)
    assert per_image.shape == (12, 8, 8)
    np.testing.assert_allclose(per_image.mean(0), phase_matrix(layer_similarity(traj, groups)),
                               atol=1e-7)  # layer_similarity averages patches in float32


def _noisy_images(S: np.ndarray, n: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = S + rng.normal(0, noise, (n, *S.shape))
    return (x + x.transpose(0, 2, 1)) / 2


def test_stationary_images_give_an_excess_interval_that_covers_zero():
    per_image = _noisy_images(_decay(8), n=400, noise=0.3, seed=1)
    ex = phase_excess(per_image, 3, n_boot=200)
    assert ex.low < 0 < ex.high and abs(ex.excess) < 0.02
    assert ex.null_cut == maxcut(stationary_null(per_image.mean(0)), 3)


def test_every_k_at_once_is_each_k_alone(planted_blocks: Blocks):
    S = 0.5 * planted_blocks([3, 3, 2]) + 0.5 * _decay(8)
    per_image = _noisy_images(S, n=60, noise=0.3, seed=3)
    growth = _noisy_images(_decay(8), n=60, noise=0.1, seed=4)
    together = phase_excesses(per_image, (2, 3, 4), growth=growth, n_boot=20, seed=5)
    assert together == {k: phase_excess(per_image, k, growth=growth, n_boot=20, seed=5)
                        for k in (2, 3, 4)}
    with pytest.raises(ValueError, match="k must be"):
        phase_excesses(per_image, ())


def test_stationary_excess_is_unbiased_over_seeds():
    """The cross-fit keeps noise from creating excess: mean over many noise draws ≈ 0."""
    values = [phase_excess(_noisy_images(_decay(8), 60, 0.5, s), 2, n_boot=10).excess
              for s in range(40)]
    assert abs(np.mean(values)) < 3 * np.std(values) / np.sqrt(len(values)) + 1e-3


def test_planted_blocks_give_an_excess_interval_above_zero(planted_blocks: Blocks):
    S = 0.5 * planted_blocks([3, 3, 2]) + 0.5 * _decay(8)
    ex = phase_excess(_noisy_images(S, n=400, noise=0.3, seed=2), 3, n_boot=200)
    assert ex.cut == ((0, 3), (3, 6), (6, 8)) and ex.low > 0.05
    assert ex.agreement > 0.9 and ex.rank.rank == 1 and ex.rank.total == 21


def test_phase_excess_rejects_bad_input():
    with pytest.raises(ValueError, match="per_image"):
        phase_excess(np.ones((3, 4, 4)), 2)
    with pytest.raises(ValueError, match="k must be"):
        phase_excess(np.ones((8, 4, 4)), 5)
    with pytest.raises(ValueError, match="n_boot"):
        phase_excess(np.ones((8, 4, 4)), 2, n_boot=1)


def _growing_stream(n: int, L: int, dim: int, seed: int, orthogonal: bool = False
                    ) -> tuple[torch.Tensor, TokenGroups]:
    """A residual stream whose every update is uncorrelated with it (exactly orthogonal with
    ``orthogonal``): Gaussian increments whose size grows fast early and stops late."""
    g = torch.Generator().manual_seed(seed)
    groups = TokenGroups.from_counts(1, 0, 4)
    sizes = torch.tensor([1.0, 2.0, 2.0, 1.5, 1.0, 0.3, 0.2, 0.2, 0.1])[:L + 1]
    if orthogonal:  # update l along basis vector l, per token a random rotation of the basis
        # in float64: float32's QR is orthogonal to ~1e-7 only
        q, _ = torch.linalg.qr(torch.randn(n, groups.num_tokens, dim, dim, generator=g,
                                           dtype=torch.float64))
        steps = q[..., :L + 1].permute(0, 3, 1, 2) * sizes[None, :, None, None]
    else:
        steps = torch.randn(n, L + 1, groups.num_tokens, dim, generator=g) \
            * sizes[None, :, None, None] / dim ** 0.5
    return steps.cumsum(dim=1), groups


def test_growth_null_is_exact_for_orthogonal_updates():
    """If every update is orthogonal to the stream, cos(x_l, x_m) = ‖x_l‖ / ‖x_m‖ exactly — for
    the cls token; the mean patch token's updates are orthogonal to it only on average."""
    traj, _ = _growing_stream(6, 8, 16, seed=0, orthogonal=True)
    cls_only = TokenGroups.from_counts(1, 0, 0)
    traj = traj[:, :, :1]
    np.testing.assert_allclose(image_growth_nulls(traj, cls_only),
                               image_phase_matrices(traj, cls_only), atol=1e-12)


def test_uncorrelated_updates_have_no_excess_over_the_growth_null():
    """High-dimensional random updates: S is the growth null up to noise, so the excess over the
    stronger null has an interval around 0, although the stationary null alone is beaten (the
    norm stops growing late, so late layers look like a block)."""
    traj, groups = _growing_stream(200, 8, 512, seed=1)
    per_image, growth = image_phase_matrices(traj, groups), image_growth_nulls(traj, groups)
    assert np.abs(per_image.mean(0) - growth.mean(0)).max() < 0.02
    ex = phase_excess(per_image, 3, growth=growth, n_boot=100)
    assert ex.ladder["stationary"].excess > 0.02 and abs(ex.ladder["random walk"].excess) < 0.01
    assert ex.excess == ex.ladder["warped decay"].excess and ex.high < 0.01


def test_planted_phases_have_excess_over_both_nulls():
    traj, groups = _phased_trajectory(n=100)
    ex = phase_excess(image_phase_matrices(traj, groups), 3,
                      growth=image_growth_nulls(traj, groups), n_boot=50)
    assert ex.cut == ((0, 3), (3, 6), (6, 8))
    assert list(ex.ladder) == list(NULLS)
    assert all(x.excess > 0.1 and x.low > 0.1 for x in ex.ladder.values()) and ex.low > 0.1


def test_phase_excess_without_growth_has_no_random_walk_rung():
    per_image = _noisy_images(_decay(8), n=40, noise=0.3, seed=3)
    ex = phase_excess(per_image, 2, n_boot=10)
    assert list(ex.ladder) == ["stationary", "warped decay"]
    assert ex.excess == ex.ladder["warped decay"].excess
    with pytest.raises(ValueError, match="growth must have per_image's shape"):
        phase_excess(per_image, 2, growth=per_image[:, :4, :4])


def test_warped_decay_fits_a_stationary_decay_and_a_random_walk_exactly():
    """λ = 1 holds every monotone stationary decay; λ = 0 a random walk's expected similarity
    ``√(l / m)`` (a decay of ``|log l − log m|``)."""
    assert 1.0 in WARP_EXPONENTS and 0.0 in WARP_EXPONENTS
    np.testing.assert_allclose(warped_decay_null(_decay(10)), _decay(10), atol=1e-12)
    layer = np.arange(1, 11)
    walk = np.sqrt(np.minimum.outer(layer, layer) / np.maximum.outer(layer, layer))
    np.testing.assert_allclose(warped_decay_null(walk), walk, atol=1e-12)


def test_warped_decay_takes_the_better_origin_of_the_warp():
    """Counted from the first block or the last, whichever fits better; a decay that is fast
    late (a log axis from the end) needs the second."""
    d = np.log(np.arange(10, 0, -1))
    late = np.exp(-np.abs(d[:, None] - d[None, :]))
    upper = np.triu_indices(10, 1)
    sse = {o: ((late - warped_decay_null(late, o))[upper] ** 2).sum()
           for o in (("first",), ("last",), ("first", "last"))}
    assert sse[("last",)] < 1e-20 < sse[("first",)] and sse[("first", "last")] < 1e-20
    with pytest.raises(ValueError, match="origins"):
        warped_decay_null(late, ("middle",))


def test_warped_decay_cannot_make_a_step(planted_blocks: Blocks):
    """A block matrix keeps over a third of its contrast over the warped decay (measured: 0.28 of
    0.70): no smooth warp puts every pair inside a block closer than every pair across."""
    S = planted_blocks([4, 4, 4])
    cut = ((0, 4), (4, 8), (8, 12))
    assert contrast(S - warped_decay_null(S), cut) > 0.35 * contrast(S, cut)
    with pytest.raises(ValueError, match="square matrix"):
        warped_decay_null(np.ones((2, 2)))


def test_matrix_excess_on_the_papers_dinov2b_matrix():
    """The stationary rung of DINOv2-B's matrix, as read off independently (issue #25): +0.062 /
    +0.012 / +0.039 at k = 2 / 3 / 4; no interval without per-image matrices."""
    S = dinov2b_block_similarity()
    for k, expected in ((2, 0.062), (3, 0.012), (4, 0.039)):
        e = matrix_excess(S, k)
        assert e.ladder["stationary"].excess == pytest.approx(expected, abs=5e-4)
        assert list(e.ladder) == ["stationary", "warped decay"] and math.isnan(e.low)
        assert e.excess == e.ladder["warped decay"].excess and e.fit_rmse > 0


def test_isotonic_decreasing_is_scipys_fit_of_every_row() -> None:
    """The vectorised pool-adjacent-violators against scipy's ``isotonic_regression``, row by
    row: rows with ties, integer and real weights, padded rows of every length, monotone rows and
    rows in reverse order."""
    rng = np.random.default_rng(0)
    for trial in range(60):
        B, n = 40, int(rng.integers(1, 70))
        y = rng.normal(size=(B, n)).cumsum(1) * (-1) ** trial
        y = np.round(y, trial % 3)  # 0 or 1 decimals: many ties
        w = rng.integers(1, 5, size=(B, n)) * (1.0 if trial % 2 else rng.uniform(0.1, 3))
        length = rng.integers(1, n + 1, size=B)
        fit = isotonic_decreasing(np.where(np.arange(n) < length[:, None], y, -np.inf), w)
        for row, m in enumerate(length):
            expected = isotonic_regression(y[row, :m], weights=w[row, :m], increasing=False).x
            np.testing.assert_allclose(fit[row, :m], expected, rtol=0, atol=1e-12)
            assert np.isneginf(fit[row, m:]).all()


def test_bounded_minimum_takes_scipys_steps() -> None:
    """Many bounded searches at once land where scipy's ``minimize_scalar(method="bounded")``
    lands on each, to the bit: smooth functions, and step functions like the warp's misfit
    (constant between the exponents where the order of the distances changes)."""
    rng = np.random.default_rng(1)
    centre, width, steps = rng.uniform(-1, 1, 50), rng.uniform(0.05, 2, 50), rng.integers(0, 2, 50)

    def f(row: int, x: float) -> float:
        v = (x - centre[row]) ** 2 * width[row]
        return math.floor(v * 40) / 40 if steps[row] else v

    low, high = rng.uniform(-2, -0.5, 50), rng.uniform(0.5, 2, 50)
    x, fun = bounded_minimum(lambda rows, v: np.array([f(r, a) for r, a in zip(rows, v)]),
                             low, high, 0.005)
    for row in range(50):
        expected = minimize_scalar(lambda v: f(row, v), bounds=(low[row], high[row]),
                                   method="bounded", options={"xatol": 0.005})
        assert (x[row], fun[row]) == (expected.x, expected.fun)


def test_batched_warps_give_each_matrixs_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fits of many matrices at once (the power simulation's and the bootstrap's) give each
    matrix the null it gets alone; one matrix at a time is scipy's fit, as before."""
    per_image, _ = controls.control("random walk", 120)
    stack = per_image[:60]
    assert len(stack) >= structure.BATCHED_FROM
    together = warped_decay_nulls(stack)
    alone = np.array([warped_decay_null(S) for S in stack])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-13)
    monkeypatch.setattr(structure, "BATCHED_FROM", math.inf)
    assert best_warps(stack) == [best_warp(S) for S in stack]
