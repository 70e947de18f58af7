"""The ``paper`` profile built and stepped at full shape on the CPU (ViT-B/14, 224 px).

Every chapter's ``paper`` teacher and students take two optimiser steps of each training stage
(teacher training, distillation stages 1 and 2) through the code the chapters run (the cache,
:func:`raptor.teachers.train_classifier`, :func:`raptor.train.distill`, :mod:`raptor.loop`),
with only the step counts (and the warm-ups, which must fit in them), the batch size and the
teacher's evaluation size overridden, on a fixture CIFAR-100 in torchvision's layout; the DINOv2
run (:mod:`raptor.dinov2.pipeline`, §5) likewise on an ImageFolder tree with DINOv2-B-shaped
random weights. A configuration error of the profile surfaces here, not on a cluster.
``make test-paper-shape`` runs this file alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import timm
import torch
from safetensors.torch import save_file

from raptor import paper
from raptor.book.chapters import chapter, names, science
from raptor.book.experiment import student_of, teacher_of
from raptor.book.spec import Machine
from raptor.dinov2.pipeline import PipelineConfig, paper_distill, run_pipeline
from raptor.model import partition_from_repeats
from raptor.phases import partition_to_repeats
from raptor.paper import DINOV2_B
from raptor.teachers import TrainConfig
from raptor.train import DistillConfig, build_student

pytestmark = pytest.mark.slow

STEPS = 2
BATCH = 2


def paper_specs() -> dict[str, Any]:
    """Each chapter's ``PAPER`` spec that trains a teacher."""
    return {name: chapter(name).PAPER for name in names()
            if isinstance(getattr(chapter(name).PAPER, "train", None), TrainConfig)}


def shrunk(spec: Any, root: Path) -> Any:
    """``spec`` at two steps of each stage, batch 2, on the fixture's data, on the CPU; the
    warm-ups fit in the 2 steps, the evaluation sees the fixture's few test images."""
    changes: dict[str, Any] = dict(
        machine=Machine(data_root=str(root), device="cpu"),
        train=dataclasses.replace(spec.train, steps=STEPS, batch_size=BATCH, warmup_steps=1,
                                  eval_every=1, val_limit=BATCH))
    if hasattr(spec, "distill"):
        changes["distill"] = dataclasses.replace(spec.distill, stage1_steps=STEPS,
                                                 stage2_steps=STEPS, warmup_steps=1,
                                                 batch_size=BATCH)
    return dataclasses.replace(spec, **changes)


def teacher_cases() -> list[tuple[Any, float]]:
    """Each chapter's distinct teacher without stochastic depth and at the largest rate any
    chapter trains (the two code paths of a teacher block)."""
    specs = paper_specs().values()
    top = max(r for spec in specs for r in (*getattr(spec, "p_values", ()),
                                            getattr(spec, "p", 0.0)))
    distinct = {(spec.teacher, spec.train): spec for spec in specs}.values()
    return [(spec, p) for spec in distinct for p in dict.fromkeys((0.0, top))]


def partition(k: int, depth: int) -> tuple[tuple[int, int], ...]:
    """DINOv2-B's published partition for ``k`` (Table 1) where there is one, else near-even."""
    if depth == paper.DINOV2_B_DEPTH and k in paper.DINOV2_B_PARTITIONS:
        return paper.DINOV2_B_PARTITIONS[k]
    return partition_from_repeats([depth // k + (j < depth % k) for j in range(k)])


def student_cases() -> Iterator[tuple[str, Any, int, dict[str, Any]]]:
    """Each distinct student a chapter distils: its k values, Table 2's ladder, the untrained
    no-skip control (functional phases)."""
    seen = []
    for name, spec in paper_specs().items():
        if not isinstance(getattr(spec, "distill", None), DistillConfig):
            continue
        ks = set(getattr(spec, "k_values", ())) | {getattr(spec, "ladder_k", 2)}
        options: list[tuple[int, dict[str, Any]]] = [(k, {}) for k in sorted(ks)]
        ladder = getattr(science(name).compute, "LADDER", {})
        options += [(spec.ladder_k, rung) for rung in ladder.values()]
        if name == "functional-phases":
            options.append((min(ks), {"trained": False, "residual": False}))
        for k, changes in options:
            key = (spec.teacher, spec.train, spec.distill, k, sorted(changes.items()))
            if key not in seen:
                seen.append(key)
                label = f"{name}-k{k}-" + ("-".join(f"{a}={b}" for a, b in changes.items())
                                           or "recipe")
                yield label, spec, k, changes


@pytest.fixture(scope="module")
def cifar(fake_cifar100: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Path]:
    """A CIFAR-100 tree and a fresh cache shared by this module's tests."""
    root = fake_cifar100(tmp_path_factory.mktemp("cifar"), n_train=2 * BATCH, n_test=BATCH)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAPTOR_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.delenv("RAPTOR_DATA", raising=False)
        yield root


def finite_and_changed(trained: torch.nn.Module, initial: torch.nn.Module) -> None:
    """Every parameter finite; the trainable ones moved by the optimiser steps."""
    moved = 0
    for (name, p), q in zip(trained.state_dict().items(), initial.state_dict().values()):
        assert torch.isfinite(p).all(), name
        moved += not torch.equal(p, q)
    assert moved > 0


@pytest.mark.parametrize("spec, p", teacher_cases(),
                         ids=lambda v: f"p={v}" if isinstance(v, float) else "")
def test_paper_teacher_takes_two_steps(cifar: Path, spec: Any, p: float) -> None:
    spec = shrunk(spec, cifar)
    model, record = teacher_of(spec, p)
    assert (model.patch_embed.img_size, model.patch_embed.patch_size) == ((224, 224), (14, 14))
    assert len(model.blocks) == 12 and model.embed_dim == 768 and model.num_classes == 100
    assert len(record["loss"]) == STEPS and all(math.isfinite(v) for v in record["loss"])
    finite_and_changed(model, teacher_of(spec, p, trained=False)[0])


@pytest.mark.parametrize("label, spec, k, changes", list(student_cases()),
                         ids=[case[0] for case in student_cases()])
def test_paper_student_takes_two_steps_per_stage(cifar: Path, label: str, spec: Any, k: int,
                                                 changes: dict[str, Any]) -> None:
    spec = shrunk(spec, cifar)
    changes = dict(changes)
    where = {"trained": changes.pop("trained", True), "residual": changes.pop("residual", True)}
    part = partition(k, spec.teacher.depth)
    student, record = student_of(spec, 0.0, part, **where, **changes)
    assert len(student.blocks) == k and student.depth == 12
    stage2 = changes.get("stage2", True)
    curves = [*record["stage1"]["blocks"], record["stage2"]]
    assert [len(c["loss"]) for c in curves] == [STEPS] * k + [STEPS if stage2 else 0]
    assert all(math.isfinite(v) for c in curves for v in c["loss"])
    teacher = teacher_of(spec, trained=where["trained"], residual=where["residual"])[0]
    cfg = dataclasses.replace(spec.distill, repeats=partition_to_repeats(part), device="cpu",
                              **changes)
    finite_and_changed(student.blocks, build_student(teacher, cfg).blocks)


def test_dinov2_run_takes_two_steps_per_stage_on_imagefolder(
        fake_imagenet: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """§5's run (``python -m raptor.dinov2.pipeline``) at DINOv2-B/14 shape on an ImageFolder
    tree."""
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    root = fake_imagenet(tmp_path / "imagenet", per_class={"train": 2, "val": 1},
                         size=(256, 300))
    torch.manual_seed(0)
    weights = tmp_path / "dinov2.safetensors"
    save_file(timm.create_model(DINOV2_B, pretrained=False).state_dict(), weights)
    cfg = PipelineConfig(imagenet=root, out=tmp_path / "run", weights=weights,
                         distill=paper_distill(stage1_steps=STEPS, stage2_steps=STEPS,
                                               warmup_steps=1, batch_size=BATCH, device="cpu"),
                         probe_epochs=1, probe_batch_size=BATCH, probe_cache_features=True,
                         workers=0, loader_threads=1, progress=False)
    res = run_pipeline(cfg)
    assert {"stage1", "stage2"} <= set(res["steps_done"])  # sorted names, every stage done
    assert (tmp_path / "run" / "student.safetensors").is_file()
