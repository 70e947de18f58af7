"""The finding-phases chapter: its claim on known inputs, the result of a smoke run."""

import numpy as np
import pytest

from raptor.book.chapters import finding_phases as chapter
from raptor.book.claims import EXCESS_MIN, FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE
from raptor.structure import PhaseExcess, phase_excess


# --- claims and statistics on synthetic inputs ----------------------------------------------

def _excess(block_weight: float, seed: int = 0) -> PhaseExcess:
    """C1's excess at k = 3 of noisy images of 12 layers: a depth decay with equal true phases
    1–4 | 5–8 | 9–12 of weight ``block_weight`` (0: no phases)."""
    idx = np.arange(12)
    S = (1 - block_weight) * np.exp(-np.abs(idx[:, None] - idx[None, :]) / 4) \
        + block_weight * (idx[:, None] // 4 == idx[None, :] // 4)
    x = S + np.random.default_rng(seed).normal(0, 0.3, (400, 12, 12))
    return phase_excess((x + x.transpose(0, 2, 1)) / 2, 3, n_boot=50)


def test_c2_judges_stability_and_shows_c1_under_rests_on() -> None:
    equal = _excess(0.05)
    assert equal.cut == equal.null_cut == ((0, 4), (4, 8), (8, 12))
    held = chapter.c2_boundaries_stable({3: 1}, {3: 1.0}, {"p=0, k=3": equal}, images=500,
                                        teacher_seeds=(0, 1), n_resamples=50)
    assert held.verdict == HOLDS and held.tests == 2
    assert held.ours.startswith("The k=3 boundaries' largest move across seeds (layers) is 1, "
                                "below 1.5; the share of 500-image subsets reproducing the k=3 "
                                "cut is 100%, above 90%")
    assert held.rests_on.startswith("C1: phases shown (block excess p=0, k=3 +0.0")


def test_c2_has_no_c1_part() -> None:
    """Cuts without block excess (C1 fails) leave C2's verdict on stability as it is: C1 is shown
    under "rests on", not counted a second time."""
    none = _excess(0.0)
    assert none.high <= EXCESS_MIN.value
    c = chapter.c2_boundaries_stable({3: 0}, {3: 1.0}, {"a": _excess(0.05), "b": none},
                                     images=500, teacher_seeds=(0,), n_resamples=50)
    assert c.verdict == HOLDS and c.tests == 2 and c.rests_on.startswith("C1: weak phases")


@pytest.mark.parametrize("profile", ["cpu", "paper"])
def test_c2_can_hold_at_the_profiles_resamples(profile: str) -> None:
    """Power: at the profile's subsets, every subset reproducing the cut shows a share above
    STABLE_SHARE, so C2 can hold on an ideal input; 10 subsets cannot show it (not testable, with
    the subsets it would need)."""
    n = chapter.Spec().n_resamples if profile == "cpu" else chapter.PAPER.n_resamples
    ideal = chapter.c2_boundaries_stable({3: 0}, {3: 1.0}, {"k=3": _excess(0.1)}, images=500,
                                         teacher_seeds=(0, 1), n_resamples=n)
    assert ideal.verdict == HOLDS
    few = chapter.c2_boundaries_stable({3: 0}, {3: 1.0}, {"k=3": _excess(0.1)}, images=500,
                                       teacher_seeds=(0, 1), n_resamples=10)
    assert few.verdict == UNTESTABLE
    assert "cannot be tested on 10 image subsets (it needs" in few.ours


@pytest.mark.parametrize("shift, reproduced, n, verdict", [
    ({2: 2, 3: 0}, {2: 1.0, 3: 1.0}, 40, FAILS),  # a boundary moves two layers across seeds
    ({2: 0, 3: 0}, {2: 1.0, 3: 0.3}, 40, FAILS),  # 12 of 40 subsets: far below 90%
    ({2: 0, 3: 0}, {2: 1.0, 3: 0.85}, 200, INCONCLUSIVE),  # 170 of 200: it spans 90%
    ({2: 0, 3: 0}, {2: 1.0, 3: 0.85}, 40, UNTESTABLE),  # 34 of 40: that spread cannot clear it
    ({2: 0, 3: 0}, {2: 1.0, 3: 1.0}, 10, UNTESTABLE)])  # 10 of 10 cannot show > 90%
def test_c2_on_unstable_boundaries(shift: dict[int, int], reproduced: dict[int, float], n: int,
                                   verdict: str) -> None:
    excess = {f"k={k}": _excess(0.1) for k in shift}
    c = chapter.c2_boundaries_stable(shift, reproduced, excess, images=64, teacher_seeds=(0, 1),
                                     n_resamples=n)
    assert c.verdict == verdict and c.tests == 4


def test_images_needed_is_the_first_count_stable_from_then_on() -> None:
    stability = {2: {10: 0.95, 25: 0.5, 50: 0.9, 100: 1.0}, 3: {10: 1.0, 25: 1.0, 50: 0.7}}
    assert chapter.images_needed(stability) == {2: 50, 3: None}


def test_thresholds_say_ours() -> None:
    for t in (chapter.MAX_SHIFT, chapter.STABLE_SHARE):
        assert t.source.startswith("[ours]")


def test_dp_matches_hierarchical_on_clean_blocks() -> None:
    # Two blocks of layers (1–3 | 4–6) with similarity 0.9 inside and 0.2 across.
    S = np.full((6, 6), 0.2)
    S[:3, :3] = S[3:, 3:] = 0.9
    np.fill_diagonal(S, 1.0)
    rows = chapter.hierarchical_vs_dp("toy", S, [0.2])
    assert rows == [{"teacher": "toy", "eps": 0.2, "k": 2, "hierarchical": "1–3 | 4–6",
                     "contiguous": True, "objective (hier.)": rows[0]["objective (DP)"],
                     "DP": "1–3 | 4–6", "objective (DP)": round(2 * 6 * 0.1, 4)}]


def test_paper_partitions_table() -> None:
    table = chapter.paper_partitions()
    assert table["paper (hierarchical)"].tolist() == ["1–7 | 8–12", "1–7 | 8–10 | 11–12",
                                                      "1–4 | 5–7 | 8–10 | 11–12"]
    assert table["repeats n_j"].tolist() == [(7, 5), (7, 3, 2), (4, 3, 3, 2)]


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_result(smoke_result) -> None:
    result = smoke_result(chapter.NAME)
    spec = chapter.SMOKE
    assert [(t.p, t.seed) for t in result.teachers] == [(0.0, 0), (0.2, 0), (0.2, 1), (0.2, 2)]
    for t in result.teachers:
        assert t.S.shape == (spec.teacher.depth,) * 2 and 0 <= t.accuracy <= 1
        assert list(t.cuts) == list(t.excess) == list(spec.k_values)
        assert all(t.excess[k].cut == t.cuts[k] for k in spec.k_values)
    assert len(result.comparison) == len(result.teachers) * len(spec.eps_values)
    assert list(result.seed_shift) == list(spec.k_values)
    assert {k: list(row) for k, row in result.stability.items()} == {2: [16, 32], 3: [16, 32]}
    (c2,) = chapter.claims(result)
    assert c2.id == "C2" and c2.tests == 2 * len(spec.k_values)  # shift and share per k
    assert c2.rests_on.startswith("C1: ")
