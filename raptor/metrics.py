"""How well a student reproduces its teacher: R², cosine similarity, accuracy.

- Per-vector R² (Appendix A.2): each student token vector (``D`` values) is regressed on the
  teacher's by OLS with a bias (one scale and one shift per vector). For 1-D OLS with a
  bias, R² equals the squared Pearson correlation of the two vectors, so it is symmetric and lies
  in [0, 1]. Averaged over images and tokens, per layer and token group (Fig. 4B).
- Global R² as in the authors' ImageNet code: ``1 − mean((pred − teacher)²) / var(pred)`` over
  all flattened values, ``var`` around the single mean of ``pred``. Note the denominator is the
  variance of the *prediction*, not of the teacher; implemented as stated. [ours] The streaming
  form computes it exactly over the whole dataset (the authors average per-batch values).
- Cosine similarity to the teacher through depth (Fig. 14), per layer and group.
- Accuracy through the teacher's frozen head (linear probes: :mod:`raptor.probes`).

Everything that runs over a dataset streams per batch (per-layer sums), holding no trajectories.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from raptor.loop import on_device
from raptor.trajectories import TokenGroups, embed, head_logits, run_layers

Stat = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def r2_vectors(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """R² of OLS ``student ≈ a·teacher + b`` for every vector along the last axis: ``(...,)``.

    Equal to the squared Pearson correlation; vectors with zero variance get 0.
    """
    _check_pair(student, teacher)
    s = student - student.mean(-1, keepdim=True)
    t = teacher - teacher.mean(-1, keepdim=True)
    cov = (s * t).sum(-1)
    denom = s.square().sum(-1) * t.square().sum(-1)
    return torch.where(denom > 0, cov.square() / denom.clamp_min(torch.finfo(denom.dtype).tiny),
                       torch.zeros_like(denom))


def cosine_vectors(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every vector along the last axis: ``(...,)`` (0 for a zero vector)."""
    _check_pair(student, teacher)
    return F.cosine_similarity(student, teacher, dim=-1, eps=1e-12)


class GlobalR2:
    """``1 − mean((pred − target)²) / var(pred)`` over all values of a stream of batches (the
    authors' ImageNet R²; exact float64 sums)."""

    def __init__(self) -> None:
        self.sq_err = self.total = self.total_sq = 0.0
        self.count = 0

    def update(self, pred: torch.Tensor, target: torch.Tensor) -> None:
        _check_pair(pred, target)
        p, t = pred.detach().double(), target.detach().double()
        self.sq_err += (p - t).square().sum().item()
        self.total += p.sum().item()
        self.total_sq += p.square().sum().item()
        self.count += p.numel()

    def compute(self) -> float:
        if self.count == 0:
            raise ValueError("GlobalR2 has seen no values")
        mean = self.total / self.count
        var = self.total_sq / self.count - mean * mean
        return 1.0 - (self.sq_err / self.count) / var


class LayerwiseMeans:
    """Streaming mean over images and tokens of a per-vector statistic, per layer and group.

    ``update(student, teacher)`` takes trajectories ``(N, L+1, T, D)``; ``compute()`` returns
    ``{group: (L+1,) float64 array}`` for the groups present, in the order cls, registers,
    patches.
    """

    def __init__(self, groups: TokenGroups, stat: Stat = r2_vectors) -> None:
        self.groups, self.stat = groups, stat
        self.sums: dict[str, torch.Tensor] = {}
        self.counts: dict[str, int] = {}

    def update(self, student: torch.Tensor, teacher: torch.Tensor) -> None:
        _check_pair(student, teacher)
        if student.ndim != 4 or student.shape[2] != self.groups.num_tokens:
            raise ValueError(f"trajectories must be (N, L+1, T={self.groups.num_tokens}, D), got "
                             f"{tuple(student.shape)}")
        values = self.stat(student.detach(), teacher.detach()).double()
        for name, s in self.groups.items():
            part = values[:, :, s].sum(dim=(0, 2)).cpu()
            self.sums[name] = self.sums.get(name, 0) + part
            self.counts[name] = self.counts.get(name, 0) + values.shape[0] * (s.stop - s.start)

    def compute(self) -> dict[str, np.ndarray]:
        if not self.counts:
            raise ValueError("LayerwiseMeans has seen no trajectories")
        return {name: (self.sums[name] / self.counts[name]).numpy() for name in self.sums}


def _check_pair(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"student and teacher shapes differ: {tuple(a.shape)} vs "
                         f"{tuple(b.shape)}")


@torch.no_grad()
def evaluate_student(student: nn.Module, teacher: nn.Module, batches: Iterable, *,
                     device: str | torch.device = "cpu", max_images: int | None = None,
                     teacher_traj: torch.Tensor | None = None) -> dict[str, object]:
    """One streaming pass comparing a student (e.g. a Raptor) with its teacher.

    Returns per-layer, per-group ``r2`` and ``cosine`` (lists, layers 0..L), the authors'
    ``global_r2`` at the last layer, top-1 ``student_acc`` and ``teacher_acc`` through the
    teacher's head, their top-1 ``agreement``, ``student_correct`` (per image, in order: the
    student's top-1 is the label) and the number of ``images``. Computed on
    ``device`` (:func:`~raptor.loop.on_device`: the models are given back where they were).
    ``teacher_traj``: the teacher's trajectories of these images ``(N, L+1, T, D)``, in order,
    where they are already computed (a chapter's walk), so the teacher is not run again.
    """
    if max_images is not None and max_images < 1:
        raise ValueError(f"max_images must be >= 1 or None, got {max_images}")
    groups = TokenGroups.from_model(teacher)
    r2, cos, final = LayerwiseMeans(groups, r2_vectors), LayerwiseMeans(groups, cosine_vectors), \
        GlobalR2()
    hits = {"student": 0, "teacher": 0, "agree": 0}
    student_correct = []
    seen = 0
    with on_device(student, device) as device, on_device(teacher, device):
        for images, labels in batches:
            if max_images is not None:
                images, labels = images[: max_images - seen], labels[: max_images - seen]
            images, labels = images.to(device), labels.to(device)
            t_traj = (run_layers(teacher, embed(teacher, images)) if teacher_traj is None
                      else teacher_traj[seen:seen + len(labels)].to(device))
            s_traj = run_layers(student, embed(student, images))
            r2.update(s_traj, t_traj)
            cos.update(s_traj, t_traj)
            final.update(s_traj[:, -1], t_traj[:, -1])
            s_pred = head_logits(student, s_traj[:, -1]).argmax(-1)
            t_pred = head_logits(teacher, t_traj[:, -1]).argmax(-1)
            student_correct.append((s_pred == labels).cpu().numpy())
            hits["student"] += int(student_correct[-1].sum())
            hits["teacher"] += (t_pred == labels).sum().item()
            hits["agree"] += (s_pred == t_pred).sum().item()
            seen += len(labels)
            if max_images is not None and seen >= max_images:
                break
    if seen == 0:
        raise ValueError("batches yielded no images")
    return {"r2": {k: v.tolist() for k, v in r2.compute().items()},
            "cosine": {k: v.tolist() for k, v in cos.compute().items()},
            "global_r2": final.compute(), "student_acc": hits["student"] / seen,
            "teacher_acc": hits["teacher"] / seen, "agreement": hits["agree"] / seen,
            "student_correct": np.concatenate(student_correct), "images": seen}


@torch.no_grad()
def head_correct(model: nn.Module, batches: Iterable, *, device: str | torch.device = "cpu"
                 ) -> np.ndarray:
    """Per image, in order, whether the top-1 class of a ViT or a Raptor through the (teacher's)
    final norm and head is its label (a bool array), computed on ``device``
    (:func:`~raptor.loop.on_device`). The same forward pass as :func:`evaluate_student`'s
    ``student_correct``: images scored there need not be run again for an accuracy over more."""
    correct = []
    with on_device(model, device) as device:
        for images, labels in batches:
            logits = head_logits(model, run_layers(model, embed(model, images.to(device)))[:, -1])
            correct.append((logits.argmax(-1).cpu() == labels.cpu()).numpy())
    if not sum(len(c) for c in correct):
        raise ValueError("batches yielded no images")
    return np.concatenate(correct)


def head_accuracy(model: nn.Module, batches: Iterable, *, device: str | torch.device = "cpu"
                  ) -> float:
    """Top-1 accuracy of :func:`head_correct`: its share of correct images."""
    return float(head_correct(model, batches, device=device).mean())
