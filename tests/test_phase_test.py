"""C1's test of phases (issue 44): its power on steps of realistic strength, monotone in the step,
its d* computed and found again, what the null absorbs, and a published matrix."""

import math

import numpy as np
import pytest

from raptor import controls, paper
from raptor.book.claims import FAILS, HOLDS
from types import SimpleNamespace

from scipy import stats

from raptor.phase_test import (K_TRIED, SPLITS, _crossfit, bca_interval, contrasts,
                               phase_test, smallest_step)
from raptor.structure import best_warp
from raptor.structure import contiguous_partitions, contrast, warped_decay_null


def test_contrasts_agree_with_the_contrast_of_each_partition() -> None:
    M = np.random.default_rng(0).normal(size=(9, 9))
    for k in (2, 3, 4):
        parts, values = contrasts(M, k)
        assert list(parts) == contiguous_partitions(9, k)
        np.testing.assert_allclose(values, [contrast((M + M.T) / 2, p) for p in parts])


def test_paper_partition_is_table_1s_and_scales_with_depth() -> None:
    assert paper.paper_partition(12, 3) == paper.DINOV2_B_PARTITIONS[3] == ((0, 7), (7, 10), (10, 12))
    assert paper.paper_partition(12, 4) == paper.DINOV2_B_PARTITIONS[4]
    assert paper.paper_partition(6, 3) == ((0, 4), (4, 5), (5, 6))
    assert paper.paper_partition(3, 3) == ((0, 1), (1, 2), (2, 3))


@pytest.mark.parametrize("sizes", controls.REALISTIC_PHASES)
@pytest.mark.parametrize("decay", controls.STEP_DECAYS)
def test_the_positives_step_lies_above_the_power_measured_on_their_decay(sizes, decay) -> None:
    """d* planted where the phases are, on the decay alone at 200 images: the positive controls'
    step (which they pass, tests/test_controls.py) is above it, and every d* is below 0.2."""
    d_star = smallest_step(controls.decay_images(200, decay), controls.partition_of(sizes),
                           reps=30)
    assert 0.01 < d_star < 0.2 < controls.STEP, (sizes, decay, d_star)


@pytest.mark.parametrize(("sizes", "decay"), [((7, 3, 2), "accelerating"),
                                              ((10, 2), "stationary"), ((3, 9), "random walk")])
def test_the_verdict_is_monotone_in_the_step(sizes, decay) -> None:
    """A sweep of the step never passes then fails (an end step on a stationary decay can go
    from inconclusive back to does not hold while the warp absorbs part of it)."""
    steps = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4)
    verdicts = [phase_test(controls.decay_images(200, decay, sizes, d), n_boot=50,
                           power_reps=0).verdict() for d in steps]
    assert verdicts[0] == FAILS and verdicts[-1] == HOLDS, verdicts
    assert set(verdicts[verdicts.index(HOLDS):]) == {HOLDS}, verdicts


def test_a_step_of_twice_d_star_planted_into_a_models_null_is_found() -> None:
    """d* is computed, not assumed: a "model" (a random-walk residual stream, 200 images) has no
    phases; twice its d* planted at the paper's 7 | 3 | 2 into its own fitted null, with its own
    images' deviations, passes; the null alone does not."""
    per_image, _ = controls.control("random walk", 200)
    found = phase_test(per_image, n_boot=50, power_reps=40)
    assert found.verdict() == FAILS and found.planted == paper.DINOV2_B_PARTITIONS[3]
    assert 0.01 < found.d_star < 0.5
    S = per_image.mean(0)
    phase = np.repeat(np.arange(3), (7, 3, 2))
    planted = warped_decay_null(S) * (1 - 2 * found.d_star) ** np.abs(
        phase[:, None] - phase[None, :]) + per_image - S
    assert phase_test(planted, n_boot=50, power_reps=0, seed=1).verdict() == HOLDS


def test_the_null_absorbs_a_last_phase_of_one_layer() -> None:
    """A staircase whose last phase is one layer is in the warped null's family (λ = −3 from the
    last block: one gap holds most of the axis); two layers at the end are not."""
    def staircase(sizes: tuple[int, ...]) -> np.ndarray:
        phase = np.repeat(np.arange(len(sizes)), sizes)
        return 0.3 ** np.abs(phase[:, None] - phase[None, :])

    absorbed = phase_test(staircase((11, 1)), power_reps=0)
    seen = phase_test(staircase((10, 2)), power_reps=0)
    assert max(e.excess for e in absorbed.per_k.values()) < 0.002
    assert max(e.excess for e in seen.per_k.values()) > 0.05


def test_a_published_matrix_has_its_numbers_without_an_interval() -> None:
    S = paper.dinov2b_block_similarity()
    t = phase_test(S, power_reps=1)
    assert t.n_images == 1 and set(t.per_k) == set(K_TRIED)
    assert all(math.isnan(x) for x in t.interval())
    assert {k: r.cut for k, r in t.reference.items()} == paper.DINOV2_B_PARTITIONS
    assert 0 < t.d_star < 1
    np.testing.assert_allclose(t.steps, 1 - np.diagonal(S, 1))
    assert t.best().excess >= max(r.excess for r in t.reference.values())  # chosen ≥ any fixed


def test_trajectories_and_their_matrices_give_the_same_test() -> None:
    traj = controls.jump_stream(40, seed=2)
    a = phase_test(traj, controls.CLS, n_boot=20, power_reps=0)
    b = phase_test(controls.control("orthogonal jumps", 40, seed=2)[0], n_boot=20, power_reps=0)
    assert a.per_k == b.per_k and a.verdict() == b.verdict() == HOLDS
    assert a.best().cut == controls.PHASES


def test_bad_input_is_refused_before_any_work() -> None:
    x = controls.decay_images(20, "stationary")
    with pytest.raises(ValueError, match="at least 8 images"):
        phase_test(x[:5])
    with pytest.raises(ValueError, match="in \\[2, L − 1"):
        phase_test(x, ks=(2, 12))
    with pytest.raises(ValueError, match="token groups"):
        phase_test(controls.jump_stream(8))
    with pytest.raises(ValueError, match="need trajectories"):
        phase_test(np.ones((10, 4, 5)))
    with pytest.raises(ValueError, match="n_boot"):
        phase_test(x, n_boot=2)


@pytest.mark.parametrize("level", [0.9, 0.95, 1 - 0.05 / 3])
def test_bca_interval_is_scipys(level: float) -> None:
    """The BCa interval from a set of resamples and the leave-one-out values is
    ``scipy.stats.bootstrap``'s on the same resamples (a skewed sample, its mean)."""
    rng = np.random.default_rng(3)
    x = rng.lognormal(size=40)
    boots = np.array([x[rng.integers(0, 40, 40)].mean() for _ in range(400)])
    jackknife = np.array([np.delete(x, i).mean() for i in range(40)])
    expected = stats.bootstrap((x,), np.mean, n_resamples=0, method="BCa",
                               confidence_level=level,
                               bootstrap_result=SimpleNamespace(bootstrap_distribution=boots))
    np.testing.assert_allclose(bca_interval(boots, x.mean(), jackknife, level),
                               expected.confidence_interval, rtol=1e-12)


@pytest.mark.parametrize("name", ["random walk", "orthogonal jumps", "smooth decay"])
def test_the_interval_lies_about_the_estimate(name: str) -> None:
    """Every k's interval, and that of the largest excess, contains its estimate; the cut
    reported at each k is one the halves chose, with the share of the 2 × SPLITS halves."""
    t = phase_test(controls.control(name, 200)[0], n_boot=60, power_reps=0)
    for e in t.per_k.values():
        lo, hi = e.interval(t.level_k(0.95))
        assert lo <= e.excess <= hi, (name, e.k, lo, e.excess, hi)
        assert e.share * 2 * SPLITS == round(e.share * 2 * SPLITS) and e.share >= 1 / (2 * SPLITS)
    lo, hi = t.interval()
    assert lo <= t.excess <= hi


def test_the_warp_is_chosen_on_the_half_that_chooses_the_partition() -> None:
    """Each direction of the cross-fit takes the warp its choosing half fits best: halves whose
    decays want different warps give the excess computed by hand with each half's own warp."""
    A = controls.decay_images(60, "accelerating").mean(0)
    B = controls.decay_images(60, "random walk", seed=1).mean(0)
    assert best_warp(A) != best_warp(B)
    excess, _, cuts = _crossfit(A[None], B[None], (3,), {})
    wa, wb = best_warp(A), best_warp(B)
    parts = contiguous_partitions(len(A), 3)
    a_on_a, b_on_a = A - warped_decay_null(A, warp=wa), B - warped_decay_null(B, warp=wa)
    b_on_b, a_on_b = B - warped_decay_null(B, warp=wb), A - warped_decay_null(A, warp=wb)
    cut_a = max(parts, key=lambda p: contrast(a_on_a, p))
    cut_b = max(parts, key=lambda p: contrast(b_on_b, p))
    assert [parts[i] for i in cuts[0, 0]] == [cut_a, cut_b]
    np.testing.assert_allclose(excess[0, 0],
                               (contrast(b_on_a, cut_a) + contrast(a_on_b, cut_b)) / 2, atol=1e-12)
