"""A pipeline run's datasets: ImageNet for the distillation, and each probe's (train, val) sets,
every root opened and checked before any training."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

from torch.utils.data import Dataset
from torchvision.datasets import ImageFolder

from raptor.analysis import unreadable_images
from raptor.data import get_datasets, subset
from raptor.dinov2.dense_data import ADE20k, NYUv2Depth
from raptor.dinov2.run_config import PipelineConfig
from raptor.probes import probe_train_transform


def readable(folder: ImageFolder) -> ImageFolder:
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


def build_datasets(cfg: PipelineConfig, patch: int
                   ) -> tuple[Dataset, dict[str, tuple[Dataset, Dataset]], int]:
    """The distillation set, each probe's (train, val) sets and ImageNet's class count.

    Every root given is opened (and its layout checked) here, before any training.
    """
    seed = cfg.distill.seed
    train, val = (readable(d) for d in get_datasets("imagenet", root=cfg.imagenet,
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
