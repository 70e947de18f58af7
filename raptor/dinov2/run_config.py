"""A pipeline run's configuration (:mod:`raptor.dinov2.pipeline`): the paper's distillation
recipe on DINOv2-B's partitions (§3, Table 1) and the run's inputs, each checked on creation."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from raptor.config import DistillConfig
from raptor.model import repeats_from_partition
from raptor.paper import (ADE20K_SIZE, DINOV2_B, DINOV2_B_DEPTH, DINOV2_B_PARTITIONS, IMG_SIZE,
                          RECIPE)


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
