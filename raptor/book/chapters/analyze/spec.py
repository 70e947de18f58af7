"""The spec of the chapter *Your own ViT*: its parameters, checked without the science's imports,
and its profiles (its ``compute`` module computes it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from raptor.book.profiles import (DISTILL, PAPER_DISTILL, PAPER_TEACHER, PAPER_TRAIN, SMOKE_DISTILL,
                                  SMOKE_TEACHER, SMOKE_TRAIN, TEACHER, TRAIN)
from raptor.book.pretrained import require_images, require_vit, require_weights
from raptor.book.spec import Machine, nested, require, require_data
from raptor.catalog import DATASETS, IMAGE_SUFFIXES, dataset_info
from raptor.config import DistillConfig, TeacherConfig, TrainConfig

NAME = "analyze"
NOTEBOOK = "chapters/analyze.ipynb"
COMPANION = "companion"  # the model name of the book's own teacher (the cpu profile's)


@dataclass(frozen=True)
class Spec:
    """``model``: a timm ViT name with its local ``weights`` file (safetensors or a torch state
    dict), or ``"companion"``: the companion's teacher that ``teacher`` describes (trained through
    the cache; the book's default one is in the artifact tier). ``images``: a dataset of
    :mod:`raptor.data` (its validation split) or a folder of image files; ``n_images`` of them at
    random. The max-cut and C1's test (``n_boot`` resamples) at each k of ``k_values`` in
    [2, L − 1]; the pass in batches of ``batch`` images, under bfloat16 autocast with ``bf16``.
    ``input_size``: a timm model's input size (default its own). With ``fit_raptor``, a Raptor of
    k blocks is distilled by ``distill`` (its two stages' steps, at most ``distill_limit`` images)
    on each max-cut and on ``random_partitions`` random partitions per k, from the source's
    images that are not among the ``n_images`` it is compared on (the companion's: the cached
    student of its training images). ``machine``'s ``data_root`` and ``device`` serve every
    model."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    model: str = COMPANION
    weights: str | None = None
    images: str = "fashion-mnist"
    input_size: int | None = None
    n_images: int = 1000
    k_values: tuple[int, ...] = (2, 3, 4)
    n_boot: int = 200
    batch: int = 64
    bf16: bool = False
    fit_raptor: bool = True
    random_partitions: int = 0
    distill: DistillConfig = nested(DISTILL)
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        require(self.n_images >= 8, "n_images", "≥ 8 (C1's test splits them in halves)",
                self.n_images)
        require(self.n_boot >= 10, "n_boot", "≥ 10", self.n_boot)
        require(self.batch >= 1, "batch", "≥ 1", self.batch)
        require(self.input_size is None or self.input_size >= 1, "input_size", "None or ≥ 1",
                self.input_size)
        if self.model == COMPANION:
            require(self.weights is None, "weights", f"None for model {COMPANION!r} (its "
                    f"weights come from the artifact tier)", self.weights)
        else:
            require_weights(self.model, self.weights)
        self._require_k(self.teacher.depth if self.model == COMPANION else None)
        require_images(self.images)
        require(self.random_partitions >= 0 and (self.fit_raptor or not self.random_partitions),
                "random_partitions", "≥ 0, and 0 unless fit_raptor is True",
                self.random_partitions)
        if self.fit_raptor and self.model != COMPANION:
            size, batch = source_size(self.images), self.distill.batch_size
            val = self.distill.val_limit or 0
            held = f" and {val} held out for its convergence criterion" if val else ""
            require(size - self.n_images >= batch + val, "n_images", f"at most {size} − "
                    f"{batch + val} = {size - batch - val} with fit_raptor: the Raptor trains on "
                    f"the images of {self.images!r} ({size}) that are not analysed, a batch of "
                    f"{batch} at least{held}", self.n_images)

    def require_model(self) -> None:
        """The checks that need torch and timm: a timm model against its weights file
        (:func:`~raptor.book.pretrained.require_vit`), and ``k_values`` against its depth."""
        if self.model != COMPANION:
            self._require_k(require_vit(self.model, self.weights, self.input_size))

    def _require_k(self, depth: int | None) -> None:
        """``k_values`` in [2, L − 1] for a model of ``depth`` L (``None``: not known yet)."""
        top = f" = {depth - 1}" if depth else ""
        require(len(self.k_values) >= 1
                and all(2 <= k and (depth is None or k <= depth - 1) for k in self.k_values),
                "k_values", f"a non-empty list of k in [2, L − 1{top}]", self.k_values)


def source_size(images: str) -> int:
    """How many images ``images`` holds: a dataset's validation split, or a folder's image
    files."""
    if images in DATASETS:
        return dataset_info(images).val_size
    return sum(p.suffix.lower() in IMAGE_SUFFIXES
               for p in Path(images).expanduser().rglob("*"))


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN,
                            distill=SMOKE_DISTILL, n_images=64, k_values=(2, 3), n_boot=20,
                            random_partitions=1)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN,
                            distill=PAPER_DISTILL, images=PAPER_TRAIN.dataset, n_images=2000)
