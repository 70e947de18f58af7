"""The functional-phases chapter: its claims on known inputs, its spec, profiles and notebook."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np
import pytest

from raptor.book.chapters import functional_phases as chapter
from raptor.book.claims import FAILS, HOLDS, UNTESTABLE, Claim
from raptor.book.result import load, save
from raptor.book.spec import SpecError, from_parameters

NOTEBOOK = Path(__file__).parents[1] / "book" / chapter.NOTEBOOK

# The profiles as the old raptor/profiles.py set them for this chapter.
OLD_SMOKE = {"L": 4, "D": 32, "heads": 2, "steps": 30, "batch_size": 64, "train_limit": 1024,
             "stage1_steps": 6, "stage2_steps": 6, "distill_warmup": 2, "distill_limit": 256,
             "n_images": 64, "k_values": [2], "n_random": 2, "overfit_limit": 128,
             "overfit_steps": 20, "overfit_snapshots": [10, 20], "swap_counts": [1, 2],
             "max_swap_sets": 3}
OLD_PAPER = {"dataset": "cifar100", "L": 12, "D": 768, "heads": 12, "patch_size": 14,
             "img_size": 224, "registers": 0, "steps": 8_000, "batch_size": 256, "lr": 5e-4,
             "train_limit": None, "stage1_steps": 20_000, "stage2_steps": 20_000,
             "distill_lr": 3e-4, "distill_warmup": 1_000, "distill_limit": None,
             "n_images": 10_000, "k_values": [2, 3, 4], "n_random": 10, "overfit_limit": 5_000,
             "overfit_steps": 8_000, "overfit_snapshots": [500, 1_000, 2_000, 4_000, 8_000]}


# --- claims on synthetic inputs --------------------------------------------------------------

def test_margin_is_in_sample_standard_deviations() -> None:
    assert chapter.margin(0.95, [0.7, 0.8, 0.9]) == pytest.approx(1.5)  # mean 0.8, σ 0.1
    assert chapter.margin(0.7, [0.7, 0.8, 0.9]) == pytest.approx(-1.0)


def test_c3_maxcut_beats_random() -> None:
    held = chapter.c3_maxcut_beats_random({2: 1.5, 3: 2.0}, n_random=5)
    assert held.verdict == HOLDS and held.ours == "k=2: +1.5σ, k=3: +2.0σ"
    failed = chapter.c3_maxcut_beats_random({3: -0.8}, n_random=5)
    assert failed.verdict == FAILS and failed.ours == "k=3: -0.8σ"
    assert failed.detail == "5 random contiguous partitions per k"
    assert chapter.c3_maxcut_beats_random({2: 3.0, 3: 0.9}, n_random=5).verdict == FAILS


def test_c4_swaps() -> None:
    assert chapter.c4_swaps([0.95, 0.92], [0.3, 0.55]).verdict == HOLDS
    failed = chapter.c4_swaps([0.88, 0.95], [0.78, 0.9])
    assert failed.verdict == FAILS
    assert failed.ours == "intra keeps 88%–95%, inter keeps 78%–90% of teacher accuracy"
    assert failed.detail == ("holds if every intra setting keeps ≥ 90% and every inter setting "
                             "≤ 60% [ours]")
    assert chapter.c4_swaps([0.95], [0.5, 0.61]).verdict == FAILS
    assert chapter.c4_swaps([], [0.5]).verdict == UNTESTABLE


def test_c9_untrained_easier() -> None:
    trained = {"cls": 0.957, "patches": 0.98}
    held = chapter.c9_untrained_easier({"cls": 0.98, "patches": 0.999}, trained)
    assert held.verdict == HOLDS
    assert held.ours == "R² cls/patches: untrained 0.980/0.999, trained 0.957/0.980"
    assert chapter.c9_untrained_easier({"cls": 0.98, "patches": 0.97}, trained).verdict == FAILS


def test_c10_skip_removal() -> None:
    assert chapter.c10_skip_removal(0.999, 0.95).verdict == HOLDS
    failed = chapter.c10_skip_removal(0.999, 0.749)
    assert failed.verdict == FAILS and failed.ours == "patch R² 0.999 → 0.749"
    assert failed.detail == "drop of patch R² below 0.1 [ours]"


def test_c11_overfitting() -> None:
    steps, r2 = [50, 150, 300, 600], [0.9587, 0.9104, 0.8371, 0.8369]
    failed = chapter.c11_overfitting(100, steps, r2, [0.5134, 0.693, 0.689, 0.7155])
    assert failed.verdict == FAILS  # cls R² drops but accuracy rises
    assert failed.ours == ("val-loss minimum at step 100; cls R² 0.959 → 0.837, "
                           "acc 0.513 → 0.716")
    held = chapter.c11_overfitting(150, steps, r2, [0.5, 0.7, 0.69, 0.65])
    assert held.verdict == HOLDS and "cls R² 0.910 → 0.837, acc 0.700 → 0.650" in held.ours
    assert chapter.c11_overfitting(20, steps, r2, [0.5, 0.4, 0.3, 0.2]).verdict == HOLDS
    untestable = chapter.c11_overfitting(600, steps, r2, [0.5, 0.7, 0.69, 0.65])
    assert untestable.verdict == UNTESTABLE and untestable.ours.endswith("no snapshot after the "
                                                                         "minimum")


def test_thresholds_cite_the_paper_or_say_ours() -> None:
    for t in (chapter.INTRA_KEEP_MIN, chapter.INTER_KEEP_MAX, chapter.SKIP_DROP_MAX):
        assert t.source.startswith("[ours]") and "§2" in t.source
    assert "§2, Fig. 3" in chapter.SIGMA_MIN.source


# --- spec, profiles, notebook ----------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("p", 1.0), ("seed", -1), ("k_values", [9]), ("k_values", [1]), ("k_values", []),
    ("n_random", 1), ("n_images", 0), ("overfit_limit", 0), ("overfit_steps", 0),
    ("overfit_snapshots", [700]), ("overfit_snapshots", [300, 50]), ("overfit_snapshots", []),
    ("swap_counts", []), ("swap_counts", [9]), ("max_swap_sets", 0),
])
def test_bad_parameters_are_named(name: str, value: object) -> None:
    with pytest.raises(SpecError, match=f"parameter '{name}'"):
        from_parameters(chapter.Spec, {name: value})


def test_profiles_are_the_old_ones() -> None:
    assert chapter.SMOKE == from_parameters(chapter.Spec, OLD_SMOKE)
    assert chapter.PAPER == from_parameters(chapter.Spec, OLD_PAPER)
    assert chapter.Spec().overfit() == dict(train_limit=500, weight_decay=0.0, steps=600,
                                            snapshot_steps=(50, 150, 300, 600), eval_every=50)


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_compute_round_trips(smoke_result, tmp_path: Path) -> None:
    result = smoke_result(chapter.NAME)
    spec = chapter.SMOKE
    assert list(result.partitions) == list(spec.k_values)
    for k, parts in result.partitions.items():
        assert len(parts) == 1 + spec.n_random and result.student_acc[k].shape == (len(parts),)
        assert all(result.student_r2[k][g].shape == (len(parts),) for g in chapter.GROUPS)
    assert set(result.controls) == {"trained", "untrained", "untrained, no skip"}
    assert result.snapshot_r2["cls"].shape == (len(spec.overfit_snapshots),)
    assert set(spec.overfit_snapshots) <= set(result.val_steps.tolist())
    assert 0 <= result.teacher_acc <= 1
    again = load(chapter.Result, save(result, tmp_path / "result"))
    assert again.spec == spec and again.partitions == result.partitions
    assert again.controls == result.controls and again.teacher_acc == result.teacher_acc
    for kind, by_n in result.swap_acc.items():
        assert list(again.swap_acc[kind]) == list(by_n)
        assert all(np.array_equal(again.swap_acc[kind][n], a) for n, a in by_n.items())
    assert np.array_equal(again.val_loss, result.val_loss)
    assert chapter.claims(again) == chapter.claims(result)
    assert all(isinstance(c, Claim) for c in chapter.claims(result))
    assert len(chapter.versus_table(result)) == len(spec.k_values) * (1 + spec.n_random)
    for figure in (chapter.maxcut_vs_random_figure, chapter.overfitting_figure,
                   chapter.swaps_figure):
        plt.close(figure(result))
