"""The paper's DINOv2 run (§5, Table 1) as one resumable command: distil, save, probe.

    torchrun --nproc_per_node=N -m raptor.dinov2.pipeline \\
        --weights dinov2_vitb14_reg4.safetensors \\
        --imagenet /data/imagenet --k 3 --out runs/k3 [--ade20k DIR] [--nyuv2 DIR] \\
        [--linear-head FILE]

(``python -m raptor.dinov2.pipeline`` runs the same on one device or the CPU.) Steps: ``stage1`` and
``stage2``, :func:`raptor.train.distill` of :attr:`PipelineConfig.distill` (by default
:func:`paper_distill`: §3's recipe on DINOv2-B's partition for ``--k``, Table 1); then each
probe of §5 that has data (:mod:`raptor.probes`) on the student, ``--probe-teacher`` also on the
teacher. Each step's output is a checkpoint in ``--out`` (:mod:`raptor.dinov2.run_folder`), so a
rerun resumes; ``results.json`` (:mod:`raptor.dinov2.table1`) is rewritten after every step.
Every input is checked before any long work: the model and its arguments, the partition, the weights file,
every dataset root, the linear head's shape, a distillation already in ``--out``.

[ours] Engineering choices:

- The teacher is built with ``dynamic_img_size=True`` so one model serves distillation at
  ``--img-size`` and the dense probes at their own resolutions (518 px ADE20k, padded NYUv2).
- Training batches are decoded by a thread pool (:class:`raptor.data.ThreadedImages`).
- Under ``torchrun`` all ranks distil (DDP, :mod:`raptor.distributed`); rank 0 alone saves the
  student and runs the probes (single device) while the other ranks exit.
- A distillation done with another configuration is an error (a student is never discarded
  silently); a probe done with another configuration is run again. The teacher's weights (and
  ``--linear-head``) enter the keys by their digest, so other weights under the same file name
  are another configuration; a step file that fails its digest is redone, with a warning.
- The dense probes use bf16 autocast (``amp``) only on CUDA.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import typing
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import timm
import torch
import torch.distributed as dist
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets import ImageFolder

from raptor import gpu_cost
from raptor.analysis import unreadable_images, vit_shape
from raptor.catalog import DatasetNotFoundError, dataset_info
from raptor.data import ThreadedImages, get_datasets, subset
from raptor.dinov2.cli import add_options, field_defaults, numbers
from raptor.dinov2.dense_data import ADE20k, NYUv2Depth
from raptor.dinov2.dense_probes import train_depth_probe, train_segmentation_probe
from raptor.dinov2.run_folder import (STUDENT_FILE, WORK_FILE, check_distillation, done_records,
                                      jsonable, saved, step_path, step_record)
from raptor.dinov2.table1 import format_table, table1_results
from raptor.distributed import cpu_share, init_distributed
from raptor.model import Raptor, flops_per_image, repeats_from_partition
from raptor.paper import (ADE20K_SIZE, DINOV2_B, DINOV2_B_DEPTH, DINOV2_B_PARTITIONS, IMG_SIZE,
                          RECIPE, TABLE1_SEEDS)
from raptor.probes import (ADE20K_PROBE, IMAGENET_PROBE, NYUV2_PROBE, ProbeConfig, ProbeResult,
                           init_linear_head, probe_train_transform, train_linear_probe)
from raptor.storage.artifacts import sha256
from raptor.storage.checkpoint import (CheckpointError, atomic_write, digest, fingerprint,
                                       load_tensors, save_tensors)
from raptor.teachers import load_pretrained
from raptor.train import DistillConfig, build_student, distill

RESULTS_FILE = "results.json"
#: Fields that are not options one to one: ``repeats`` comes from ``--k`` / ``--partition``, the
#: dataset is ImageNet, ``progress`` is ``--quiet``.
_NOT_OPTIONS = ("distill", "repeats", "dataset", "progress")
_HELP = {
    "imagenet": "folder with train/ and val/", "out": "run folder (resumable)",
    "weights": "local weights file of --model (safetensors or a weights-only torch file)",
    "download": "fetch the weights from the hub instead (needs a network)",
    "model": "timm ViT name", "model_kwargs": "JSON object of extra timm.create_model arguments",
    "loader_threads": "threads decoding a training batch (None: a share of the cores)",
    "ade20k": "ADEChallengeData2016 folder", "nyuv2": "nyu_depth_v2 folder (BTS layout)",
    "linear_head": "DINOv2's linear head to start the ImageNet probe from",
    "probe_teacher": "probe the teacher too", "probe_epochs": "override every probe's epochs",
    "probe_batch_size": "override every probe's batch size",
    "probe_cache_features": "compute features once (no ImageNet augmentation)",
    "workers": "the probes' DataLoader processes (None: a share of the cores)",
    "dry_run": "check everything, print the plan, train nothing",
    "device": "cpu, cuda or cuda:<i> (None: cuda when available)",
    "bf16": "None: on CUDA", "compile": "None: on CUDA"}


def published_repeats(k: int) -> tuple[int, ...]:
    """``(n_1, …, n_k)`` of DINOv2-B's partition into ``k`` blocks (Table 1)."""
    if k not in DINOV2_B_PARTITIONS:
        raise ValueError(f"--k={k} has no published partition (known: "
                         f"{sorted(DINOV2_B_PARTITIONS)}); pass --partition n_1,...,n_k")
    return repeats_from_partition(DINOV2_B_PARTITIONS[k], DINOV2_B_DEPTH)


def paper_distill(**changes: Any) -> DistillConfig:
    """The paper's recipe (§3) on ImageNet with DINOv2-B's k = 3 partition; ``device`` defaults to
    CUDA when available, ``bf16`` and ``compile`` to on exactly on CUDA; ``changes`` override."""
    device = changes.pop("device", None) or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.startswith("cuda")
    return DistillConfig(**{"repeats": published_repeats(3), **dataclasses.asdict(RECIPE),
                            "dataset": "imagenet", "bf16": cuda, "compile": cuda, **changes,
                            "device": device})


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline run; the fields are the command-line options (see ``--help``), and so are
    those of ``distill`` (:func:`paper_distill` by default).

    ``None`` means "automatic": ``loader_threads`` and ``workers`` (the probes' DataLoader
    processes) share the CPU cores between the local ranks, and ``probe_epochs`` /
    ``probe_batch_size`` keep each probe's recipe. The probes use ``distill.seed``.
    """

    imagenet: Path
    out: Path
    distill: DistillConfig = field(default_factory=paper_distill)
    weights: Path | None = None
    download: bool = False
    model: str = DINOV2_B
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    img_size: int = IMG_SIZE
    checkpoint_every: int = 2000
    loader_threads: int | None = None
    ade20k: Path | None = None
    ade20k_size: int = ADE20K_SIZE
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
        if not isinstance(self.distill, DistillConfig) or self.distill.dataset != "imagenet":
            raise ValueError(f"distill must be a DistillConfig with dataset='imagenet', got "
                             f"{self.distill!r}")
        for name, hint in typing.get_type_hints(PipelineConfig).items():
            value, low = getattr(self, name), int(name != "workers")
            kinds = (hint, *typing.get_args(hint))
            if value is not None and Path in kinds:
                object.__setattr__(self, name, Path(value).expanduser())
            elif value is not None and int in kinds and (
                    isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= {low}, "
                                 f"got {value!r}")
        if (self.weights is None) == (not self.download):
            raise ValueError("give exactly one of --weights FILE (a local weights file) and "
                             "--download (fetch the weights from the hub)")
        if not isinstance(self.model_kwargs, dict):
            raise ValueError(f"--model-kwargs must be a JSON object, got {self.model_kwargs!r}")
        if "img_size" in self.model_kwargs:
            raise ValueError("--model-kwargs must not set img_size: use --img-size")
        if self.out.exists() and not self.out.is_dir():
            raise ValueError(f"--out {self.out} is an existing file; give a folder (a new one, "
                             f"or the run folder of a run to resume)")


@dataclass
class _Plan:
    """A validated run: everything the steps need, built before any long work."""

    cfg: PipelineConfig
    teacher: VisionTransformer
    distill_set: Dataset
    probe_data: dict[str, tuple[Dataset, Dataset]]
    num_classes: int
    keys: dict[str, dict[str, Any]]
    rank: int
    world: int


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m raptor.dinov2.pipeline``: one option per field of
    :class:`PipelineConfig` and of :class:`~raptor.config.DistillConfig` (:mod:`raptor.dinov2.cli`;
    defaults: the paper's §3/§5 run), ``--k`` / ``--partition`` for the repeats and ``--quiet``."""
    p = argparse.ArgumentParser(prog="python -m raptor.dinov2.pipeline", description=__doc__.split(
        "\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    paper = {n: None if n in ("device", "bf16", "compile") else v  # None: automatic
             for n, v in dataclasses.asdict(paper_distill(device="cpu")).items()}
    add_options(p.add_argument_group("run and probes (§5)"), PipelineConfig,
                field_defaults(PipelineConfig), skip=_NOT_OPTIONS, helps=_HELP)
    g = p.add_argument_group("distillation (§3)")
    add_options(g, DistillConfig, paper, skip=_NOT_OPTIONS, helps=_HELP)
    g.add_argument("--k", type=int, help="number of blocks, with the paper's DINOv2-B "
                   f"partition for k in {sorted(DINOV2_B_PARTITIONS)} (None: 3)")
    g.add_argument("--partition", type=numbers(int), help="repeats n_1,...,n_k instead")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def parse_args(argv: Sequence[str] | None = None) -> PipelineConfig:
    """A :class:`PipelineConfig` from command-line arguments (``sys.argv[1:]`` by default)."""
    args = vars(build_parser().parse_args(argv))
    k, partition = args.pop("k"), args.pop("partition")
    if k is not None and partition is not None and k != len(partition):
        raise ValueError(f"--k={k} contradicts --partition {','.join(map(str, partition))} "
                         f"({len(partition)} blocks); give one of them")
    changes = {name: args.pop(name) for name in typing.get_type_hints(DistillConfig)
               if name not in _NOT_OPTIONS}
    repeats = partition if partition is not None else published_repeats(3 if k is None else k)
    args["distill"] = paper_distill(repeats=repeats, **{n: v for n, v in changes.items()
                                                        if v is not None})
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
    patch = model.patch_embed.patch_size[0]
    if cfg.img_size % patch:
        raise ValueError(f"--img-size={cfg.img_size} must be a multiple of {cfg.model}'s patch "
                         f"size {patch} (e.g. {max(1, round(cfg.img_size / patch)) * patch})")
    repeats, depth = cfg.distill.repeats, len(model.blocks)
    if sum(repeats) != depth:
        raise ValueError(f"the partition {','.join(map(str, repeats))} sums to {sum(repeats)}, "
                         f"but the teacher has {depth} blocks (the published partitions of --k "
                         f"are DINOv2-B's {DINOV2_B_DEPTH}): pass --partition n_1,...,n_k")
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


def _readable(folder: ImageFolder) -> ImageFolder:
    """``folder`` (ImageNet's split) without the image files PIL cannot read, with a warning
    naming them and the split's files that are not images (which ImageFolder leaves out
    silently); one with no readable image is an error. Checked before any training, so no
    unreadable file stops it hours in."""
    root, kept = Path(folder.root), set(map(Path, (p for p, _ in folder.samples)))
    others = sorted(p for p in root.rglob("*") if p.is_file() and p not in kept
                    and not p.name.startswith("."))
    bad = set(unreadable_images([Path(p) for p, _ in folder.samples]))
    for what, files in (("files that are not images", others),
                        ("image files that cannot be read", sorted(bad))):
        if files:
            warnings.warn(f"{root}: leaving out {len(files)} {what}: "
                          f"{', '.join(map(str, files[:10]))}{' …' if len(files) > 10 else ''}",
                          stacklevel=2)
    if bad:
        folder.samples = [(p, y) for p, y in folder.samples if Path(p) not in bad]
        folder.imgs, folder.targets = folder.samples, [y for _, y in folder.samples]
    if not folder.samples:
        raise ValueError(f"--imagenet: {root} holds no readable image files")
    return folder


def _datasets(cfg: PipelineConfig, patch: int
              ) -> tuple[Dataset, dict[str, tuple[Dataset, Dataset]], int]:
    """The distillation set, each probe's (train, val) sets and ImageNet's class count.

    Every root given is opened (and its layout checked) here, before any training.
    """
    seed = cfg.distill.seed
    train, val = (_readable(d) for d in get_datasets("imagenet", root=cfg.imagenet,
                                                     img_size=cfg.img_size))
    probe_train = train
    if not cfg.probe_cache_features:  # the recipe's augmentation (needs fresh features)
        probe_train = copy.copy(train)
        probe_train.transform = probe_train_transform(cfg.img_size)
    data = {"imagenet": (probe_train, val)}
    if cfg.ade20k is not None:
        if cfg.ade20k_size % patch:
            raise ValueError(f"--ade20k-size={cfg.ade20k_size} must be a multiple of the "
                             f"patch size {patch}")
        data["ade20k"] = (ADE20k(cfg.ade20k, "training", cfg.ade20k_size),
                          ADE20k(cfg.ade20k, "validation", cfg.ade20k_size))
    if cfg.nyuv2 is not None:
        data["nyuv2"] = (NYUv2Depth(cfg.nyuv2, "train"), NYUv2Depth(cfg.nyuv2, "test"))
    targets = {"imagenet": (train.targets, val.targets)}
    for name, (tr, va) in data.items():
        tr_targets, va_targets = targets.get(name, (None, None))
        data[name] = (subset(tr, cfg.probe_train_limit, seed, name="--probe-train-limit",
                             targets=tr_targets),
                      subset(va, cfg.probe_val_limit, seed, name="--probe-val-limit",
                             targets=va_targets))
    distill_set = subset(train, cfg.distill.train_limit, seed, name="--train-limit",
                         targets=train.targets)
    return distill_set, data, len(train.classes)


def _probe_config(cfg: PipelineConfig, probe: str, device: str) -> ProbeConfig:
    recipe = {"imagenet": IMAGENET_PROBE, "ade20k": ADE20K_PROBE, "nyuv2": NYUV2_PROBE}[probe]
    changes: dict[str, Any] = {"seed": cfg.distill.seed, "cache_features": cfg.probe_cache_features,
                               "amp": recipe.amp and device.startswith("cuda")}
    if cfg.probe_epochs is not None:
        changes["epochs"] = cfg.probe_epochs
    if cfg.probe_batch_size is not None:
        changes["batch_size"] = cfg.probe_batch_size
    return dataclasses.replace(recipe, **changes)


def _plan(cfg: PipelineConfig) -> _Plan:
    """Check every input and build what the run needs; raises before any long work."""
    _architecture(cfg)
    teacher = load_pretrained(cfg.model, cfg.weights, allow_download=cfg.download,
                              **_model_kwargs(cfg))
    distill_set, probe_data, num_classes = _datasets(cfg, teacher.patch_embed.patch_size[0])
    if cfg.linear_head is not None:
        init_linear_head(nn.Linear(2 * teacher.embed_dim, num_classes), cfg.linear_head)
    rank, world = init_distributed(cfg.distill.device) if not cfg.dry_run else (0, 1)
    if cfg.distill.batch_size % world or cfg.distill.batch_size > len(distill_set):
        raise ValueError(f"--batch-size={cfg.distill.batch_size} must be divisible by the world "
                         f"size {world} and at most the {len(distill_set)} training images")
    threads = cfg.loader_threads or cpu_share(16)
    distill_key = {"model": cfg.model, "model_kwargs": _model_kwargs(cfg),
                   "weights": digest(teacher.state_dict()),  # content, whatever the file's name
                   "distill": dataclasses.asdict(cfg.distill), "format": 1}
    keys = {"stage1": distill_key, "stage2": distill_key}
    for who in ("student", "teacher") if cfg.probe_teacher else ("student",):
        for probe, (train, val) in probe_data.items():
            keys[f"probe:{who}:{probe}"] = {
                "model": fingerprint(distill_key) if who == "student" else "teacher",
                "probe": dataclasses.asdict(_probe_config(cfg, probe, cfg.distill.device)),
                "images": [len(train), len(val)],
                "ade20k_size": cfg.ade20k_size if probe == "ade20k" else None,
                "linear_head": sha256(cfg.linear_head) if cfg.linear_head and probe == "imagenet"
                else None, "format": 1}
    plan = _Plan(cfg, teacher, ThreadedImages(distill_set, threads), probe_data, num_classes,
                 keys, rank, world)
    check_distillation(cfg.out, keys["stage2"])
    return plan


def results(plan: _Plan) -> dict[str, Any]:
    """The run's ``results.json`` (:func:`raptor.dinov2.table1.table1_results`) from its
    checkpoints."""
    done = done_records(plan.cfg.out, plan.keys)
    return table1_results(plan.cfg.model, plan.cfg.distill.repeats, done, STUDENT_FILE)


def _done(plan: _Plan, step: str) -> bool:
    return step_record(plan.cfg.out, plan.keys, step) is not None


def _write_results(plan: _Plan) -> None:
    text = json.dumps(results(plan), indent=1, default=str)
    atomic_write(plan.cfg.out / RESULTS_FILE, lambda tmp: Path(tmp).write_text(text))


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------

def _say(plan: _Plan, message: str) -> None:
    if plan.cfg.progress and plan.rank == 0:
        print(f"[raptor.dinov2.pipeline] {message}", flush=True)


def _distil(plan: _Plan) -> Raptor:
    """Stages 1 and 2 (resuming from the work file), then the student saved on rank 0."""
    out = plan.cfg.out
    work = saved(out / WORK_FILE)
    _say(plan, "distilling: " + (f"resuming at stage {work[1]['stage']}, step "
                                 f"{work[1]['step']}" if work else "from the start")
         + f" (repeats {plan.cfg.distill.repeats}, world size {plan.world})")
    try:
        raptor, record = distill(plan.teacher, plan.distill_set, plan.cfg.distill,
                                 work_path=out / WORK_FILE,
                                 checkpoint_every=plan.cfg.checkpoint_every,
                                 progress=plan.cfg.progress)
    finally:
        if plan.rank == 0:
            _write_results(plan)
    if plan.rank == 0:
        save_tensors(out / STUDENT_FILE, raptor.blocks.state_dict(), plan.keys["stage2"], record)
        (out / WORK_FILE).unlink(missing_ok=True)
        _write_results(plan)
        _say(plan, f"student saved to {out / STUDENT_FILE}")
    if plan.world > 1:
        dist.barrier()
    return raptor


def _load_student(plan: _Plan) -> Raptor:
    tensors, _ = load_tensors(plan.cfg.out / STUDENT_FILE, plan.keys["stage2"])
    raptor = build_student(plan.teacher, plan.cfg.distill)
    raptor.blocks.load_state_dict(tensors)
    return raptor.eval()


def _probe(plan: _Plan, model: nn.Module, probe: str) -> ProbeResult:
    cfg = plan.cfg
    device = cfg.distill.device  # under torchrun: this rank's GPU, made current in init_distributed
    pcfg = _probe_config(cfg, probe, device)
    workers = cpu_share(8) if cfg.workers is None else cfg.workers
    train, val = plan.probe_data[probe]

    def loader(ds: Dataset, shuffle: bool) -> DataLoader:
        return DataLoader(ds, batch_size=pcfg.batch_size, shuffle=shuffle, num_workers=workers,
                          generator=torch.Generator().manual_seed(cfg.distill.seed) if shuffle
                          else None, pin_memory=device.startswith("cuda"),
                          persistent_workers=workers > 0)

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


def _dry_run(plan: _Plan) -> dict[str, Any]:
    steps = {step: "to do" if not _done(plan, step) else "done" for step in plan.keys}
    raptor = build_student(plan.teacher, plan.cfg.distill)
    plan_out = {"dry_run": True, "steps": steps, "repeats": list(plan.cfg.distill.repeats),
                "distill": jsonable(dataclasses.asdict(plan.cfg.distill)),
                "distill_images": len(plan.distill_set),
                "probes": {p: [len(t), len(v)] for p, (t, v) in plan.probe_data.items()},
                "flops_per_image": flops_per_image(raptor),
                "teacher_flops_per_image": flops_per_image(plan.teacher),
                "cost": cost(plan.cfg.distill, plan.cfg.model, plan.cfg.img_size).iloc[:, 0]
                .to_dict()}
    _say(plan, "dry run, nothing trained:\n" + json.dumps(plan_out, indent=1))
    return plan_out


def cost(distill: DistillConfig | None = None, model: str = DINOV2_B,
         img_size: int = IMG_SIZE) -> pd.DataFrame:
    """What one DINOv2 run (a Raptor of Table 1) costs on a GPU (:mod:`raptor.gpu_cost`), and
    Table 1's runs: the distillation (a Raptor applies its blocks as often as ``model`` has layers,
    so it costs ``model``'s parameters) and the ImageNet linear probe's forward passes through the
    frozen student, every epoch."""
    distill = distill or paper_distill(device="cpu")
    vit = vit_shape(model, img_size)
    params = sum(p.numel() for p in vit.parameters())
    tokens = vit.patch_embed.num_patches + vit.num_prefix_tokens
    source, tflops, mark = gpu_cost.throughput()
    flops = {"distillation": gpu_cost.training_flops(
                 params, tokens, distill.batch_size * (distill.stage1_steps + distill.stage2_steps)),
             "ImageNet linear probe": gpu_cost.training_flops(
                 params, tokens, IMAGENET_PROBE.epochs * dataset_info("imagenet").train_size)
             / 3}  # forward passes only: 2 of the 6
    runs = len(DINOV2_B_PARTITIONS) * TABLE1_SEEDS
    rows = {what: f"{f / 1e15:.4g} PFLOP, {mark}{gpu_cost.gpu_hours(f, tflops):.3g} GPU-hours"
            for what, f in {**flops, "one run": sum(flops.values()),
                            f"Table 1's {runs} runs (k = 2, 3, 4; {TABLE1_SEEDS} seeds)":
                                runs * sum(flops.values())}.items()}
    rows["GPU-hours at"] = f"{tflops:.4g} TFLOP/s ({source})"
    rows["not counted"] = ("the ADE20k and NYUv2 probes (smaller datasets), the teacher's "
                           "forward passes")
    return pd.DataFrame({f"the DINOv2 run: {model} at {img_size} px": rows})


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
        if cfg.dry_run:
            return _dry_run(plan)
        cfg.out.mkdir(parents=True, exist_ok=True)
        raptor: Raptor | None = None
        if _done(plan, "stage2"):
            _say(plan, f"distillation done ({STUDENT_FILE}): skipped")
        else:
            raptor = _distil(plan)
        if plan.rank != 0:
            return {"rank": plan.rank}
        if dist.is_initialized() and not joined:
            dist.destroy_process_group()  # the probes run on rank 0 alone
        for step in (s for s in plan.keys if s.startswith("probe:")):
            if _done(plan, step):
                _say(plan, f"{step}: done, skipped")
                continue
            if step_path(plan.cfg.out, step).exists():
                _say(plan, f"{step}: done with another configuration, running again")
            _, who, probe = step.split(":")
            _say(plan, f"{step}: training the probe")
            if who == "student" and raptor is None:
                raptor = _load_student(plan)
            result = _probe(plan, raptor if who == "student" else plan.teacher, probe)
            save_tensors(step_path(cfg.out, step), result.head.state_dict(), plan.keys[step],
                         _summary(result))
            _write_results(plan)
        res = results(plan)
        if not (cfg.out / RESULTS_FILE).is_file():
            _write_results(plan)
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
