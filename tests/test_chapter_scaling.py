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
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE, Claim
from raptor.book.result import load, save

# The paper's Table 2 (the ladder), as fractions.
PAPER_RUNGS = [v / 100 for v in paper.TABLE2.values()]


# --- claims on synthetic inputs --------------------------------------------------------------

def dinov2_results(k: int, raptor: float, teacher: float = 84.5) -> dict:
    """A results.json of raptor.dinov2.pipeline with both IN-1k rows (%)."""
    model = "vit_base_patch14_reg4_dinov2.lvd142m"
    return {"model": model, "k": k, "table1": {f"Raptor k={k} (this run)": {"IN-1k": raptor},
                                               f"{model} (this run)": {"IN-1k": teacher}}}


def test_c12_is_untestable_at_cpu_and_shows_head_and_probe() -> None:
    c = chapter.c12_share_of_teacher({2: [95.4], 3: [96.0]},
                                     {2: [97.86], 3: [99.12], 4: [100.0]},
                                     dataset="fashion-mnist", profile="cpu")
    assert c.verdict == UNTESTABLE and c.paper == ("k=2 ≈ 96%, k=3 ≈ 98% of DINOv2-B (IN-1k, "
                                                   "Table 1)")
    assert c.ours == ("fashion-mnist analogue (not the claim): head k=2 95.4%, k=3 96.0%; "
                      "probe k=2 97.9%, k=3 99.1%, k=4 100.0% of the teacher")
    assert "not run at cpu" in c.detail and "1 teacher seed(s)" in c.detail
    # Over seeds: the mean, and the seeds' range.
    seeds = chapter.c12_share_of_teacher({2: [94.0, 96.0, 95.0]}, {2: [97.0, 99.0, 98.0]},
                                         dataset="fashion-mnist", profile="cpu")
    assert seeds.verdict == UNTESTABLE and seeds.ours == (
        "fashion-mnist analogue (not the claim): head k=2 95.0% (94.0–96.0); "
        "probe k=2 98.0% (97.0–99.0) of the teacher")
    assert "3 teacher seed(s)" in seeds.detail
    # Pipeline results with only one k stay untestable.
    one = chapter.pipeline_shares([dinov2_results(2, 81.2)])
    assert chapter.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper",
                                        dinov2=one).verdict == UNTESTABLE


def test_c12_on_dinov2_pipeline_results_both_ways() -> None:
    # The paper's own numbers hold (81.2 / 84.5 = 96.1%, 83.0 / 84.5 = 98.2%) ...
    own = chapter.pipeline_shares([dinov2_results(2, 81.2), dinov2_results(3, 83.0)])
    assert own[2].estimate == pytest.approx(100 * 81.2 / 84.5)
    assert own[2].low < own[2].estimate < own[2].high
    held = chapter.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper", dinov2=own)
    assert held.verdict == HOLDS and held.ours.startswith("k=2: 96.1% [")
    # ... 78.0 / 84.5 = 92.3% does not, and 80.7 / 84.5 = 95.5% sits on the threshold.
    low = chapter.pipeline_shares([dinov2_results(2, 78.0), dinov2_results(3, 83.0)])
    assert chapter.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper",
                                        dinov2=low).verdict == FAILS
    edge = chapter.pipeline_shares([dinov2_results(2, 80.7), dinov2_results(3, 83.0)])
    assert chapter.c12_share_of_teacher({}, {}, dataset="imagenet", profile="paper",
                                        dinov2=edge).verdict == INCONCLUSIVE


def test_c13_judged_against_intervals() -> None:
    # On 20,000 images the intervals are ±0.6 points: a 3-point rise and a 0.2-point change hold.
    assert chapter.c13_saturates_at_k4({2: 0.80, 3: 0.83, 4: 0.832}, 20_000).verdict == HOLDS
    assert chapter.c13_saturates_at_k4({2: 0.70, 3: 0.80, 4: 0.85}, 20_000).verdict == FAILS
    assert chapter.c13_saturates_at_k4({2: 0.80, 3: 0.70, 4: 0.70}, 20_000).verdict == FAILS
    # The committed cpu numbers on 1,000 images: gaps of < 1 point within ±3.6 points of noise.
    c = chapter.c13_saturates_at_k4({2: 0.781, 3: 0.788, 4: 0.795}, 1000)
    assert c.verdict == INCONCLUSIVE
    assert c.ours.startswith("k=2: 78.1, k=3: 78.8, k=4: 79.5; k=2→3 +0.7 [-2.9, +4.3]")
    assert chapter.c13_saturates_at_k4({2: 0.7, 3: 0.8}, 1000).verdict == UNTESTABLE


def test_c14_ladder_judged_against_intervals() -> None:
    c = chapter.c14_ladder(PAPER_RUNGS, k=3, n=50_000)  # the paper's own ladder holds
    assert c.verdict == HOLDS
    assert c.ours.startswith("3.9 → 72.7 → 75.2 → 76.7 → 82.4 → 83.0")
    assert c.paper == ("TF alone collapses (3.9); AR with annealed TF recovers (72.7); each "
                       "later step adds (Table 2)")
    no_collapse = [0.664, 0.704, 0.709, 0.710, 0.771, 0.787]  # the committed cpu run
    assert chapter.c14_ladder(no_collapse, k=3, n=1000).verdict == FAILS
    a_rung_loses = PAPER_RUNGS[:3] + [0.70] + PAPER_RUNGS[4:]
    assert chapter.c14_ladder(a_rung_loses, k=3, n=50_000).verdict == FAILS
    # The paper's ladder on 1,000 images: 75.2 → 76.7 is within noise of the 1-point tolerance.
    assert chapter.c14_ladder(PAPER_RUNGS, k=3, n=1000).verdict == INCONCLUSIVE


def test_table1_is_the_paper_table() -> None:
    t = chapter.table1()
    assert list(t.index) == ["Raptor k=2", "Raptor k=3", "Raptor k=4", "DINOv2 ViT-S",
                             "DINOv2 ViT-B"]
    assert list(t.columns) == ["IN-1k top-1", "ADE20k mIoU", "NYUv2 RMSE"]
    assert t.loc["Raptor k=2", "NYUv2 RMSE"] == "0.648 ± 0.003"
    assert t.loc["DINOv2 ViT-S", "NYUv2 RMSE"] == "0.600"
    assert t.loc["Raptor k=4", "IN-1k top-1"] == "83.2 ± 0.1"


def test_claims_of_the_committed_cpu_run() -> None:
    """The committed book's accuracies (n/1000 on 1,000 images, so exact) give its claims."""
    ladder = dict(zip([*chapter.LADDER, chapter.PROBE_RUNG],
                      [0.664, 0.704, 0.709, 0.710, 0.771, 0.787]))
    run = chapter.SeedRun(0, {}, 0.806, 0.794, {2: 0.769, 3: 0.771, 4: 0.788},
                          {2: 0.777, 3: 0.787, 4: 0.794}, {}, ladder)
    result = chapter.Result(dataclasses.replace(chapter.Spec(), seeds=(0,)), [run], [])
    c12, c13, c14 = chapter.claims(result)
    assert c12.verdict == UNTESTABLE and "head k=2 95.4%, k=3 95.7%, k=4 97.8%" in c12.ours
    assert (c13.verdict, c14.verdict) == (INCONCLUSIVE, FAILS)
    # C13 on three seeds: a seed where k=4 falls clearly below k=3 makes it fail
    fall = dataclasses.replace(run, seed=2, probe_acc={2: 0.70, 3: 0.80, 4: 0.70})
    three = chapter.Result(chapter.Spec(), [run, dataclasses.replace(run, seed=1), fall], [])
    c13 = chapter.claims(three)[1]
    assert c13.verdict == FAILS and "per seed: 0 inconclusive, 1 inconclusive, 2 does not hold" \
        in c13.ours
    # C14 on three seeds: the paper's own ladder on 50,000 images holds on every seed; one seed
    # whose TF-only rung does not collapse makes it fail
    big = dataclasses.replace(chapter.Spec(), n_images=50_000)
    paper_ladder = dict(zip(ladder, PAPER_RUNGS))
    runs = [dataclasses.replace(run, seed=s, ladder=paper_ladder) for s in (0, 1, 2)]
    assert chapter.claims(chapter.Result(big, runs, []))[2].verdict == HOLDS
    runs[1] = dataclasses.replace(runs[1], ladder={**paper_ladder, "TF only": 0.80})
    c14 = chapter.claims(chapter.Result(big, runs, []))[2]
    assert c14.verdict == FAILS and "1 does not hold" in c14.ours


# --- pipeline results -----------------------------------------------------------------------

def test_missing_pipeline_results_fail_before_any_work(tmp_path: Path) -> None:
    spec = dataclasses.replace(chapter.SMOKE, pipeline_results=(str(tmp_path / "none.json"),))
    with pytest.raises(FileNotFoundError, match="none.json"):
        chapter.compute(spec)


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_compute_round_trips(smoke_cache: Path, tmp_path: Path) -> None:
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
        result = chapter.compute(spec)
    assert result.pipeline == [results]
    (run,) = result.runs
    assert run.seed == spec.seeds[0] and list(run.partitions) == list(spec.k_values)
    assert all(len(run.partitions[k]) == k for k in spec.k_values)
    assert list(run.ladder) == [*chapter.LADDER, chapter.PROBE_RUNG]
    assert run.ladder[chapter.PROBE_RUNG] == run.probe_acc[spec.ladder_k]
    L = spec.teacher.depth
    assert all(run.cosine[k]["cls"].shape == (L + 1,) for k in spec.k_values)
    table = chapter.run_table(result)
    assert table.loc[(run.seed, f"teacher (L={L})"), "probe, % of teacher"] == 100
    again = load(chapter.Result, save(result, tmp_path / "result"))
    assert again.spec == spec and again.pipeline == result.pipeline
    assert again.runs[0].partitions == run.partitions and again.runs[0].ladder == run.ladder
    assert all(np.array_equal(again.runs[0].cosine[k][g], run.cosine[k][g])
               for k in spec.k_values for g in run.cosine[k])
    assert chapter.run_table(again).equals(table)
    assert chapter.share_cosine_figure(result).axes
    claims = chapter.claims(result, profile="smoke")
    assert [c.id for c in claims] == ["C12", "C13", "C14"]
    assert all(isinstance(c, Claim) for c in claims)
    assert chapter.claims(again, profile="smoke") == claims
    assert claims[0].verdict == UNTESTABLE and "not run at smoke" in claims[0].detail
    assert len(chapter.ladder_table(result)) == len(paper.TABLE2)
    plt.close(chapter.share_cosine_figure(result))
