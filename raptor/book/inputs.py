"""What a chapter will read and write, checked before any work (``python -m raptor run`` and
``sweep`` refuse with every problem named): the data sets its spec names, found in their layout;
the files its parameters name; the images its splits must give; the folders it writes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from raptor.book.spec import fields_of, parameters
from raptor.catalog import DATASETS, DatasetNotFoundError, dataset_info, find
from raptor.config import TrainConfig

# Parameters that count images of a split of the chapter's dataset.
IMAGE_COUNTS = {"n_images": "val", "probe_images": "train"}


def missing_inputs(spec: Any) -> list[str]:
    """Every data set and input file (:func:`~raptor.book.spec.input_files`) ``spec`` names that
    is not there, and every image count its dataset's split cannot give."""
    problems = []
    values = parameters(spec)
    wanted = []
    if isinstance(getattr(spec, "train", None), TrainConfig):
        wanted.append((spec.train.dataset, spec.machine.data_root, "dataset / data_root"))
    pretrained = getattr(spec, "pretrained", None)  # a timm ViT beside the teachers
    if pretrained is not None and pretrained.weights and pretrained.images in DATASETS:
        wanted.append((pretrained.images, spec.machine.data_root, "images / data_root"))
    for dataset, root, param in wanted:
        try:
            find(dataset, root)
        except DatasetNotFoundError as err:
            problems.append(f"parameter {param}: {err}")
    for param, where in fields_of(type(spec)).items():
        for path in values[param] if where.files else ():
            if not Path(path).expanduser().is_file():
                problems.append(f"parameter {param}: file {path} does not exist")
    # the analyze chapter reads its images from ``images``, every other from its dataset
    dataset = values.get("images" if pretrained is None else "dataset", values.get("dataset"))
    if dataset in DATASETS:
        info = dataset_info(dataset)
        for param, split in IMAGE_COUNTS.items():
            size = info.val_size if split == "val" else info.train_size
            if param in values and values[param] > size:
                problems.append(f"parameter {param}: {dataset}'s {split} split has {size:,} "
                                f"images, got {values[param]:,}")
    return problems


def unwritable(folder: Path) -> str | None:
    """Why ``folder`` cannot be written (created where it is missing), or ``None``."""
    existing = Path(folder).expanduser().absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None
