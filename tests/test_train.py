"""Tests of raptor.losses and raptor.train: losses, schedule, config, resume, NaN guard, DDP."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import Dataset, TensorDataset

import raptor.data
import raptor.train
from raptor.storage.cache import entry_path, load_entry
from raptor.storage.checkpoint import (digest, fingerprint, load_tensors, metadata,
                                       save_tensors)
from raptor.config import tf_lambda
from raptor.losses import (BlockObjective, Objective, autoregressive_loss, present_weights,
                           segment_loss, teacher_forced_loss, token_mse)
from raptor.model import Raptor
from raptor.student_batch import distil_all
from raptor.teachers import TeacherConfig, TeacherRequest, build_teacher
from raptor.train import DistillConfig, StudentRequest, distill, get_student, student_key
from raptor.trajectories import TokenGroups, trajectory

TINY = TeacherConfig(depth=4, embed_dim=32, num_heads=4, patch_size=4, img_size=16, in_chans=1,
                     num_classes=10, reg_tokens=1)
FAST = dict(repeats=(3, 1), stage1_steps=4, stage2_steps=3, batch_size=4, warmup_steps=1,
            lr=1e-3)


def teacher(cfg: TeacherConfig = TINY) -> torch.nn.Module:
    return build_teacher(cfg, seed=0).eval()


def dataset(n: int = 12) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 1, 16, 16, generator=g), torch.randint(0, 10, (n,),
                                                                             generator=g))


def weights(raptor: Raptor) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in raptor.blocks.state_dict().items()}


# ---------------------------------------------------------------- losses and schedule


def test_tf_lambda_closed_form() -> None:
    total, frac = 40, 0.25
    values = [tf_lambda(s, total, frac) for s in range(total)]
    assert values[0] == 1.0 and values[5] == pytest.approx(0.5) and values[10] == 0.0
    assert all(v == 0.0 for v in values[10:])
    assert np.allclose(np.diff(values[:11]), -0.1)
    with pytest.raises(ValueError, match="anneal_frac"):
        tf_lambda(0, 10, 0.0)
    cfg = DistillConfig(**FAST)
    assert [cfg.stage1_lambda(s) for s in range(4)] == [1.0, 0.0, 0.0, 0.0]
    assert DistillConfig(**{**FAST, "autoregressive": False}).stage1_lambda(3) == 1.0
    assert DistillConfig(**{**FAST, "teacher_forcing": False}).stage1_lambda(0) == 0.0


def test_token_mse_weights_and_renormalisation() -> None:
    g = TokenGroups.from_counts(1, 2, 5)
    pred, target = torch.randn(3, 8, 4), torch.randn(3, 8, 4)
    err = ((pred - target) ** 2).numpy()
    manual = 0.34 * err[:, 0].mean() + 0.33 * err[:, 1:3].mean() + 0.33 * err[:, 3:].mean()
    assert token_mse(pred, target, g, (0.34, 0.33, 0.33)).item() == pytest.approx(manual)
    assert token_mse(pred, target, g).item() == pytest.approx(err.mean())
    no_reg = TokenGroups.from_counts(1, 0, 7)
    pairs = present_weights(no_reg, (0.45, 0.10, 0.45))
    assert [w for _, w in pairs] == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="no weight"):
        present_weights(no_reg, (0.0, 1.0, 0.0))
    with pytest.raises(ValueError, match="3 non-negative"):
        present_weights(g, (1.0, -1.0, 1.0))


def test_stage_losses_against_a_manual_loop() -> None:
    t = teacher()
    g = TokenGroups.from_model(t)
    traj = trajectory(t, dataset(3).tensors[0]).detach()
    torch.manual_seed(0)
    r = Raptor(t, (3, 1), init="random")
    w = (0.34, 0.33, 0.33)
    tf = sum(token_mse(r.blocks[0](traj[:, l], l + 1), traj[:, l + 1], g, w) for l in range(3)) / 3
    torch.testing.assert_close(teacher_forced_loss(r.blocks[0], traj, 0, 3, g, w), tf)
    x, ar = traj[:, 0], 0.0
    for layer in range(1, 4):
        x = r.blocks[0](x, layer)
        ar = ar + token_mse(x, traj[:, layer], g, w) / 3
    torch.testing.assert_close(autoregressive_loss(r, traj, 0, 3, g, w), ar)
    assert torch.equal(segment_loss(r.blocks[0], traj, 0, 3, g, w),
                       autoregressive_loss(r, traj, 0, 3, g, w))  # the block alone, same ops
    loss, parts = BlockObjective(r.blocks[0], (0, 3), g, w)(traj, 0.25)
    torch.testing.assert_close(loss, 0.25 * tf + 0.75 * ar)
    last = 0.25 * teacher_forced_loss(r.blocks[1], traj, 3, 4, g, None) + 0.75 * \
        autoregressive_loss(r, traj, 3, 4, g, None)
    torch.testing.assert_close(BlockObjective(r.blocks[1], (3, 4), g, None)(traj, 0.25)[0], last)
    torch.testing.assert_close(parts, loss.detach()[None])
    torch.testing.assert_close(Objective(r, g, w)(traj)[0],
                               autoregressive_loss(r, traj, 0, 4, g, w))


def test_exact_teacher_copy_has_zero_loss() -> None:
    t = teacher()
    traj = trajectory(t, dataset(3).tensors[0])
    r = Raptor(t, (1, 1, 1, 1), depth_scaling=False, init="teacher")
    loss, _ = Objective(r, TokenGroups.from_model(t), None)(traj)
    assert loss.item() < 1e-10


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize("field,value", [
    ("repeats", ()), ("repeats", (2, 0)), ("stage1_steps", -1), ("stage2_steps", 1.5),
    ("batch_size", 0), ("lr", 0.0), ("min_lr", 1.0), ("weight_decay", -1.0), ("grad_clip", 0),
    ("anneal_frac", 0.0), ("anneal_frac", 1.5), ("warmup_steps", -2), ("seed", -1),
    ("stage1_weights", (1.0, 1.0)), ("stage2_weights", (0.0, 0.0, 0.0)),
    ("weighted", 1), ("depth_scaling", "yes"), ("mlp", "geglu"), ("init", "zeros"),
    ("dataset", "mnist"), ("train_limit", 0), ("device", "tpu"), ("bf16", True),
    ("compile", True), ("cache_teacher", None)])
def test_config_rejects_bad_fields(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        DistillConfig(**{**FAST, field: value})


def test_config_cross_field_rules() -> None:
    with pytest.raises(ValueError, match="needs mlp='teacher'"):
        DistillConfig(**FAST, init="teacher", mlp="swiglu")
    with pytest.raises(ValueError, match="teacher_forcing or autoregressive"):
        DistillConfig(**FAST, teacher_forcing=False, autoregressive=False)
    with pytest.raises(ValueError, match="nothing to train"):
        DistillConfig(**{**FAST, "stage1_steps": 0}, stage2=False)
    cfg = DistillConfig(**{**FAST, "repeats": [3, 1], "stage1_weights": [1, 0, 1]}, stage2=False)
    assert cfg.repeats == (3, 1) and cfg.stage2_steps == 0 and cfg.stage1_weights == (1., 0., 1.)


def test_distill_rejects_bad_inputs_before_work() -> None:
    t = teacher()
    with pytest.raises(ValueError, match="teacher's depth"):
        distill(t, dataset(), DistillConfig(**{**FAST, "repeats": (2, 1)}), progress=False)
    with pytest.raises(ValueError, match="batch_size=16"):
        distill(t, dataset(), DistillConfig(**{**FAST, "batch_size": 16}), progress=False)
    no_reg = teacher(dataclasses.replace(TINY, reg_tokens=0))
    with pytest.raises(ValueError, match="no weight"):
        distill(no_reg, dataset(), DistillConfig(**FAST, stage2_weights=(0, 1, 0)),
                progress=False)
    with pytest.raises(ValueError, match="checkpoint_every"):
        distill(t, dataset(), DistillConfig(**FAST), checkpoint_every=0, progress=False)
    with pytest.raises(TypeError, match="DistillConfig"):
        distill(t, dataset(), dict(FAST), progress=False)  # type: ignore[arg-type]


# ---------------------------------------------------------------- training runs


def test_distill_record_and_cache_equivalence() -> None:
    cfg = DistillConfig(**FAST)
    online, rec = distill(teacher(), dataset(), cfg, progress=False)
    cached, rec_c = distill(teacher(), dataset(), dataclasses.replace(cfg, cache_teacher=True),
                            progress=False)
    assert [b["lambda"] for b in rec["stage1"]["blocks"]] == [[1.0, 0.0, 0.0, 0.0]] * 2
    assert [len(b["loss"]) for b in rec["stage1"]["blocks"]] == [4, 4]
    assert len(rec["stage2"]["loss"]) == 3
    assert rec["flops_per_image"] > rec["teacher_flops_per_image"]
    for k, v in weights(online).items():
        torch.testing.assert_close(weights(cached)[k], v, rtol=1e-5, atol=1e-6)
    assert not online.training and not online.teacher.training


def test_training_reduces_the_loss_and_updates_every_weight() -> None:
    cfg = DistillConfig(**{**FAST, "stage1_steps": 1, "stage2_steps": 25, "lr": 3e-3},
                        init="random")
    t = teacher()
    initial = weights(raptor.train.build_student(teacher(), cfg))
    trained, rec = distill(t, dataset(4), cfg, progress=False)
    assert rec["stage2"]["loss"][-1] < 0.5 * rec["stage2"]["loss"][0]
    changed = {k: not torch.equal(v, initial[k]) for k, v in weights(trained).items()}
    assert all(changed.values()), [k for k, c in changed.items() if not c]


def test_tf_only_ablation_skips_stage2() -> None:
    cfg = DistillConfig(**FAST, autoregressive=False, stage2=False)
    _, rec = distill(teacher(), dataset(), cfg, progress=False)
    assert rec["stage1"]["blocks"][0]["lambda"] == [1.0] * 4 and rec["stage2"]["loss"] == []


@pytest.mark.parametrize("after,left", [(3 * 4, 2 + 4 + 3), (4 * 4 + 3 * 4, 2 + 3),
                                        (8 * 4 + 2 * 4, 1)])
def test_resume_after_interruption_matches_uninterrupted(tmp_path: Path, after: int, left: int,
                                                         kill_after: Callable[..., Dataset]
                                                         ) -> None:
    """Interrupted in stage 1's first block at step 3 (checkpoint at 2), in its second block at
    step 3, or in stage 2 at step 2 (checkpoint at 2): the resumed run does only the ``left``
    missing steps (a finished block is not trained again) and ends bit-identical."""
    cfg = DistillConfig(**FAST)
    reference, rec_ref = distill(teacher(), dataset(), cfg, progress=False)
    work = tmp_path / "work.safetensors"
    with pytest.raises(kill_after.Killed):
        distill(teacher(), kill_after(dataset(), after), cfg, work_path=work, checkpoint_every=2,
                progress=False)
    assert any(tmp_path.iterdir())
    counting = kill_after(dataset(), 10**9)
    resumed, rec = distill(teacher(), counting, cfg, work_path=work, checkpoint_every=2,
                           progress=False)
    assert counting.reads == left * cfg.batch_size
    for k, v in weights(reference).items():
        assert torch.equal(weights(resumed)[k], v), k
    assert rec["stage1"] == rec_ref["stage1"] and rec["stage2"] == rec_ref["stage2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work.safetensors"]


def test_a_record_counts_its_processor_seconds_across_a_resume_or_leaves_them_out(
        tmp_path: Path, kill_after: Callable[..., Dataset]) -> None:
    """The core-seconds a student cost: counted in one run, carried over a resume in stage 2,
    and left out where the run resumed kept none (a work file written before they were kept)."""
    cfg = DistillConfig(**FAST)
    _, whole = distill(teacher(), dataset(), cfg, progress=False)
    assert 0 < whole["cpu_seconds"] and 0 < whole["seconds"]
    for forget in (False, True):
        work = tmp_path / f"work{forget}.safetensors"
        with pytest.raises(kill_after.Killed):
            distill(teacher(), kill_after(dataset(), 8 * 4 + 2 * 4), cfg, work_path=work,
                    checkpoint_every=2, progress=False)
        tensors, kept = load_tensors(work)
        assert 0 < kept["cpu_seconds"]
        if forget:
            del kept["cpu_seconds"]
            save_tensors(work, tensors, json.loads(metadata(work.read_bytes())["config"]), kept)
        _, rec = distill(teacher(), dataset(), cfg, work_path=work, checkpoint_every=2,
                         progress=False)
        assert ("cpu_seconds" in rec) is not forget
        assert forget or rec["cpu_seconds"] > kept["cpu_seconds"]


def test_nan_guard_names_stage_and_step_and_keeps_checkpoint(tmp_path: Path,
                                                             kill_after: Callable[..., Dataset]
                                                             ) -> None:
    work = tmp_path / "work.safetensors"
    cfg = DistillConfig(**FAST)
    with pytest.raises(FloatingPointError, match="stage 1, block 1 at step 2"):
        distill(teacher(), kill_after(dataset(), 2 * 4, None), cfg, work_path=work,
                checkpoint_every=1, progress=False)
    tensors, record = load_tensors(work.with_suffix(".block0.safetensors"))
    assert record["step"] == 2 and not record["done"]
    assert all(torch.isfinite(v).all() for v in tensors.values())


def test_get_student_builds_once_then_loads(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: (dataset(), dataset(4)))
    cfg = DistillConfig(**{**FAST, "stage1_steps": 2, "stage2_steps": 1})
    first, rec = get_student(TINY, None, 0, cfg)
    monkeypatch.setattr(raptor.train, "distill", lambda *a, **k: pytest.fail("rebuilt"))
    second, rec2 = get_student(TINY, None, 0, cfg)
    for k, v in weights(first).items():
        assert torch.equal(weights(second)[k], v)
    assert rec2["stage1"] == rec["stage1"]
    assert list(tmp_path.glob("*/*.work*.safetensors")) == []
    assert len(list((tmp_path / "block").glob("*.safetensors"))) == 2  # one entry a block


# ---------------------------------------------------------------- DDP (gloo, 2 processes)


def _ddp_worker(rank: int, world: int, init_file: str, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    try:
        t = teacher()
        seen = []
        t.patch_embed.register_forward_hook(lambda m, args, out: seen.append(len(args[0])))
        raptor_, _ = distill(t, dataset(), DistillConfig(**FAST), progress=False)
        if rank == 0:
            torch.save({**weights(raptor_), "seen": torch.tensor(seen)}, out)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_ddp_two_processes_match_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gloo, 2 spawned processes, each on its half of every global batch, average to the
    update of one process on the whole batch."""
    single, _ = distill(teacher(), dataset(), DistillConfig(**FAST), progress=False)
    out = str(tmp_path / "ddp.pt")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "rdzv"), out), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=True)
    steps = len(FAST["repeats"]) * FAST["stage1_steps"] + FAST["stage2_steps"]  # stage 1: a block
    assert ddp.pop("seen").tolist() == [FAST["batch_size"] // 2] * steps  # each rank: its half
    for k, v in weights(single).items():
        torch.testing.assert_close(ddp[k], v, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- #11: checks, verified resume, content keys


@pytest.mark.parametrize("field,value", [
    ("lr", float("nan")), ("lr", float("inf")), ("min_lr", float("nan")),
    ("grad_clip", float("inf")), ("grad_clip", -1.0), ("weight_decay", float("inf")),
    ("anneal_frac", float("nan"))])
def test_config_rejects_non_finite_values_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"^{field} must be"):
        DistillConfig(**{**FAST, field: value})
    assert DistillConfig(**{**FAST, "grad_clip": None}).grad_clip is None  # no clipping


@pytest.mark.parametrize("damage", ["flip a byte", "another configuration"])
def test_damaged_work_file_restarts_from_zero_bit_identical(tmp_path: Path, damage: str,
                                                           kill_after: Callable[..., Dataset]
                                                           ) -> None:
    cfg = DistillConfig(**FAST)
    reference, rec_ref = distill(teacher(), dataset(), cfg, progress=False)
    work = tmp_path / "work.safetensors"
    with pytest.raises(kill_after.Killed):  # killed in stage 2, a checkpoint at its step 2
        distill(teacher(), kill_after(dataset(), 2 * 4 * 4 + 2 * 4), cfg, work_path=work,
                checkpoint_every=2, progress=False)
    if damage == "flip a byte":
        blob = bytearray(work.read_bytes())
        blob[-3] ^= 0x10
        work.write_bytes(bytes(blob))
        other = cfg
    else:
        other = dataclasses.replace(cfg, stage2_steps=4)
        reference, rec_ref = distill(teacher(), dataset(), other, progress=False)
    counting = kill_after(dataset(), 10**9)
    with pytest.warns(UserWarning, match=f"not resuming from {work}"):
        resumed, rec = distill(teacher(), counting, other, work_path=work, checkpoint_every=2,
                               progress=False)
    assert counting.reads == (2 * other.stage1_steps + other.stage2_steps) * cfg.batch_size  # all
    for k, v in weights(reference).items():
        assert torch.equal(weights(resumed)[k], v), k
    assert rec["stage1"] == rec_ref["stage1"] and rec["stage2"] == rec_ref["stage2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["work.safetensors"]


def test_half_weights_round_a_students_weights(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: (dataset(), dataset(4)))
    cfg = DistillConfig(**{**FAST, "stage1_steps": 2, "stage2_steps": 1})
    full, _ = get_student(TINY, None, 0, cfg)
    half, _ = get_student(TINY, None, 0, dataclasses.replace(cfg, half_weights=True))
    assert all(torch.equal(weights(half)[k], v.half().float()) for k, v in weights(full).items())
    assert "half_weights" not in student_key(TINY, None, 0, cfg, None)["distill"]


def test_student_key_holds_the_teachers_weight_digest() -> None:
    from raptor.teachers import TrainConfig

    cfg, train = DistillConfig(**FAST), TrainConfig(steps=2)
    a, b = teacher(), build_teacher(TINY, seed=1)
    key = student_key(TINY, train, 0, cfg, a)
    assert key["teacher_weights"] == digest(a.state_dict())
    assert student_key(TINY, train, 0, cfg, digest(a.state_dict())) == key
    assert fingerprint(student_key(TINY, train, 0, cfg, b)) != fingerprint(key)


def test_an_untrained_teachers_students_are_keyed_by_its_configuration() -> None:
    """Other last bits of an untrained teacher's init (another CPU's math library) must find the
    same student: the key holds no weight digest, but the teacher's seed and architecture."""
    cfg, a = DistillConfig(**FAST), teacher()
    other_bits = {k: v.nextafter(torch.full_like(v, 1e9)) if v.is_floating_point() else v
                  for k, v in a.state_dict().items()}
    b = teacher()
    b.load_state_dict(other_bits)
    key = student_key(TINY, None, 0, cfg, a)
    assert key["teacher_weights"] is None
    assert student_key(TINY, None, 0, cfg, b) == key == student_key(TINY, None, 0, cfg, None)
    assert fingerprint(student_key(TINY, None, 1, cfg, a)) != fingerprint(key)


def test_a_rebuilt_teacher_invalidates_its_students(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The teacher's entry is replaced by other weights (rebuilt): the student distilled from the
    old weights is not loaded; a new one is distilled from the new teacher."""
    from raptor.teachers import TrainConfig, teacher_key

    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: (dataset(), dataset(4)))
    train = TrainConfig(steps=2, batch_size=4, warmup_steps=1, eval_every=2)
    cfg = DistillConfig(**{**FAST, "stage1_steps": 2, "stage2_steps": 1})
    first, _ = get_student(TINY, train, 0, cfg)
    key = teacher_key(TINY, train, 0)
    tensors, record = load_entry("teacher", key)
    rebuilt = {k: v + 0.01 if v.is_floating_point() else v for k, v in tensors.items()}
    save_tensors(entry_path("teacher", key), rebuilt, key, {**record, "digest": digest(rebuilt)})
    teachers_seen = []
    real = raptor.train.distill
    monkeypatch.setattr(raptor.train, "distill",
                        lambda t, *a, **k: teachers_seen.append(t) or real(t, *a, **k))
    second, _ = get_student(TINY, train, 0, cfg)
    assert len(teachers_seen) == 1  # distilled again
    assert all(torch.equal(v, rebuilt[k]) for k, v in teachers_seen[0].state_dict().items())
    assert not all(torch.equal(v, weights(second)[k]) for k, v in weights(first).items())
    assert len(list((tmp_path / "student").glob("*.safetensors"))) == 2


# ---------------------------------------------------------------- the convergence criterion


def test_a_stage_decays_from_its_plateau_and_stops_there() -> None:
    """At a learning rate too small to move the loss by 1%, each stage-1 block and stage 2 reach
    their plateau ``patience`` readings after the first (stage 1 not before the TF → AR anneal
    ends, at step 5 of 20), decay over 20% of the steps run and stop: plateau 6, stop 8."""
    cfg = DistillConfig(**{**FAST, "stage1_steps": 20, "stage2_steps": 20, "lr": 1e-9,
                           "min_lr": 0.0, "val_limit": 4, "eval_every": 2, "patience": 2})
    raptor_, rec = distill(teacher(), dataset(), cfg, val_set=dataset(4), progress=False)
    for curves in (*rec["stage1"]["blocks"], rec["stage2"]):
        assert (curves["plateau"], curves["stopped"], curves["why"]) == (6, 8, "plateau")
        assert [v["step"] for v in curves["val"]] == [2, 4, 6, 8] and len(curves["loss"]) == 8
        assert curves["lr"][1:6] == [1e-9] * 5 and curves["lr"][6:] == [5e-10, 0.0]
    assert raptor.train.steps_trained(rec, cfg) == 16 < cfg.stage1_steps + cfg.stage2_steps
    assert raptor.train.steps_trained({"planned": True}, cfg) == 40
    before_blocks = {"stage1": {"loss": [1.0] * 7}, "stage2": {"loss": [1.0] * 5}}
    assert raptor.train.steps_trained(before_blocks, cfg) == 12  # the tier's older records
    groups = TokenGroups.from_model(teacher())
    traj = trajectory(teacher(), dataset(4).tensors[0])
    with torch.no_grad():  # the weights kept are the last ones, whose loss the last reading is
        val = Objective(raptor_, groups, cfg.stage2_weights)(traj)
    assert float(val[0]) == pytest.approx(rec["stage2"]["val"][-1]["loss"], rel=1e-5)


def test_a_loss_that_never_plateaus_decays_by_the_cap_and_says_so() -> None:
    """With more patience than readings, the cap starts the decay where it still ends by the
    cap (step 10 of 12 at 20%), and the record says the cap stopped it."""
    cfg = DistillConfig(**{**FAST, "stage1_steps": 12, "stage2_steps": 12, "lr": 3e-3,
                           "val_limit": 4, "eval_every": 2, "patience": 10})
    _, rec = distill(teacher(), dataset(), cfg, val_set=dataset(4), progress=False)
    for curves in (*rec["stage1"]["blocks"], rec["stage2"]):
        assert (curves["plateau"], curves["stopped"], curves["why"]) == (None, 12, "cap")
        assert curves["decay"] == [10, 12] and curves["lr"][9] == 3e-3 > curves["lr"][10]


def test_a_curve_that_plateaus_before_its_cap_trains_the_same_under_a_longer_one() -> None:
    """With the anneal a fixed number of steps, the cap only bounds a stage: a student whose
    curves all plateau before it (the first test's) is bit-identical under twice the stage-1
    cap, as is its record; under ``anneal_frac`` of the cap the longer cap trains another one."""
    criterion = {**FAST, "stage1_steps": 20, "stage2_steps": 20, "lr": 1e-9, "min_lr": 0.0,
                 "val_limit": 4, "eval_every": 2, "patience": 2}
    runs = [distill(teacher(), dataset(), DistillConfig(**{**criterion, **change}),
                    val_set=dataset(4), progress=False)
            for change in ({}, {"stage1_steps": 40, "anneal_steps": 5}, {"stage1_steps": 40})]
    (short, rec_short), (long, rec_long), (frac, _) = runs
    assert all(c["why"] == "plateau" for c in (*rec_short["stage1"]["blocks"], rec_short["stage2"]))
    assert weights(short).keys() == weights(long).keys()
    assert all(torch.equal(v, weights(long)[k]) for k, v in weights(short).items())
    assert rec_short["stage1"] == rec_long["stage1"] and rec_short["stage2"] == rec_long["stage2"]
    assert not all(torch.equal(v, weights(frac)[k]) for k, v in weights(short).items())


def test_anneal_steps_set_the_anneal_and_unset_leave_stored_keys_alone() -> None:
    cfg = DistillConfig(**{**FAST, "stage1_steps": 40, "anneal_steps": 4})
    assert [cfg.stage1_lambda(s) for s in (0, 2, 4, 39)] == [1.0, 0.5, 0.0, 0.0]
    assert "anneal_steps" not in student_key(TINY, None, 0, DistillConfig(**FAST), None)["distill"]
    assert "anneal_steps" not in raptor.train.stage1_key(DistillConfig(**FAST))
    assert student_key(TINY, None, 0, cfg, None)["distill"]["anneal_steps"] == 4
    with pytest.raises(ValueError, match="anneal_steps"):
        DistillConfig(**{**FAST, "anneal_steps": 5})  # beyond stage 1's 4 steps
    with pytest.raises(ValueError, match="anneal_steps"):
        DistillConfig(**{**FAST, "anneal_steps": 0})


@pytest.mark.parametrize("cap,frac", [(12, 0.2), (2000, 0.2), (2000, 0.1), (7, 1.0), (1, 0.5)])
def test_the_caps_decay_start_is_the_latest_that_ends_by_the_cap(cap: int, frac: float) -> None:
    start = raptor.train.decay_start(cap, frac)
    assert start + math.ceil(frac * start) <= cap < start + 1 + math.ceil(frac * (start + 1))


def test_students_sharing_a_segment_share_its_stage1_entry(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """(1, 3) and (1, 1, 2) share their first block's segment: it is trained once, stored once,
    and is bit-identical to the block a student trains without the cache; blocks, which only
    builds need, are never listed for the artifact tier."""
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path))
    monkeypatch.setenv("RAPTOR_CACHE_LOG", str(tmp_path / "used.log"))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: (dataset(), dataset(4)))
    trained = []
    train_block = raptor.train._train_block
    monkeypatch.setattr(raptor.train, "_train_block",
                        lambda run, index, work: trained.append(run.cfg.repeats[:index + 1])
                        or train_block(run, index, work))
    one, two = (DistillConfig(**{**FAST, "repeats": r}) for r in ((1, 3), (1, 1, 2)))
    _, rec_one = get_student(TINY, None, 0, one)
    _, rec_two = get_student(TINY, None, 0, two)
    assert trained == [(1,), (1, 3), (1, 1), (1, 1, 2)]  # the shared block once
    assert len(list((tmp_path / "block").glob("*.safetensors"))) == 4
    assert rec_one["stage1"]["blocks"][0] == rec_two["stage1"]["blocks"][0]
    used = (tmp_path / "used.log").read_text().split()  # what the artifact tier would take
    assert used and not [name for name in used if name.startswith("block/")]
    alone, _ = distill(teacher(), dataset(), dataclasses.replace(two, stage2=False),
                       progress=False)
    stored = [load_tensors(p)[0] for p in (tmp_path / "block").glob("*.safetensors")]
    first = alone.blocks[0].state_dict()
    assert sum(all(torch.equal(t[k], v) for k, v in first.items()) for t in stored
               if t.keys() == first.keys()) == 1


def test_validation_needs_its_held_out_images() -> None:
    cfg = DistillConfig(**{**FAST, "val_limit": 4, "patience": 2})
    with pytest.raises(ValueError, match="val_set must hold cfg.val_limit=4"):
        distill(teacher(), dataset(), cfg, progress=False)
    with pytest.raises(ValueError, match="patience needs held-out images"):
        DistillConfig(**{**FAST, "patience": 2})


def test_a_student_without_validation_keeps_its_stored_key() -> None:
    key = student_key(TINY, None, 0, DistillConfig(**FAST), None)["distill"]
    assert not {"val_limit", "eval_every", "patience"} & set(key)
    key = student_key(TINY, None, 0, DistillConfig(**FAST, val_limit=4, patience=2), None)
    assert key["distill"]["patience"] == 2


def test_held_out_images_are_outside_the_training_subset() -> None:
    full = TensorDataset(torch.arange(100), torch.arange(100) % 10)
    train = raptor.data.subset(full, 60, 0, targets=(torch.arange(100) % 10).tolist())
    held = raptor.data.held_out(train, 30, seed=1)
    assert len(held) == 30 and not set(held.indices) & set(train.indices)
    assert held.indices == raptor.data.held_out(train, 30, seed=1).indices
    assert held.indices != raptor.data.held_out(train, 30, seed=2).indices
    with pytest.raises(ValueError, match="val_limit=41 exceeds the 40 training images outside"):
        raptor.data.held_out(train, 41, seed=1)
    with pytest.raises(ValueError, match="held-out images need a training subset"):
        raptor.data.held_out(full, 1, seed=1)


def test_students_distilled_side_by_side_in_threads_equal_those_distilled_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three students in three threads (raptor.student_batch) are bit-identical to each distilled
    alone: seeding and data order do not race between threads."""
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: (dataset(), dataset(4)))
    cfgs = [DistillConfig(**{**FAST, "seed": s}) for s in (0, 1, 2)]
    alone = [distill(teacher(), dataset(), cfg, progress=False)[1]["stage2"]["loss"]
             for cfg in cfgs]
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path))
    requests = [StudentRequest(TeacherRequest(TINY, None, 0, "cpu"), cfg) for cfg in cfgs]
    rows = distil_all(requests, threads=3, deadline=float("inf"), device="cpu", capture=False,
                      out=lambda line: None)
    assert [r["status"] for r in rows] == ["done"] * 3
    together = [get_student(TINY, None, 0, cfg)[1]["stage2"]["loss"] for cfg in cfgs]
    assert together == alone


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_captured_steps_match_eager_ones_on_a_gpu() -> None:
    cfg = DistillConfig(**{**FAST, "stage1_steps": 12, "stage2_steps": 6, "device": "cuda",
                           "val_limit": 4, "eval_every": 3})
    eager = distill(teacher(), dataset(), cfg, val_set=dataset(4), progress=False)[1]
    captured = distill(teacher(), dataset(), cfg, val_set=dataset(4), capture=True,
                       progress=False)[1]
    for ours, theirs in zip([*captured["stage1"]["blocks"], captured["stage2"]],
                            [*eager["stage1"]["blocks"], eager["stage2"]]):
        np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-4)
