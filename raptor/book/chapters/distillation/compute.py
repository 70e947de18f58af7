"""The computation of chapter *Raptor*: per seed the teacher's max-cuts, its distilled Raptors,
their match to the teacher, accuracy and cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from raptor.book.chapters.distillation.spec import Spec
from raptor.book.experiment import batched, images_of, probe_accuracy, student_of, teacher_of, walk
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student
from raptor.model import count_parameters, flops_per_image
from raptor.phases import Partition
from raptor.planning import Plan

GROUPS = ("cls", "patches")
UNIT_IMAGES = 50  # images per unit of the per-unit cosine [ours]


@dataclass
class Model:
    """Accuracy and cost of the teacher or one Raptor."""

    name: str
    head_acc: float
    probe_acc: float
    block_params: int
    flops: int


@dataclass
class SeedRun:
    """One seed's teacher and Raptors."""

    seed: int
    partitions: dict[int, Partition]
    records: dict[int, dict[str, Any]]  # distillation records (losses, λ per step)
    evals: dict[int, dict[str, Any]]  # evaluate_student: per-layer r2 and cosine per group
    models: list[Model]  # the teacher first, then one Raptor per k
    unit_sizes: np.ndarray  # images per unit of ≤ UNIT_IMAGES
    unit_cosine: dict[int, dict[str, np.ndarray]]  # k -> group -> (units, L+1) cosine


@dataclass
class Result:
    spec: Spec
    runs: list[SeedRun]  # one per seed, in the order of ``spec.seeds``


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """For each seed: max-cut partitions, the distilled Raptors, their match, accuracy and cost."""
    device = resolve_device(spec.machine.device)
    return Result(spec, [_seed_run(spec, seed, device, plan) for seed in spec.seeds])


def _seed_run(spec: Spec, seed: int, device: str, plan: Plan | None) -> SeedRun:
    w = walk(teacher_of(spec, spec.p, seed=seed, plan=plan),
             images_of(spec, spec.n_images, seed=seed, plan=plan),
             cuts=spec.k_values, device=device)
    val, units = w.batches(), w.batches(UNIT_IMAGES)
    train = batched(*images_of(spec, spec.probe_images, seed=seed, split="train", plan=plan))

    def model(name: str, net: torch.nn.Module, head_acc: float) -> Model:
        return Model(name, head_acc, probe_accuracy(net, train, val, device),
                     count_parameters(net)["blocks"], flops_per_image(net))

    records, evals, raptors, unit_cosine = {}, {}, [], {}
    for k in spec.k_values:
        student, records[k] = student_of(spec, spec.p, w.cuts[k], seed=seed, plan=plan)
        evals[k] = w.evaluate(student, device)
        raptors.append(model(f"Raptor k={k}", student, evals[k]["student_acc"]))
        per = [evaluate_student(student, w.model, [u], device=device)["cosine"] for u in units]
        unit_cosine[k] = {g: np.array([c[g] for c in per]) for g in GROUPS}
    teacher = model(f"teacher (L={spec.teacher.depth})", w.model,
                    evals[spec.k_values[0]]["teacher_acc"])
    return SeedRun(seed, w.cuts, records, evals, [teacher, *raptors],
                   np.array([len(y) for _, y in units], dtype=float), unit_cosine)


def cost_table(result: Result) -> pd.DataFrame:
    """Head and probe accuracy (mean and standard deviation over seeds), block parameters and
    FLOPs per image; mean head accuracy as % of the teacher's."""
    def sd(a: np.ndarray) -> float:
        return float(a.std(ddof=1)) if len(a) > 1 else np.nan

    rows = []
    for i, model in enumerate(result.runs[0].models):
        head = np.array([run.models[i].head_acc for run in result.runs])
        probe = np.array([run.models[i].probe_acc for run in result.runs])
        rows.append({"model": model.name, "head acc": head.mean(), "head sd": sd(head),
                     "probe acc": probe.mean(), "probe sd": sd(probe),
                     "block params": model.block_params, "FLOPs/image": model.flops})
    table = pd.DataFrame(rows).set_index("model")
    table["% of teacher (head)"] = 100 * table["head acc"] / table["head acc"].iloc[0]
    return table
