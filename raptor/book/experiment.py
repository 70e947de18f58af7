"""Steps every experiment shares: a chapter's teachers, students and evaluation images from its
spec, a model's trajectories on images held in memory, in batches, the walk from a teacher to its
phases (§2, App. A.1), and a linear probe's accuracy."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from raptor import data
from raptor.analysis import image_data, load_vit, split
from raptor.book.spec import Pretrained, SpecError
from raptor.loop import resolve_device
from raptor.phases import Partition, maxcut, partition_to_repeats
from raptor.probes import linear_probe, probe_features
from raptor.similarity import layer_similarity, phase_matrix
from raptor.structure import PhaseExcess, image_growth_nulls, image_phase_matrices, phase_excess
from raptor.storage.cache import planned_images
from raptor.teachers import get_teacher, teacher_snapshot
from raptor.train import get_student
from raptor.trajectories import TokenGroups, collect_trajectories


# A chapter's spec nests ``teacher`` (TeacherConfig), ``train`` (TrainConfig), ``machine``
# (raptor.book.spec.Machine) and, for a chapter with students, ``distill`` (DistillConfig).
def teacher_of(spec: Any, p: float = 0.0, *, seed: int = 0, trained: bool = True,
               residual: bool = True, **train_changes: Any
               ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The chapter's teacher with stochastic depth ``p`` (trained through the cache, or untrained)
    and its training record; ``train_changes`` override its training's fields."""
    train = dataclasses.replace(spec.train, seed=seed, **train_changes) if trained else None
    return get_teacher(dataclasses.replace(spec.teacher, p=p, residual=residual), train,
                       seed=seed, data_root=spec.machine.data_root, progress=False,
                       device=spec.machine.device)


def student_of(spec: Any, p: float, partition: Partition, *, seed: int = 0,
               trained: bool = True, residual: bool = True, snapshot: int | None = None,
               teacher_changes: dict[str, Any] | None = None, **changes: Any):
    """The Raptor distilled with ``partition`` (max-cut or any) from :func:`teacher_of`'s teacher
    (of its weights at training step ``snapshot``, Fig. 13, if given), cached. ``changes``
    override the distillation's fields (Table 2's ablations)."""
    train = (dataclasses.replace(spec.train, seed=seed, **(teacher_changes or {}))
             if trained else None)
    cfg = dataclasses.replace(spec.distill, repeats=partition_to_repeats(partition),
                              dataset=spec.train.dataset, seed=seed,
                              **{"device": resolve_device(spec.machine.device), **changes})
    return get_student(dataclasses.replace(spec.teacher, p=p, residual=residual), train, seed,
                       cfg, data_root=spec.machine.data_root, snapshot=snapshot, progress=False)


def snapshot_of(spec: Any, p: float, step: int, *, seed: int = 0, **train_changes: Any
                ) -> torch.nn.Module:
    """The teacher's weights at training ``step`` (one of its ``snapshot_steps``)."""
    return teacher_snapshot(dataclasses.replace(spec.teacher, p=p),
                            dataclasses.replace(spec.train, seed=seed, **train_changes), step,
                            seed=seed, data_root=spec.machine.data_root,
                            device=spec.machine.device)


def images_of(spec: Any, n: int, seed: int = 0, split: str = "val"
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images and labels of the chapter's dataset (:func:`eval_images`)."""
    return eval_images(spec.train.dataset, n, seed=seed, split=split,
                       root=spec.machine.data_root, img_size=spec.teacher.img_size)


def eval_images(dataset: str, n: int, *, seed: int = 0, split: str = "val",
                root: str | None = None, img_size: int | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images and labels of ``split`` of ``dataset``: a seeded random subset, the same in
    every chapter (:func:`raptor.data.eval_images`); a dry run's plan stands in for them."""
    planned = planned_images(dataset, img_size, n, seed)
    if planned is not None:  # a dry run's plan (raptor.sweep): no data is read
        return planned
    try:
        return data.eval_images(dataset, n, seed=seed, split=split, root=root, img_size=img_size)
    except ValueError as err:
        if str(err).startswith("n_images"):  # the data module names the parameter
            raise SpecError(f"parameter {err}") from None
        raise


def trajectories_of(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                    batch_size: int = 250, device: str = "auto"
                    ) -> tuple[torch.Tensor, TokenGroups]:
    """The model's trajectories ``(N, L+1, T, D)`` on ``images`` (on the CPU) and its token groups.

    Computed on ``device`` (:func:`~raptor.loop.resolve_device`); the model is given back on the
    device it came on. No images is an error, non-finite pixels a warning.
    """
    if len(images) == 0 or len(images) != len(labels):
        raise ValueError(f"trajectories_of needs at least one image and one label per image, got "
                         f"{len(images)} images and {len(labels)} labels")
    bad = int((~torch.isfinite(images.flatten(1))).any(1).sum())
    if bad:
        warnings.warn(f"trajectories_of: {bad} of {len(images)} images hold NaN or infinite "
                      f"pixels; their trajectories will not be finite", stacklevel=2)
    traj, _ = collect_trajectories(model, batched(images, labels, batch_size), device=device,
                                   progress=False)
    return traj, TokenGroups.from_model(model)


def batched(images: torch.Tensor, labels: torch.Tensor, batch_size: int = 250
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(images, labels)`` cut into batches, for the streaming evaluators."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    return [(images[i:i + batch_size], labels[i:i + batch_size])
            for i in range(0, len(images), batch_size)]


@dataclass(frozen=True)
class Walk:
    """A teacher on its evaluation images, up to its phases (:func:`walk`).

    ``similarity``: layer–layer similarity per token group, layers 0..L (Fig. 1); ``S``: the
    phase matrix over blocks 1..L, tokens {cls, mean patch} (App. A.1); ``cuts``: its max-cut per
    k; ``per_image``: one phase matrix per image ``(N, L, L)`` and ``excess``: the max-cut's block
    excess over the warped-decay null per k (C1; both only where excess was asked for).
    """

    model: torch.nn.Module
    record: dict[str, Any]  # the training record; no "val" where it was not trained here
    images: torch.Tensor
    labels: torch.Tensor
    traj: torch.Tensor  # (N, L+1, T, D)
    groups: TokenGroups
    similarity: dict[str, np.ndarray]
    S: np.ndarray
    cuts: dict[int, Partition]
    per_image: np.ndarray | None
    excess: dict[int, PhaseExcess]

    @property
    def accuracy(self) -> float:
        """The teacher's last validation accuracy in training (NaN if not trained here)."""
        return self.record["val"][-1]["acc"] if "val" in self.record else math.nan

    def batches(self, size: int = 250) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The images and labels in batches of ``size`` (:func:`batched`)."""
        return batched(self.images, self.labels, size)


def walk(teacher: tuple[torch.nn.Module, dict[str, Any]],
         data: tuple[torch.Tensor, torch.Tensor], *, cuts: Sequence[int] = (),
         excess: Sequence[int] = (), n_boot: int = 200, boot_seed: int = 0,
         batch_size: int = 250, device: str = "auto") -> Walk:
    """``teacher`` (a model and its record, as :func:`teacher_of` gives them) walked on ``data``
    (images and labels, as :func:`images_of` gives them): its trajectories (in batches
    of ``batch_size`` on ``device``), similarity, phase matrix and max-cut for each k of ``cuts``
    (App. A.1), and for each k of ``excess`` the block excess over each null
    (:func:`~raptor.structure.phase_excess` with ``n_boot`` resamples seeded by ``boot_seed``;
    C1)."""
    model, record = teacher
    images, labels = data
    traj, groups = trajectories_of(model, images, labels, batch_size, device)
    similarity = layer_similarity(traj, groups)
    S = phase_matrix(similarity)
    per_image = image_phase_matrices(traj, groups) if excess else None
    growth = image_growth_nulls(traj, groups) if excess else None
    return Walk(model, record, images, labels, traj, groups, similarity, S,
                {k: maxcut(S, k) for k in cuts}, per_image,
                {k: phase_excess(per_image, k, growth=growth, n_boot=n_boot, seed=boot_seed)
                 for k in excess})


def pretrained_walk(pretrained: Pretrained, n_images: int, data_root: str | None = None,
                    **kwargs: Any) -> Walk:
    """The timm ViT of ``pretrained`` walked on ``min(n_images, 1000)`` of its images (drawn as
    :func:`raptor.analysis.split` draws them), in batches of 50 (Fig. 1 for DINOv2-B on
    ImageNet); ``kwargs`` go to :func:`walk`."""
    model = load_vit(pretrained.model, Path(pretrained.weights).expanduser(),
                     pretrained.input_size)
    images, _ = split(image_data(pretrained.images, model, root=data_root), min(n_images, 1000))
    batch = next(iter(DataLoader(images, batch_size=len(images))))
    return walk((model, {}), batch, batch_size=50, **kwargs)


def probe_correct(model: torch.nn.Module, train: list[tuple[torch.Tensor, torch.Tensor]],
                  val: list[tuple[torch.Tensor, torch.Tensor]], device: str = "auto"
                  ) -> np.ndarray:
    """Per ``val`` image, in order, whether a linear probe on ``model``'s [cls ‖ mean patches]
    features (:func:`~raptor.probes.probe_features`) fit on the ``train`` batches predicts its
    label (§3; the chapters' probe, not Table 1's): a bool array, for paired comparisons."""
    return np.asarray(linear_probe(*probe_features(model, train, device=device),
                                   *probe_features(model, val, device=device))["val_correct"],
                      dtype=bool)


def probe_accuracy(model: torch.nn.Module, train: list[tuple[torch.Tensor, torch.Tensor]],
                   val: list[tuple[torch.Tensor, torch.Tensor]], device: str = "auto") -> float:
    """Validation accuracy of :func:`probe_correct`'s linear probe."""
    return float(probe_correct(model, train, val, device).mean())
