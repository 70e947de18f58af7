"""The scaling chapter: its claims on known inputs, Tables 1–2, a smoke run with pipeline
results."""

import dataclasses
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np
import pytest

from raptor import paper
from raptor.book.chapters import scaling as chapter
from raptor.book.chapters.scaling import claims, compute, figures
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE, Claim
from raptor.book.engine import ENGINE

# The paper's Table 2 (the ladder), as fractions.
PAPER_RUNGS = [v / 100 for v in paper.TABLE2.values()]


# --- claims on synthetic inputs --------------------------------------------------------------

def dinov2_results(k: int, raptor: float, teacher: float = 84.5) -> dict:
    """A results.json of raptor.dinov2.pipeline with both IN-1k rows (%)."""
    model = "vit_base_patch14_reg4_dinov2.lvd142m"
    return {"model": model, "k": k, "table1": {f"Raptor k={k} (this run)": {"IN-1k": raptor},
                                               f"{model} (this run)": {"IN-1k": teacher}}}


def test_c12_is_untestable_at_cpu_and_shows_head_and_probe() -> None:
    c = claims.c12_share_of_teacher({2: [95.4], 3: [96.0]},
                                    {2: [97.86], 3: [99.12], 4: [100.0]},
                                    dataset="fashion-mnist", profile="cpu")
    assert c.verdict == UNTESTABLE and c.paper == ("k=2 ≈ 96%, k=3 ≈ 98% of DINOv2-B (IN-1k, "
                                                   "Table 1)")
    assert c.ours == ("fashion-mnist analogue (not the claim): head k=2 95.4%, k=3 96.0%; "
                      "probe k=2 97.9%, k=3 99.1%, k=4 100.0% of the teacher")
    assert "not run at cpu" in c.detail and "1 teacher seed(s)" in c.detail
    # Over seeds: the mean, and the seeds' range.
    seeds = claims.c12_share_of_teacher({2: [94.0, 96.0, 95.0]}, {2: [97.0, 99.0, 98.0]},
                                        dataset="fashion-mnist", profile="cpu")
    assert seeds.verdict == UNTESTABLE and seeds.ours == (
        "fashion-mnist analogue (not the claim): head k=2 95.0% (94.0–96.0); "
        "probe k=2 98.0% (97.0–99.0) of the teacher")
    assert "3 teacher seed(s)" in seeds.detail
    # Pipeline results with only one k stay untestable.
    one = claims.pipeline_shares([dinov2_results(2, 81.2)])
    assert claims.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper",
                                       dinov2=one).verdict == UNTESTABLE


def test_c12_on_dinov2_pipeline_results_both_ways() -> None:
    # The paper's own numbers hold (81.2 / 84.5 = 96.1%, 83.0 / 84.5 = 98.2%) ...
    own = claims.pipeline_shares([dinov2_results(2, 81.2), dinov2_results(3, 83.0)])
    assert own[2].estimate == pytest.approx(100 * 81.2 / 84.5)
    assert own[2].low < own[2].estimate < own[2].high
    held = claims.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper", dinov2=own)
    assert held.verdict == HOLDS
    assert held.ours.startswith("Raptor k=2's share of DINOv2-B's IN-1k top-1 (%) is 96.1, above "
                                "95.5")
    assert "k=2 96.1 [" in held.detail and "one given model" in held.detail
    # ... 78.0 / 84.5 = 92.3% does not, and 80.7 / 84.5 = 95.5% sits on the threshold.
    low = claims.pipeline_shares([dinov2_results(2, 78.0), dinov2_results(3, 83.0)])
    assert claims.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper",
                                       dinov2=low).verdict == FAILS
    edge = claims.pipeline_shares([dinov2_results(2, 80.7), dinov2_results(3, 83.0)])
    assert claims.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper",
                                       dinov2=edge).verdict == INCONCLUSIVE


def nested(n: int, *accs: float) -> list[np.ndarray]:
    """Per-image correctness on ``n`` images of models right on nested sets of images (a model
    is right wherever a less accurate one is): the strongest pairing."""
    return [np.arange(n) < round(a * n) for a in accs]


def by_k(*correct: np.ndarray) -> dict[int, np.ndarray]:
    return dict(zip((2, 3, 4), correct))


def seeds(*per_seed: tuple[float, float, float], n: int = 1000) -> list[dict[int, np.ndarray]]:
    """Per seed, the k = 2, 3, 4 probes' correctness at those accuracies (nested) on ``n``
    images."""
    return [by_k(*nested(n, *accs)) for accs in per_seed]


def test_c13_is_judged_over_seeds() -> None:
    # A 5-point rise and a flat k=3 → 4 on three seeds that agree within a fraction of a point
    held = claims.c13_saturates_at_k4(seeds((0.75, 0.80, 0.80), (0.752, 0.801, 0.802),
                                            (0.749, 0.799, 0.797)))
    assert held.verdict == HOLDS and held.tests == 2
    assert held.ours.startswith("The probe accuracy gain from k=2 to k=3 is +5.0%, above +0.0%; "
                                "the gain from k=3 to k=4 is -0.0%, between -1.0% and +1.0%")
    assert "k=2 / 3 / 4 per seed: 75.0% / 80.0% / 80.0%" in held.detail
    # A fall from k=2 to 3 on every seed does not hold; so does a 5-point gain from 3 to 4.
    fall = claims.c13_saturates_at_k4(seeds((0.80, 0.75, 0.75), (0.81, 0.755, 0.755),
                                            (0.79, 0.745, 0.745)))
    assert fall.verdict == FAILS
    gain = seeds((0.75, 0.80, 0.85), (0.752, 0.801, 0.851), (0.749, 0.799, 0.849))
    assert claims.c13_saturates_at_k4(gain).verdict == FAILS
    # The committed cpu run's seeds (rise -0.3 / +0.5 / +0.4, k=3 → 4 +0.2 / +0.1 / -0.1
    # points): the saturation holds, the rise is inconclusive (it would need more seeds).
    cpu = claims.c13_saturates_at_k4(seeds((0.787, 0.784, 0.786), (0.777, 0.782, 0.783),
                                           (0.800, 0.804, 0.803)))
    assert cpu.verdict == INCONCLUSIVE and "80% power only for a true value of" in cpu.detail
    # Seeds spread so widely that even Table 1's 0.2-point change could not fit the ±1-point
    # band: not testable, with the seeds it would need.
    wide = claims.c13_saturates_at_k4(seeds((0.75, 0.80, 0.82), (0.75, 0.80, 0.78),
                                            (0.75, 0.80, 0.80)))
    assert wide.verdict == UNTESTABLE and "it needs" in wide.ours and " seeds)" in wide.ours
    # One seed, or a missing k: not testable.
    assert claims.c13_saturates_at_k4(seeds((0.75, 0.80, 0.80))).verdict == UNTESTABLE
    assert claims.c13_saturates_at_k4([by_k(*nested(1000, 0.7, 0.8))]).verdict == UNTESTABLE
    with pytest.raises(ValueError, match="equal length"):
        claims.c13_saturates_at_k4([by_k(*nested(1000, 0.75, 0.80), *nested(999, 0.8))])


def ladders(*per_seed: list[float], n: int = 1000) -> list[list[np.ndarray]]:
    """Per seed, Table 2's six rungs right on nested sets of ``n`` images at these
    accuracies."""
    return [nested(n, *accs) for accs in per_seed]


def jittered(rungs: list[float], seed: int, sd: float = 0.003) -> list[float]:
    """``rungs`` each moved by a seed's own noise of ``sd``."""
    return list(np.add(rungs, np.random.default_rng(seed).normal(0, sd, len(rungs))))


# The committed cpu book's three ladders (%): TF only keeps most of the full recipe's accuracy.
CPU_LADDERS = [[59.3, 61.2, 62.2, 61.0, 76.2, 78.4], [69.4, 67.2, 70.8, 70.1, 77.1, 78.2],
               [62.9, 66.4, 62.8, 64.3, 79.0, 80.4]]


def test_c14_is_judged_over_seeds() -> None:
    # The paper's own ladder on three seeds, each rung moved by 0.3 points of noise: it holds
    paper_seeds = [jittered(PAPER_RUNGS, s) for s in range(3)]
    c = claims.c14_ladder(ladders(*paper_seeds), k=3)
    assert c.verdict == HOLDS and c.tests == 6
    assert c.ours.startswith("TF only's accuracy as a share of the full recipe's is 4.")
    assert c.paper == ("TF alone collapses (3.9); AR with annealed TF recovers (72.7); each "
                       "later step adds (Table 2)")
    assert c.detail.startswith("k=3; rungs 1–5 through the teacher's head, rung 6 a fresh linear "
                               "probe; accuracy on 1,000 images per seed")
    assert "rung 4→5 +6.3% [" in c.detail and ENGINE in c.detail and "[ours]" in c.detail
    # A rung that loses 5 points on every seed does not hold
    loses = [a[:3] + [a[3] - 0.065] + a[4:] for a in paper_seeds]
    failed = claims.c14_ladder(ladders(*loses), k=3)
    assert failed.verdict == FAILS
    assert "the accuracy rung 4 adds to rung 3 is -5." in failed.ours
    # Seeds that disagree on TF only's collapse (35%, 60%, 50% of the full recipe): inconclusive
    spread = [[r * a[4]] + a[1:] for r, a in zip((0.35, 0.60, 0.50), paper_seeds)]
    assert claims.c14_ladder(ladders(*spread), k=3).verdict == INCONCLUSIVE
    # The committed cpu seeds: TF only keeps 82.5% [66.1, 98.8] of the full recipe, wholly above
    # the 50% of a collapse on its 95% interval (not at the 99.17% Bonferroni level of 6 parts):
    # the verdict follows that interval, inconclusive, and says so; the middle rungs, which move
    # by ±4 points between seeds, are not testable beside it, with the seeds they would need
    cpu = claims.c14_ladder(ladders(*([v / 100 for v in a] for a in CPU_LADDERS)), k=3)
    assert cpu.verdict == INCONCLUSIVE and "(it needs 7 seeds)" in cpu.ours
    assert ("TF only's accuracy as a share of the full recipe's is 82.5%, not below 50.0% on its "
            "95% interval, yet not wholly against it at the 99.17% level that 6 parts need"
            in cpu.ours)
    assert ("TF only collapses 82.5% [66.1%, 98.8%] (per seed 77.8%, 90.0%, 79.6%) vs below "
            "50.0% [ours]: inconclusive (against it on its 95% interval)" in cpu.detail)
    # One seed has no spread between seeds; a full recipe that gets nothing right has no share
    assert claims.c14_ladder(ladders(PAPER_RUNGS), k=3).verdict == UNTESTABLE
    nothing = [a[:4] + [0.0] + a[5:] for a in paper_seeds]
    assert claims.c14_ladder(ladders(*nothing), k=3).verdict == UNTESTABLE
    with pytest.raises(ValueError, match="6 rungs"):
        claims.c14_ladder(ladders(PAPER_RUNGS[:5]), k=3)


def test_table1_is_the_paper_table() -> None:
    t = figures.table1()
    assert list(t.index) == ["Raptor k=2", "Raptor k=3", "Raptor k=4", "DINOv2 ViT-S",
                             "DINOv2 ViT-B"]
    assert list(t.columns) == ["IN-1k top-1", "ADE20k mIoU", "NYUv2 RMSE"]
    assert t.loc["Raptor k=2", "NYUv2 RMSE"] == "0.648 ± 0.003"
    assert t.loc["DINOv2 ViT-S", "NYUv2 RMSE"] == "0.600"
    assert t.loc["Raptor k=4", "IN-1k top-1"] == "83.2 ± 0.1"


def test_claims_of_a_run_like_the_committed_cpu_run() -> None:
    """The committed book's accuracies (n/1000 on 1,000 images), nested per image, give its
    claims."""
    rungs = [*compute.LADDER, compute.PROBE_RUNG]
    ladder = dict(zip(rungs, nested(1000, 0.664, 0.704, 0.709, 0.710, 0.771, 0.787)))
    run = compute.SeedRun(0, {}, 0.806, 0.794, {2: 0.769, 3: 0.771, 4: 0.788},
                          by_k(*nested(1000, 0.777, 0.787, 0.794)), {}, ladder)
    assert run.probe_acc == {2: 0.777, 3: 0.787, 4: 0.794}
    assert run.ladder_correct[compute.PROBE_RUNG].mean() == 0.787
    result = compute.Result(dataclasses.replace(chapter.Spec(), seeds=(0,)), [run], [])
    c12, c13, c14 = claims.claims(result)
    assert c12.verdict == UNTESTABLE and "head k=2 95.4%, k=3 95.7%, k=4 97.8%" in c12.ours
    assert (c13.verdict, c14.verdict) == (UNTESTABLE, UNTESTABLE)  # one seed has no spread
    # sub-tests: C13 the rise and the saturation; C14 collapse, recovery, 4 later steps
    assert (c13.tests, c14.tests) == (2, 6)
    # On three seeds, C13 is judged on the seeds' gains (a t interval over them)
    falls = seeds((0.70, 0.80, 0.70), (0.71, 0.80, 0.71), (0.70, 0.81, 0.70))
    three = compute.Result(chapter.Spec(), [dataclasses.replace(run, seed=s, probe_correct=f)
                                            for s, f in enumerate(falls)], [])
    c13 = claims.claims(three)[1]
    assert c13.verdict == FAILS and c13.tests == 2
    # and C14 on the seeds' ladders: the paper's holds, one whose TF only keeps 86% of the full
    # recipe on every seed does not
    runs = [dataclasses.replace(run, seed=s, ladder_correct=dict(zip(rungs, c)))
            for s, c in enumerate(ladders(*(jittered(PAPER_RUNGS, s) for s in range(3))))]
    c14 = claims.claims(compute.Result(chapter.Spec(), runs, []))[2]
    assert c14.verdict == HOLDS and ENGINE in c14.detail
    runs = [dataclasses.replace(r, ladder_correct={**r.ladder_correct,
                                                   "TF only": ladder["TF only"]}) for r in runs]
    assert claims.claims(compute.Result(chapter.Spec(), runs, []))[2].verdict == FAILS


# --- pipeline results -----------------------------------------------------------------------

def test_missing_pipeline_results_fail_before_any_work(tmp_path: Path) -> None:
    spec = dataclasses.replace(chapter.SMOKE, pipeline_results=(str(tmp_path / "none.json"),))
    with pytest.raises(FileNotFoundError, match="none.json"):
        compute.compute(spec)


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_compute(smoke_cache: Path, tmp_path: Path) -> None:
    # A results.json as raptor.dinov2.pipeline writes it (nested, with nulls).
    results = {"model": "vit_base_patch14_reg4_dinov2.lvd142m", "k": 3, "repeats": [7, 3, 2],
               "table1": {"Raptor k=3 (this run)": {"IN-1k": 82.9}},
               "paper_table1": {"Raptor k=3": {"IN-1k": {"mean": 83.0, "sd": 0.1}},
                                "DINOv2 ViT-B": {"IN-1k": {"mean": 84.5, "sd": None}}},
               "steps_done": ["stage1", "stage2"]}
    (tmp_path / "results.json").write_text(json.dumps(results))
    spec = dataclasses.replace(chapter.SMOKE, pipeline_results=(str(tmp_path / "results.json"),))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAPTOR_CACHE", str(smoke_cache))
        result = compute.compute(spec)
    assert result.pipeline == [results]
    (run,) = result.runs
    assert run.seed == spec.seeds[0] and list(run.partitions) == list(spec.k_values)
    assert all(len(run.partitions[k]) == k for k in spec.k_values)
    assert list(run.ladder_correct) == [*compute.LADDER, compute.PROBE_RUNG]
    assert run.ladder_correct[compute.PROBE_RUNG] is run.probe_correct[spec.ladder_k]
    L = spec.teacher.depth
    assert all(run.cosine[k]["cls"].shape == (L + 1,) for k in spec.k_values)
    table = figures.run_table(result)
    assert table.loc[(run.seed, f"teacher (L={L})"), "probe, % of teacher"] == 100
    assert all(c.dtype == bool and len(c) == spec.n_images for c in run.ladder_correct.values())
    assert figures.SHARE_COSINE(result).axes
    checks = claims.claims(result, profile="smoke")
    assert [c.id for c in checks] == ["C12", "C13", "C14"]
    assert all(isinstance(c, Claim) for c in checks)
    assert checks[0].verdict == UNTESTABLE and "not run at smoke" in checks[0].detail
    assert len(figures.ladder_table(result)) == len(paper.TABLE2)
    plt.close(figures.SHARE_COSINE(result))

