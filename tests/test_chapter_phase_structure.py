"""Chapter *Emergent phase structure*: C1 judged on block excess over the stronger of two nulls."""

from __future__ import annotations

import numpy as np

from raptor.book.chapters import phase_structure as chapter
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE
from raptor.book.experiment import walk
from raptor.book.profiles import PHASE_TEACHER
from raptor.structure import PhaseExcess, Rank, phase_excess

CUT = ((0, 3), (3, 6), (6, 8))


def excess(value: float, half_width: float = 0.002) -> PhaseExcess:
    return PhaseExcess(3, CUT, CUT, value, value - half_width, value + half_width, 0.95, 1.0,
                       Rank(1, 21))


def test_c1_holds_only_when_every_interval_clears_the_threshold() -> None:
    t = chapter.EXCESS_MIN.value
    assert chapter.c1_block_excess({"a": excess(t + 0.02), "b": excess(t + 0.01)}, k=3
                                   ).verdict == HOLDS
    assert chapter.c1_block_excess({"a": excess(t + 0.02), "b": excess(0.0)}, k=3
                                   ).verdict == FAILS
    c = chapter.c1_block_excess({"a": excess(t + 0.02), "b": excess(t, 0.005)}, k=3)
    assert c.verdict == INCONCLUSIVE and "b: excess" in c.ours


def _images(S: np.ndarray, seed: int, n: int = 300) -> np.ndarray:
    x = S + np.random.default_rng(seed).normal(0, 0.2, (n, *S.shape))
    return (x + x.transpose(0, 2, 1)) / 2


def test_c1_fails_on_a_stationary_matrix_and_holds_on_planted_blocks(planted_blocks) -> None:
    idx = np.arange(8)
    decay = np.exp(-0.2 * np.abs(idx[:, None] - idx[None, :]))
    stationary = {f"seed {s}": phase_excess(_images(decay, s), 3, n_boot=100) for s in range(3)}
    assert chapter.c1_block_excess(stationary, k=3).verdict == FAILS
    blocks = 0.5 * planted_blocks([3, 3, 2]) + 0.5 * decay
    planted = {f"seed {s}": phase_excess(_images(blocks, s), 3, n_boot=100) for s in range(3)}
    assert chapter.c1_block_excess(planted, k=3).verdict == HOLDS


def test_smoke_result_has_every_model_and_a_c1(smoke_result) -> None:
    r = smoke_result("phase-structure")
    seeds = r.spec.teacher_seeds
    assert len(r.trained()) == len(r.spec.p_values) * len(seeds)
    assert sorted(r.untrained()) == [f"untrained, seed {s}" for s in seeds]
    assert all(e.low <= e.high and e.cut == r.cuts[name] for name, e in r.excess.items())
    (c1,) = chapter.claims(r)
    assert c1.id == "C1" and c1.verdict in (HOLDS, FAILS, INCONCLUSIVE)


def test_c1_is_inconclusive_when_the_untrained_control_passes_too() -> None:
    t = chapter.EXCESS_MIN.value
    trained = {"a": excess(t + 0.02)}
    c = chapter.c1_block_excess(trained, k=3, control={"untrained": excess(t + 0.02)})
    assert c.verdict == INCONCLUSIVE and c.detail.endswith("untrained control: holds")
    c = chapter.c1_block_excess(trained, k=3, control={"untrained": excess(0.0)})
    assert c.verdict == HOLDS and c.detail.endswith("untrained control: does not hold")
    assert chapter.c1_block_excess({"a": excess(0.0)}, k=3, control={"u": excess(t + 0.02)}
                                   ).verdict == FAILS


def test_c1_fails_on_untrained_teachers(fresh_cache) -> None:
    """The book's untrained control on real images (Fashion-MNIST): over the stationary null alone
    a 12-block untrained ViT's late layers look like a block, but its stream follows the norm-growth
    null, so C1 fails on it."""
    images = PHASE_TEACHER.eval_images(300)
    excess = {f"seed {seed}": walk(PHASE_TEACHER.get_teacher(seed=seed, trained=False), images,
                                   excess=(3,), n_boot=50, device="cpu").excess[3]
              for seed in range(3)}
    assert any(e.stationary > chapter.EXCESS_MIN.value for e in excess.values())
    assert chapter.c1_block_excess(excess, k=3).verdict == FAILS
