"""Steps every experiment shares: a chapter's teachers, students and evaluation images from its
spec, a model's trajectories on images held in memory, in batches, the walk from a teacher to its
phases (§2, App. A.1), and a linear probe's accuracy.

A chapter's ``compute(spec, plan)`` hands its planner's :class:`~raptor.planning.Plan` (``None``:
build what the cache lacks) to every request here. In a dry run's plan (``python -m raptor sweep
--dry-run``) a chapter's models and images are small stand-ins of its depth, token groups and
classes (:func:`stand_in_config`, :data:`DRY_SIZE`): each model asked for is noted as a job
from its configuration (:meth:`~raptor.planning.Plan.note`), a stand-in model's trajectories are
random and its resamples few (:func:`is_stand_in`), and ``compute`` runs to its end in seconds,
with no full-size forward pass and no data read."""

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
from raptor.analysis import image_data, load_vit, split, vit_shape
from raptor.book.pretrained import Pretrained
from raptor.book.spec import REPLICATE_SEEDS, SpecError
from raptor.book.chapters.phase_structure.spec import Spec as PhaseStructureSpec
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student
from raptor.phase_test import PhaseTest, phase_test
from raptor.phases import Partition, maxcut, partition_to_repeats
from raptor.probes import linear_probe, probe_features
from raptor.similarity import layer_similarity, phase_matrix
from raptor.structure import PhaseExcess, image_growth_nulls, image_phase_matrices, phase_excesses
from raptor.planning import Plan
from raptor.teachers import (TeacherConfig, TeacherRequest, TrainConfig, build_teacher,
                             get_teacher, teacher_key, teacher_snapshot)
from raptor.train import DistillConfig, StudentRequest, build_student, get_student, student_key
from raptor.trajectories import TokenGroups, collect_trajectories, trajectory_model


C1 = PhaseStructureSpec()  # C1's test of any chapter's teacher: this chapter's images and resamples
DRY_SIZE = 8  # a dry run's images and stand-in models: 8 px, patches of 4 (four patch tokens)
DRY_BOOT = 10  # bootstrap resamples of a dry run's walks
DRY_IMAGES = 250  # a dry run's images per request: at most these, or one more than the largest
# subset the spec draws from them (``image_counts``, C2)


def stand_in_config(cfg: TeacherConfig) -> TeacherConfig:
    """A dry run's stand-in for a teacher of ``cfg``: its depth, registers, classes and channels,
    one head, 12 wide (DMD's rank 10 fits) and :data:`DRY_SIZE` px, so that its forward passes
    cost nothing."""
    return dataclasses.replace(cfg, embed_dim=12, num_heads=1, img_size=DRY_SIZE,
                               patch_size=DRY_SIZE // 2)


def is_stand_in(model: torch.nn.Module) -> bool:
    """Whether ``model`` is a dry run's stand-in (:func:`_stood_in`)."""
    return getattr(model, "stand_in", False)


def _stood_in(model: torch.nn.Module) -> torch.nn.Module:
    """``model``, in eval mode, marked as a dry run's stand-in."""
    model.stand_in = True
    return model.eval()


def _dry(plan: Plan | None) -> bool:
    return plan is not None and plan.dry


def planned_record(train: TrainConfig) -> dict[str, Any]:
    """The training record of a planned (untrained) teacher: its evaluations, as NaN."""
    evals = [s for s in range(1, train.steps + 1) if s % train.eval_every == 0 or s == train.steps]
    return {"planned": True, "val": [{"step": s, "acc": math.nan, "loss": math.nan}
                                     for s in evals]}


def _planned_teacher(cfg: TeacherConfig, train: TrainConfig | None, seed: int, device: str,
                     plan: Plan) -> tuple[torch.nn.Module, dict[str, Any]]:
    """In a dry run: the teacher noted as a job (as :func:`~raptor.teachers.get_teacher` asks for
    it) and its small stand-in."""
    model = _stood_in(build_teacher(stand_in_config(cfg), seed))
    if train is None:
        return model, {"untrained": True}
    device = resolve_device(device)
    plan.note("teacher", teacher_key(cfg, train, seed, device),
              TeacherRequest(cfg, train, seed, device))
    return model, planned_record(train)


# A chapter's spec nests ``teacher`` (TeacherConfig), ``train`` (TrainConfig), ``machine``
# (raptor.book.spec.Machine) and, for a chapter with students, ``distill`` (DistillConfig).
def teacher_of(spec: Any, p: float | None = None, *, seed: int = 0, trained: bool = True,
               residual: bool = True, plan: Plan | None = None, **train_changes: Any
               ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The chapter's teacher with stochastic depth ``p`` (``None``: its teacher's; trained through
    the cache, or untrained; under ``plan``, planned) and its training record; ``train_changes``
    override its training's fields."""
    train = dataclasses.replace(spec.train, seed=seed, **train_changes) if trained else None
    cfg = dataclasses.replace(spec.teacher, p=spec.teacher.p if p is None else p,
                              residual=residual)
    if _dry(plan):
        return _planned_teacher(cfg, train, seed, spec.machine.device, plan)
    return get_teacher(cfg, train, seed=seed, data_root=spec.machine.data_root, progress=False,
                       device=spec.machine.device, plan=plan)


def student_of(spec: Any, p: float, partition: Partition, *, seed: int = 0,
               trained: bool = True, residual: bool = True, snapshot: int | None = None,
               teacher_changes: dict[str, Any] | None = None, replicate: int = 0,
               plan: Plan | None = None, **changes: Any):
    """The Raptor distilled with ``partition`` (max-cut or any) from :func:`teacher_of`'s teacher
    (of its weights at training step ``snapshot``, Fig. 13, if given), cached (under ``plan``,
    planned). ``changes`` override the distillation's fields (Table 2's ablations).
    ``replicate`` r > 0: the same Raptor distilled again from another initialisation and batch
    order (distillation seed ``seed + REPLICATE_SEEDS · r``), for the noise of training alone."""
    train = (dataclasses.replace(spec.train, seed=seed, **(teacher_changes or {}))
             if trained else None)
    cfg = dataclasses.replace(spec.distill, repeats=partition_to_repeats(partition),
                              dataset=spec.train.dataset, seed=seed + REPLICATE_SEEDS * replicate,
                              **{"device": resolve_device(spec.machine.device), **changes})
    teacher = dataclasses.replace(spec.teacher, p=p, residual=residual)
    if _dry(plan):
        return _planned_student(teacher, train, seed, cfg, snapshot, plan)
    return get_student(teacher, train, seed, cfg, data_root=spec.machine.data_root,
                       snapshot=snapshot, progress=False, plan=plan)


def _planned_student(teacher: TeacherConfig, train: TrainConfig | None, seed: int,
                     cfg: DistillConfig, snapshot: int | None, plan: Plan
                     ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """In a dry run: the student noted as a job, with its teacher, and its small stand-in. Its
    key holds no teacher weights: its partition is a stand-in's, so it is not its real entry."""
    model, _ = _planned_teacher(teacher, train, seed, cfg.device, plan)
    key = {**student_key(teacher, train, seed, cfg, "planned"), "snapshot": snapshot}
    plan.note("student", key, StudentRequest(TeacherRequest(teacher, train, seed, cfg.device),
                                             cfg, snapshot))
    return _stood_in(build_student(model, cfg)), {"planned": True}


def snapshot_of(spec: Any, p: float, step: int, *, seed: int = 0, plan: Plan | None = None,
                **train_changes: Any) -> torch.nn.Module:
    """The teacher's weights at training ``step`` (one of its ``snapshot_steps``)."""
    cfg = dataclasses.replace(spec.teacher, p=p)
    train = dataclasses.replace(spec.train, seed=seed, **train_changes)
    if _dry(plan):
        return _planned_teacher(cfg, train, seed, spec.machine.device, plan)[0]
    return teacher_snapshot(cfg, train, step, seed=seed, data_root=spec.machine.data_root,
                            device=spec.machine.device, plan=plan)


def images_of(spec: Any, n: int, seed: int = 0, split: str = "val", plan: Plan | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images and labels of the chapter's dataset (:func:`eval_images`); in a dry run at
    most :data:`DRY_IMAGES`, or one more than the largest of the spec's ``image_counts``."""
    if _dry(plan):
        n = min(n, max([DRY_IMAGES, *(c + 1 for c in getattr(spec, "image_counts", ()))]))
    return eval_images(spec.train.dataset, n, seed=seed, split=split,
                       root=spec.machine.data_root, img_size=spec.teacher.img_size, plan=plan)


def eval_images(dataset: str, n: int, *, seed: int = 0, split: str = "val",
                root: str | None = None, img_size: int | None = None, plan: Plan | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images and labels of ``split`` of ``dataset``: a seeded random subset, the same in
    every chapter (:func:`raptor.data.eval_images`); a dry run's ``plan`` stands in for them, at
    :data:`DRY_SIZE` px."""
    planned = plan.images_of(dataset, DRY_SIZE, n, seed) if plan else None
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
    groups = TokenGroups.from_model(model)
    if is_stand_in(model):  # random, of their shape (L+1 states, T tokens)
        g = torch.Generator().manual_seed(len(images))
        vit = trajectory_model(model).teacher
        return torch.randn(len(images), len(vit.blocks) + 1, groups.patches.stop, vit.embed_dim,
                           generator=g), groups
    traj, _ = collect_trajectories(model, batched(images, labels, batch_size), device=device,
                                   progress=False)
    return traj, groups


def phase_matrices_of(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                      batch_size: int = 1000, device: str = "auto") -> np.ndarray:
    """The model's phase matrix per image ``(N, L, L)``
    (:func:`~raptor.structure.image_phase_matrices`), ``batch_size`` images' trajectories at a
    time: many images' trajectories need not fit in memory at once."""
    return np.concatenate([image_phase_matrices(*trajectories_of(model, x, y, device=device))
                           for x, y in batched(images, labels, batch_size)])


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
        """The teacher's validation accuracy in training at the weights it kept: at its lowest
        validation loss where a convergence criterion stopped it, else the last (NaN if not
        trained here)."""
        if "val" not in self.record:
            return math.nan
        kept = self.record.get("best", {}).get("step", self.record["val"][-1]["step"])
        return next(v["acc"] for v in self.record["val"] if v["step"] == kept)

    def batches(self, size: int = 250) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The images and labels in batches of ``size`` (:func:`batched`)."""
        return batched(self.images, self.labels, size)

    def evaluate(self, student: torch.nn.Module, device: str = "auto") -> dict[str, Any]:
        """A Raptor of this teacher on these images (:func:`~raptor.metrics.evaluate_student`),
        the teacher's trajectories reused."""
        return evaluate_student(student, self.model, self.batches(), device=device,
                                teacher_traj=self.traj)


def walk(teacher: tuple[torch.nn.Module, dict[str, Any]],
         data: tuple[torch.Tensor, torch.Tensor], *, cuts: Sequence[int] = (),
         excess: Sequence[int] = (), n_boot: int = 200, boot_seed: int = 0,
         batch_size: int = 250, device: str = "auto") -> Walk:
    """``teacher`` (a model and its record, as :func:`teacher_of` gives them) walked on ``data``
    (images and labels, as :func:`images_of` gives them): its trajectories (in batches
    of ``batch_size`` on ``device``), similarity, phase matrix and max-cut for each k of ``cuts``
    (App. A.1), and for each k of ``excess`` the block excess over each null
    (:func:`~raptor.structure.phase_excesses` with ``n_boot`` resamples seeded by ``boot_seed``;
    C1)."""
    model, record = teacher
    images, labels = data
    if is_stand_in(model):  # a stand-in's numbers are not read: a few resamples give their shapes
        n_boot = min(n_boot, DRY_BOOT)
    traj, groups = trajectories_of(model, images, labels, batch_size, device)
    similarity = layer_similarity(traj, groups)
    S = phase_matrix(similarity)
    per_image = image_phase_matrices(traj, groups) if excess else None
    growth = image_growth_nulls(traj, groups) if excess else None
    return Walk(model, record, images, labels, traj, groups, similarity, S,
                {k: maxcut(S, k) for k in cuts}, per_image,
                phase_excesses(per_image, excess, growth=growth, n_boot=n_boot, seed=boot_seed)
                if excess else {})


def phases_of(spec: Any, p: float | None = None, *, seed: int = 0, device: str = "auto",
              plan: Plan | None = None) -> PhaseTest:
    """C1's test of the chapter's teacher (:func:`teacher_of`) as every chapter reads it: on the
    phase-structure chapter's evaluation images and resamples (its ``cpu`` defaults, whatever
    the profile), so that a model has one result wherever it is asked for (d* is that chapter's
    alone)."""
    model, _ = teacher_of(spec, p, seed=seed, plan=plan)
    per_image = phase_matrices_of(model, *images_of(spec, C1.n_images, plan=plan),
                                  batch_size=C1.n_images, device=device)
    return phase_test(per_image, power_reps=0,
                      n_boot=min(C1.n_boot, DRY_BOOT) if is_stand_in(model) else C1.n_boot)


def pretrained_walk(pretrained: Pretrained, n_images: int, data_root: str | None = None,
                    plan: Plan | None = None, **kwargs: Any) -> Walk:
    """The timm ViT of ``pretrained`` walked on ``min(n_images, 1000)`` of its images (drawn as
    :func:`raptor.analysis.split` draws them), in batches of 50 (Fig. 1 for DINOv2-B on
    ImageNet); in a dry run, a stand-in of its depth and registers; ``kwargs`` go to
    :func:`walk`."""
    if _dry(plan):
        shape = vit_shape(pretrained.model, pretrained.input_size)
        model = _stood_in(build_teacher(stand_in_config(TeacherConfig(
            depth=len(shape.blocks), in_chans=3, num_classes=max(1, shape.num_classes),
            reg_tokens=shape.num_reg_tokens))))
    else:
        model = load_vit(pretrained.model, Path(pretrained.weights).expanduser(),
                         pretrained.input_size)
    images, _ = split(image_data(pretrained.images, model, root=data_root, plan=plan),
                      min(n_images, 1000))
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
