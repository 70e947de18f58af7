"""The scaling chapter: its claims on known inputs, Tables 1–2, its spec, profiles and notebook."""

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
from raptor.book.claims import FAILS, HOLDS, UNTESTABLE, Claim
from raptor.book.result import load, save
from raptor.book.spec import SpecError, from_parameters

NOTEBOOK = Path(__file__).parents[1] / "book" / chapter.NOTEBOOK

# The profiles as the old raptor/profiles.py set them for this chapter.
OLD_SMOKE = {"L": 4, "D": 32, "heads": 2, "steps": 30, "batch_size": 64, "train_limit": 1024,
             "stage1_steps": 6, "stage2_steps": 6, "distill_warmup": 2, "distill_limit": 256,
             "n_images": 64, "k_values": [2, 3, 4], "probe_images": 128}
OLD_PAPER = {"dataset": "cifar100", "L": 12, "D": 768, "heads": 12, "patch_size": 14,
             "img_size": 224, "registers": 0, "steps": 8_000, "batch_size": 256, "lr": 5e-4,
             "train_limit": None, "stage1_steps": 20_000, "stage2_steps": 20_000,
             "distill_lr": 3e-4, "distill_warmup": 1_000, "distill_limit": None,
             "n_images": 10_000, "probe_images": 50_000}
# The paper's Table 2 (the ladder), as fractions.
PAPER_RUNGS = [v / 100 for v in paper.TABLE2.values()]


# --- claims on synthetic inputs --------------------------------------------------------------

def test_c12_share_both_ways() -> None:
    c = chapter.c12_share_of_teacher({2: 97.86, 3: 99.12, 4: 100.0}, dataset="fashion-mnist",
                                     profile="cpu")
    assert c.verdict == HOLDS and c.paper == "k=2 ≈ 96%, k=3 ≈ 98% of DINOv2-B (IN-1k)"
    assert c.ours == "k=2: 97.9%, k=3: 99.1%, k=4: 100.0% of the fashion-mnist teacher (probe)"
    assert c.detail == "cpu analogue: Fashion-MNIST linear probe"
    # The paper's own numbers hold (81.2 / 84.5 = 96.1%, 83.0 / 84.5 = 98.2%).
    dinov2 = paper.TABLE1["DINOv2 ViT-B"]["IN-1k"][0]
    own = {k: 100 * paper.TABLE1[f"Raptor k={k}"]["IN-1k"][0] / dinov2 for k in (2, 3)}
    assert chapter.c12_share_of_teacher(own, dataset="imagenet", profile="paper").verdict == HOLDS
    c = chapter.c12_share_of_teacher({2: 95.9, 3: 99.0}, dataset="cifar100", profile="paper")
    assert c.verdict == FAILS and c.detail == "cifar100"
    assert chapter.c12_share_of_teacher({2: 99.0}, dataset="cifar100",
                                        profile="paper").verdict == UNTESTABLE


def test_c13_saturation_both_ways() -> None:
    assert chapter.c13_saturates_at_k4({2: 0.70, 3: 0.80, 4: 0.805}).verdict == HOLDS
    rising = {2: 0.70, 3: 0.80, 4: 0.83}
    assert chapter.c13_saturates_at_k4(rising).verdict == FAILS
    assert chapter.c13_saturates_at_k4({2: 0.80, 3: 0.78, 4: 0.78}).verdict == FAILS  # no rise
    assert chapter.c13_saturates_at_k4({2: 0.7, 3: 0.8}).verdict == UNTESTABLE


def test_c14_ladder_both_ways() -> None:
    c = chapter.c14_ladder(PAPER_RUNGS, k=3)  # the paper's own ladder holds
    assert c.verdict == HOLDS and c.ours == "3.9 → 72.7 → 75.2 → 76.7 → 82.4 → 83.0"
    assert c.paper == ("TF alone collapses (3.9); AR with annealed TF recovers (72.7); each "
                       "later step adds")
    assert c.detail == "k=3; rungs 1–5 through the teacher's head, rung 6 a fresh linear probe"
    no_collapse = [0.664, 0.704, 0.709, 0.710, 0.771, 0.787]  # the committed cpu run
    assert chapter.c14_ladder(no_collapse, k=3).verdict == FAILS
    a_rung_loses = PAPER_RUNGS[:3] + [0.70] + PAPER_RUNGS[4:]
    assert chapter.c14_ladder(a_rung_loses, k=3).verdict == FAILS


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
    result = chapter.Result(chapter.Spec(), {}, 0.806, 0.794, {2: 0.769, 3: 0.771, 4: 0.788},
                            {2: 0.777, 3: 0.787, 4: 0.794}, {}, ladder, [])
    assert [(c.ours, c.verdict) for c in chapter.claims(result)] == [
        ("k=2: 97.9%, k=3: 99.1%, k=4: 100.0% of the fashion-mnist teacher (probe)", HOLDS),
        ("k=2: 77.7, k=3: 78.7, k=4: 79.4", HOLDS),
        ("66.4 → 70.4 → 70.9 → 71.0 → 77.1 → 78.7", FAILS)]


# --- spec, profiles, notebook ----------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("p", 1.0), ("k_values", []), ("k_values", [2, 9]), ("ladder_k", 5), ("n_images", 0),
    ("probe_images", 0), ("pipeline_results", "results.json")])
def test_spec_errors_name_the_parameter(name: str, value: object) -> None:
    with pytest.raises(SpecError, match=repr(name)):
        from_parameters(chapter.Spec, {name: value})


def test_missing_pipeline_results_fail_before_any_work(tmp_path: Path) -> None:
    spec = dataclasses.replace(chapter.SMOKE, pipeline_results=(str(tmp_path / "none.json"),))
    with pytest.raises(FileNotFoundError, match="none.json"):
        chapter.compute(spec)


def test_profiles_are_the_old_ones() -> None:
    assert chapter.SMOKE == from_parameters(chapter.Spec, OLD_SMOKE)
    assert chapter.PAPER == from_parameters(chapter.Spec, OLD_PAPER)


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_compute_round_trips(smoke_cache: Path, tmp_path: Path) -> None:
    # A results.json as raptor.pipeline writes it (nested, with nulls).
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
    assert list(result.partitions) == list(spec.k_values)
    assert all(len(result.partitions[k]) == k for k in spec.k_values)
    assert list(result.ladder) == [*chapter.LADDER, chapter.PROBE_RUNG]
    assert result.ladder[chapter.PROBE_RUNG] == result.probe_acc[spec.ladder_k]
    L = spec.teacher.depth
    assert all(result.cosine[k]["cls"].shape == (L + 1,) for k in spec.k_values)
    table = chapter.run_table(result)
    assert table.loc[f"teacher (L={L})", "probe, % of teacher"] == 100
    again = load(chapter.Result, save(result, tmp_path / "result"))
    assert again.spec == spec and again.pipeline == result.pipeline
    assert again.partitions == result.partitions and again.ladder == result.ladder
    assert all(np.array_equal(again.cosine[k][g], result.cosine[k][g])
               for k in spec.k_values for g in result.cosine[k])
    assert chapter.run_table(again).equals(table)
    claims = chapter.claims(result, profile="smoke")
    assert [c.id for c in claims] == ["C12", "C13", "C14"]
    assert all(isinstance(c, Claim) for c in claims)
    assert chapter.claims(again, profile="smoke") == claims
    assert claims[0].detail == "smoke analogue: Fashion-MNIST linear probe"
    assert len(chapter.ladder_table(result)) == len(paper.TABLE2)
    plt.close(chapter.share_cosine_figure(result))
