"""The functional-phases chapter: its claims on known inputs, the result of a smoke run."""

import dataclasses

import numpy as np
import pytest
import torch

from raptor.book.chapters import functional_phases as chapter
from raptor.book.chapters import functional_phases_claims as judge
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE
from raptor.book.engine import ENGINE
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


def test_c3_is_judged_over_seeds() -> None:
    held = judge.c3_maxcut_beats_random({2: [1.5, 1.6, 1.7], 3: [2.0, 2.2, 2.1]},
                                        counts={2: 6, 3: 10}, rests_on="C1: weak phases")
    assert held.verdict == HOLDS and held.tests == 2 and held.rests_on == "C1: weak phases"
    assert held.ours.startswith("The k=2 max-cut Raptor's margin over random partitions (σ) is "
                                "+1.6, above +1.0")
    assert held.detail.startswith("random contiguous partitions other than the max-cut, each "
                                  "once: k=2: 6, k=3: 10; the margin in σ")
    failed = judge.c3_maxcut_beats_random({3: [-0.8, -0.6, -0.9]}, counts={3: 10})
    assert failed.verdict == FAILS
    # the stored cpu seeds: at k=2 (-0.7 / +2.8 / +0.3 σ) too spread to tell, at k=3 (+0.2 /
    # -0.1 / -0.2 σ) wholly below 1σ even at the Bonferroni level: it does not hold
    cpu = judge.c3_maxcut_beats_random({2: [-0.7, 2.8, 0.3], 3: [0.2, -0.1, -0.2]},
                                       counts={2: 10, 3: 10})
    assert cpu.verdict == FAILS
    assert "k=2 +0.8 [-3.7, +5.3]" in cpu.detail and "k=3 -0.0 [-0.6, +0.5]" in cpu.detail
    # no σ on some seed, or one seed: not testable
    assert judge.c3_maxcut_beats_random({2: [1.5, float("nan")]}, counts={2: 2}).verdict \
        == UNTESTABLE
    assert judge.c3_maxcut_beats_random({2: [3.0]}, counts={2: 6}).verdict == UNTESTABLE


def test_maxcut_margin_is_on_the_accuracies_over_all_images() -> None:
    rng = np.random.default_rng(0)
    sizes = np.r_[np.full(19, 50.0), 20.0]
    units = rng.uniform(0.6, 0.9, (6, 20))
    acc = (units * sizes).sum(axis=1) / sizes.sum()
    assert judge.maxcut_margin(units, sizes) == pytest.approx(judge.margin(acc[0], acc[1:]))


def test_retained_interval_is_paired_over_units() -> None:
    rng = np.random.default_rng(0)
    sizes = np.full(20, 50.0)
    teacher = 0.8 + rng.normal(0, 0.06, 20)  # units differ in difficulty
    copies = np.stack([0.9 * teacher, 0.7 * teacher])  # each copy keeps a share on every unit
    iv = judge.retained_interval(copies, teacher, sizes)
    assert iv.estimate == pytest.approx(0.8)
    # the units' difficulty is shared by teacher and copies: it moves no share, a point interval
    assert iv.high - iv.low == pytest.approx(0.0, abs=1e-9)
    noisy = judge.retained_interval(copies + rng.normal(0, 0.03, copies.shape), teacher, sizes)
    assert noisy.low < noisy.estimate < noisy.high
    assert np.isnan(judge.retained_interval(copies, 0 * teacher, sizes).estimate)


def test_c4_swaps() -> None:
    held = judge.c4_swaps({1: _iv(0.95, 0.93, 0.97), 2: _iv(0.92, 0.91, 0.94)},
                          {1: _iv(0.3, 0.25, 0.35), 2: _iv(0.5, 0.45, 0.55)})
    assert held.verdict == HOLDS and held.tests == 4
    assert held.ours == ("share of teacher accuracy kept: intra 1 layer 95% [93%, 97%], 2 layers "
                         "92% [91%, 94%]; inter 1 layer 30% [25%, 35%], 2 layers 50% [45%, 55%]")
    assert held.detail.startswith("holds if, for every number of layers swapped, intra swaps "
                                  "keep > 90% and inter swaps < 60% of the teacher's accuracy")
    # inter swaps that keep 78% and more, clear of 60%: does not hold, whatever intra does
    failed = judge.c4_swaps({1: _iv(0.89, 0.86, 0.92)}, {1: _iv(0.78, 0.75, 0.81)})
    assert failed.verdict == FAILS
    # an intra share whose interval spans 90%, every other part holding: inconclusive
    assert judge.c4_swaps({1: _iv(0.91, 0.88, 0.93)},
                          {1: _iv(0.3, 0.25, 0.35)}).verdict == INCONCLUSIVE
    assert judge.c4_swaps({}, {1: _iv(0.5, 0.4, 0.6)}).verdict == UNTESTABLE
    nan = float("nan")
    assert judge.c4_swaps({1: _iv(nan, nan, nan)}, {1: _iv(0.3, 0.2, 0.4)}).verdict == UNTESTABLE


def _swap_units(keep: float, flip: float, sets: int, rng: np.random.Generator,
                teacher: np.ndarray) -> np.ndarray:
    """Per unit (50 images) accuracy of ``sets`` swapped copies: each image's correctness is the
    teacher's, redrawn (correct with chance ``keep`` × the teacher's accuracy) on a share ``flip``
    of the images."""
    redraw = rng.random((sets, *teacher.shape)) < flip
    fresh = rng.random((sets, *teacher.shape)) < keep * teacher.mean()
    return np.where(redraw, fresh, teacher).reshape(sets, 20, 50).mean(axis=2)


def test_c4_power_at_the_cpu_profile() -> None:
    """C4 can hold at the cpu profile's n (1,000 images in 20 units, 20 swap sets for each of 1,
    2, 3 layers): intra copies that redraw 10% of the images at the teacher's accuracy, inter
    copies that redraw 90% at 30% of it; with no difference between the kinds (inter copies
    as good as intra ones) it does not hold."""
    rng = np.random.default_rng(0)
    teacher = rng.random(1000) < 0.8
    t_units = teacher.reshape(20, 50).mean(axis=1)

    def shares(keep: float, flip: float) -> dict[int, Interval]:
        return {n: judge.retained_interval(_swap_units(keep, flip, 20, rng, teacher),
                                           t_units, SIZES) for n in (1, 2, 3)}

    intra = shares(1.0, 0.1)
    assert judge.c4_swaps(intra, shares(0.3, 0.9)).verdict == HOLDS
    assert judge.c4_swaps(intra, intra).verdict == FAILS


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
                                            snapshot_steps=(50, 150, 300, 600), eval_every=50,
                                            patience=None)


def _run(seed: int, *, untrained_cls: float = 0.98, maxcut_acc: float = 0.8) -> chapter.SeedRun:
    """One seed's max-cut vs random partitions, controls, swaps and overfitting run; its phases
    have block excess (C1 holds)."""
    cut = ((0, 2), (2, 5), (5, 8))
    trained = {"cls": units(0.957, seed=seed), "patches": units(0.98, seed=seed + 1),
               "acc": units(0.8, seed=seed + 5)}
    untrained = {"cls": units(untrained_cls, seed=seed + 2),
                 "patches": units(0.999, seed=seed + 3)}
    teacher = trained["acc"]
    raptors = np.stack([units(a, seed=seed + i)
                        for i, a in enumerate([maxcut_acc, 0.7, 0.72, 0.71])])
    r2, acc = snapshots([0.96, 0.95, 0.93, 0.91], [0.7, 0.72, 0.70, 0.66])
    return chapter.SeedRun(
        seed, {}, {3: raptors}, {},
        {3: PhaseExcess(3, cut, cut, 0.05, 0.04, 0.06, 0.95, 1.0, Rank(1, 21))}, 0.8,
        {"trained": trained, "untrained": untrained,
         "untrained, no skip": {"cls": untrained["cls"], "patches": units(0.95, seed=seed + 4)}},
        {"intra": {1: np.stack([teacher - 0.02, teacher - 0.01])},
         "inter": {1: np.stack([units(0.3, seed=seed + 6), units(0.4, seed=seed + 7)])}},
        {"step": np.array(STEPS), "loss": np.array([1.0, 0.5, 0.6, 0.7]), "acc": np.zeros(4)},
        {**r2, "acc": acc})


def test_claims_judge_controls_and_swaps_on_every_seed() -> None:
    """C4, C9 and C10 are judged on every seed and combined by ``across_seeds``' binomial test:
    one seed of three whose untrained teacher is reconstructed worse than its trained one is
    outvoted (2 holds: P ≈ 0.002; 1 fails: P ≈ 0.07), two of three make C9 fail, and only C9."""
    result = chapter.Result(chapter.Spec(), SIZES, [_run(s) for s in (0, 10, 20)])
    claims = {c.id: c for c in chapter.claims(result)}
    assert [claims[i].verdict for i in ("C4", "C9", "C10")] == [HOLDS, HOLDS, HOLDS]
    assert "(per seed: 0 holds, 10 holds, 20 holds)" in claims["C9"].ours
    # per seed: C4 one intra and one inter setting, C9 cls and patches, C10 one drop
    assert [claims[i].tests for i in ("C4", "C9", "C10")] == [6, 6, 3]
    assert claims["C3"].verdict == HOLDS  # 0.8 against 0.70–0.72: many σ, whatever the draw
    assert ENGINE in claims["C3"].detail and claims["C3"].rests_on.startswith("C1: ")
    result.seeds[1] = _run(10, untrained_cls=0.90)
    claims = {c.id: c for c in chapter.claims(result)}
    assert [claims[i].verdict for i in ("C4", "C9", "C10")] == [HOLDS, HOLDS, HOLDS]
    assert "(per seed: 0 holds, 10 does not hold, 20 holds)" in claims["C9"].ours
    assert "2 hold (P = 0.0018), 1 does not (P = 0.073)" in claims["C9"].detail
    result.seeds[2] = _run(20, untrained_cls=0.90)
    claims = {c.id: c for c in chapter.claims(result)}
    assert [claims[i].verdict for i in ("C4", "C9", "C10")] == [HOLDS, FAILS, HOLDS]
    assert "(per seed: 0 holds, 10 does not hold, 20 does not hold)" in claims["C9"].ours


def test_claims_judge_c3_over_seeds_and_c11_on_every_seed() -> None:
    """C3 is declared over the seeds (a t interval over their margins): of two seeds, one whose
    max-cut Raptor is no better than the random ones leaves it inconclusive, two make it fail;
    C11 is judged on each seed and keeps its verdict."""
    result = chapter.Result(chapter.Spec(), SIZES, [_run(0), _run(10)])
    claims = {c.id: c for c in chapter.claims(result)}
    assert claims["C3"].verdict == HOLDS and "(per seed " in claims["C3"].detail
    c11 = claims["C11"].verdict
    result.seeds[1] = _run(10, maxcut_acc=0.6)
    claims = {c.id: c for c in chapter.claims(result)}
    assert claims["C3"].verdict == INCONCLUSIVE
    assert claims["C11"].verdict == c11 and "(per seed: 0 " in claims["C11"].ours
    result.seeds[0] = _run(0, maxcut_acc=0.6)
    claims = {c.id: c for c in chapter.claims(result)}
    assert claims["C3"].verdict == FAILS


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
    (run,) = result.seeds
    assert run.seed == spec.seeds[0]
    assert list(run.partitions) == list(spec.k_values)
    for k, parts in run.partitions.items():
        assert len(parts) == len(set(parts)) == 1 + spec.n_random  # the max-cut, then others
        assert run.student_units[k].shape == (len(parts), len(result.unit_sizes))
        acc = result.pooled(run.student_units[k])
        assert acc.shape == (len(parts),) and 0 <= acc.min() and acc.max() <= 1
        assert all(run.student_r2[k][g].shape == (len(parts),) for g in chapter.GROUPS)
    assert set(run.control_units) == {"trained", "untrained", "untrained, no skip"}
    assert run.snapshot_units["cls"].shape == (len(spec.overfit_snapshots),
                                               len(result.unit_sizes))
    assert set(spec.overfit_snapshots) <= set(run.val["step"].tolist())
    assert 0 <= run.teacher_acc <= 1
    # C4's units: the teacher's accuracy per unit adds up to its accuracy on all the images
    assert result.pooled(run.control_units["trained"]["acc"]) == pytest.approx(run.teacher_acc)
    for by_n in run.swap_units.values():
        for u in by_n.values():
            assert u.shape[1] == len(result.unit_sizes)
    assert len(chapter.versus_table(result)) == len(spec.k_values) * (1 + spec.n_random)
    controls = chapter.controls_table(result).loc[run.seed]
    assert controls.loc["trained", "cls"] == run.student_r2[spec.control_k]["cls"][0]


@pytest.mark.slow
def test_every_seed_gets_its_own_partitions_and_overfitting_run(
        smoke_cache, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second seed's teacher gets its own max-cut, random partitions, overfitting run and
    snapshots; the first seed's are those of a run on it alone (the smoke run's, from the shared
    cache)."""
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    spec = dataclasses.replace(chapter.SMOKE, seeds=(0, 1), swap_counts=(1,), max_swap_sets=1)
    result = chapter.compute(spec)
    first, second = result.seeds
    assert (first.seed, second.seed) == (0, 1)
    assert not np.array_equal(first.val["loss"], second.val["loss"])  # its own overfitting run
    alone = chapter.compute(dataclasses.replace(spec, seeds=(0,)))
    (only,) = alone.seeds
    assert only.partitions == first.partitions
    np.testing.assert_array_equal(only.student_units[2], first.student_units[2])
    assert chapter.snapshots_table(result).index.get_level_values("seed").unique().tolist() \
        == [0, 1]
    claims = {c.id: c for c in chapter.claims(result)}
    assert "(per seed: 0 " in claims["C4"].ours and ", 1 " in claims["C4"].ours
    assert claims["C3"].tests == len(spec.k_values) and "(per seed " in claims["C3"].detail


# --- power: each claim can hold at the cpu profile's n (1,000 images in 20 units of 50) ------

def _raptor_units(means: np.ndarray, seed: int) -> np.ndarray:
    """Per unit accuracy of Raptors with these mean accuracies on the same images: a difficulty
    shared by every Raptor on a unit (sd 0.06, about binomial at 50 images) and each Raptor's own
    noise (sd 0.03)."""
    rng = np.random.default_rng(seed)
    return means[:, None] + rng.normal(0, 0.06, (1, 20)) + rng.normal(0, 0.03, (len(means), 20))


def test_c3_power_at_the_cpu_profile() -> None:
    """With 6 (k = 2) and 10 (k = 3) random partitions, as at cpu, and three seeds, each with
    its own random partitions: a max-cut 5σ of the random partitions' spread above their mean
    holds; one at their mean does not."""
    def c3(sigmas: float) -> str:
        margins = {}
        for k, count in ((2, 6), (3, 10)):
            margins[k] = []
            for seed in range(3):
                rng = np.random.default_rng(10 * k + seed)
                random = 0.7 + rng.normal(0, 0.02, count)
                maxcut = random.mean() + sigmas * random.std(ddof=1)
                units = _raptor_units(np.r_[maxcut, random], seed=seed)
                margins[k].append(judge.maxcut_margin(units, SIZES))
        return judge.c3_maxcut_beats_random(margins, counts={2: 6, 3: 10}).verdict

    assert c3(5.0) == HOLDS
    assert c3(0.0) != HOLDS


def test_c9_c10_c11_power_at_the_cpu_profile() -> None:
    """On 20 units with the per-unit spread the cpu book measured (R² sd 0.01, accuracy 0.035),
    C9, C10 and C11 hold when the effect is there and do not when it is not."""
    r2 = {"cls": units(0.96, 0.01), "patches": units(0.98, 0.01, seed=1)}
    easier = {"cls": units(0.98, 0.01, seed=2), "patches": units(0.995, 0.01, seed=3)}
    assert judge.c9_untrained_easier(easier, r2, SIZES).verdict == HOLDS
    same = {g: units(v.mean(), 0.01, seed=4 + i) for i, (g, v) in enumerate(r2.items())}
    assert judge.c9_untrained_easier(same, r2, SIZES).verdict != HOLDS
    assert judge.c10_skip_removal(units(0.999, 0.01), units(0.97, 0.01, seed=1),
                                  SIZES).verdict == HOLDS
    assert judge.c10_skip_removal(units(0.999, 0.01), units(0.75, 0.01, seed=1),
                                  SIZES).verdict == FAILS
    high, acc = snapshots([0.97, 0.96, 0.93, 0.92], [0.7, 0.72, 0.70, 0.66], sd=0.01)
    acc = np.array([units(a, 0.035, seed=30 + i) for i, a in enumerate([0.7, 0.72, 0.7, 0.66])])
    assert judge.c11_overfitting(150, STEPS, high, acc, SIZES).verdict == HOLDS
    flat = np.array([units(0.72, 0.035, seed=40 + i) for i in range(4)])
    steady, _ = snapshots([0.97, 0.96, 0.96, 0.96], [0.7] * 4, sd=0.01)
    assert judge.c11_overfitting(150, STEPS, steady, flat, SIZES).verdict != HOLDS
