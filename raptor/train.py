"""The two-stage Raptor training engine (paper §3, Table 2).

Stage 1 trains each block on its own segment of the teacher's trajectory with teacher forcing
annealed into autoregression; stage 2 chains the blocks and trains them end to end from layer 0
to ``L``, autoregressively (losses in :mod:`raptor.losses`). Both stages run the shared loop,
:func:`raptor.loop.train`, with fresh optimiser state (the authors ran them as separate jobs).

[ours] Engineering choices:

- The teacher runs online: each step computes its trajectory for the batch under ``no_grad``
  (cheaper than the authors' 13 TB of stored activations); ``cache_teacher=True`` precomputes
  it once for a small training set and keeps it in memory.
- The ``k`` stage-1 blocks train in one loop on the same batches; gradients are clipped per
  block, so each block trains exactly as it would alone.
- Deterministic on CPU: initialisation from ``seed``, batch order from ``(seed, stage, epoch)``.
  Resumable from atomic safetensors checkpoints; a non-finite loss or gradient stops training
  with an error naming the stage and step, leaving the last good checkpoint in place.
- Under ``torchrun`` (``torch.distributed`` initialised) the step's loss module is wrapped in DDP
  and each rank takes its contiguous slice of the same global batch, so ``N`` processes compute
  the update of one process on the whole batch.
- The convergence criterion (``DistillConfig.patience``): each stage's validation loss — the
  stage's objective in the form it ends in (AR after the anneal, TF for "TF only"), on held-out
  training images — every ``eval_every`` steps; a stage stops once it has not fallen by
  :data:`DISTILL_TOL` for ``patience`` evaluations and keeps its best weights, as the teachers do
  (:data:`raptor.teachers.CONVERGENCE_TOL`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, TensorDataset
from tqdm import tqdm

from raptor import data
from raptor.planning import get_or_plan
from raptor.storage.cache import digest
from raptor.storage.checkpoint import half_rounded, load_tensors, save_tensors, save_training_state
from raptor.loop import (CapturedStep, adamw, batches_from, improves, plateaued, resume, seeded,
                         train)
from raptor.losses import Objective, present_weights
from raptor.model import Raptor, count_parameters, flops_per_image
from raptor.config import DistillConfig, check_int
from raptor.teachers import (TeacherConfig, TeacherRequest, TrainConfig, get_teacher, teacher_key,
                             teacher_snapshot)
from raptor.trajectories import TokenGroups, ViTTeacher, trajectory

CACHE_LIMIT_BYTES = 8 * 2**30
# [ours] A Raptor's distillation loss keeps falling slowly, with no minimum: a stage stops once
# ``patience`` evaluations bring it down by less than 1% of itself (the teachers' 0.1% would run
# every stage to its cap). Three of the book's students so distilled on a GPU stopped at 1,900-2,000
# of 2,000 steps a stage, their loss falling under 0.5% per 100 steps (results/students/).
DISTILL_TOL = 0.01
VAL_BATCH = 250


def build_student(teacher: nn.Module, cfg: DistillConfig) -> Raptor:
    """The untrained Raptor of ``cfg`` on ``teacher``, initialised from ``cfg.seed``."""
    with seeded(cfg.seed):
        return Raptor(teacher, cfg.repeats, depth_scaling=cfg.depth_scaling, mlp=cfg.mlp,
                      init=cfg.init)


@dataclass
class _Run:
    """What every step of a distillation needs."""

    cfg: DistillConfig
    raptor: Raptor
    teacher: nn.Module
    objective: Objective
    step_loss: nn.Module
    train_set: Dataset
    cache: torch.Tensor | None
    val: torch.Tensor | None
    device: torch.device
    config: dict[str, Any]
    record: dict[str, Any]
    work_path: Path | None
    checkpoint_every: int
    progress: bool
    capture: bool = False
    rank: int = 0
    world: int = 1
    t0: float = 0.0
    best: dict[str, torch.Tensor] | None = None  # the current stage's best weights (patience)


def distill(teacher: nn.Module, train_set: Dataset, cfg: DistillConfig, *,
            val_set: Dataset | None = None, capture: bool = False,
            work_path: str | Path | None = None, checkpoint_every: int = 200,
            progress: bool = True) -> tuple[Raptor, dict[str, Any]]:
    """Distil ``teacher`` (a timm ViT) into the Raptor of ``cfg`` on ``train_set`` (image, label).

    ``val_set``: the held-out images of ``cfg.val_limit`` (its validation loss and convergence
    criterion). ``capture``: each step replayed from CUDA graphs (:class:`~raptor.loop.
    CapturedStep`; one CUDA device), the same steps at a fraction of the launch cost.
    Resumes from ``work_path`` if it holds a checkpoint of the same configuration and teacher,
    and writes one there every ``checkpoint_every`` steps and at the end of stage 1. The teacher
    is frozen and moved to ``cfg.device``. Returns the Raptor (eval mode) and a JSON-able record:
    per stage the loss, ``λ`` and learning rate of every step (stage 1 also each block's loss),
    with validation its ``val`` curve (``{"step", "loss"}``), with ``patience`` its ``best``
    (step and loss of the weights kept), ``stopped`` (the steps it ran) and ``converged``
    (whether the criterion stopped it, else its cap did); the wall time, parameter and FLOP counts.
    """
    if not isinstance(cfg, DistillConfig):
        raise TypeError(f"cfg must be a DistillConfig, got {type(cfg).__name__}")
    check_int("checkpoint_every", checkpoint_every, 1)
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    if (cfg.val_limit is None) != (val_set is None) or (
            val_set is not None and len(val_set) != cfg.val_limit):
        raise ValueError(f"val_set must hold cfg.val_limit={cfg.val_limit} held-out images, got "
                         f"{None if val_set is None else len(val_set)}")
    if capture and (not cfg.device.startswith("cuda") or world > 1 or cfg.compile):
        raise ValueError("capture needs one CUDA device (no process group) and compile=False")
    depth = ViTTeacher(teacher).depth
    if sum(cfg.repeats) != depth:
        raise ValueError(f"sum(repeats)={sum(cfg.repeats)} must equal the teacher's depth {depth}")
    if cfg.batch_size % world or cfg.batch_size > len(train_set):
        raise ValueError(f"batch_size={cfg.batch_size} must be divisible by the world size "
                         f"{world} and at most the {len(train_set)} training images")
    groups = TokenGroups.from_model(teacher)
    if cfg.weighted:
        for weights in (cfg.stage1_weights, cfg.stage2_weights):
            present_weights(groups, weights)
    if cfg.cache_teacher:
        size = len(train_set) * (depth + 1) * groups.num_tokens * teacher.embed_dim * 4
        if size > CACHE_LIMIT_BYTES:
            raise ValueError(f"cache_teacher would hold {size / 2**30:.1f} GiB of trajectories "
                             f"(limit {CACHE_LIMIT_BYTES / 2**30:.0f} GiB); "
                             f"use cache_teacher=False")
    device = _device(cfg)
    config = {"distill": dataclasses.asdict(cfg), "teacher": digest(teacher.state_dict()),
              "format": 1}
    teacher = teacher.eval().requires_grad_(False).to(device)
    raptor = build_student(teacher, cfg).to(device)
    if cfg.compile:
        for block in raptor.blocks:
            block.compile()
    stage1_weights = [cfg.stage1_weights if cfg.weighted and stop == depth else None
                      for _, stop in raptor.partition]
    objective = Objective(raptor, groups, stage1_weights,
                          cfg.stage2_weights if cfg.weighted else None)
    step_loss = objective if world == 1 else DistributedDataParallel(
        objective, device_ids=[device.index] if device.type == "cuda" else None)
    def curves(*names: str) -> dict[str, list[Any]]:
        return {name: [] for name in (*names, *(("val",) if val_set is not None else ()))}

    record: dict[str, Any] = {
        "stage1": curves("loss", "lambda", "lr", "block_loss"),
        "stage2": curves("loss", "lambda", "lr"), "seconds": 0.0,
        "parameters": count_parameters(raptor), "flops_per_image": flops_per_image(raptor),
        "teacher_flops_per_image": flops_per_image(teacher), "world_size": world}
    run = _Run(cfg, raptor, teacher, objective, step_loss, train_set, None, None, device, config,
               record, Path(work_path) if work_path is not None else None, checkpoint_every,
               progress, capture, rank, world)
    optimizer = _optimizer(run)

    def best_of(saved: dict[str, Any]) -> None:  # verified before the weights are restored
        if saved[f"stage{saved['stage']}"].get("best", {}).get("step"):
            run.best = load_tensors(_best_path(run.work_path), config)[0]

    saved = resume(run.work_path, model=raptor.blocks, optimizer=optimizer, config=config,
                   check=best_of)
    stage, start = (saved.pop("stage"), saved.pop("step")) if saved is not None else (1, 0)
    run.record = record if saved is None else saved
    if cfg.cache_teacher:
        run.cache = _trajectories(run, train_set)
    if val_set is not None:
        run.val = _trajectories(run, val_set)
    run.t0 = time.perf_counter() - run.record["seconds"]
    for this, steps in ((1, cfg.stage1_steps), (2, cfg.stage2_steps)):
        if this < stage or steps == 0:
            continue
        if this > stage:
            optimizer, start = _optimizer(run), 0
            if this == 2 and cfg.stage1_steps:
                _checkpoint(run, optimizer, 2, 0)
        _train_stage(run, this, steps, start, optimizer)
    run.record["seconds"] = round(time.perf_counter() - run.t0, 2)
    return raptor.eval(), run.record


def _device(cfg: DistillConfig) -> torch.device:
    if cfg.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device={cfg.device!r} but CUDA is not available")
        if cfg.device == "cuda" and dist.is_initialized():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device(cfg.device)


def _optimizer(run: _Run) -> torch.optim.Optimizer:
    return adamw(run.raptor.raptor_parameters(), run.cfg, capturable=run.capture)


def _best_path(work_path: Path) -> Path:
    return work_path.with_suffix(".best.safetensors")


def _checkpoint(run: _Run, optimizer: torch.optim.Optimizer, stage: int, step: int) -> None:
    if run.work_path is None:
        return
    if run.rank == 0:
        run.record["seconds"] = time.perf_counter() - run.t0
        if run.best is not None:
            save_tensors(_best_path(run.work_path), run.best, run.config)
        save_training_state(run.work_path, model=run.raptor.blocks, optimizer=optimizer,
                            config=run.config, record={**run.record, "stage": stage, "step": step})
    if run.world > 1:
        dist.barrier()


def _autocast(run: _Run) -> Any:
    return torch.autocast("cuda", dtype=torch.bfloat16) if run.cfg.bf16 else nullcontext()


@torch.no_grad()
def _trajectories(run: _Run, dataset: Dataset) -> torch.Tensor:
    """The teacher trajectories of ``dataset``, in dataset order, on the device."""
    chunks = []
    loader = DataLoader(dataset, batch_size=256, shuffle=False, generator=torch.Generator())
    for images, _ in tqdm(loader, desc="teacher cache", disable=not run.progress or run.rank != 0):
        with _autocast(run):
            chunks.append(trajectory(run.teacher, images.to(run.device)).float())
    return torch.cat(chunks)


def _batches(run: _Run, stage: int, start: int, steps: int
             ) -> Iterator[tuple[int, torch.Tensor]]:
    """``(step, teacher trajectory of this rank's slice)`` for steps ``start..steps-1``."""
    source = run.train_set if run.cache is None else TensorDataset(torch.arange(len(run.train_set)))
    local = run.cfg.batch_size // run.world
    part = slice(run.rank * local, (run.rank + 1) * local)
    order = batches_from(source, batch_size=run.cfg.batch_size, seed=run.cfg.seed * 10 + stage,
                         start_step=start)
    for step, batch in islice(order, steps - start):
        if run.cache is not None:
            yield step, run.cache[batch[0][part].to(run.device)]  # the images' dataset indices
            continue
        with torch.no_grad(), _autocast(run):  # left before the yield: the step needs grads
            traj = trajectory(run.teacher, batch[0][part].to(run.device)).float()
        yield step, traj


def _train_stage(run: _Run, stage: int, steps: int, start: int,
                 optimizer: torch.optim.Optimizer) -> None:
    cfg, curves = run.cfg, run.record[f"stage{stage}"]
    clip_groups = [list(b.parameters()) for b in run.raptor.blocks] if stage == 1 else \
        [run.raptor.raptor_parameters()]
    lam = cfg.stage1_lambda if stage == 1 else lambda step: 0.0
    end = lam(steps - 1)  # the form the stage ends in, which its validation loss measures
    if cfg.patience is not None:
        curves.setdefault("best", {"step": 0, "loss": math.inf})

    def objective(traj: torch.Tensor, weight: float | torch.Tensor,
                  terms: tuple[bool, bool] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        with _autocast(run):
            value, parts = run.step_loss(traj, stage, weight, terms)
        return value, _average(run, parts.float())

    def after_step(step: int, parts: torch.Tensor, lr: float) -> None:
        curves["loss"].append(_sig(parts.sum().item()))
        curves["lambda"].append(_sig(lam(step)))
        curves["lr"].append(_sig(lr))
        if stage == 1:
            curves["block_loss"].append([_sig(v) for v in parts.tolist()])
        done = step + 1
        if run.val is None or (done % cfg.eval_every and done != steps):
            return
        loss = _sig(_val_loss(run, stage, end))
        curves["val"].append({"step": done, "loss": loss})
        if cfg.patience is not None and improves(loss, curves["best"]["loss"], DISTILL_TOL):
            curves["best"] = {"step": done, "loss": loss}
            run.best = {k: v.detach().clone() for k, v in run.raptor.blocks.state_dict().items()}

    def stale() -> bool:
        return cfg.patience is not None and lam(len(curves["loss"])) == end and \
            plateaued(curves["val"], curves["best"]["step"], cfg.patience)

    captured = None
    if run.capture:
        def inputs(step: int, traj: torch.Tensor) -> tuple[Any, dict[str, torch.Tensor]]:
            weight = lam(step)  # λ = 1 of TF → AR's first step runs the anneal's graph (AR × 0)
            return ((weight > 0, weight < 1 or cfg.autoregressive),
                    {"traj": traj, "lam": torch.tensor(float(weight))})

        captured = (CapturedStep(lambda terms: lambda x: objective(x["traj"], x["lam"], terms),
                                 optimizer, clip_groups, cfg), inputs)
    run.raptor.train()
    done = train(f"stage {stage}", _batches(run, stage, start, steps),
                 lambda step, traj: objective(traj, lam(step)), optimizer, clip_groups, cfg,
                 steps, after_step=after_step,
                 checkpoint=(lambda done: _checkpoint(run, optimizer, stage, done))
                 if run.work_path is not None else None,
                 checkpoint_every=run.checkpoint_every, progress=run.progress and run.rank == 0,
                 initial=start, stop=stale, captured=captured)
    if cfg.patience is not None:
        curves.update(stopped=done, converged=stale())
        if run.best is not None:
            run.raptor.blocks.load_state_dict(run.best)
        run.best = None


@torch.no_grad()
def _val_loss(run: _Run, stage: int, weight: float) -> float:
    """The stage's loss at TF weight ``weight`` on the held-out trajectories (image mean)."""
    run.raptor.eval()
    total = 0.0
    for chunk in run.val.split(VAL_BATCH):
        with _autocast(run):
            _, parts = run.objective(chunk, stage, weight)
        total += parts.float().sum().item() * len(chunk)
    run.raptor.train()
    return total / len(run.val)


def _sig(value: float) -> float:
    """``value`` to 6 significant digits, for a compact JSON record."""
    return float(f"{value:.6g}")


def _average(run: _Run, values: torch.Tensor) -> torch.Tensor:
    """Mean over ranks (the loss of the whole global batch)."""
    if run.world > 1:
        values = values.clone()
        dist.all_reduce(values)
        values /= run.world
    return values


def student_key(teacher_cfg: TeacherConfig, teacher_train: TrainConfig | None, teacher_seed: int,
                cfg: DistillConfig, teacher: nn.Module | str | None) -> dict[str, Any]:
    """The cache key of a student: its teacher's key, the digest of the teacher's weights
    (``teacher``: the model, or that digest), so a rebuilt teacher gets new students, and the
    distillation configuration.

    An untrained teacher (``teacher_train`` ``None``) is its configuration and seed: its weights
    carry no digest, because their last bits depend on the machine's math library (the
    truncated-normal init goes through MKL's ``erfinv``), which would give its students other
    keys on another CPU."""
    if teacher_train is None:
        weights = None
    else:
        weights = teacher if isinstance(teacher, str) else digest(teacher.state_dict())
    distill = dataclasses.asdict(cfg)
    if not distill["half_weights"]:  # a field added later: off, left out (stored keys hold)
        del distill["half_weights"]
    if distill["val_limit"] is None:  # likewise: no validation, no criterion
        for later in ("val_limit", "eval_every", "patience"):
            del distill[later]
    return {"teacher": teacher_key(teacher_cfg, teacher_train, teacher_seed, cfg.device),
            "teacher_weights": weights, "distill": distill, "format": 1}


@dataclass(frozen=True)
class StudentRequest:
    """A student as :func:`get_student` is asked for it: its teacher, its distillation and the
    teacher's training step it distils (``snapshot``; ``None``: the trained teacher). What a
    planner (:func:`raptor.planning.planning`) is handed for its entry."""

    teacher: TeacherRequest
    cfg: DistillConfig
    snapshot: int | None = None


def get_student(teacher_cfg: TeacherConfig, teacher_train: TrainConfig | None, teacher_seed: int,
                cfg: DistillConfig, data_root: str | Path | None = None, *,
                snapshot: int | None = None, progress: bool = True, device: str | None = None,
                capture: bool = False) -> tuple[Raptor, dict[str, Any]]:
    """The student of ``cfg`` for that teacher: from the cache, or distilled and stored.

    Chapters asking for the same teacher and configuration share one student. An interrupted
    build resumes from its work file. The teacher trains on ``cfg.device`` if it must.
    ``snapshot``: the student of the teacher's weights at that training step (one of its
    ``snapshot_steps``, e.g. Fig. 13). ``device``: distil there rather than on ``cfg.device`` —
    the same student computed elsewhere, under ``cfg``'s key, its record saying where
    (``trained_on``); ``capture``: its steps replayed from CUDA graphs (:func:`distill`). Returns
    the Raptor (eval mode, on the CPU) and its record.
    """
    if snapshot is None:
        teacher, _ = get_teacher(teacher_cfg, teacher_train, seed=teacher_seed,
                                 data_root=data_root, progress=progress, device=cfg.device)
    else:
        teacher = teacher_snapshot(teacher_cfg, teacher_train, snapshot, seed=teacher_seed,
                                   data_root=data_root, device=cfg.device)
    key = student_key(teacher_cfg, teacher_train, teacher_seed, cfg, teacher)
    if snapshot is not None:
        key["snapshot"] = snapshot
    request = StudentRequest(TeacherRequest(teacher_cfg, teacher_train, teacher_seed, cfg.device),
                             cfg, snapshot)

    def build(work: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        train_set, _ = data.get_datasets(cfg.dataset, root=data_root,
                                         img_size=teacher_cfg.img_size,
                                         train_limit=cfg.train_limit, seed=cfg.seed)
        val_set = data.held_out(train_set, cfg.val_limit, cfg.seed) \
            if cfg.val_limit is not None else None
        on = dataclasses.replace(cfg, device=device) if device is not None else cfg
        raptor, record = distill(teacher, train_set, on, val_set=val_set, capture=capture,
                                 work_path=work, progress=progress)
        record["trained_on"] = torch.cuda.get_device_name(torch.device(on.device)) \
            if on.device.startswith("cuda") else "cpu"
        tensors = {k: v.cpu() for k, v in raptor.blocks.state_dict().items()}
        return (half_rounded(tensors) if cfg.half_weights else tensors), record

    tensors, record = get_or_plan("student", key, build, request=request)
    raptor = build_student(teacher.cpu(), cfg)
    raptor.blocks.load_state_dict(tensors)
    return raptor.eval(), record
