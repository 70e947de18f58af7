"""The computation of chapter *Scaling Raptor to foundation models*: per seed the teacher's
max-cuts, a Raptor per k and Table 2's ladder of Raptors, and the pipeline's results as read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raptor.book.chapters.scaling.spec import Spec
from raptor.book.experiment import (batched, images_of, probe_accuracy, probe_correct, student_of,
                                    teacher_of, walk)
from raptor.loop import resolve_device
from raptor.phases import Partition
from raptor.planning import Plan

#: Table 2's rungs: the :class:`~raptor.config.DistillConfig` changes that leave a part out.
LADDER: dict[str, dict[str, bool]] = {
    "TF only": dict(autoregressive=False, depth_scaling=False, weighted=False, stage2=False),
    "+ AR with annealed TF": dict(depth_scaling=False, weighted=False, stage2=False),
    "+ depth scaling": dict(weighted=False, stage2=False),
    "+ cls weighting": dict(stage2=False),
    "+ second stage": dict(),
}
PROBE_RUNG = "+ fine-tuned probe"


@dataclass
class SeedRun:
    """One seed's teacher, its Raptor per k and Table 2's ladder; per-image correctness, on the
    same evaluation images in the same order, for the models C13 and C14 compare paired."""

    seed: int
    partitions: dict[int, Partition]
    teacher_acc: float  # through its own head
    teacher_probe: float  # a fresh linear probe
    head_acc: dict[int, float]  # Raptor k through the teacher's head
    probe_correct: dict[int, np.ndarray]  # Raptor k's own linear probe, per image
    cosine: dict[int, dict[str, np.ndarray]]  # layerwise cosine to the teacher per group
    ladder_correct: dict[str, np.ndarray]  # Table 2's rungs, per image

    @property
    def probe_acc(self) -> dict[int, float]:
        """Each Raptor's probe accuracy in [0, 1]."""
        return {k: float(c.mean()) for k, c in self.probe_correct.items()}


@dataclass
class Result:
    spec: Spec
    runs: list[SeedRun]  # one per seed, in the order of ``spec.seeds``
    pipeline: list[dict[str, Any]]  # the pipeline_results files as read


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """For each seed the teacher's max-cuts, a Raptor per k and Table 2's ladder of Raptors."""
    files = [Path(f) for f in spec.pipeline_results]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"pipeline_results not found: {missing}")
    device = resolve_device(spec.machine.device)
    return Result(spec, [_seed_run(spec, seed, device, plan) for seed in spec.seeds],
                  [json.loads(f.read_text()) for f in files])


def _seed_run(spec: Spec, seed: int, device: str, plan: Plan | None) -> SeedRun:
    w = walk(teacher_of(spec, spec.p, seed=seed, plan=plan),
             images_of(spec, spec.n_images, seed=seed, plan=plan),
             cuts=spec.k_values, device=device)
    batches = w.batches()
    probe_train = batched(*images_of(spec, spec.probe_images, seed=seed, split="train", plan=plan))

    def raptor(k: int, **options: bool) -> tuple[torch.nn.Module, dict[str, Any]]:
        """Raptor k on the teacher's max-cut, and its evaluation against the teacher."""
        student, _ = student_of(spec, spec.p, w.cuts[k], seed=seed, plan=plan, **options)
        return student, w.evaluate(student, device)

    students, evals = {}, {}
    for k in spec.k_values:
        students[k], evals[k] = raptor(k)
    probes = {k: probe_correct(s, probe_train, batches, device) for k, s in students.items()}
    ladder = {name: raptor(spec.ladder_k, **options)[1]["student_correct"]
              for name, options in LADDER.items()}
    ladder[PROBE_RUNG] = probes[spec.ladder_k]
    return SeedRun(seed, w.cuts, evals[spec.k_values[0]]["teacher_acc"],
                   probe_accuracy(w.model, probe_train, batches, device),
                   {k: e["student_acc"] for k, e in evals.items()}, probes,
                   {k: {g: np.asarray(v) for g, v in e["cosine"].items()}
                    for k, e in evals.items()}, ladder)
