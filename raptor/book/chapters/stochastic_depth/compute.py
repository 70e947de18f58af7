"""The computation of chapter *Stochastic depth and recurrent compressibility*: for every rate and
seed the teacher, its similarity and max-cut, and its Raptor's fit; the sweep's table, which the
claims judge."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from raptor import phases
from raptor.book.chapters.stochastic_depth.spec import Spec
from raptor.book.experiment import images_of, student_of, teacher_of, walk
from raptor.loop import resolve_device
from raptor.phases import Partition
from raptor.planning import Plan
from raptor.similarity import mean_offdiagonal


@dataclass
class Run:
    """One teacher (rate ``p``, ``seed``) and its Raptor."""

    p: float
    seed: int
    similarity: np.ndarray  # S over blocks 1..L (phase_matrix)
    partition: Partition
    r2: dict[str, np.ndarray]  # layerwise R², student vs teacher, per token group (layers 0..L)
    teacher_acc: float
    student_acc: float


@dataclass
class Result:
    spec: Spec
    runs: list[Run]


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """For every rate and seed: the teacher, its similarity and max-cut, and its Raptor's fit."""
    device = resolve_device(spec.machine.device)
    images = images_of(spec, spec.n_images, plan=plan)
    runs = []
    for p in spec.p_values:
        for seed in spec.seeds:
            w = walk(teacher_of(spec, p, seed=seed, plan=plan), images, cuts=(spec.k,),
                     device=device)
            student, _ = student_of(spec, p, w.cuts[spec.k], seed=seed, plan=plan)
            ev = w.evaluate(student, device)
            runs.append(Run(p, seed, w.S, w.cuts[spec.k],
                            {g: np.asarray(v) for g, v in ev["r2"].items()},
                            ev["teacher_acc"], ev["student_acc"]))
    return Result(spec, runs)


def sweep_table(result: Result) -> pd.DataFrame:
    """One row per teacher: partition, mean similarity, accuracies and R² over layers 1..L (cls,
    patches, and "R²": their mean, Fig. 4D)."""
    rows = []
    for r in result.runs:
        cls, patches = (float(np.mean(r.r2[g][1:])) for g in ("cls", "patches"))
        rows.append({"p": r.p, "seed": r.seed, "partition": phases.format_partition(r.partition),
                     "mean similarity": mean_offdiagonal(r.similarity),
                     "teacher acc": r.teacher_acc, "student acc": r.student_acc,
                     "R² cls": cls, "R² patches": patches, "R²": (cls + patches) / 2})
    return pd.DataFrame(rows)
