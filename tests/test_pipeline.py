"""Tests of raptor.dinov2.pipeline on a tiny timm ViT and tiny datasets in their on-disk layouts.

The oracle for the distillation is :func:`raptor.train.distill` called directly with the
paper's hyperparameters written out: the pipeline's student must be bit-identical (CPU runs are
deterministic), which also proves the threaded batch reader changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import timm
import torch
import torch.multiprocessing as mp
from safetensors.torch import save_file
from torch.utils.data import DataLoader, Dataset

from raptor.storage.checkpoint import CheckpointError, load_tensors
from raptor.catalog import DatasetNotFoundError
from raptor.data import get_datasets
from raptor.dinov2 import steps
from raptor.dinov2.pipeline import main, run_pipeline
from raptor.dinov2.table1 import format_table
from raptor.probes import ProbeConfig, train_linear_probe
from raptor.teachers import load_pretrained
from raptor.train import DistillConfig, distill
import raptor.train

MODEL = "vit_tiny_patch16_224"
TINY = {"patch_size": 7, "embed_dim": 32, "depth": 4, "num_heads": 2, "num_classes": 0,
        "reg_tokens": 2}
IMG = 28
FAST = ["--partition", "3,1", "--stage1-steps", "3", "--stage2-steps", "2", "--batch-size", "4",
        "--warmup-steps", "1", "--probe-epochs", "2", "--probe-batch-size", "4",
        "--probe-cache-features", "--workers", "0", "--loader-threads", "2", "--quiet"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAPTOR_DATA", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def save_weights(path: Path, seed: int = 0, **kwargs: Any) -> Path:
    torch.manual_seed(seed)
    model = timm.create_model(MODEL, pretrained=False, img_size=IMG, **{**TINY, **kwargs})
    save_file(model.state_dict(), path)
    return path


def args(data: dict[str, Path], out: Path, *extra: str, kwargs: dict | None = None) -> list[str]:
    return ["--model", MODEL, "--model-kwargs", json.dumps(kwargs or TINY), "--img-size",
            str(IMG), "--weights", str(data["weights"]), "--imagenet", str(data["imagenet"]),
            "--out", str(out), *FAST, *extra]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, fake_imagenet: Callable[..., Path],
         fake_ade: Callable[..., Path], fake_nyu: Callable[..., Path]) -> dict[str, Path]:
    """ImageNet with 2 classes of 4 train and 2 val images; ADE20k and NYUv2 with 2 images a
    split (4 classes, depths of 0.5–5 m); the teacher's weights."""
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(1)
    labels = {split: {str(i): rng.integers(0, 4, (30, 30)) for i in range(2)}
              for split in ("training", "validation")}
    depths = {split: [rng.integers(500, 5000, (20, 24)) for _ in range(2)]
              for split in ("train", "test")}
    return {"imagenet": fake_imagenet(root / "imagenet", {"train": 4, "val": 2}, ("n01", "n02"),
                                      (32, 32), suffix=".png"),
            "ade20k": fake_ade(root, labels), "nyuv2": fake_nyu(root, depths),
            "weights": save_weights(root / "w.safetensors")}


@pytest.fixture(scope="module")
def finished(data: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Path, dict[str, Any]]:
    """One complete run with all three probes."""
    out = tmp_path_factory.mktemp("run") / "k2"
    return out, run_pipeline(args(data, out, "--ade20k", str(data["ade20k"]), "--ade20k-size",
                                  "28", "--nyuv2", str(data["nyuv2"])))


def oracle_student(data: dict[str, Path]) -> dict[str, torch.Tensor]:
    """The student of ``distill`` called directly with the paper's hyperparameters."""
    teacher = load_pretrained(MODEL, data["weights"], img_size=IMG, **TINY)
    train_set, _ = get_datasets("imagenet", root=data["imagenet"], img_size=IMG)
    cfg = DistillConfig(repeats=(3, 1), stage1_steps=3, stage2_steps=2, batch_size=4,
                        warmup_steps=1, lr=3e-4, weight_decay=1e-4, min_lr=1e-6, grad_clip=1.0,
                        dataset="imagenet", seed=0, device="cpu")
    raptor, _ = distill(teacher, train_set, cfg, progress=False)
    return raptor.blocks.state_dict()


def assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


# ------------------------------------------------------------------------------ end to end


def test_end_to_end_student_results_and_state(finished: tuple[Path, dict[str, Any]],
                                               data: dict[str, Path]) -> None:
    out, res = finished
    student, _ = load_tensors(out / "student.safetensors")
    assert_same_tensors(student, oracle_student(data))
    assert json.loads((out / "results.json").read_text()) == res
    assert set(res["steps_done"]) == {"stage1", "stage2", "probe:student:imagenet",
                                      "probe:student:ade20k", "probe:student:nyuv2"}
    assert not (out / "distill.work.safetensors").exists()
    row = res["table1"]["Raptor k=2 (this run)"]
    probes = res["probes"]["student"]
    top1 = [h["top1"] for h in probes["imagenet"]["history"]]
    assert probes["imagenet"]["best"] == max(top1)  # the paper reports the best epoch
    assert row["IN-1k"] == pytest.approx(100 * max(top1))
    assert {round(t * 4) / 4 for t in top1} == set(top1)  # 4 validation images
    rmse = [h["rmse"] for h in probes["nyuv2"]["history"]]
    assert row["NYUv2"] == min(rmse) > 0  # lower is better
    assert 0 <= row["ADE20k"] <= 100
    assert res["distill"]["stage1_final_loss"] > 0 and res["repeats"] == [3, 1]
    assert "paper_table1" not in res  # not DINOv2-B
    for name in ("student_imagenet", "student_ade20k", "student_nyuv2"):
        assert (out / "probes" / f"{name}.safetensors").is_file()


def test_rerun_after_completion_does_nothing(finished: tuple[Path, dict[str, Any]],
                                             data: dict[str, Path],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    out, res = finished
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*") if p.is_file()}

    def forbidden(*_: Any, **__: Any) -> None:
        raise AssertionError("a finished step ran again")

    for name in ("distill", "train_linear_probe", "train_segmentation_probe",
                 "train_depth_probe", "build_student"):
        monkeypatch.setattr(steps, name, forbidden)
    again = run_pipeline(args(data, out, "--ade20k", str(data["ade20k"]), "--ade20k-size", "28",
                              "--nyuv2", str(data["nyuv2"])))
    assert again == res
    assert before == {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*")
                      if p.is_file()}


def test_run_interrupted_after_stage1_resumes_with_stage2_only(
        finished: tuple[Path, dict[str, Any]], data: dict[str, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, kill_after: Callable[..., Dataset]) -> None:
    real = raptor.train._train_stage
    calls: list[tuple[int, int]] = []

    def dies_in_stage2(run: Any, label: str, *rest: Any) -> None:  # rest[5]: the start step
        if label == "stage 2":
            raise kill_after.Killed
        real(run, label, *rest)

    def counted(run: Any, label: str, *rest: Any) -> None:
        calls.append((label, rest[5]))
        real(run, label, *rest)

    out = tmp_path / "run"
    monkeypatch.setattr(raptor.train, "_train_stage", dies_in_stage2)
    with pytest.raises(kill_after.Killed):
        run_pipeline(args(data, out))
    assert json.loads((out / "results.json").read_text())["steps_done"] == ["stage1"]
    assert not (out / "student.safetensors").exists()
    with pytest.raises(ValueError, match=r"work\.safetensors\) done with another configuration "
                                         r"\(differs in: distill\.stage1_steps\)"):
        run_pipeline(args(data, out, "--stage1-steps", "4"))  # would discard stage 1
    monkeypatch.setattr(raptor.train, "_train_stage", counted)
    res = run_pipeline(args(data, out))
    assert calls == [("stage 2", 0)]  # no stage-1 block trained again
    student, _ = load_tensors(out / "student.safetensors")
    assert_same_tensors(student, load_tensors(finished[0] / "student.safetensors")[0])
    assert res["table1"]["Raptor k=2 (this run)"]["IN-1k"] == \
        finished[1]["table1"]["Raptor k=2 (this run)"]["IN-1k"]


def test_probe_with_another_configuration_runs_again(finished: tuple[Path, dict[str, Any]],
                                                      data: dict[str, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    first = run_pipeline(args(data, out, "--probe-teacher"))
    assert first["probes"]["teacher"]["imagenet"] == teacher_probe_oracle(data, epochs=2)
    assert "vit_tiny_patch16_224 (this run)" in first["table1"]
    monkeypatch.setattr(steps, "distill", lambda *a, **k: pytest.fail("distilled again"))
    res = run_pipeline(args(data, out, "--probe-teacher", "--probe-epochs", "3"))
    assert len(res["probes"]["student"]["imagenet"]["history"]) == 3
    assert res["probes"]["teacher"]["imagenet"] == teacher_probe_oracle(data, epochs=3)


def teacher_probe_oracle(data: dict[str, Path], epochs: int) -> dict[str, Any]:
    """The teacher's ImageNet probe run directly with the recipe and the test's overrides."""
    teacher = load_pretrained(MODEL, data["weights"], img_size=IMG, **TINY)
    train_set, val_set = get_datasets("imagenet", root=data["imagenet"], img_size=IMG)
    cfg = ProbeConfig(lr=1e-4, weight_decay=1e-2, epochs=epochs, batch_size=4,
                      warmup_steps=100, min_lr=1e-6, grad_clip=1.0, cache_features=True)
    result = train_linear_probe(
        teacher, DataLoader(train_set, batch_size=4, shuffle=True,
                            generator=torch.Generator().manual_seed(0)),
        DataLoader(val_set, batch_size=4), cfg, num_classes=2)
    return json.loads(json.dumps({
        "metric": "top1", "higher_is_better": True, "best": result.best,
        "best_epoch": result.best_epoch, "last": result.last, "history": result.history}))


def test_distillation_with_another_configuration_is_refused(
        finished: tuple[Path, dict[str, Any]], data: dict[str, Path]) -> None:
    out, _ = finished
    with pytest.raises(ValueError, match=r"another configuration \(differs in: "
                                         r"distill\.stage1_steps\)"):
        run_pipeline(args(data, out, "--stage1-steps", "4"))


def test_other_weights_with_the_same_name_and_size_are_another_teacher(
        finished: tuple[Path, dict[str, Any]], data: dict[str, Path], tmp_path: Path) -> None:
    """The run's key holds the weights' digest: a different file of the same name and byte size
    does not reuse the finished distillation."""
    other = save_weights(tmp_path / data["weights"].name, seed=1)
    assert other.stat().st_size == data["weights"].stat().st_size
    out, _ = finished
    argv = args(data, out)
    argv[argv.index("--weights") + 1] = str(other)
    with pytest.raises(ValueError, match=r"another configuration \(differs in: weights\)"):
        run_pipeline(argv)


def test_damaged_student_is_redone_bit_identical(finished: tuple[Path, dict[str, Any]],
                                                 data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(finished[0], out)
    student = out / "student.safetensors"
    blob = bytearray(student.read_bytes())
    blob[-5] ^= 0x01  # in the tensor data: the file still parses
    student.write_bytes(bytes(blob))
    with pytest.warns(UserWarning, match=f"{student} is damaged"):
        run_pipeline(args(data, out))
    assert_same_tensors(load_tensors(student)[0],
                        load_tensors(finished[0] / "student.safetensors")[0])


def test_dinov2_teacher_gets_the_papers_partition_and_table_rows(data: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    name, kwargs = "vit_base_patch14_reg4_dinov2.lvd142m", {"embed_dim": 32, "num_heads": 2}
    torch.manual_seed(0)
    weights = tmp_path / "dinov2.safetensors"
    save_file(timm.create_model(name, img_size=IMG, **kwargs).state_dict(), weights)
    argv = [a for a in args(data, tmp_path / "out", kwargs=kwargs) if a not in ("--partition",
                                                                                "3,1")]
    argv[argv.index("--weights") + 1] = str(weights)
    argv[argv.index("--model") + 1] = name
    res = run_pipeline(argv + ["--k", "3", "--stage1-steps", "1", "--stage2-steps", "1"])
    assert res["repeats"] == [7, 3, 2]  # Table 1's k = 3: blocks 1-7 | 8-10 | 11-12
    paper = res["paper_table1"]
    assert paper["Raptor k=3"]["IN-1k"] == {"mean": 83.0, "sd": 0.1}
    assert paper["DINOv2 ViT-B"]["NYUv2"] == {"mean": 0.578, "sd": None}
    ours = res["table1"]["Raptor k=3 (this run)"]["IN-1k"]
    assert res["fraction_of_paper_dinov2"]["IN-1k"] == pytest.approx(ours / 84.5)
    table = format_table(res)
    assert "Raptor k=3 (paper)" in table and "83.0 ± 0.1" in table


def _rank(rank: int, world: int, port: int, argv: list[str], report: str) -> None:
    """One ``torchrun``-style process: the environment torchrun sets, then the pipeline."""
    os.environ.update(WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    res = run_pipeline(argv)
    Path(f"{report}.{rank}").write_text(json.dumps(res))


def test_two_ranks_under_torchrun_match_one_process(finished: tuple[Path, dict[str, Any]],
                                                    data: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """DDP (gloo): both ranks distil, rank 0 alone saves the student and probes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out, report = tmp_path / "run", str(tmp_path / "report")
    mp.spawn(_rank, args=(2, port, args(data, out), report), nprocs=2, join=True)
    assert json.loads(Path(f"{report}.1").read_text()) == {"rank": 1}
    res = json.loads(Path(f"{report}.0").read_text())
    assert res["distill"]["world_size"] == 2
    assert set(res["steps_done"]) == {"stage1", "stage2", "probe:student:imagenet"}
    student, _ = load_tensors(out / "student.safetensors")
    for key, value in load_tensors(finished[0] / "student.safetensors")[0].items():
        torch.testing.assert_close(student[key], value, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ bad input


def bad_cases(data: dict[str, Path], tmp: Path) -> list[tuple[list[str], type, str]]:
    wrong_layout = tmp / "flat"
    (wrong_layout / "n01").mkdir(parents=True)
    deeper = save_weights(tmp / "deeper.safetensors", depth=5)
    head = tmp / "head.safetensors"
    save_file({"weight": torch.zeros(3, 64), "bias": torch.zeros(3)}, head)
    base = args(data, tmp / "out")
    a_file, text, empty = tmp / "results.txt", tmp / "notes.pth", tmp / "empty.pth"
    a_file.write_text("not a run folder")
    text.write_text("these are not weights\n")
    empty.write_bytes(b"")

    def swap(option: str, value: str) -> list[str]:
        i = base.index(option)
        return base[:i + 1] + [value] + base[i + 2:]

    return [
        (swap("--weights", str(deeper)), CheckpointError, "does not match the architecture"),
        (swap("--weights", str(tmp / "none.safetensors")), CheckpointError, "not found"),
        (swap("--imagenet", str(wrong_layout)), DatasetNotFoundError, "train/<wnid>"),
        (swap("--model", "vit_no_such_model"), ValueError, "unknown timm model"),
        (swap("--model", "resnet18"), ValueError, "not a timm VisionTransformer"),
        (swap("--partition", "3,2"), ValueError, "sums to 5, but the teacher has 4 blocks"),
        ([a for a in base if a not in ("--partition", "3,1")], ValueError,
         "published partitions of --k are DINOv2-B's"),
        (swap("--model-kwargs", json.dumps({**TINY, "depth": 12})) + ["--partition", "12",
                                                                       "--k", "5"],
         ValueError, "contradicts --partition"),
        ([a for a in swap("--model-kwargs", json.dumps({**TINY, "depth": 12}))
          if a not in ("--partition", "3,1")] + ["--k", "5"], ValueError,
         "no published partition"),
        (swap("--model-kwargs", json.dumps({**TINY, "bogus": 1})), ValueError, "bogus"),
        (swap("--model-kwargs", json.dumps({**TINY, "in_chans": 1})), ValueError, "in_chans"),
        (swap("--model-kwargs", json.dumps({**TINY, "img_size": 56})), ValueError,
         "use --img-size"),
        (base + ["--ade20k", str(wrong_layout)], DatasetNotFoundError, "ADE20k not found"),
        (base + ["--ade20k", str(data["ade20k"]), "--ade20k-size", "30"], ValueError,
         "multiple of the patch size 7"),
        (base + ["--nyuv2", str(wrong_layout)], DatasetNotFoundError, "NYUv2 not found"),
        (base + ["--linear-head", str(head)], CheckpointError, "expected a linear head"),
        (swap("--batch-size", "9"), ValueError, "at most the 8 training images"),
        (swap("--stage1-steps", "-1"), ValueError, "stage1_steps must be an integer >= 0"),
        (base + ["--workers", "-1"], ValueError, "--workers must be an integer >= 0"),
        (base + ["--device", "cpu", "--bf16"], ValueError, "bf16 and compile are CUDA-only"),
        (base + ["--download"], ValueError, "exactly one of --weights"),
        (swap("--img-size", "30"), ValueError,
         "--img-size=30 must be a multiple of vit_tiny_patch16_224's patch size 7"),
        (swap("--out", str(a_file)), ValueError, f"--out {a_file} is an existing file; give a "
                                                  f"folder"),
        (swap("--weights", str(text)), CheckpointError,
         f"unreadable weights file {text}.*allowed: a safetensors file"),
        (swap("--weights", str(empty)), CheckpointError, f"weights file {empty} is empty"),
    ]


def test_bad_input_is_refused_before_any_work(data: dict[str, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "distill", lambda *a, **k: pytest.fail("training started"))
    for argv, error, match in bad_cases(data, tmp_path):
        with pytest.raises(error, match=match):
            run_pipeline(argv)
        assert not (tmp_path / "out").exists(), argv


def test_command_line_reports_bad_input_and_dry_run_writes_nothing(
        data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args(data, tmp_path / "out", "--partition", "1,1")) == 2
    assert "error: the partition 1,1 sums to 2" in capsys.readouterr().err
    argv = [a for a in args(data, tmp_path / "out") if a != "--quiet"]
    assert main(argv + ["--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert '"stage1": "to do"' in printed and '"probe:student:imagenet": "to do"' in printed
    assert '"one run": "' in printed and "GPU-hours" in printed
    assert not (tmp_path / "out").exists()
