"""What the book tested, at what scale: one sentence per profile, said before any verdict.

The paper's claims are about ViT-B/14 teachers on CIFAR-100 and DINOv2-B on ImageNet (§2–§5);
the committed book runs the ``cpu`` profile (:mod:`raptor.book.profiles`), far smaller. A
reader meets :func:`sentence` first on the intro, the claims page and every chapter (the book's
``scope`` directive, ``book/_ext/scope.py``), and reads each verdict scoped to it
(:data:`raptor.book.claims.SCOPED`).
"""

from __future__ import annotations

from raptor.book.chapters import PROFILES, ChapterError, spec_for
from raptor.catalog import dataset_info
from raptor.config import DistillConfig

DATASET_NAMES = {"fashion-mnist": "Fashion-MNIST", "cifar100": "CIFAR-100", "imagenet": "ImageNet"}
# The chapter whose spec holds every configuration a profile sets: teacher, training, students.
_SPEC_CHAPTER = "distillation"


def _images(dataset: str, limit: int | None) -> str:
    n = dataset_info(dataset).train_size if limit is None else min(limit, dataset_info(dataset).train_size)
    return f"{n:,} {DATASET_NAMES[dataset]} images"


def stages(distill: DistillConfig) -> str:
    """How long ``distill`` trains a Raptor's two stages, words to follow "distilled in"."""
    steps = (f"2 × {distill.stage1_steps:,} steps" if distill.stage1_steps == distill.stage2_steps
             else f"{distill.stage1_steps:,} + {distill.stage2_steps:,} steps")
    if distill.patience:
        return f"stages that stopped where their held-out loss flattened (at most {steps})"
    return steps


def sentence(profile: str) -> str:
    """Profile ``profile``'s scope, one sentence in Markdown: the teachers' depth, width, data and
    training, the students' training, and what the paper ran that this profile does not.

    >>> sentence("cpu").startswith("Tested at `cpu`: ViTs of 12 blocks, width 64, trained from")
    True
    """
    if profile not in PROFILES:
        raise ChapterError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    spec = spec_for(_SPEC_CHAPTER, profile)
    t, train, distill = spec.teacher, spec.train, spec.distill
    until = ("until their validation loss stopped falling" if train.patience
             else f"for {train.steps:,} steps")
    students = _images(distill.dataset, distill.train_limit)
    on = "" if students == _images(train.dataset, train.train_limit) else f" on {students}"
    missing = ("DINOv2-B runs only where its weights are given" if train.dataset == "cifar100"
               else "DINOv2-B and CIFAR-100 were not run (they need a GPU)")
    return (f"Tested at `{profile}`: ViTs of {t.depth} blocks, width {t.embed_dim}, trained from "
            f"scratch on {_images(train.dataset, train.train_limit)} {until}, Raptors distilled "
            f"from them in {stages(distill)}{on}; {missing}, so each verdict is about this scale.")
