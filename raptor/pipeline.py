"""The paper's DINOv2 run (§5, Table 1) as one resumable command: distil, save, probe.

    torchrun --nproc_per_node=N -m raptor.pipeline --weights dinov2_vitb14_reg4.safetensors \\
        --imagenet /data/imagenet --k 3 --out runs/k3 [--ade20k DIR] [--nyuv2 DIR] \\
        [--linear-head FILE]

(``python -m raptor.pipeline ...`` runs the same on one device or the CPU.) The steps:

1. the teacher: :func:`raptor.teachers.load_pretrained` (DINOv2 ViT-B/14 with 4 registers by
   default, or any timm ViT via ``--model`` / ``--model-kwargs``);
2. the partition: the paper's DINOv2-B partition for ``--k`` (FACTS.md §2,
   :data:`raptor.phases.DINOV2_B_PARTITIONS`), or ``--partition 7,3,2``;
3. ``stage1`` and ``stage2``: :func:`raptor.train.distill` with the paper's hyperparameters as
   defaults (FACTS.md §3: AdamW lr 3e-4, wd 1e-4, batch 64, 312,500 steps per stage, 10k warmup
   steps, cosine to 1e-6, clip 1.0), bf16 and ``torch.compile`` on CUDA. Its work file
   ``<out>/distill.work.safetensors`` resumes a killed run inside a stage and across the stage
   boundary; ``stage2`` is recorded when the student's blocks are saved to
   ``<out>/student.safetensors`` (atomic safetensors, the distillation record in its metadata);
4. the probes of §5 that have data (:mod:`raptor.probes` recipes): ``probe:student:imagenet``
   (initialisable from DINOv2's linear head, ``--linear-head``), ``probe:student:ade20k``,
   ``probe:student:nyuv2``, and with ``--probe-teacher`` the same for the teacher.

Each finished step is recorded in ``<out>/state.json`` with the configuration it ran with; a
rerun skips finished steps. ``<out>/results.json`` (Table-1 units: top-1 and mIoU in %, RMSE in
metres, beside the paper's numbers) is rewritten after every step. Both files are written
atomically. Every input is checked before any long work: the model name and its arguments, the
partition, the weights file against the architecture, every dataset root's layout, the linear
head's shape, and, for an ``--out`` that already holds a run, its configuration.

[ours] Engineering choices:

- The teacher is built with ``dynamic_img_size=True`` so one model serves distillation at
  ``--img-size`` and the dense probes at their own resolutions (518 px ADE20k, padded NYUv2);
  at the distillation size timm's position embedding is used as is.
- :func:`raptor.train.distill` reads its batches in the main process; :class:`ThreadedImages`
  decodes each batch's JPEGs in a thread pool (PIL releases the GIL while decoding and
  resizing), so ImageNet decoding does not starve the GPU.
- Under ``torchrun`` all ranks distil (DDP, :mod:`raptor.train`); rank 0 alone saves the student
  and runs the probes (single device) while the other ranks exit.
- A distillation step done with another configuration is an error (a student is never
  discarded silently); a probe done with another configuration is run again. Dataset roots are
  not part of a step's configuration, so a run can move between machines.
- The dense probes use bf16 autocast (``amp``) only on CUDA.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import timm
import torch
import torch.distributed as dist
from safetensors import SafetensorError, safe_open
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset

from raptor.checkpoint import (CheckpointError, atomic_write, fingerprint, load_tensors,
                               save_tensors)
from raptor.data import DatasetNotFoundError, class_balanced_indices, get_datasets
from raptor.dense_data import ADE20k, NYUv2Depth
from raptor.model import Raptor, flops_per_image, repeats_from_partition
from raptor.phases import DINOV2_B_PARTITIONS
from raptor.probes import (ADE20K_PROBE, IMAGENET_PROBE, NYUV2_PROBE, ProbeConfig, ProbeResult,
                           init_linear_head, probe_train_transform, save_probe,
                           train_depth_probe, train_linear_probe, train_segmentation_probe)
from raptor.teachers import DINOV2_B, load_pretrained
from raptor.train import DistillConfig, build_student, distill

STATE_FILE = "state.json"
RESULTS_FILE = "results.json"
STUDENT_FILE = "student.safetensors"
WORK_FILE = "distill.work.safetensors"
PROBES = ("imagenet", "ade20k", "nyuv2")
#: Table 1 columns: probe → (column, factor from the probe's metric to the table's unit).
TABLE1_COLUMNS = {"imagenet": ("IN-1k", 100.0), "ade20k": ("ADE20k", 100.0),
                  "nyuv2": ("NYUv2", 1.0)}
#: The paper's Table 1 (FACTS.md §5): mean and standard deviation over 3 seeds (None: one run).
PAPER_TABLE1: dict[str, dict[str, tuple[float, float | None]]] = {
    "Raptor k=2": {"IN-1k": (81.2, 0.2), "ADE20k": (39.6, 0.6), "NYUv2": (0.648, 0.003)},
    "Raptor k=3": {"IN-1k": (83.0, 0.1), "ADE20k": (43.0, 0.3), "NYUv2": (0.618, 0.006)},
    "Raptor k=4": {"IN-1k": (83.2, 0.1), "ADE20k": (43.6, 0.1), "NYUv2": (0.607, 0.006)},
    "DINOv2 ViT-S": {"IN-1k": (80.9, None), "ADE20k": (44.6, None), "NYUv2": (0.600, None)},
    "DINOv2 ViT-B": {"IN-1k": (84.5, None), "ADE20k": (47.5, None), "NYUv2": (0.578, None)},
}
PUBLISHED_DEPTH = 12  # DINOV2_B_PARTITIONS partition DINOv2-B's 12 blocks


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline run; the fields are the command-line options (see ``--help``).

    ``None`` means "automatic": ``k`` is 3 (or the length of ``partition``), ``device`` is CUDA
    when available, ``bf16`` and ``compile`` are on exactly on CUDA, ``loader_threads`` and
    ``workers`` (the probes' DataLoader processes) share the CPU cores between the local ranks,
    and ``probe_epochs`` / ``probe_batch_size`` keep each
    probe's recipe. ``partition`` holds the repeats ``(n_1, …, n_k)``.
    """

    imagenet: Path
    out: Path
    weights: Path | None = None
    download: bool = False
    model: str = DINOV2_B
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    img_size: int = 224
    k: int | None = None
    partition: tuple[int, ...] | None = None
    stage1_steps: int = 312_500
    stage2_steps: int = 312_500
    batch_size: int = 64
    lr: float = 3e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 10_000
    min_lr: float = 1e-6
    grad_clip: float = 1.0
    mlp: str = "teacher"
    init: str = "random"
    seed: int = 0
    train_limit: int | None = None
    device: str | None = None
    bf16: bool | None = None
    compile: bool | None = None
    checkpoint_every: int = 2000
    loader_threads: int | None = None
    ade20k: Path | None = None
    ade20k_size: int = 518
    nyuv2: Path | None = None
    linear_head: Path | None = None
    probe_teacher: bool = False
    probe_epochs: int | None = None
    probe_batch_size: int | None = None
    probe_train_limit: int | None = None
    probe_val_limit: int | None = None
    probe_cache_features: bool = False
    workers: int | None = None
    dry_run: bool = False
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("imagenet", "out", "weights", "ade20k", "nyuv2", "linear_head"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value).expanduser())
        if (self.weights is None) == (not self.download):
            raise ValueError("give exactly one of --weights FILE (a local weights file) and "
                             "--download (fetch the weights from the hub)")
        if not isinstance(self.model_kwargs, dict):
            raise ValueError(f"--model-kwargs must be a JSON object, got {self.model_kwargs!r}")
        if "img_size" in self.model_kwargs:
            raise ValueError("--model-kwargs must not set img_size: use --img-size")
        ints = [("img_size", 1), ("stage1_steps", 0), ("stage2_steps", 0), ("batch_size", 1),
                ("warmup_steps", 0), ("seed", 0), ("checkpoint_every", 1), ("ade20k_size", 1)]
        optional = [("k", 1), ("train_limit", 1), ("loader_threads", 1), ("probe_epochs", 1),
                    ("probe_batch_size", 1), ("probe_train_limit", 1), ("probe_val_limit", 1),
                    ("workers", 0)]
        for name, low in ints + optional:
            value = getattr(self, name)
            if value is None and (name, low) in optional:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= {low}, "
                                 f"got {value!r}")
        if self.partition is not None:
            if not isinstance(self.partition, tuple) or not self.partition or any(
                    isinstance(n, bool) or not isinstance(n, int) or n < 1
                    for n in self.partition):
                raise ValueError(f"--partition must be positive integers n_1,...,n_k, got "
                                 f"{self.partition!r}")
            if self.k is not None and self.k != len(self.partition):
                raise ValueError(f"--k={self.k} contradicts --partition "
                                 f"{','.join(map(str, self.partition))} ({len(self.partition)} "
                                 f"blocks); give one of them")


@dataclass
class _Plan:
    """A validated run: everything the steps need, built before any long work."""

    cfg: PipelineConfig
    teacher: VisionTransformer
    distill_cfg: DistillConfig
    distill_set: Dataset
    probe_data: dict[str, tuple[Dataset, Dataset]]
    num_classes: int
    keys: dict[str, dict[str, Any]]
    device: str
    rank: int
    world: int


class ThreadedImages(Dataset):
    """``dataset`` whose batches (DataLoader's ``__getitems__``) are read by ``threads`` threads.

    :func:`raptor.schedule.batches_from` loads in the main process; decoding a batch of
    ImageNet JPEGs there one by one would cap the distillation's throughput. Samples come out
    in the order asked for, identical to ``dataset``'s.
    """

    def __init__(self, dataset: Dataset, threads: int) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
        self.dataset, self.threads = dataset, threads
        self._pool: ThreadPoolExecutor | None = None

    def __len__(self) -> int:
        return _size(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        if self.threads == 1:
            return [self.dataset[i] for i in indices]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="decode")
        return list(self._pool.map(self.dataset.__getitem__, indices))


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def _repeats(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 7,3,2, got "
                                         f"{text!r}") from None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m raptor.pipeline`` (defaults: the paper's §3/§5 run)."""
    p = argparse.ArgumentParser(prog="python -m raptor.pipeline", description=__doc__.split(
        "\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    d = PipelineConfig.__dataclass_fields__
    g = p.add_argument_group("teacher and partition")
    g.add_argument("--weights", type=Path, help="local weights file of --model (safetensors or "
                   "a weights-only torch file)")
    g.add_argument("--download", action="store_true", help="fetch the weights from the hub "
                   "instead (needs a network)")
    g.add_argument("--model", default=DINOV2_B, help="timm ViT name")
    g.add_argument("--model-kwargs", type=_json_object, default={},
                   help="JSON object of extra timm.create_model arguments")
    g.add_argument("--img-size", type=int, default=d["img_size"].default)
    g.add_argument("--k", type=int, help="number of blocks; the paper's DINOv2-B partition "
                   f"for k in {sorted(DINOV2_B_PARTITIONS)} (default 3)")
    g.add_argument("--partition", type=_repeats, help="repeats n_1,...,n_k instead, e.g. 7,3,2")
    g = p.add_argument_group("distillation (FACTS.md §3)")
    for name in ("stage1_steps", "stage2_steps", "batch_size", "warmup_steps", "seed",
                 "checkpoint_every"):
        g.add_argument(f"--{name.replace('_', '-')}", type=int, default=d[name].default)
    for name in ("lr", "weight_decay", "min_lr", "grad_clip"):
        g.add_argument(f"--{name.replace('_', '-')}", type=float, default=d[name].default)
    g.add_argument("--mlp", default=d["mlp"].default, help="teacher, swiglu or swiglu-wide")
    g.add_argument("--init", default=d["init"].default, help="random (the authors') or teacher")
    g.add_argument("--train-limit", type=int, help="distil on a class-balanced subset")
    g.add_argument("--device", help="cpu, cuda or cuda:<i> (default: cuda when available)")
    g.add_argument("--bf16", action=argparse.BooleanOptionalAction, help="default: on CUDA")
    g.add_argument("--compile", action=argparse.BooleanOptionalAction, help="default: on CUDA")
    g.add_argument("--loader-threads", type=int, help="threads decoding each training batch")
    g = p.add_argument_group("probes (FACTS.md §5)")
    g.add_argument("--ade20k", type=Path, help="ADEChallengeData2016 folder")
    g.add_argument("--ade20k-size", type=int, default=d["ade20k_size"].default)
    g.add_argument("--nyuv2", type=Path, help="nyu_depth_v2 folder (BTS layout)")
    g.add_argument("--linear-head", type=Path, help="DINOv2's linear head to start the "
                   "ImageNet probe from")
    g.add_argument("--probe-teacher", action="store_true", help="probe the teacher too")
    g.add_argument("--probe-epochs", type=int, help="override every probe's epochs")
    g.add_argument("--probe-batch-size", type=int, help="override every probe's batch size")
    g.add_argument("--probe-train-limit", type=int)
    g.add_argument("--probe-val-limit", type=int)
    g.add_argument("--probe-cache-features", action="store_true",
                   help="compute features once (no ImageNet augmentation)")
    g.add_argument("--workers", type=int, help="DataLoader worker processes of the probes")
    p.add_argument("--imagenet", type=Path, required=True, help="folder with train/ and val/")
    p.add_argument("--out", type=Path, required=True, help="run folder (resumable)")
    p.add_argument("--dry-run", action="store_true", help="check everything, print the plan, "
                   "train nothing")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def parse_args(argv: Sequence[str] | None = None) -> PipelineConfig:
    """A :class:`PipelineConfig` from command-line arguments (``sys.argv[1:]`` by default)."""
    args = vars(build_parser().parse_args(argv))
    args["progress"] = not args.pop("quiet")
    return PipelineConfig(**args)


# ---------------------------------------------------------------------------------------------
# Validation: everything before any long work
# ---------------------------------------------------------------------------------------------

def _architecture(cfg: PipelineConfig) -> VisionTransformer:
    """The teacher's architecture on the meta device (no memory, no weights)."""
    if not timm.is_model(cfg.model.split(".")[0]):
        close = timm.list_models(f"{cfg.model.split('_')[0]}_*")[:8]
        raise ValueError(f"--model: unknown timm model {cfg.model!r}; similar names: {close}")
    try:
        model = _create(cfg.model, _model_kwargs(cfg))
    except TypeError as err:
        if isinstance(_create(cfg.model, {}), VisionTransformer):
            raise ValueError(f"--model-kwargs {cfg.model_kwargs} not accepted by {cfg.model}: "
                             f"{err}") from err
        model = _create(cfg.model, {})
    if not isinstance(model, VisionTransformer):
        raise ValueError(f"--model {cfg.model!r} is a {type(model).__name__}, not a timm "
                         f"VisionTransformer")
    if model.patch_embed.proj.in_channels != 3:
        raise ValueError(f"the teacher takes {model.patch_embed.proj.in_channels} input "
                         f"channels; ImageNet images are RGB: in_chans must be 3")
    if not model.has_class_token:
        raise ValueError(f"--model {cfg.model!r} has no cls token; the probes of §5 need one")
    return model


def _create(name: str, kwargs: dict[str, Any]) -> nn.Module:
    """``timm.create_model`` without weights, on the meta device where its init allows."""
    try:
        with torch.device("meta"):
            return timm.create_model(name, pretrained=False, **kwargs)
    except (RuntimeError, NotImplementedError):  # an init that needs real tensors
        return timm.create_model(name, pretrained=False, **kwargs)


def _model_kwargs(cfg: PipelineConfig) -> dict[str, Any]:
    return {"img_size": cfg.img_size, "dynamic_img_size": True, **cfg.model_kwargs}


def resolve_repeats(cfg: PipelineConfig, depth: int) -> tuple[int, ...]:
    """``(n_1, …, n_k)``: ``cfg.partition``, else the paper's DINOv2-B partition for ``cfg.k``."""
    if cfg.partition is not None:
        if sum(cfg.partition) != depth:
            raise ValueError(f"--partition {','.join(map(str, cfg.partition))} sums to "
                             f"{sum(cfg.partition)}, but the teacher has {depth} blocks")
        return cfg.partition
    k = 3 if cfg.k is None else cfg.k
    if k not in DINOV2_B_PARTITIONS:
        raise ValueError(f"--k={k} has no published partition (known: "
                         f"{sorted(DINOV2_B_PARTITIONS)}); pass --partition n_1,...,n_k")
    if depth != PUBLISHED_DEPTH:
        raise ValueError(f"the published partitions are DINOv2-B's ({PUBLISHED_DEPTH} blocks); "
                         f"the teacher has {depth}: pass --partition n_1,...,n_k")
    return repeats_from_partition(DINOV2_B_PARTITIONS[k], depth)


def _limited(dataset: Dataset, limit: int | None, seed: int, what: str,
             targets: Sequence[int] | None = None) -> Dataset:
    """A seeded subset of ``limit`` items (class-balanced when ``targets`` are given)."""
    if limit is None:
        return dataset
    if limit > _size(dataset):
        raise ValueError(f"{what}={limit} exceeds the {_size(dataset)} images")
    if targets is not None:
        return Subset(dataset, class_balanced_indices(targets, limit, seed).tolist())
    order = torch.randperm(_size(dataset), generator=torch.Generator().manual_seed(seed))
    return Subset(dataset, sorted(order[:limit].tolist()))


def _size(dataset: Dataset) -> int:
    return len(dataset)  # type: ignore[arg-type]


def _datasets(cfg: PipelineConfig, patch: int
              ) -> tuple[Dataset, dict[str, tuple[Dataset, Dataset]], int]:
    """The distillation set, each probe's (train, val) sets and ImageNet's class count.

    Every root given is opened (and its layout checked) here, before any training.
    """
    train, val = get_datasets("imagenet", root=cfg.imagenet, img_size=cfg.img_size)
    probe_train = train
    if not cfg.probe_cache_features:  # the recipe's augmentation (needs fresh features)
        probe_train = copy.copy(train)
        probe_train.transform = probe_train_transform(cfg.img_size)
    data = {"imagenet": (
        _limited(probe_train, cfg.probe_train_limit, cfg.seed, "--probe-train-limit",
                 train.targets),
        _limited(val, cfg.probe_val_limit, cfg.seed, "--probe-val-limit", val.targets))}
    if cfg.ade20k is not None:
        if cfg.ade20k_size % patch:
            raise ValueError(f"--ade20k-size={cfg.ade20k_size} must be a multiple of the "
                             f"patch size {patch}")
        data["ade20k"] = (ADE20k(cfg.ade20k, "training", cfg.ade20k_size),
                          ADE20k(cfg.ade20k, "validation", cfg.ade20k_size))
    if cfg.nyuv2 is not None:
        data["nyuv2"] = (NYUv2Depth(cfg.nyuv2, "train"), NYUv2Depth(cfg.nyuv2, "test"))
    for name in ("ade20k", "nyuv2"):
        if name in data:
            data[name] = (
                _limited(data[name][0], cfg.probe_train_limit, cfg.seed, "--probe-train-limit"),
                _limited(data[name][1], cfg.probe_val_limit, cfg.seed, "--probe-val-limit"))
    distill_set = _limited(train, cfg.train_limit, cfg.seed, "--train-limit", train.targets)
    return distill_set, data, len(train.classes)


def _probe_config(cfg: PipelineConfig, probe: str, device: str) -> ProbeConfig:
    recipe = {"imagenet": IMAGENET_PROBE, "ade20k": ADE20K_PROBE, "nyuv2": NYUV2_PROBE}[probe]
    changes: dict[str, Any] = {"seed": cfg.seed, "cache_features": cfg.probe_cache_features,
                               "amp": recipe.amp and device.startswith("cuda")}
    if cfg.probe_epochs is not None:
        changes["epochs"] = cfg.probe_epochs
    if cfg.probe_batch_size is not None:
        changes["batch_size"] = cfg.probe_batch_size
    return dataclasses.replace(recipe, **changes)


def _init_distributed(device: str) -> tuple[int, int]:
    """``(rank, world size)``; joins the process group when started by ``torchrun``."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        if device.startswith("cuda"):
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _cpu_share(cap: int) -> int:
    """This rank's share of the CPU cores, at most ``cap``."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, min(cap, (os.cpu_count() or 1) // local))


def _plan(cfg: PipelineConfig) -> _Plan:
    """Check every input and build what the run needs; raises before any long work."""
    shape = _architecture(cfg)
    repeats = resolve_repeats(cfg, len(shape.blocks))
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_cuda = device.startswith("cuda")
    distill_cfg = DistillConfig(
        repeats=repeats, stage1_steps=cfg.stage1_steps, stage2_steps=cfg.stage2_steps,
        batch_size=cfg.batch_size, lr=cfg.lr, weight_decay=cfg.weight_decay,
        warmup_steps=cfg.warmup_steps, min_lr=cfg.min_lr, grad_clip=cfg.grad_clip, mlp=cfg.mlp,
        init=cfg.init, seed=cfg.seed, dataset="imagenet", train_limit=cfg.train_limit,
        device=device, bf16=on_cuda if cfg.bf16 is None else cfg.bf16,
        compile=on_cuda if cfg.compile is None else cfg.compile)
    teacher = load_pretrained(cfg.model, cfg.weights, allow_download=cfg.download,
                              **_model_kwargs(cfg))
    distill_set, probe_data, num_classes = _datasets(cfg, teacher.patch_embed.patch_size[0])
    if cfg.linear_head is not None:
        init_linear_head(nn.Linear(2 * teacher.embed_dim, num_classes), cfg.linear_head)
    rank, world = _init_distributed(device) if not cfg.dry_run else (0, 1)
    if cfg.batch_size % world or cfg.batch_size > _size(distill_set):
        raise ValueError(f"--batch-size={cfg.batch_size} must be divisible by the world size "
                         f"{world} and at most the {_size(distill_set)} training images")
    threads = cfg.loader_threads or _cpu_share(16)
    weights = ({"file": cfg.weights.name, "bytes": cfg.weights.stat().st_size}
               if cfg.weights is not None else "hub")
    distill_key = {"model": cfg.model, "model_kwargs": _model_kwargs(cfg), "weights": weights,
                   "distill": dataclasses.asdict(distill_cfg), "format": 1}
    keys = {"stage1": distill_key, "stage2": distill_key}
    for who in ("student", "teacher") if cfg.probe_teacher else ("student",):
        for probe, (train, val) in probe_data.items():
            keys[f"probe:{who}:{probe}"] = {
                "model": fingerprint(distill_key) if who == "student" else "teacher",
                "probe": dataclasses.asdict(_probe_config(cfg, probe, device)),
                "images": [_size(train), _size(val)],
                "ade20k_size": cfg.ade20k_size if probe == "ade20k" else None,
                "linear_head": cfg.linear_head.name if cfg.linear_head and probe == "imagenet"
                else None, "format": 1}
    plan = _Plan(cfg, teacher, distill_cfg, ThreadedImages(distill_set, threads), probe_data,
                 num_classes, keys, device, rank, world)
    _check_state(plan, _read_state(cfg.out))
    return plan


# ---------------------------------------------------------------------------------------------
# State and results
# ---------------------------------------------------------------------------------------------

def _read_state(out: Path) -> dict[str, Any]:
    path = out / STATE_FILE
    if not path.is_file():
        return {"format": 1, "steps": {}}
    try:
        state = json.loads(path.read_text())
        if not isinstance(state.get("steps"), dict):
            raise ValueError("no 'steps' object")
    except ValueError as err:
        raise ValueError(f"{path} is not a pipeline state file ({err}); use another --out") from err
    return state


def _check_state(plan: _Plan, state: dict[str, Any]) -> None:
    """Refuse an ``--out`` whose distillation ran with another configuration."""
    for step in ("stage1", "stage2"):
        done = state["steps"].get(step)
        if done is not None and done["config"] != _jsonable(plan.keys[step]):
            saved, now = done["config"], _jsonable(plan.keys[step])
            diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
            inner = [f"{k}.{f}" for k in diff if isinstance(now.get(k), dict)
                     for f in sorted(set(saved.get(k) or {}) | set(now[k]))
                     if (saved.get(k) or {}).get(f) != now[k].get(f)]
            raise ValueError(f"{plan.cfg.out} holds a distillation ({step}) done with another "
                             f"configuration (differs in: {', '.join(inner or diff)}); use a "
                             f"new --out, or the original options to resume")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _is_done(plan: _Plan, state: dict[str, Any], step: str) -> bool:
    done = state["steps"].get(step)
    return done is not None and done["config"] == _jsonable(plan.keys[step])


def _write_json(path: Path, value: dict[str, Any]) -> None:
    text = json.dumps(value, indent=1, default=str)
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def _record(plan: _Plan, state: dict[str, Any], step: str, **result: Any) -> None:
    state["steps"][step] = {"config": _jsonable(plan.keys[step]), "finished": time.strftime(
        "%Y-%m-%dT%H:%M:%S"), **result}
    _write_json(plan.cfg.out / STATE_FILE, state)
    _write_json(plan.cfg.out / RESULTS_FILE, results(plan, state))


def _distill_progress(plan: _Plan) -> tuple[int, int] | None:
    """``(stage, step)`` the distillation's work file resumes from, if it belongs to this run."""
    try:
        with safe_open(plan.cfg.out / WORK_FILE, framework="pt") as f:
            meta = f.metadata() or {}
        record, config = json.loads(meta["record"]), json.loads(meta["config"])
        if config.get("distill") != _jsonable(dataclasses.asdict(plan.distill_cfg)):
            return None
        return int(record["stage"]), int(record["step"])
    except (OSError, SafetensorError, KeyError, ValueError, TypeError):
        return None


def _distill_summary(record: dict[str, Any]) -> dict[str, Any]:
    """Timing, sizes and the final losses (mean of the last 100 steps) of a distillation."""
    def final(stage: str) -> float | None:
        losses = record[stage]["loss"][-100:]
        return sum(losses) / len(losses) if losses else None
    keep = ("seconds", "parameters", "flops_per_image", "teacher_flops_per_image", "world_size")
    return {**{k: record[k] for k in keep if k in record},
            "stage1_final_loss": final("stage1"), "stage2_final_loss": final("stage2")}


def results(plan: _Plan, state: dict[str, Any]) -> dict[str, Any]:
    """The run's results (``results.json``): Table-1 numbers of the finished probes, the paper's
    own (FACTS.md §5), each probe's curve, and the distillation's summary."""
    k = len(plan.distill_cfg.repeats)
    label = {"student": f"Raptor k={k} (this run)", "teacher": f"{plan.cfg.model} (this run)"}
    table: dict[str, dict[str, float]] = {}
    probes: dict[str, dict[str, Any]] = {}
    for step, done in state["steps"].items():
        if step.startswith("probe:") and _is_done(plan, state, step):
            _, who, probe = step.split(":")
            column, factor = TABLE1_COLUMNS[probe]
            table.setdefault(label[who], {})[column] = done["result"]["best"] * factor
            probes.setdefault(who, {})[probe] = done["result"]
    out: dict[str, Any] = {
        "model": plan.cfg.model, "k": k, "repeats": list(plan.distill_cfg.repeats),
        "table1": table, "probes": probes,
        "distill": state["steps"].get("stage2", {}).get("distill"),
        "student_file": STUDENT_FILE if "stage2" in state["steps"] else None,
        "steps_done": sorted(s for s in state["steps"] if _is_done(plan, state, s))}
    if plan.cfg.model.startswith(DINOV2_B.split(".")[0]):
        paper = {"DINOv2 ViT-B": PAPER_TABLE1["DINOv2 ViT-B"]}
        if k in DINOV2_B_PARTITIONS and plan.distill_cfg.repeats == repeats_from_partition(
                DINOV2_B_PARTITIONS[k], PUBLISHED_DEPTH):
            paper[f"Raptor k={k}"] = PAPER_TABLE1[f"Raptor k={k}"]
        out["paper_table1"] = {row: {c: {"mean": m, "sd": s} for c, (m, s) in cols.items()}
                               for row, cols in paper.items()}
        ours = table.get(label["student"], {})
        out["fraction_of_paper_dinov2"] = {c: v / paper["DINOv2 ViT-B"][c][0]
                                           for c, v in ours.items()}
    return out


def format_table(res: dict[str, Any]) -> str:
    """Table 1 as text: this run's rows, then the paper's."""
    columns = [c for c, _ in TABLE1_COLUMNS.values()]
    lines = [f"{'model':<50}" + "".join(f"{c:>16}" for c in columns)]
    rows = [(name, {c: f"{v:.4g}" for c, v in cols.items()})
            for name, cols in res["table1"].items()]
    rows += [(f"{name} (paper)", {c: f"{v['mean']}" + (f" ± {v['sd']}" if v["sd"] else "")
                                  for c, v in cols.items()})
             for name, cols in res.get("paper_table1", {}).items()]
    for name, cols in rows:
        lines.append(f"{name:<50}" + "".join(f"{cols.get(c, '—'):>16}" for c in columns))
    return "\n".join(lines) + "\n(IN-1k top-1 %, ADE20k mIoU %, NYUv2 RMSE m; paper: 3 seeds)"


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------

def _say(plan: _Plan, message: str) -> None:
    if plan.cfg.progress and plan.rank == 0:
        print(f"[raptor.pipeline] {message}", flush=True)


def _distil(plan: _Plan, state: dict[str, Any]) -> Raptor:
    """Stages 1 and 2 (resuming from the work file), then the student saved on rank 0."""
    out = plan.cfg.out

    def note_progress() -> tuple[int, int] | None:
        """Record ``stage1`` once the work file has reached stage 2."""
        progress = _distill_progress(plan)
        if plan.rank == 0 and progress is not None and progress[0] >= 2 \
                and not _is_done(plan, state, "stage1"):
            _record(plan, state, "stage1")
        return progress

    progress = note_progress()
    _say(plan, "distilling: " + (f"resuming at stage {progress[0]}, step {progress[1]}"
                                 if progress else "from the start")
         + f" (repeats {plan.distill_cfg.repeats}, world size {plan.world})")
    try:
        raptor, record = distill(plan.teacher, plan.distill_set, plan.distill_cfg,
                                 work_path=out / WORK_FILE,
                                 checkpoint_every=plan.cfg.checkpoint_every,
                                 progress=plan.cfg.progress)
    finally:
        note_progress()
    if plan.rank == 0:
        save_tensors(out / STUDENT_FILE, raptor.blocks.state_dict(), plan.keys["stage2"], record)
        if not _is_done(plan, state, "stage1"):
            _record(plan, state, "stage1")
        _record(plan, state, "stage2", distill=_distill_summary(record))
        (out / WORK_FILE).unlink(missing_ok=True)
        _say(plan, f"student saved to {out / STUDENT_FILE}")
    if plan.world > 1:
        dist.barrier()
    return raptor


def _load_student(plan: _Plan) -> Raptor:
    tensors, _ = load_tensors(plan.cfg.out / STUDENT_FILE, plan.keys["stage2"])
    raptor = build_student(plan.teacher, plan.distill_cfg)
    raptor.blocks.load_state_dict(tensors)
    return raptor.eval()


def _probe(plan: _Plan, model: nn.Module, probe: str) -> ProbeResult:
    cfg = plan.cfg
    pcfg = _probe_config(cfg, probe, plan.device)
    device = plan.device  # under torchrun: this rank's GPU, made current in _init_distributed
    workers = _cpu_share(8) if cfg.workers is None else cfg.workers
    train, val = plan.probe_data[probe]

    def loader(ds: Dataset, shuffle: bool) -> DataLoader:
        return DataLoader(ds, batch_size=pcfg.batch_size, shuffle=shuffle, num_workers=workers,
                          generator=torch.Generator().manual_seed(cfg.seed) if shuffle else None,
                          pin_memory=device.startswith("cuda"), persistent_workers=workers > 0)

    train_loader, val_loader = loader(train, True), loader(val, False)
    if probe == "imagenet":
        return train_linear_probe(model, train_loader, val_loader, pcfg,
                                  num_classes=plan.num_classes, init_head=cfg.linear_head,
                                  device=device)
    run: Callable[..., ProbeResult] = (train_segmentation_probe if probe == "ade20k"
                                       else train_depth_probe)
    return run(model, train_loader, val_loader, pcfg, device=device)


def _summary(result: ProbeResult) -> dict[str, Any]:
    return {"metric": result.metric, "higher_is_better": result.higher_is_better,
            "best": result.best, "best_epoch": result.best_epoch, "last": result.last,
            "history": list(result.history)}


def _dry_run(plan: _Plan, state: dict[str, Any]) -> dict[str, Any]:
    steps = {step: "done" if _is_done(plan, state, step) else "to do" for step in plan.keys}
    raptor = Raptor(plan.teacher, plan.distill_cfg.repeats, init=plan.distill_cfg.init,
                    mlp=plan.distill_cfg.mlp)
    plan_out = {"dry_run": True, "steps": steps, "repeats": list(plan.distill_cfg.repeats),
                "distill": _jsonable(dataclasses.asdict(plan.distill_cfg)),
                "distill_images": _size(plan.distill_set),
                "probes": {p: [_size(t), _size(v)] for p, (t, v) in plan.probe_data.items()},
                "flops_per_image": flops_per_image(raptor),
                "teacher_flops_per_image": flops_per_image(plan.teacher)}
    _say(plan, "dry run, nothing trained:\n" + json.dumps(plan_out, indent=1))
    return plan_out


def run_pipeline(config: PipelineConfig | Sequence[str]) -> dict[str, Any]:
    """Run (or resume) the whole pipeline; returns :func:`results` (``results.json``).

    ``config`` is a :class:`PipelineConfig` or command-line arguments. With ``dry_run`` it
    returns the plan instead and writes nothing. Under ``torchrun`` the ranks other than 0
    return ``{"rank": r}`` once the student is saved.
    """
    cfg = config if isinstance(config, PipelineConfig) else parse_args(list(config))
    joined = dist.is_initialized()
    try:
        plan = _plan(cfg)
        state = _read_state(cfg.out)
        if cfg.dry_run:
            return _dry_run(plan, state)
        cfg.out.mkdir(parents=True, exist_ok=True)
        raptor: Raptor | None = None
        if _is_done(plan, state, "stage2"):
            _say(plan, "distillation done (state.json): skipped")
        else:
            raptor = _distil(plan, state)
        if plan.rank != 0:
            return {"rank": plan.rank}
        if dist.is_initialized() and not joined:
            dist.destroy_process_group()  # the probes run on rank 0 alone
        for step in plan.keys:
            if not step.startswith("probe:"):
                continue
            if _is_done(plan, state, step):
                _say(plan, f"{step}: done (state.json), skipped")
                continue
            if step in state["steps"]:
                _say(plan, f"{step}: done with another configuration, running again")
            _, who, probe = step.split(":")
            _say(plan, f"{step}: training the probe")
            if who == "student" and raptor is None:
                raptor = _load_student(plan)
            result = _probe(plan, raptor if who == "student" else plan.teacher, probe)
            save_probe(cfg.out / "probes" / f"{who}_{probe}.safetensors", result,
                       _probe_config(cfg, probe, plan.device))
            _record(plan, state, step, result=_summary(result))
        res = results(plan, state)
        if not (cfg.out / RESULTS_FILE).is_file():
            _write_json(cfg.out / RESULTS_FILE, res)
        _say(plan, f"results in {cfg.out / RESULTS_FILE}\n{format_table(res)}")
        return res
    finally:
        if dist.is_initialized() and not joined:
            dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: 0 on success, 2 (with the message) on bad input."""
    try:
        run_pipeline(parse_args(argv))
    except (ValueError, CheckpointError, DatasetNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
