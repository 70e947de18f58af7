"""C1's test against cases with the answer built in: it must pass every positive control and fail
every negative one, at 200 images, in both directions (issue #25)."""

import numpy as np
import pytest

from raptor import controls
from raptor.book.chapters.phase_structure import c1_block_excess
from raptor.book.claims import FAILS, HOLDS
from raptor.phases import maxcut
from raptor.structure import phase_excess


@pytest.fixture(scope="module")
def measured() -> dict[str, object]:
    out = {}
    for name in controls.CONTROLS:
        per_image, growth = controls.control(name, 200)
        out[name] = phase_excess(per_image, 3, growth=growth, n_boot=50)
    return out


@pytest.mark.parametrize("name", list(controls.CONTROLS))
def test_c1_passes_every_positive_control_and_fails_every_negative_one(name, measured) -> None:
    has_phases = controls.CONTROLS[name][0]
    verdict = c1_block_excess({name: measured[name]}, k=3).verdict
    assert verdict == (HOLDS if has_phases else FAILS), (name, measured[name])


@pytest.mark.parametrize("name", [n for n, (phased, _) in controls.CONTROLS.items() if phased])
def test_the_max_cut_of_a_positive_control_finds_its_phases(name, measured) -> None:
    assert measured[name].cut == controls.PHASES


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
