"""The two-stage Raptor training engine (paper §3, Table 2).

Stage 1 trains each block on its own segment of the teacher's trajectory with teacher forcing
annealed into autoregression; stage 2 chains the blocks and trains them end to end from layer 0
to ``L``, autoregressively (losses in :mod:`raptor.losses`). Both stages run the shared loop,
:func:`raptor.loop.train`, with fresh optimiser state (the authors ran them as separate jobs).

[ours] Engineering choices:

- The teacher runs online: each step computes its trajectory for the batch under ``no_grad``
  (cheaper than the authors' 13 TB of stored activations); ``cache_teacher=True`` precomputes
  it once for a small training set and keeps it in memory.
- Each stage-1 block trains alone on its segment (its own optimiser, schedule and stop), on the
  batches every block sees; its initialisation depends only on the seed and its index, so a
  block is a function of the teacher, the seed, its index and segment and the stage-1 recipe:
  :func:`get_student` stores it as a cache entry of its own (``block/``), which every student
  with that segment at that index shares.
- Deterministic on CPU: initialisation from ``seed``, batch order from ``(seed, stage, epoch)``.
  Resumable from atomic safetensors checkpoints; a non-finite loss or gradient stops training
  with an error naming the stage and step, leaving the last good checkpoint in place.
- Under ``torchrun`` (``torch.distributed`` initialised) the step's loss module is wrapped in DDP
  and each rank takes its contiguous slice of the same global batch, so ``N`` processes compute
  the update of one process on the whole batch.
- The convergence criterion (``DistillConfig.patience``): each stage's (each stage-1 block's)
  validation loss — its objective in the form it ends in (AR after the anneal, TF for "TF
  only"), on held-out training images — every ``eval_every`` steps, at a constant learning rate;
  once it falls by less than :data:`DISTILL_TOL` a reading over ``patience`` readings (of
  :data:`DISTILL_FLOOR` for a loss below it: the plateau, :func:`~raptor.loop.flattened`), the
  rate decays linearly to ``min_lr`` over ``decay_frac`` of the steps run so far and the stage
  stops there, keeping its last weights (warmup–stable–decay: Hu et al. 2024, MiniCPM; Hägele et
  al. 2024 found a linear decay of 20% of the steps matches a cosine of the same length). Under
  a cosine tied to the cap the loss fell by more than 1% per 400 steps until the rate reached
  zero, so a patience rule there never fired (8 of 8 students ran to their cap): with the rate
  held constant, the plateau is a measurement.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
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
from raptor.planning import Plan, get_or_plan
from raptor.storage.cache import digest, get_or_build
from raptor.storage.checkpoint import half_rounded, save_training_state
from raptor.loop import (CapturedStep, adamw, batches_from, flattened, resume, seeded, train,
                         warmup_cosine, warmup_stable_decay)
from raptor.losses import BlockObjective, Objective, present_weights
from raptor.model import Raptor, count_parameters, flops_per_image
from raptor.config import DistillConfig, check_int
from raptor.teachers import (TeacherConfig, TeacherRequest, TrainConfig, get_teacher, teacher_key,
                             teacher_snapshot)
from raptor.trajectories import TokenGroups, ViTTeacher, trajectory

CACHE_LIMIT_BYTES = 8 * 2**30
# [ours] A Raptor's distillation loss keeps falling slowly at a constant learning rate, with no
# minimum: its plateau is where it falls by less than 1% a reading over ``patience`` readings
# (:func:`raptor.loop.flattened`). The teachers' rule (no reading 0.1% below the best, for
# ``patience`` readings) would run each stage to its cap: the first block distilled at a constant
# rate still fell by 1.5-1.8% per 100 steps at step 1,600.
DISTILL_TOL = 0.01
# [ours] The loss below which the margin stays at 1% of this floor. A block of one layer can copy
# its teacher's layer: its loss falls geometrically towards zero (4e-6 at 4,000 steps, still 1% a
# reading), where a relative margin never fires; every block of two or more layers stayed above
# 3e-4, and the students' whole (stage-2) losses above 3e-2, so the floor binds on no other.
DISTILL_FLOOR = 1e-4
VAL_BATCH = 250


def build_student(teacher: nn.Module, cfg: DistillConfig) -> Raptor:
    """The untrained Raptor of ``cfg`` on ``teacher``, initialised from ``cfg.seed``."""
    with seeded(cfg.seed):
        return Raptor(teacher, cfg.repeats, depth_scaling=cfg.depth_scaling, mlp=cfg.mlp,
                      init=cfg.init)


Built = tuple[dict[str, torch.Tensor], dict[str, Any]]  # a block's weights and record
# ``store(index, key, build)``: a stage-1 block, stored or built by ``build(work_path)``
BlockStore = Callable[[int, Mapping[str, Any], Callable[[Path | None], Built]], Built]


@dataclass
class _Run:
    """What every step of a distillation needs, in both stages."""

    cfg: DistillConfig
    raptor: Raptor
    teacher: nn.Module
    groups: TokenGroups
    train_set: Dataset
    cache: torch.Tensor | None
    val: torch.Tensor | None
    device: torch.device
    config: dict[str, Any]
    checkpoint_every: int
    progress: bool
    capture: bool = False
    rank: int = 0
    world: int = 1


def distill(teacher: nn.Module, train_set: Dataset, cfg: DistillConfig, *,
            val_set: Dataset | None = None, capture: bool = False,
            work_path: str | Path | None = None, checkpoint_every: int = 200,
            progress: bool = True, blocks: BlockStore | None = None
            ) -> tuple[Raptor, dict[str, Any]]:
    """Distil ``teacher`` (a timm ViT) into the Raptor of ``cfg`` on ``train_set`` (image, label).

    Stage 1 trains each block alone on its segment (its parameters, loss, learning rate and stop
    are its own), so a block depends only on the teacher, the seed, its index and segment and the
    stage-1 recipe: ``blocks(index, key, build)`` may return a stored one (``key``, with the
    teacher's weight digest, says which; ``build(work_path)`` trains it) — :func:`get_student`
    shares them through the cache, so students with a segment in common train it once. Without
    ``blocks``, each is trained here (resumable from ``<work_path>.block<j>``).

    ``val_set``: the held-out images of ``cfg.val_limit`` (its validation loss and convergence
    criterion). ``capture``: each step replayed from CUDA graphs (:class:`~raptor.loop.
    CapturedStep`; one CUDA device), the same steps at a fraction of the launch cost.
    Resumes stage 2 from ``work_path`` if it holds a checkpoint of the same configuration and
    teacher, and writes one there every ``checkpoint_every`` steps and when stage 2 starts. The
    teacher is frozen and moved to ``cfg.device``. Returns the Raptor (eval mode) and a JSON-able
    record: ``stage1`` holds one record per block (``blocks``), ``stage2`` its own; each has the
    loss, ``λ`` and learning rate of every step, with validation its ``val`` curve (``{"step",
    "loss"}``), with ``patience`` its ``plateau`` step (``None`` if the cap
    came first), the step it ``stopped`` and ``why`` (``"plateau"`` or ``"cap"``); and the wall
    time, parameter and FLOP counts.
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
    teacher_digest = digest(teacher.state_dict())
    config = {"distill": dataclasses.asdict(cfg), "teacher": teacher_digest, "format": 2}
    teacher = teacher.eval().requires_grad_(False).to(device)
    raptor = build_student(teacher, cfg).to(device)
    if cfg.compile:
        for block in raptor.blocks:
            block.compile()
    run = _Run(cfg, raptor, teacher, groups, train_set, None, None, device, config,
               checkpoint_every, progress, capture, rank, world)
    record: dict[str, Any] = {
        "stage1": {"blocks": []}, "stage2": _curves(run), "seconds": 0.0,
        "parameters": count_parameters(raptor), "flops_per_image": flops_per_image(raptor),
        "teacher_flops_per_image": flops_per_image(teacher), "world_size": world}
    work = Path(work_path) if work_path is not None else None
    objective = Objective(raptor, groups, cfg.stage2_weights if cfg.weighted else None)
    optimizer = adamw(raptor.raptor_parameters(), cfg, capturable=capture)
    saved = resume(work, model=raptor.blocks, optimizer=optimizer, config=config)
    t0 = time.perf_counter() - (saved["seconds"] if saved is not None else 0.0)
    # the core-seconds of this process and of those it resumes; unknown (left out) where one of
    # them kept none
    c0 = time.process_time() - (saved.get("cpu_seconds", math.inf) if saved is not None else 0.0)

    def spent() -> dict[str, float]:
        """Wall and (where known) processor seconds so far."""
        cpu = time.process_time() - c0
        return {"seconds": time.perf_counter() - t0,
                **({"cpu_seconds": cpu} if math.isfinite(cpu) else {})}

    if cfg.cache_teacher:
        run.cache = _trajectories(run, train_set)
    if val_set is not None:
        run.val = _trajectories(run, val_set)
    if saved is None:
        store = blocks if blocks is not None else _local_blocks(work)
        for index, (start, stop) in enumerate(raptor.partition if cfg.stage1_steps else ()):
            key = {"teacher_weights": teacher_digest, "stage1": stage1_key(cfg),
                   "block": index, "segment": [start, stop], "last": stop == depth, "format": 1}
            tensors, block_record = store(index, key,
                                          lambda path, index=index: _train_block(run, index, path))
            raptor.blocks[index].load_state_dict(tensors)
            record["stage1"]["blocks"].append(
                {k: v for k, v in block_record.items() if k not in ("built", "digest")})
        if cfg.stage2_steps:
            record.update(spent())
            _checkpoint(run, work, raptor.blocks, optimizer, config,
                        {**record, "stage": 2, "step": 0})
            if blocks is None and work is not None:
                for index in range(len(raptor.blocks)):
                    _block_path(work, index).unlink(missing_ok=True)
        start = 0
    else:
        record, start = saved, saved.pop("step")
        record.pop("stage")
    if cfg.stage2_steps:
        run_checkpoint = (lambda done: _checkpoint(
            run, work, raptor.blocks, optimizer, config,
            {**record, **spent(), "stage": 2, "step": done})) \
            if work is not None else None
        raptor.train()
        _train_stage(run, "stage 2", objective, optimizer, [raptor.raptor_parameters()],
                     record["stage2"], cfg.stage2_steps, start, lambda step: 0.0, 2,
                     run_checkpoint)
    record.update({k: round(v, 2) for k, v in spent().items()})
    return raptor.eval(), record


def steps_trained(record: Mapping[str, Any], cfg: DistillConfig) -> int:
    """The steps a Raptor of ``cfg`` trained, by its record: its longest stage-1 curve's and stage
    2's (a criterion stops each where it plateaus); ``cfg``'s budget where the record holds no
    curves (a planned stand-in)."""
    if "stage1" not in record:
        return cfg.stage1_steps + cfg.stage2_steps
    return (max((len(c["loss"]) for c in stage_curves(record, "stage1")), default=0)
            + len(record["stage2"]["loss"]))


def stage_curves(record: Mapping[str, Any], stage: str) -> list[Mapping[str, Any]]:
    """The curves of a distillation record's ``stage``: stage 1's one per block, stage 2's one.
    Records stored before the blocks trained apart (the artifact tier's, until its refill) hold
    stage 1 as one joint curve."""
    curves = record[stage]
    return list(curves["blocks"]) if "blocks" in curves else [curves]


def stage1_key(cfg: DistillConfig) -> dict[str, Any]:
    """The fields of ``cfg`` a stage-1 block depends on (not its partition, nor stage 2's)."""
    fields = distill_key(cfg)
    for later in ("repeats", "stage2_steps", "stage2_weights", "stage2", "half_weights",
                  "device"):
        fields.pop(later, None)
    return fields


def _local_blocks(work: Path | None) -> BlockStore:
    """The stage-1 blocks trained here, each resumable from its own file beside ``work``."""
    return lambda index, key, build: build(_block_path(work, index) if work is not None else None)


def _block_path(work: Path, index: int) -> Path:
    return work.with_suffix(f".block{index}.safetensors")


def _curves(run: _Run) -> dict[str, Any]:
    return {name: [] for name in ("loss", "lambda", "lr",
                                  *(("val",) if run.cfg.val_limit is not None else ()))}


def _train_block(run: _Run, index: int, work: Path | None) -> Built:
    """Stage 1 of block ``index`` alone on its segment: its weights and record."""
    cfg, block = run.cfg, run.raptor.blocks[index]
    segment = run.raptor.partition[index]
    objective = BlockObjective(block, segment, run.groups, cfg.stage1_weights
                               if cfg.weighted and segment[1] == run.raptor.depth else None)
    optimizer = adamw(block.parameters(), cfg, capturable=run.capture)
    config = {**run.config, "block": index}
    saved = resume(work, model=block, optimizer=optimizer, config=config)
    record = saved if saved is not None else _curves(run)
    start = record.pop("step", 0)
    if record.pop("done", False):
        return _weights(block), record

    def checkpoint(done: int, finished: bool = False) -> None:
        _checkpoint(run, work, block, optimizer, config,
                    {**record, "step": done, "done": finished})

    block.train()
    _train_stage(run, f"stage 1, block {index + 1}", objective, optimizer,
                 [list(block.parameters())], record, cfg.stage1_steps, start, cfg.stage1_lambda,
                 1, checkpoint if work is not None else None)
    if work is not None:
        checkpoint(len(record["loss"]), finished=True)
    return _weights(block), record


def _weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def _device(cfg: DistillConfig) -> torch.device:
    if cfg.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device={cfg.device!r} but CUDA is not available")
        if cfg.device == "cuda" and dist.is_initialized():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device(cfg.device)


def _checkpoint(run: _Run, work: Path | None, model: nn.Module,
                optimizer: torch.optim.Optimizer, config: dict[str, Any],
                record: dict[str, Any]) -> None:
    if work is None:
        return
    if run.rank == 0:
        save_training_state(work, model=model, optimizer=optimizer, config=config, record=record)
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


def decay_start(cap: int, decay_frac: float) -> int:
    """The latest step from which a decay of ``decay_frac`` of the steps so far still ends by
    ``cap``: where the cap starts the decay when no plateau came first."""
    return max(s for s in range(cap + 1) if s + math.ceil(decay_frac * s) <= cap)


def _train_stage(run: _Run, label: str, objective: nn.Module, optimizer: torch.optim.Optimizer,
                 clip_groups: list[list[nn.Parameter]], curves: dict[str, Any], steps: int,
                 start: int, lam: Callable[[int], float], stage: int,
                 checkpoint: Callable[[int], None] | None) -> None:
    """Train ``objective``'s parameters for a stage (or one stage-1 block) from ``start``:
    a cosine over ``steps`` without a criterion; with one, warmup–stable–decay (the decay set
    at the plateau, or forced by the cap, in ``curves``), stopping when the decay ends."""
    cfg = run.cfg
    end = lam(steps - 1)  # the form the stage ends in, which its validation loss measures
    step_loss = objective if run.world == 1 else DistributedDataParallel(
        objective, device_ids=[run.device.index] if run.device.type == "cuda" else None)
    criterion = cfg.patience is not None
    if criterion:
        curves.setdefault("plateau", None)
        forced = decay_start(steps, cfg.decay_frac)

    def decay() -> tuple[int, int] | None:
        return tuple(curves["decay"]) if "decay" in curves else None

    def schedule(step: int) -> float:
        if not criterion:
            return warmup_cosine(step, steps, cfg.warmup_steps, cfg.lr, cfg.min_lr)
        if decay() is None and step >= forced:
            curves.update(decay=[step, steps], why="cap")
        return warmup_stable_decay(step, cfg.warmup_steps, cfg.lr, cfg.min_lr, decay())

    def losses(traj: torch.Tensor, weight: float | torch.Tensor,
               terms: tuple[bool, bool] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        with _autocast(run):
            value, parts = step_loss(traj, weight, terms) if stage == 1 else step_loss(traj)
        return value, _average(run, parts.float())

    def after_step(step: int, parts: torch.Tensor, lr: float) -> None:
        curves["loss"].append(_sig(parts.sum().item()))
        curves["lambda"].append(_sig(lam(step)))
        curves["lr"].append(_sig(lr))
        done = step + 1
        last = done == (decay()[1] if criterion and decay() is not None else steps)
        if run.val is None or (done % cfg.eval_every and not last):
            return
        loss = _sig(_val_loss(run, objective, stage, end))
        curves["val"].append({"step": done, "loss": loss})
        if criterion and decay() is None and lam(done) == end and \
                flattened(curves["val"], cfg.patience, DISTILL_TOL, DISTILL_FLOOR):
            curves.update(plateau=done, decay=[done, min(steps, done + math.ceil(
                cfg.decay_frac * done))], why="plateau")

    def stop() -> bool:
        return criterion and decay() is not None and len(curves["loss"]) >= decay()[1]

    captured = None
    if run.capture:
        def inputs(step: int, traj: torch.Tensor) -> tuple[Any, dict[str, torch.Tensor]]:
            weight = lam(step)  # λ = 1 of TF → AR's first step runs the anneal's graph (AR × 0)
            return ((weight > 0, weight < 1 or cfg.autoregressive),
                    {"traj": traj, "lam": torch.tensor(float(weight))})

        captured = (CapturedStep(lambda terms: lambda x: losses(x["traj"], x["lam"], terms),
                                 optimizer, clip_groups, cfg), inputs)
    done = train(label, _batches(run, stage, start, steps),
                 lambda step, traj: losses(traj, lam(step)), optimizer, clip_groups, cfg,
                 steps, after_step=after_step, checkpoint=checkpoint,
                 checkpoint_every=run.checkpoint_every, progress=run.progress and run.rank == 0,
                 initial=start, stop=stop, captured=captured, schedule=schedule)
    if criterion:
        curves["stopped"] = done


@torch.no_grad()
def _val_loss(run: _Run, objective: nn.Module, stage: int, weight: float) -> float:
    """The loss at TF weight ``weight`` on the held-out trajectories (image mean)."""
    objective.eval()
    total = 0.0
    for chunk in run.val.split(VAL_BATCH):
        with _autocast(run):
            _, parts = objective(chunk, weight) if stage == 1 else objective(chunk)
        total += parts.float().sum().item() * len(chunk)
    objective.train()
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
    return {"teacher": teacher_key(teacher_cfg, teacher_train, teacher_seed, cfg.device),
            "teacher_weights": weights, "distill": distill_key(cfg), "format": 1}


def distill_key(cfg: DistillConfig) -> dict[str, Any]:
    """``cfg``'s fields as a key holds them: those added later are left out where unset, so
    the entries stored before them keep their keys."""
    fields = dataclasses.asdict(cfg)
    unset = [k for k in ("half_weights", "anneal_steps") if fields[k] in (False, None)]
    if fields["val_limit"] is None:  # no validation, no criterion
        unset += ["val_limit", "eval_every", "patience", "decay_frac"]
    return {k: v for k, v in fields.items() if k not in unset}


@dataclass(frozen=True)
class StudentRequest:
    """A student as :func:`get_student` is asked for it: its teacher, its distillation and the
    teacher's training step it distils (``snapshot``; ``None``: the trained teacher). What a
    planner's :class:`~raptor.planning.Plan` is handed for its entry."""

    teacher: TeacherRequest
    cfg: DistillConfig
    snapshot: int | None = None


def get_student(teacher_cfg: TeacherConfig, teacher_train: TrainConfig | None, teacher_seed: int,
                cfg: DistillConfig, data_root: str | Path | None = None, *,
                snapshot: int | None = None, progress: bool = True, device: str | None = None,
                capture: bool = False, plan: Plan | None = None) -> tuple[Raptor, dict[str, Any]]:
    """The student of ``cfg`` for that teacher: from the cache, or distilled and stored.

    Chapters asking for the same teacher and configuration share one student. An interrupted
    build resumes from its work file. The teacher trains on ``cfg.device`` if it must.
    ``snapshot``: the student of the teacher's weights at that training step (one of its
    ``snapshot_steps``, e.g. Fig. 13). ``device``: distil there rather than on ``cfg.device`` —
    the same student computed elsewhere, under ``cfg``'s key, its record saying where
    (``trained_on``); ``capture``: its steps replayed from CUDA graphs (:func:`distill`); under a
    ``plan`` a missing student (or teacher) is stood in for, not trained. Returns the Raptor
    (eval mode, on the CPU) and its record.
    """
    if snapshot is None:
        teacher, _ = get_teacher(teacher_cfg, teacher_train, seed=teacher_seed,
                                 data_root=data_root, progress=progress, device=cfg.device,
                                 plan=plan)
    else:
        teacher = teacher_snapshot(teacher_cfg, teacher_train, snapshot, seed=teacher_seed,
                                   data_root=data_root, device=cfg.device, plan=plan)
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
        shared = {k: v for k, v in key.items() if k != "distill"}
        raptor, record = distill(
            teacher, train_set, on, val_set=val_set, capture=capture, work_path=work,
            progress=progress, blocks=lambda index, block, build: get_or_build(
                "block", {**block, **shared}, build, intermediate=True))
        record["trained_on"] = torch.cuda.get_device_name(torch.device(on.device)) \
            if on.device.startswith("cuda") else "cpu"
        tensors = {k: v.cpu() for k, v in raptor.blocks.state_dict().items()}
        return (half_rounded(tensors) if cfg.half_weights else tensors), record

    tensors, record = get_or_plan("student", key, build, request=request, plan=plan)
    raptor = build_student(teacher.cpu(), cfg)
    raptor.blocks.load_state_dict(tensors)
    return raptor.eval(), record
