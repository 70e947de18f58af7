"""From a chapter's papermill parameters to models and data: the steps every chapter shares.

Chapters name their parameters as the paper does (``L`` for depth, ``D`` for width, ``p`` for the
stochastic-depth rate, ``k`` for the number of Raptor blocks); this module turns them into
:class:`~raptor.teachers.TeacherConfig` / :class:`~raptor.teachers.TrainConfig` and fetches
teachers, evaluation images and their trajectories, with the cache shared across chapters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Subset

from raptor.data import dataset_info, get_datasets
from raptor.model import Raptor
from raptor.phases import Partition, partition_to_repeats
from raptor.teachers import TeacherConfig, TrainConfig, get_teacher, teacher_snapshot
from raptor.train import DistillConfig, get_student, student_key, student_of
from raptor.trajectories import TokenGroups, collect_trajectories


@dataclass(frozen=True)
class Setup:
    """The teacher family and data of a chapter (one per profile)."""

    dataset: str
    data_root: str | None
    L: int
    D: int
    heads: int
    patch_size: int
    img_size: int | None
    registers: int
    steps: int
    batch_size: int
    lr: float
    train_limit: int | None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Setup:
        """Pick this class's fields out of a chapter's parameters (extra names are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = names - set(params)
        if missing:
            raise ValueError(f"chapter parameters lack {sorted(missing)}")
        return cls(**{k: params[k] for k in names})

    def teacher(self, p: float = 0.0, residual: bool = True) -> TeacherConfig:
        info = dataset_info(self.dataset)
        return TeacherConfig(depth=self.L, embed_dim=self.D, num_heads=self.heads,
                             patch_size=self.patch_size,
                             img_size=self.img_size or info.image_size, in_chans=info.in_chans,
                             num_classes=info.num_classes, reg_tokens=self.registers, p=p,
                             residual=residual)

    def training(self, seed: int = 0, **changes: Any) -> TrainConfig:
        base = TrainConfig(dataset=self.dataset, steps=self.steps, batch_size=self.batch_size,
                           lr=self.lr, seed=seed, train_limit=self.train_limit,
                           eval_every=max(1, self.steps // 4))
        return dataclasses.replace(base, **changes)

    def get_teacher(self, p: float = 0.0, *, seed: int = 0, trained: bool = True,
                    residual: bool = True, **train_changes: Any):
        """The teacher (trained through the cache, or untrained) and its training record.

        Progress bars are off: a chapter's stored outputs should not hold them.
        """
        train = self.training(seed, **train_changes) if trained else None
        return get_teacher(self.teacher(p, residual), train, seed=seed, data_root=self.data_root,
                           progress=False)

    def get_student(self, p: float, partition: Partition, *, seed: int = 0, trained: bool = True,
                    residual: bool = True, teacher_changes: dict[str, Any] | None = None,
                    **distill: Any) -> tuple[Raptor, dict[str, Any]]:
        """The Raptor distilled from that teacher with the given max-cut (or any) partition.

        ``distill`` holds :class:`~raptor.train.DistillConfig` fields (e.g. ``stage1_steps``,
        ``train_limit``); the student is trained on this setup's dataset, with the teacher's
        trajectories cached in memory, and shared through the artifact cache.
        """
        train = self.training(seed, **(teacher_changes or {})) if trained else None
        cfg = DistillConfig(repeats=partition_to_repeats(partition), dataset=self.dataset,
                            seed=seed, cache_teacher=True, **distill)
        return get_student(self.teacher(p, residual), train, seed, cfg,
                           data_root=self.data_root, progress=False)

    def snapshot_teacher(self, p: float, step: int, *, seed: int = 0, **train_changes: Any
                         ) -> torch.nn.Module:
        """The teacher's weights at training ``step`` (one of its ``snapshot_steps``)."""
        return teacher_snapshot(self.teacher(p), self.training(seed, **train_changes), step,
                                seed=seed, data_root=self.data_root)

    def get_snapshot_student(self, p: float, partition: Partition, step: int, *, seed: int = 0,
                             teacher_changes: dict[str, Any] | None = None, **distill: Any
                             ) -> tuple[Raptor, dict[str, Any]]:
        """The Raptor of the teacher's weights at training ``step`` (a snapshot, Fig. 13)."""
        train = self.training(seed, **(teacher_changes or {}))
        teacher = self.snapshot_teacher(p, step, seed=seed, **(teacher_changes or {}))
        cfg = DistillConfig(repeats=partition_to_repeats(partition), dataset=self.dataset,
                            seed=seed, cache_teacher=True, **distill)
        key = {**student_key(self.teacher(p), train, seed, cfg), "snapshot": step}
        return student_of(teacher, key, cfg, img_size=self.teacher(p).img_size,
                          data_root=self.data_root, progress=False)

    def eval_images(self, n: int, seed: int = 0, split: str = "val"
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` images and labels of ``split``, a seeded random subset (the same in every chapter).
        """
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        train, val = get_datasets(self.dataset, root=self.data_root, img_size=self.img_size)
        data = val if split == "val" else train
        if not 1 <= n <= len(data):
            raise ValueError(f"n_images must be in [1, {len(data)}], got {n}")
        idx = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))[:n]
        images, labels = next(iter(DataLoader(Subset(data, idx.tolist()), batch_size=n)))
        return images, labels


def trajectories_of(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                    batch_size: int = 250) -> tuple[torch.Tensor, TokenGroups]:
    """The model's trajectories ``(N, L+1, T, D)`` on ``images`` and its token groups."""
    traj, _ = collect_trajectories(model, batched(images, labels, batch_size), progress=False)
    return traj, TokenGroups.from_model(model)


def batched(images: torch.Tensor, labels: torch.Tensor, batch_size: int = 250
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(images, labels)`` cut into batches, for the streaming evaluators."""
    return [(images[i:i + batch_size], labels[i:i + batch_size])
            for i in range(0, len(images), batch_size)]


def weights_path(path: str | None) -> Path | None:
    """A user-given weights file, checked to exist before any long work."""
    if path is None:
        return None
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"weights file {p} does not exist")
    return p
