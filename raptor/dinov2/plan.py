"""A validated pipeline run (:class:`Plan`): every input checked and the key of each step
(:mod:`raptor.dinov2.run_folder`) built before any long work, and the run's ``results.json``."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.utils.data import Dataset

from raptor.data import ThreadedImages
from raptor.dinov2.architecture import architecture, teacher_kwargs
from raptor.dinov2.datasets import build_datasets
from raptor.dinov2.run_config import PipelineConfig
from raptor.dinov2.run_folder import (STUDENT_FILE, check_distillation, done_records,
                                      step_record)
from raptor.dinov2.table1 import table1_results
from raptor.distributed import cpu_share, init_distributed
from raptor.probes import (ADE20K_PROBE, IMAGENET_PROBE, NYUV2_PROBE, ProbeConfig,
                           init_linear_head)
from raptor.storage.artifacts import sha256
from raptor.storage.checkpoint import atomic_write, digest, fingerprint
from raptor.teachers import load_pretrained

RESULTS_FILE = "results.json"


@dataclass
class Plan:
    """A validated run: everything the steps need, built before any long work."""

    cfg: PipelineConfig
    teacher: VisionTransformer
    distill_set: Dataset
    probe_data: dict[str, tuple[Dataset, Dataset]]
    num_classes: int
    keys: dict[str, dict[str, Any]]
    rank: int
    world: int


def probe_config(cfg: PipelineConfig, probe: str, device: str) -> ProbeConfig:
    """Probe ``probe``'s recipe with the run's seed and overrides (``amp`` only on CUDA)."""
    recipe = {"imagenet": IMAGENET_PROBE, "ade20k": ADE20K_PROBE, "nyuv2": NYUV2_PROBE}[probe]
    changes: dict[str, Any] = {"seed": cfg.distill.seed, "cache_features": cfg.probe_cache_features,
                               "amp": recipe.amp and device.startswith("cuda")}
    if cfg.probe_epochs is not None:
        changes["epochs"] = cfg.probe_epochs
    if cfg.probe_batch_size is not None:
        changes["batch_size"] = cfg.probe_batch_size
    return dataclasses.replace(recipe, **changes)


def plan_run(cfg: PipelineConfig) -> Plan:
    """Check every input and build what the run needs; raises before any long work."""
    architecture(cfg)
    teacher = load_pretrained(cfg.model, cfg.weights, allow_download=cfg.download,
                              **teacher_kwargs(cfg))
    distill_set, probe_data, num_classes = build_datasets(cfg, teacher.patch_embed.patch_size[0])
    if cfg.linear_head is not None:
        init_linear_head(nn.Linear(2 * teacher.embed_dim, num_classes), cfg.linear_head)
    rank, world = init_distributed(cfg.distill.device) if not cfg.dry_run else (0, 1)
    if cfg.distill.batch_size % world or cfg.distill.batch_size > len(distill_set):
        raise ValueError(f"--batch-size={cfg.distill.batch_size} must be divisible by the world "
                         f"size {world} and at most the {len(distill_set)} training images")
    threads = cfg.loader_threads or cpu_share(16)
    distill_key = {"model": cfg.model, "model_kwargs": teacher_kwargs(cfg),
                   "weights": digest(teacher.state_dict()),  # content, whatever the file's name
                   "distill": dataclasses.asdict(cfg.distill), "format": 1}
    keys = {"stage1": distill_key, "stage2": distill_key}
    for who in ("student", "teacher") if cfg.probe_teacher else ("student",):
        for probe, (train, val) in probe_data.items():
            keys[f"probe:{who}:{probe}"] = {
                "model": fingerprint(distill_key) if who == "student" else "teacher",
                "probe": dataclasses.asdict(probe_config(cfg, probe, cfg.distill.device)),
                "images": [len(train), len(val)],
                "ade20k_size": cfg.ade20k_size if probe == "ade20k" else None,
                "linear_head": sha256(cfg.linear_head) if cfg.linear_head and probe == "imagenet"
                else None, "format": 1}
    plan = Plan(cfg, teacher, ThreadedImages(distill_set, threads), probe_data, num_classes,
                keys, rank, world)
    check_distillation(cfg.out, keys["stage2"])
    return plan


def results(plan: Plan) -> dict[str, Any]:
    """The run's ``results.json`` (:func:`raptor.dinov2.table1.table1_results`) from its
    checkpoints."""
    done = done_records(plan.cfg.out, plan.keys)
    return table1_results(plan.cfg.model, plan.cfg.distill.repeats, done, STUDENT_FILE)


def step_done(plan: Plan, step: str) -> bool:
    """Whether ``step``'s checkpoint is in the run folder, done with this run's key."""
    return step_record(plan.cfg.out, plan.keys, step) is not None


def write_results(plan: Plan) -> None:
    """Rewrite the run folder's ``results.json`` (atomically)."""
    text = json.dumps(results(plan), indent=1, default=str)
    atomic_write(plan.cfg.out / RESULTS_FILE, lambda tmp: Path(tmp).write_text(text))
