"""The computation of chapter *Finding the phases*: each teacher's phase matrix, max-cuts,
novelty boundaries and C1's test, the exact DP beside the hierarchical bisection, and the cuts'
stability on held-out images."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raptor import phases
from raptor.book.chapters.finding_phases.spec import Spec
from raptor.book.experiment import (images_of, phase_matrices_of, phases_of, pretrained_walk,
                                    teacher_of, walk)
from raptor.loop import resolve_device
from raptor.novelty import novelty_peaks
from raptor.phase_test import PhaseTest
from raptor.phases import Partition
from raptor.planning import Plan
from raptor.stats import HOLDS
from raptor.structure import subset_stability


@dataclass
class TeacherPhases:
    """One teacher's phase matrix (blocks' outputs, tokens {cls, mean patch}), its max-cuts, the
    boundaries Foote's novelty finds in it and C1's test of it (None for a pretrained ViT: C1
    judges it in the chapter *Emergent phase structure*)."""

    label: str
    p: float | None  # None: DINOv2-B
    seed: int
    accuracy: float
    S: np.ndarray
    cuts: dict[int, Partition]
    novelty: list[int]
    phases: PhaseTest | None


@dataclass
class Result:
    """``stability``: per k and subset size, the share of held-out subsets reproducing the cut
    of ``stable_teacher`` (the first rate's first teacher with phases, else its first)."""

    spec: Spec
    teachers: list[TeacherPhases]
    comparison: list[dict[str, object]]
    stable_teacher: str
    stability: dict[int, dict[int, float]]

    def first(self) -> list[TeacherPhases]:
        """The first rate's teachers, one per seed: C2's models."""
        return [te for te in self.teachers if te.p == self.spec.p_values[0]]


def hierarchical_vs_dp(label: str, S: np.ndarray, eps_values: Sequence[float]
                       ) -> list[dict[str, object]]:
    """One row per ``eps``: the hierarchical bisection and the exact DP with as many segments."""
    rows = []
    for eps in eps_values:
        h = phases.hierarchical_maxcut(S, eps)
        dp = phases.maxcut(S, len(h.clusters))
        rows.append({
            "teacher": label, "eps": eps, "k": len(h.clusters),
            "hierarchical": phases.format_partition(h.partition) if h.contiguous
            else " | ".join(",".join(str(i + 1) for i in c) for c in h.clusters),
            "contiguous": h.contiguous,
            "objective (hier.)": round(phases.in_segment_weight(S, h.partition), 4)
            if h.contiguous else None,
            "DP": phases.format_partition(dp),
            "objective (DP)": round(phases.in_segment_weight(S, dp), 4)})
    return rows


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """Phase matrices, max-cuts and novelty boundaries per teacher, DP vs hierarchical, C1's test
    of each teacher, and the cuts' stability on held-out image subsets (C2)."""
    spec.require_model()
    p0, seed0 = spec.p_values[0], spec.teacher_seeds[0]
    images = images_of(spec, spec.n_images + spec.held_out, plan=plan)
    mine = tuple(x[:spec.n_images] for x in images)
    device = resolve_device(spec.machine.device)
    measure = dict(cuts=spec.k_values, device=device)
    teachers = []
    runs = sorted({(p, seed0) for p in spec.p_values} | {(p0, s) for s in spec.teacher_seeds})
    for p, s in runs:
        w = walk(teacher_of(spec, p, seed=s, plan=plan), mine, **measure)
        teachers.append(TeacherPhases(f"p={p}, seed {s}", p, s, w.accuracy, w.S, w.cuts,
                                      novelty_peaks(w.S),
                                      phases_of(spec, p, seed=s, device=device, plan=plan)))
    if spec.pretrained.weights is not None:
        w = pretrained_walk(spec.pretrained, spec.n_images, spec.machine.data_root, plan,
                            **measure)
        teachers.append(TeacherPhases(spec.pretrained.label, None, 0, w.accuracy, w.S, w.cuts,
                                      novelty_peaks(w.S), None))
    comparison = [row for te in teachers
                  for row in hierarchical_vs_dp(te.label, te.S, spec.eps_values)]
    first = [te for te in teachers if te.p == p0]
    stable = next((te for te in first if te.phases.verdict() == HOLDS), first[0])
    held = tuple(x[spec.n_images:] for x in images)  # none in a dry run's stand-in images
    stability = subset_stability(stable.cuts, phase_matrices_of(
        teacher_of(spec, p0, seed=stable.seed, plan=plan)[0], *held, device=device),
        spec.image_counts, spec.n_resamples) if len(held[1]) else {}
    return Result(spec, teachers, comparison, stable.label, stability)
