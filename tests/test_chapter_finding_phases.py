"""The finding-phases chapter: its claim on known inputs, the result of a smoke run."""

import numpy as np
import pytest

from raptor.book.chapters import finding_phases as chapter
from raptor.book.claims import FAILS, HOLDS


# --- claims and statistics on synthetic inputs ----------------------------------------------

def test_c2_holds_with_stable_boundaries() -> None:
    held = chapter.c2_boundaries_stable({2: 0, 3: 1}, {2: 1.0, 3: 0.9}, images=500,
                                        teacher_seeds=(0, 1), n_resamples=10,
                                        as_null={2: False, 3: False})
    assert held.verdict == HOLDS
    assert held.ours == ("largest boundary shift across seeds 1 layer(s); cut at 500 images "
                         "reproduced in k=2: 100%, k=3: 90%; the stationary null's cut is the "
                         "same for no k")


@pytest.mark.parametrize("shift, reproduced, as_null", [
    ({2: 2, 3: 0}, {2: 1.0, 3: 1.0}, {2: False, 3: False}),
    ({2: 0, 3: 0}, {2: 1.0, 3: 0.8}, {2: False, 3: False}),
    ({2: 0, 3: 0}, {2: 1.0, 3: 1.0}, {2: False, 3: True})])
def test_c2_fails_when_boundaries_move_subsets_disagree_or_the_null_agrees(
        shift, reproduced, as_null) -> None:
    assert chapter.c2_boundaries_stable(shift, reproduced, images=64, teacher_seeds=(0,),
                                        n_resamples=3, as_null=as_null).verdict == FAILS


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
    assert [(t.p, t.seed) for t in result.teachers] == [(0.0, 0), (0.0, 1), (0.0, 2), (0.3, 0)]
    for t in result.teachers:
        assert t.S.shape == (spec.teacher.depth,) * 2 and 0 <= t.accuracy <= 1
        assert list(t.cuts) == list(t.excess) == list(spec.k_values)
        assert all(t.excess[k].cut == t.cuts[k] for k in spec.k_values)
    assert len(result.comparison) == len(result.teachers) * len(spec.eps_values)
    assert list(result.seed_shift) == list(spec.k_values)
    assert {k: list(row) for k, row in result.stability.items()} == {2: [16, 32], 3: [16, 32]}
