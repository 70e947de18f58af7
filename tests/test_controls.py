"""C1's test against cases with the answer built in: it must pass every positive control and fail
every negative one, at 200 images, in both directions (issues #25, #44)."""

import numpy as np
import pytest

from raptor import controls
from raptor.book.chapters.phase_structure.claims import c1_block_excess
from raptor.book.claims import FAILS, HOLDS
from raptor.phases import maxcut
from raptor.phase_test import phase_test
from raptor.structure import boundaries, phase_excess

TEXTBOOK = ("orthogonal jumps", "jumps along the state", "shared direction", "random walk",
            "smooth decay")


@pytest.fixture(scope="module")
def tested() -> dict[str, object]:
    return {name: phase_test(controls.control(name, 200)[0], n_boot=50, power_reps=0)
            for name in controls.CONTROLS}


@pytest.fixture(scope="module")
def measured() -> dict[str, object]:
    """The max-cut's excess over the ladder of nulls, for the textbook controls."""
    out = {}
    for name in TEXTBOOK:
        per_image, growth = controls.control(name, 200)
        out[name] = phase_excess(per_image, 3, growth=growth, n_boot=50)
    return out


@pytest.mark.parametrize("name", list(controls.CONTROLS))
def test_c1_passes_every_positive_control_and_fails_every_negative_one(name, tested) -> None:
    has_phases = controls.CONTROLS[name][0]
    verdict = c1_block_excess({name: tested[name]}).verdict
    assert verdict == (HOLDS if has_phases else FAILS), (name, tested[name].per_k)


def test_the_controls_are_realistic_and_many() -> None:
    """Steps on three decays for every unequal or end-placed phasing, at least six smooth
    negatives, and the plateau a positive (by decision, raptor.phase_test)."""
    negatives = [n for n, (phased, _) in controls.CONTROLS.items() if not phased]
    assert len(negatives) >= 6 and controls.CONTROLS["plateau"][0]
    for sizes in controls.REALISTIC_PHASES:
        for decay in controls.STEP_DECAYS:
            assert controls.CONTROLS[f"{controls.partition_name(sizes)} on {decay} decay"][0]


@pytest.mark.parametrize("name", ["orthogonal jumps", "jumps along the state", "shared direction"])
def test_the_max_cut_of_a_textbook_control_finds_its_phases(name, measured, tested) -> None:
    assert measured[name].cut == controls.PHASES
    assert tested[name].per_k[3].cut == controls.PHASES


def test_the_best_cut_of_a_realistic_positive_has_every_true_boundary(tested) -> None:
    """The partition chosen on the residual finds where the steps are (at the best k, which may
    add a boundary the decay's misfit suggests)."""
    for sizes in controls.REALISTIC_PHASES:
        for decay in controls.STEP_DECAYS:
            name = f"{controls.partition_name(sizes)} on {decay} decay"
            true = set(boundaries(controls.partition_of(sizes)))
            assert true <= set(boundaries(tested[name].best().cut)), name


def test_the_weaker_nulls_fail_a_positive_control_or_pass_a_negative_one(measured) -> None:
    """Why C1 is judged on the warped decay: the random walk explains textbook blocks (every
    update of a jump stream is orthogonal to the state), and the stationary null leaves excess
    in a random walk and in a smooth decay."""
    orthogonal = measured["orthogonal jumps"].ladder["random walk"]
    assert orthogonal.high < 0.01
    for negative in ("random walk", "smooth decay"):
        assert measured[negative].ladder["stationary"].low > 0.01


def test_controls_are_reproducible_and_shaped_as_trajectories() -> None:
    a, growth = controls.control("shared direction", 8, seed=3)
    b, _ = controls.control("shared direction", 8, seed=3)
    assert a.shape == growth.shape == (8, controls.L, controls.L)
    np.testing.assert_array_equal(a, b)
    assert controls.jump_stream(4).shape == (4, controls.L + 1, 1, controls.DIM)
    assert maxcut(controls.control("orthogonal jumps", 20)[0].mean(0), 3) == controls.PHASES
    with pytest.raises(ValueError, match="unknown control"):
        controls.control("stripes")
