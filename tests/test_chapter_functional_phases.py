"""The functional-phases chapter: its claims on known inputs, the result of a smoke run."""

import dataclasses

import numpy as np
import pytest
import torch

from raptor.book.chapters import functional_phases as chapter
from raptor.book.chapters import functional_phases_claims as judge
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE
from raptor.book.experiment import batched, walk
from raptor.metrics import head_accuracy
from raptor.stats import Interval
from raptor.structure import PhaseExcess, Rank


# --- claims on synthetic inputs --------------------------------------------------------------

def test_margin_is_in_sample_standard_deviations() -> None:
    assert judge.margin(0.95, [0.7, 0.8, 0.9]) == pytest.approx(1.5)  # mean 0.8, σ 0.1
    assert judge.margin(0.7, [0.7, 0.8, 0.9]) == pytest.approx(-1.0)
    assert np.isnan(judge.margin(0.9, [0.8, 0.8]))  # no spread, no σ


def _iv(estimate: float, low: float, high: float) -> Interval:
    return Interval(estimate, low, high, 0.95)


def test_c3_maxcut_beats_random() -> None:
    held = judge.c3_maxcut_beats_random({2: _iv(1.5, 1.2, 1.9), 3: _iv(2.0, 1.1, 2.6)},
                                        counts={2: 6, 3: 10})
    assert held.verdict == HOLDS and held.ours == "k=2: +1.5σ [+1.2, +1.9], k=3: +2.0σ [+1.1, +2.6]"
    assert "each once: k=2: 6, k=3: 10; holds if every margin's interval lies above 1σ" \
        in held.detail
    failed = judge.c3_maxcut_beats_random({3: _iv(-0.8, -1.2, -0.3)}, counts={3: 10})
    assert failed.verdict == FAILS and failed.ours == "k=3: -0.8σ [-1.2, -0.3]"
    assert judge.c3_maxcut_beats_random({2: _iv(3.0, 2.0, 4.0), 3: _iv(0.9, 0.5, 0.99)},
                                        counts={2: 6, 3: 10}).verdict == FAILS
    # no σ on some resamples: not testable
    assert judge.c3_maxcut_beats_random({2: _iv(1.5, float("nan"), float("nan"))},
                                        counts={2: 2}).verdict == UNTESTABLE
    # an interval that spans 1σ decides nothing
    assert judge.c3_maxcut_beats_random({2: _iv(1.5, 0.8, 2.1)},
                                        counts={2: 6}).verdict == INCONCLUSIVE


def test_margin_interval_is_paired_over_units() -> None:
    rng = np.random.default_rng(0)
    sizes = np.full(20, 50.0)
    base = rng.uniform(0.6, 0.9, (6, 1)) + rng.normal(0, 0.05, (1, 20))  # shared image noise
    iv = judge.margin_interval(base, sizes)
    acc = base.mean(axis=1)
    assert iv.estimate == pytest.approx(judge.margin(acc[0], acc[1:]))
    # a noise common to every Raptor's units moves no margin: the interval is a point
    assert iv.high - iv.low == pytest.approx(0.0, abs=1e-9)
    noisy = base + rng.normal(0, 0.05, base.shape)  # each Raptor's own evaluation noise
    spread = judge.margin_interval(noisy, sizes)
    assert spread.low < spread.estimate < spread.high


def test_c4_swaps() -> None:
    assert judge.c4_swaps([0.95, 0.92], [0.3, 0.55]).verdict == HOLDS
    failed = judge.c4_swaps([0.88, 0.95], [0.78, 0.9])
    assert failed.verdict == FAILS
    assert failed.ours == "intra keeps 88%–95%, inter keeps 78%–90% of teacher accuracy"
    assert failed.detail == ("holds if every intra setting keeps ≥ 90% and every inter setting "
                             "≤ 60% [ours]")
    assert judge.c4_swaps([0.95], [0.5, 0.61]).verdict == FAILS
    assert judge.c4_swaps([], [0.5]).verdict == UNTESTABLE


SIZES = np.full(20, 50.0)  # 20 units of 50 images


def units(mean: float, sd: float = 0.01, seed: int = 0) -> np.ndarray:
    """Per-unit values around ``mean`` (evaluation noise of sd ``sd``)."""
    return mean + np.random.default_rng(seed).normal(0, sd, len(SIZES))


def test_c9_untrained_easier_on_intervals() -> None:
    trained = {"cls": units(0.957), "patches": units(0.98, seed=1)}
    untrained = {"cls": units(0.98, seed=2), "patches": units(0.999, seed=3)}
    held = judge.c9_untrained_easier(untrained, trained, SIZES)
    assert held.verdict == HOLDS and held.ours.startswith("R² cls/patches: untrained 0.98")
    assert "20 units of ≤ 50 validation images" in held.detail
    worse = {"cls": units(0.98, seed=2), "patches": units(0.96, seed=3)}
    assert judge.c9_untrained_easier(worse, trained, SIZES).verdict == FAILS
    # A gap of 0.001 against a per-unit sd of 0.02: the interval spans 0.
    close = {"cls": units(0.958, 0.02, seed=4), "patches": units(0.981, 0.02, seed=5)}
    assert judge.c9_untrained_easier(close, trained, SIZES).verdict == INCONCLUSIVE


def test_c10_skip_removal_on_intervals() -> None:
    assert judge.c10_skip_removal(units(0.999), units(0.95, seed=1), SIZES).verdict == HOLDS
    failed = judge.c10_skip_removal(units(0.999), units(0.749, seed=1), SIZES)
    assert failed.verdict == FAILS and "→ 0.749; drop +0.248 [+0.24" in failed.ours
    assert failed.detail.startswith("drop of patch R² below 0.1 [ours]; 95% bootstrap")
    near = judge.c10_skip_removal(units(0.999, 0.05), units(0.899, 0.05, seed=1), SIZES)
    assert near.verdict == INCONCLUSIVE


STEPS = [50, 150, 300, 600]


def snapshots(cls: list[float], acc: list[float], patches: float = 0.97,
              sd: float = 0.005) -> tuple[dict[str, np.ndarray], np.ndarray]:
    r2 = {"cls": np.array([units(v, sd, seed=i) for i, v in enumerate(cls)]),
          "patches": np.array([units(patches, sd, seed=9 + i) for i in range(len(cls))])}
    return r2, np.array([units(a, sd, seed=20 + i) for i, a in enumerate(acc)])


def test_c11_reference_is_at_or_after_the_minimum() -> None:
    # The committed cpu run: minimum at step 100, so the reference is step 150, not step 50.
    r2, acc = snapshots([0.9587, 0.9104, 0.8371, 0.8369], [0.5134, 0.693, 0.689, 0.7155])
    failed = judge.c11_overfitting(100, STEPS, r2, acc, SIZES)
    assert failed.verdict == FAILS  # cls R² falls to 0.84 (< 0.9) and accuracy rises
    assert "reference snapshot 150" in failed.ours and "step 150 → 600" in failed.ours
    r2, acc = snapshots([0.96, 0.95, 0.93, 0.91], [0.7, 0.72, 0.70, 0.66])
    held = judge.c11_overfitting(150, STEPS, r2, acc, SIZES)
    assert held.verdict == HOLDS and "step 150 → 600: cls R² -0.04" in held.ours
    # R² not high before the minimum: "stays high until" fails even though both drop later.
    r2, acc = snapshots([0.80, 0.95, 0.93, 0.91], [0.7, 0.72, 0.70, 0.66])
    assert judge.c11_overfitting(150, STEPS, r2, acc, SIZES).verdict == FAILS
    # A drop within evaluation noise is inconclusive.
    r2, acc = snapshots([0.96, 0.95, 0.95, 0.949], [0.7, 0.72, 0.70, 0.66], sd=0.02)
    assert judge.c11_overfitting(150, STEPS, r2, acc, SIZES).verdict == INCONCLUSIVE


def test_c11_untestable_without_snapshots_around_the_minimum() -> None:
    r2, acc = snapshots([0.96, 0.95, 0.93, 0.91], [0.7, 0.72, 0.70, 0.66])
    at_end = judge.c11_overfitting(600, STEPS, r2, acc, SIZES)
    assert at_end.verdict == UNTESTABLE and at_end.ours.endswith("no snapshot after the one at it")
    assert judge.c11_overfitting(700, STEPS, r2, acc, SIZES).verdict == UNTESTABLE


def test_thresholds_cite_the_paper_or_say_ours() -> None:
    for t in (judge.INTRA_KEEP_MIN, judge.INTER_KEEP_MAX, judge.SKIP_DROP_MAX,
              judge.R2_HIGH):
        assert t.source.startswith("[ours]") and "§2" in t.source
    assert "§2, Fig. 3" in judge.SIGMA_MIN.source


def test_the_cpu_overfitting_run() -> None:
    assert chapter.Spec().overfit() == dict(train_limit=500, weight_decay=0.0, steps=600,
                                            snapshot_steps=(50, 150, 300, 600), eval_every=50)


def _checks(seed: int, untrained_cls: float) -> chapter.SeedChecks:
    """One seed's controls and swaps; its phases have block excess (C1 holds)."""
    cut = ((0, 2), (2, 5), (5, 8))
    trained = {"cls": units(0.957, seed=seed), "patches": units(0.98, seed=seed + 1)}
    untrained = {"cls": units(untrained_cls, seed=seed + 2),
                 "patches": units(0.999, seed=seed + 3)}
    return chapter.SeedChecks(
        seed, cut, 0.8, {}, {"trained": trained, "untrained": untrained,
                             "untrained, no skip": {"cls": untrained["cls"],
                                                    "patches": units(0.95, seed=seed + 4)}},
        {"intra": {1: np.array([0.78, 0.79])}, "inter": {1: np.array([0.3, 0.4])}},
        PhaseExcess(3, cut, cut, 0.05, 0.04, 0.06, 0.95, 1.0, Rank(1, 21)))


def _versus(seed: int, maxcut_acc: float) -> chapter.SeedVersus:
    """One seed's max-cut vs random partitions and overfitting run; its phases have block
    excess."""
    r2, acc = snapshots([0.96, 0.95, 0.93, 0.91], [0.7, 0.72, 0.70, 0.66])
    raptors = np.stack([units(a, seed=seed + i)
                        for i, a in enumerate([maxcut_acc, 0.7, 0.72, 0.71])])
    return chapter.SeedVersus(seed, {}, {3: raptors}, {}, {3: _checks(seed, 0.98).excess},
                              np.array(STEPS), np.array([1.0, 0.5, 0.6, 0.7]), np.zeros(4),
                              {**r2, "acc": acc})


def test_claims_judge_controls_and_swaps_on_every_seed() -> None:
    """C4, C9 and C10 are judged on every seed and combined by ``across_seeds``' binomial test:
    one seed of three whose untrained teacher is reconstructed worse than its trained one is
    outvoted (2 holds: P ≈ 0.002; 1 fails: P ≈ 0.07), two of three make C9 fail, and only C9."""
    result = chapter.Result(chapter.Spec(), SIZES, [_versus(0, 0.8)],
                            [_checks(0, 0.98), _checks(10, 0.98), _checks(20, 0.98)])
    claims = {c.id: c for c in chapter.claims(result)}
    assert [claims[i].verdict for i in ("C4", "C9", "C10")] == [HOLDS, HOLDS, HOLDS]
    assert "(per seed: 0 holds, 10 holds, 20 holds)" in claims["C9"].ours
    # per seed: C4 one intra and one inter setting, C9 cls and patches, C10 one drop
    assert [claims[i].tests for i in ("C4", "C9", "C10")] == [6, 6, 3]
    assert claims["C3"].verdict == HOLDS  # 0.8 against 0.70–0.72: many σ, whatever the draw
    assert claims["C3"].detail.endswith("one teacher seed (versus_seeds = 1: at cpu the "
                                        "artifact tier cannot hold another seed's models under "
                                        "its 64 MB)")
    result.seeds[1] = _checks(10, 0.90)
    claims = {c.id: c for c in chapter.claims(result)}
    assert [claims[i].verdict for i in ("C4", "C9", "C10")] == [HOLDS, HOLDS, HOLDS]
    assert "(per seed: 0 holds, 10 does not hold, 20 holds)" in claims["C9"].ours
    assert "2 hold (P = 0.0018), 1 do not (P = 0.073)" in claims["C9"].detail
    result.seeds[2] = _checks(20, 0.90)
    claims = {c.id: c for c in chapter.claims(result)}
    assert [claims[i].verdict for i in ("C4", "C9", "C10")] == [HOLDS, FAILS, HOLDS]
    assert "(per seed: 0 holds, 10 does not hold, 20 does not hold)" in claims["C9"].ours


def test_claims_judge_c3_and_c11_on_every_versus_seed() -> None:
    """With ``versus_seeds`` seeds, C3 and C11 are judged on each and combined by
    ``across_seeds``' binomial test: of two seeds, one whose max-cut Raptor is no better than the
    random ones leaves C3 inconclusive (1 of 2 either way: P ≈ 0.049 < 0.05), two make it fail;
    C11 keeps its verdict."""
    spec = dataclasses.replace(chapter.Spec(), versus_seeds=2)
    checks = [_checks(0, 0.98), _checks(10, 0.98), _checks(20, 0.98)]
    result = chapter.Result(spec, SIZES, [_versus(0, 0.8), _versus(10, 0.8)], checks)
    claims = {c.id: c for c in chapter.claims(result)}
    assert claims["C3"].verdict == HOLDS and "(per seed: 0 holds, 10 holds)" in claims["C3"].ours
    assert "combined over 2 seeds" in claims["C3"].detail and "one teacher seed" not in \
        claims["C3"].detail
    c11 = claims["C11"].verdict
    result.versus[1] = _versus(10, 0.6)
    claims = {c.id: c for c in chapter.claims(result)}
    assert claims["C3"].verdict == INCONCLUSIVE
    assert "(per seed: 0 holds, 10 does not hold)" in claims["C3"].ours
    assert claims["C11"].verdict == c11 and "(per seed: 0 " in claims["C11"].ours
    result.versus[0] = _versus(0, 0.6)
    claims = {c.id: c for c in chapter.claims(result)}
    assert claims["C3"].verdict == FAILS
    assert "(per seed: 0 does not hold, 10 does not hold)" in claims["C3"].ours


def test_evaluate_gives_head_accuracy_of_each_unit(tiny_teacher) -> None:
    """One pass over the images (two batches) gives what scoring each unit of
    ``UNIT_IMAGES`` on its own does (the oracle)."""
    model, student = tiny_teacher(), tiny_teacher(seed=1)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(263, 1, 16, 16, generator=g), torch.randint(0, 10, (263,), generator=g)
    w = walk((model, {}), (x, y), device="cpu")
    acc, r2 = chapter._evaluate(student, w, "cpu")
    units = batched(x, y, chapter.UNIT_IMAGES)
    assert len(w.batches()) == 2 and len(units) == 6
    assert acc.tolist() == [head_accuracy(student, [u]) for u in units]
    assert set(r2) == set(chapter.GROUPS)


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_result(smoke_result) -> None:
    result = smoke_result(chapter.NAME)
    spec = chapter.SMOKE
    (run,) = result.versus
    assert list(run.partitions) == list(spec.k_values)
    for k, parts in run.partitions.items():
        assert len(parts) == len(set(parts)) == 1 + spec.n_random  # the max-cut, then others
        assert run.student_units[k].shape == (len(parts), len(result.unit_sizes))
        assert result.student_acc(k).shape == (len(parts),)
        assert 0 <= result.student_acc(k).min() and result.student_acc(k).max() <= 1
        assert all(run.student_r2[k][g].shape == (len(parts),) for g in chapter.GROUPS)
    (checks,) = result.seeds
    assert checks.seed == run.seed == spec.seeds[0]
    assert checks.partition == run.partitions[spec.control_k][0]
    assert set(checks.controls) == {"trained", "untrained", "untrained, no skip"}
    assert checks.controls["trained"]["cls"] == run.student_r2[spec.control_k]["cls"][0]
    assert result.snapshot_r2()["cls"].shape == (len(spec.overfit_snapshots),)
    assert set(spec.overfit_snapshots) <= set(run.val_steps.tolist())
    assert 0 <= checks.teacher_acc <= 1
    assert len(chapter.versus_table(result)) == len(spec.k_values) * (1 + spec.n_random)


@pytest.mark.slow
def test_versus_seeds_give_each_seed_its_own_partitions_and_overfitting_run(
        smoke_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``versus_seeds = 2`` the second seed's teacher gets its own max-cut, random
    partitions, overfitting run and snapshots; the first seed's are those of ``versus_seeds = 1``
    (the smoke run's, from the shared cache)."""
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    spec = dataclasses.replace(chapter.SMOKE, seeds=(0, 1), versus_seeds=2, swap_counts=(1,),
                               max_swap_sets=1)
    result = chapter.compute(spec)
    first, second = result.versus
    assert (first.seed, second.seed) == (0, 1) and [c.seed for c in result.seeds] == [0, 1]
    assert second.partitions[2][0] == result.seeds[1].partition  # its own max-cut
    assert not np.array_equal(first.val_loss, second.val_loss)  # its own overfitting run
    alone = chapter.compute(dataclasses.replace(spec, versus_seeds=1))
    (only,) = alone.versus
    assert only.partitions == first.partitions
    np.testing.assert_array_equal(only.student_units[2], first.student_units[2])
    assert chapter.snapshots_table(result).index.get_level_values("seed").unique().tolist() \
        == [0, 1]
    claims = {c.id: c for c in chapter.claims(result)}
    assert "(per seed: 0 " in claims["C3"].ours and ", 1 " in claims["C3"].ours
