"""Tests for raptor.loop: learning-rate values at known points, resumable batch order, the step's
guard and clipping, resume, and bit-identity of teacher training and distillation with literal
copies of the loops they had before :func:`raptor.loop.train` replaced them."""

from __future__ import annotations

import dataclasses
import itertools
import math
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils.data import TensorDataset

from raptor.storage.checkpoint import CheckpointError, save_training_state
from raptor.config import check_recipe
from raptor.loop import (adamw, batches_from, flattened, resolve_device, resume, train,
                         warmup_cosine)
from raptor.losses import autoregressive_loss, teacher_forced_loss
from raptor.teachers import TeacherConfig, TrainConfig, build_teacher, evaluate, train_classifier
from raptor.train import DistillConfig, build_student, distill
from raptor.trajectories import TokenGroups, trajectory


def test_warmup_cosine_known_points() -> None:
    total, warmup, base, low = 110, 10, 1e-3, 1e-5
    assert warmup_cosine(0, total, warmup, base, low) == pytest.approx(base / 10)
    assert warmup_cosine(4, total, warmup, base, low) == pytest.approx(base * 5 / 10)
    assert warmup_cosine(9, total, warmup, base, low) == pytest.approx(base)
    assert warmup_cosine(10, total, warmup, base, low) == pytest.approx(base)
    assert warmup_cosine(60, total, warmup, base, low) == pytest.approx((base + low) / 2)
    assert warmup_cosine(35, total, warmup, base, low) == pytest.approx(
        low + (base - low) * (1 + math.cos(math.pi / 4)) / 2)
    assert warmup_cosine(110, total, warmup, base, low) == pytest.approx(low)
    assert warmup_cosine(500, total, warmup, base, low) == pytest.approx(low)  # clamped
    assert warmup_cosine(0, 100, 0, base) == pytest.approx(base)  # no warmup
    assert warmup_cosine(100, 100, 0, base) == pytest.approx(0.0, abs=1e-15)


@settings(max_examples=50, deadline=None)
@given(total=st.integers(2, 500), warmup=st.integers(0, 50), data=st.data())
def test_warmup_cosine_shape(total: int, warmup: int, data: st.DataObject) -> None:
    base, low = 1.0, 0.01
    lrs = [warmup_cosine(s, total, warmup, base, low) for s in range(total + 5)]
    assert all(low - 1e-12 <= lr <= base + 1e-12 for lr in lrs)
    rising, falling = lrs[:warmup], lrs[warmup:]
    assert all(a < b for a, b in zip(rising, rising[1:]))
    assert all(a >= b - 1e-12 for a, b in zip(falling, falling[1:]))


def index_dataset(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n))


def take(n_steps: int, **kwargs) -> list[tuple[int, list[int]]]:
    it = batches_from(**kwargs)
    return [(step, batch[0].tolist()) for step, batch in itertools.islice(it, n_steps)]


def test_batches_are_deterministic_and_seeded() -> None:
    a = take(12, dataset=index_dataset(23), batch_size=5, seed=3)
    assert a == take(12, dataset=index_dataset(23), batch_size=5, seed=3)
    assert a != take(12, dataset=index_dataset(23), batch_size=5, seed=4)
    assert [s for s, _ in a] == list(range(12))
    assert all(len(b) == 5 for _, b in a)


@pytest.mark.parametrize("start", [0, 1, 3, 4, 5, 9, 13])
def test_resuming_replays_the_tail(start: int) -> None:
    full = take(16, dataset=index_dataset(23), batch_size=5, seed=1)
    resumed = take(16 - start, dataset=index_dataset(23), batch_size=5, seed=1, start_step=start)
    assert resumed == full[start:]


def test_each_epoch_is_a_permutation() -> None:
    n, bs = 23, 5  # 4 full batches per epoch, 3 images dropped
    batches = [b for _, b in take(4 * 5, dataset=index_dataset(n), batch_size=bs, seed=0)]
    epochs = [sum(batches[e * 4:(e + 1) * 4], []) for e in range(5)]
    for ids in epochs:
        assert len(ids) == 20 and len(set(ids)) == 20 and set(ids) <= set(range(n))
    assert len({tuple(e) for e in epochs}) == 5  # reshuffled each epoch


def test_unshuffled_order() -> None:
    got = take(5, dataset=index_dataset(10), batch_size=4, seed=9, shuffle=False)
    assert got == [(0, [0, 1, 2, 3]), (1, [4, 5, 6, 7]), (2, [0, 1, 2, 3]), (3, [4, 5, 6, 7]),
                   (4, [0, 1, 2, 3])]


@pytest.mark.parametrize("bs", [0, -1, 11])
def test_batch_size_errors(bs: int) -> None:
    with pytest.raises(ValueError, match=r"batch_size must be in \[1, 10\]"):
        next(batches_from(index_dataset(10), batch_size=bs, seed=0))


# ---------------------------------------------------------------- the step


Batches = list[tuple[int, tuple[torch.Tensor, torch.Tensor]]]


def line_fit(w: float = 0.0) -> tuple[nn.Linear, Batches]:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.fill_(w)
    x = torch.randn(8, 3)
    return model, [(s, (x, x.sum(1, keepdim=True))) for s in range(6)]


def mse(model: nn.Module):
    def loss(step: int, batch: tuple[torch.Tensor, torch.Tensor]):
        value = F.mse_loss(model(batch[0]), batch[1])
        return value, value.detach()
    return loss


RECIPE = TrainConfig(lr=0.1, weight_decay=0.0, warmup_steps=2, min_lr=0.0, grad_clip=1.0)


def test_train_steps_schedules_clips_and_checkpoints() -> None:
    model, batches = line_fit()
    seen, saved = [], []
    done = train("fit", batches, mse(model), adamw(model.parameters(), RECIPE),
                 [list(model.parameters())], RECIPE, 5,
                 after_step=lambda step, value, lr: seen.append((step, float(value), lr)),
                 checkpoint=saved.append, checkpoint_every=2)
    assert done == 5 and [s for s, _, _ in seen] == [0, 1, 2, 3, 4]  # stops at total
    assert [lr for *_, lr in seen] == [warmup_cosine(s, 5, 2, 0.1, 0.0) for s in range(5)]
    assert seen[-1][1] < seen[0][1]
    assert saved == [2, 4]  # every 2 steps, never after the last


def test_clipping_bounds_the_update_per_group() -> None:
    a, b = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([a, b], lr=1.0)
    recipe = dataclasses.replace(RECIPE, lr=1.0, warmup_steps=0, grad_clip=0.5)  # lr 1 at step 0
    loss = lambda step, _: ((100 * a.sum() + 0.01 * b.sum()),) * 2  # noqa: E731
    train("clip", [(0, None)], loss, opt, [[a], [b]], recipe, 1)
    assert torch.linalg.norm(a).item() == pytest.approx(0.5)  # clipped to 0.5 on its own
    assert torch.allclose(b, torch.full((2,), -0.01))  # untouched by a's large gradient
    a.data.zero_(), b.data.zero_()
    train("clip", [(0, None)], loss, opt, [[a, b]], dataclasses.replace(recipe, grad_clip=None),
          1)
    assert torch.allclose(a, torch.full((2,), -100.0))  # grad_clip=None: no clipping


@pytest.mark.parametrize("what,bad", [("loss", "loss"), ("gradient", "grad")])
def test_non_finite_guard_names_stage_and_step_before_the_update(what: str, bad: str) -> None:
    model, batches = line_fit()

    def loss(step: int, batch: tuple[torch.Tensor, torch.Tensor]):
        value = F.mse_loss(model(batch[0]), batch[1])
        if step == 3 and bad == "loss":
            value = value * float("nan")
        if step == 3 and bad == "grad":
            value = value + model.bias.sum() * float("inf")
            return value, torch.zeros(())  # a finite loss to report, an infinite gradient
        return value, value.detach()

    opt = adamw(model.parameters(), RECIPE)
    before = {}
    with pytest.raises(FloatingPointError, match=f"non-finite {what} in my stage at step 3"):
        train("my stage", batches, loss, opt, [list(model.parameters())], RECIPE, 6,
              after_step=lambda *_: before.update(model.state_dict()))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_resume_restores_model_and_optimizer_or_starts_afresh(tmp_path: Path) -> None:
    model, batches = line_fit()
    opt = adamw(model.parameters(), RECIPE)
    train("fit", batches, mse(model), opt, [list(model.parameters())], RECIPE, 3)
    work = tmp_path / "work.safetensors"
    assert resume(work, model=model, optimizer=opt, config={"a": 1}) is None  # no file
    save_training_state(work, model=model, optimizer=opt, config={"a": 1}, record={"step": 3})
    fresh, _ = line_fit(w=5.0)
    fresh_opt = adamw(fresh.parameters(), RECIPE)
    assert resume(work, model=fresh, optimizer=fresh_opt, config={"a": 2}) is None  # foreign
    assert fresh.weight.eq(5.0).all()
    assert resume(work, model=fresh, optimizer=fresh_opt, config={"a": 1}) == {"step": 3}
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in fresh.state_dict().items())
    assert torch.equal(fresh_opt.state_dict()["state"][0]["exp_avg"],
                       opt.state_dict()["state"][0]["exp_avg"])


# ---------------------------------------------------------------- bit-identity with the old loops

TINY = TeacherConfig(depth=3, embed_dim=32, num_heads=4, patch_size=4, img_size=16, in_chans=1,
                     num_classes=10, reg_tokens=1)


def toy(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 1, 16, 16, generator=g),
                         torch.randint(0, 10, (n,), generator=g))


def old_teacher_loop(model: nn.Module, train_set, val_set, cfg: TrainConfig):
    """``raptor.teachers.train_classifier``'s loop before :func:`raptor.loop.train`, verbatim
    (resume and checkpoints left out: they do not touch the numbers)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    record, snapshots = {"loss": [], "val": []}, {}
    for step, (images, labels) in batches_from(train_set, batch_size=cfg.batch_size,
                                               seed=cfg.seed):
        if step >= cfg.steps:
            break
        model.train()
        torch.manual_seed(cfg.seed * 1_000_003 + step)
        for group in optimizer.param_groups:
            group["lr"] = warmup_cosine(step, cfg.steps, cfg.warmup_steps, cfg.lr, cfg.min_lr)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        record["loss"].append(round(loss.item(), 5))
        done = step + 1
        if done in cfg.snapshot_steps:
            snapshots[done] = {k: v.clone() for k, v in model.state_dict().items()}
        if done % cfg.eval_every == 0 or done == cfg.steps:
            record["val"].append({"step": done, **evaluate(model, val_set)})
    return record, snapshots


def test_teacher_training_is_the_old_loop_bit_for_bit() -> None:
    cfg = TrainConfig(steps=9, batch_size=8, lr=2e-3, warmup_steps=3, eval_every=4,
                      snapshot_steps=(2, 7))
    arch = dataclasses.replace(TINY, p=0.2)  # layer drop: exercises the per-step RNG
    old = build_teacher(arch, seed=1)
    record_old, snaps_old = old_teacher_loop(old, toy(36, 0), toy(20, 1), cfg)
    rng_old = torch.get_rng_state()
    new = build_teacher(arch, seed=1)
    record_new, snaps_new = train_classifier(new, toy(36, 0), toy(20, 1), cfg, config={},
                                             progress=False)
    assert torch.equal(torch.get_rng_state(), rng_old)  # the same RNG consumption
    for k, v in old.state_dict().items():
        assert torch.equal(new.state_dict()[k], v), k
    assert sorted(snaps_new) == [2, 7]
    assert all(torch.equal(snaps_new[s][k], v) for s in snaps_old for k, v in snaps_old[s].items())
    assert record_new["loss"] == record_old["loss"] and record_new["val"] == record_old["val"]


def old_distill_loop(teacher: nn.Module, train_set, cfg: DistillConfig):
    """``raptor.train.distill``'s two stages before :func:`raptor.loop.train`, verbatim for one
    process with the teacher online (resume, checkpoints and the guard left out), its stage-1
    blocks trained together in one loop on the sum of their losses."""
    depth = len(teacher.blocks)
    teacher = teacher.eval().requires_grad_(False)
    raptor = build_student(teacher, cfg)
    groups = TokenGroups.from_model(teacher)
    weights = [cfg.stage1_weights if stop == depth else None for _, stop in raptor.partition]

    def objective(traj: torch.Tensor, stage: int, lam: float):
        if stage == 2:
            loss = autoregressive_loss(raptor, traj, 0, depth, groups, cfg.stage2_weights)
            return loss, loss.detach()[None]
        parts = []
        for block, (start, stop), w in zip(raptor.blocks, raptor.partition, weights):
            loss = traj.new_zeros(())
            if lam > 0:
                loss = loss + lam * teacher_forced_loss(block, traj, start, stop, groups, w)
            if lam < 1:
                loss = loss + (1 - lam) * autoregressive_loss(raptor, traj, start, stop, groups, w)
            parts.append(loss)
        return torch.stack(parts).sum(), torch.stack(parts).detach()

    losses = {1: [], 2: []}
    for stage, steps in ((1, cfg.stage1_steps), (2, cfg.stage2_steps)):
        optimizer = torch.optim.AdamW(raptor.raptor_parameters(), lr=cfg.lr,
                                      weight_decay=cfg.weight_decay)
        clip_groups = [list(b.parameters()) for b in raptor.blocks] if stage == 1 else \
            [raptor.raptor_parameters()]
        raptor.train()
        order = batches_from(train_set, batch_size=cfg.batch_size, seed=cfg.seed * 10 + stage)
        for step, (images, _) in itertools.islice(order, steps):
            with torch.no_grad():
                traj = trajectory(teacher, images).float()
            lam = cfg.stage1_lambda(step) if stage == 1 else 0.0
            for group in optimizer.param_groups:
                group["lr"] = warmup_cosine(step, steps, cfg.warmup_steps, cfg.lr, cfg.min_lr)
            loss, parts = objective(traj, stage, lam)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for group in clip_groups:
                nn.utils.clip_grad_norm_(group, cfg.grad_clip)
            optimizer.step()
            losses[stage].append([float(f"{v:.6g}") for v in parts.tolist()])
    return raptor, losses


def test_distillation_is_the_old_loop_bit_for_bit(tmp_path: Path) -> None:
    """Stage-1 blocks trained apart, each in its own loop with its own optimiser, are the blocks
    trained together in one loop, bit for bit."""
    cfg = DistillConfig(repeats=(2, 1), stage1_steps=5, stage2_steps=4, batch_size=4,
                        warmup_steps=2, lr=1e-3)
    teacher = build_teacher(TINY, seed=0).eval()
    old, losses = old_distill_loop(teacher, toy(14, 2), cfg)
    new, record = distill(teacher, toy(14, 2), cfg, work_path=tmp_path / "work.safetensors",
                          checkpoint_every=2, progress=False)
    for k, v in old.blocks.state_dict().items():
        assert torch.equal(new.blocks.state_dict()[k], v), k
    for j, block in enumerate(record["stage1"]["blocks"]):
        assert block["loss"] == [parts[j] for parts in losses[1]]
    assert record["stage2"]["loss"] == [parts[0] for parts in losses[2]]


@pytest.mark.parametrize("every, kept", [(None, "no checkpoint was written"),
                                         (5, "no checkpoint was written"),
                                         (2, "the checkpoint of step 2 is kept")])
def test_guard_says_which_checkpoint_is_kept(every: int | None, kept: str) -> None:
    model, batches = line_fit()

    def loss(step: int, batch: tuple[torch.Tensor, torch.Tensor]):
        value = F.mse_loss(model(batch[0]), batch[1]) * (float("nan") if step == 3 else 1.0)
        return value, value.detach()

    with pytest.raises(FloatingPointError, match=f"at step 3; {kept}$"):
        train("fit", batches, loss, adamw(model.parameters(), RECIPE),
              [list(model.parameters())], RECIPE, 6,
              checkpoint=(lambda done: None) if every else None, checkpoint_every=every or 1)


def test_resume_warns_naming_the_file_and_leaves_the_model_untouched(tmp_path: Path) -> None:
    model, batches = line_fit()
    opt = adamw(model.parameters(), RECIPE)
    train("fit", batches, mse(model), opt, [list(model.parameters())], RECIPE, 3)
    work = tmp_path / "work.safetensors"
    save_training_state(work, model=model, optimizer=opt, config={"a": 1}, record={"step": 3})
    fresh, _ = line_fit()
    before = {k: v.clone() for k, v in fresh.state_dict().items()}

    def missing(record: dict) -> None:
        raise CheckpointError(f"no checkpoint at {tmp_path / 'snap.safetensors'}")

    with pytest.warns(UserWarning, match=f"not resuming from {work}.*snap.safetensors"):
        assert resume(work, model=fresh, optimizer=adamw(fresh.parameters(), RECIPE),
                      config={"a": 1}, check=missing) is None
    assert all(torch.equal(v, before[k]) for k, v in fresh.state_dict().items())


@pytest.mark.parametrize("field, value", [
    ("lr", float("nan")), ("lr", float("inf")), ("lr", 0.0), ("min_lr", 0.2),
    ("min_lr", -1.0), ("weight_decay", float("nan")), ("grad_clip", 0.0),
    ("grad_clip", float("inf")), ("warmup_steps", -1), ("lr", "1e-3"),
])
def test_check_recipe_names_the_field(field: str, value: object) -> None:
    recipe = types.SimpleNamespace(lr=0.1, min_lr=0.0, weight_decay=0.0, warmup_steps=0,
                                   grad_clip=1.0)
    setattr(recipe, field, value)
    with pytest.raises(ValueError, match=f"^{field} must be"):
        check_recipe(recipe)
    recipe.grad_clip = None
    if field != "grad_clip":
        return
    check_recipe(recipe)  # None: no clipping


def test_resolve_device() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("gpu", "cpu:0", "cuda:x", "", "CUDA"):
        with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda' or"):
            resolve_device(bad)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda:0")


def readings(*losses: float) -> list[dict[str, float]]:
    return [{"step": 100 * (i + 1), "loss": v} for i, v in enumerate(losses)]


def test_a_loss_falling_by_less_than_the_margin_a_reading_has_flattened() -> None:
    falling = readings(*(1.0 * 0.98 ** i for i in range(10)))  # 2% a reading
    slowing = readings(*(1.0 * 0.995 ** i for i in range(10)))  # 0.5% a reading
    assert not any(flattened(falling[:n], 4, 0.01) for n in range(1, 11))
    assert [flattened(slowing[:n], 4, 0.01) for n in range(4, 7)] == [False, True, True]
    spike = readings(1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 9.0, 0.4)  # one noisy reading: still falling
    assert not flattened(spike, 4, 0.01)


def test_a_loss_falling_to_zero_flattens_only_against_a_floor() -> None:
    """A loss halving towards zero falls by 50% a reading forever: no relative margin fires; held
    to 1% of a floor it flattens once its fall is that small, and a floor below the loss binds
    on nothing."""
    vanishing = readings(*(1e-3 * 0.5 ** i for i in range(20)))
    assert not any(flattened(vanishing[:n], 4, 0.01) for n in range(1, 21))
    fired = [n for n in range(1, 21) if flattened(vanishing[:n], 4, 0.01, 1e-4)]
    assert fired and all(vanishing[n - 5]["loss"] - vanishing[n - 1]["loss"] < 4e-6 for n in fired)
    slowing = readings(*(1.0 * 0.995 ** i for i in range(10)))
    assert [flattened(slowing[:n], 4, 0.01, 1e-4) for n in range(1, 11)] == \
        [flattened(slowing[:n], 4, 0.01) for n in range(1, 11)]
