"""The computation of chapter *Emergent phase structure*: every model's walk, its max-cut's ladder
of nulls and C1's test, the synthetic controls' and the paper's DINOv2-B matrix's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from raptor import controls, paper
from raptor.book.chapters.phase_structure.spec import Spec
from raptor.book.experiment import Walk, images_of, pretrained_walk, teacher_of, walk
from raptor.loop import resolve_device
from raptor.phase_test import PhaseTest, phase_test, smallest_step
from raptor.planning import Plan
from raptor.structure import PhaseExcess, matrix_excess, phase_excess

PHASED = {name for name, (has_phases, _) in controls.CONTROLS.items() if has_phases}


@dataclass
class Result:
    """Per model (``"p=0.0, seed 0"``, ``"untrained, seed 0"``, a pretrained one) its walk, its
    max-cut's :class:`PhaseExcess` (the ladder) and C1's :class:`~raptor.phase_test.PhaseTest`;
    the same per control, and for the paper's DINOv2-B matrix (no interval); ``power`` the d* of
    each realistic control shape (phases on a decay without its step)."""

    spec: Spec
    accuracy: dict[str, float]
    trajectory_shape: dict[str, list[int]]
    similarity: dict[str, dict[str, np.ndarray]]
    cuts: dict[str, tuple[tuple[int, int], ...]]
    excess: dict[str, PhaseExcess]
    controls: dict[str, PhaseExcess]
    paper_dinov2b: dict[int, PhaseExcess]
    records: dict[str, dict[str, Any]]  # each trained teacher's training record
    tests: dict[str, PhaseTest]
    control_tests: dict[str, PhaseTest]
    paper_test: PhaseTest
    power: dict[str, float]

    def trained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if not name.startswith("untrained")}

    def untrained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if name.startswith("untrained")}

    def trained_tests(self) -> dict[str, PhaseTest]:
        return {name: t for name, t in self.tests.items() if not name.startswith("untrained")}


def power_reps(n_boot: int) -> int:
    """The replicates of d* (:func:`~raptor.phase_test.smallest_step`) at ``n_boot`` resamples:
    half as many, at least 20."""
    return max(20, n_boot // 2)


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """Similarity per model and token group, max-cuts, and C1's block excess for every model,
    control and the paper's DINOv2-B matrix."""
    spec.require_model()
    images = images_of(spec, spec.n_images, plan=plan)
    measure = dict(excess=(spec.k,), n_boot=spec.n_boot, device=resolve_device(spec.machine.device))
    accuracy, shapes, mats, excess, records, tests = {}, {}, {}, {}, {}, {}
    reps = power_reps(spec.n_boot)

    def add(name: str, w: Walk) -> None:
        accuracy[name], shapes[name], mats[name] = w.accuracy, list(w.traj.shape), w.similarity
        excess[name] = w.excess[spec.k]
        tests[name] = phase_test(w.per_image, n_boot=spec.n_boot, power_reps=reps)
        if "val" in w.record:
            records[name] = w.record

    for p in spec.p_values:
        for seed in spec.teacher_seeds:
            add(f"p={p}, seed {seed}",
                walk(teacher_of(spec, p, seed=seed, plan=plan), images, **measure))
    for seed in spec.teacher_seeds:
        add(f"untrained, seed {seed}",
            walk(teacher_of(spec, seed=seed, trained=False, plan=plan), images, **measure))
    if spec.pretrained.weights is not None:
        add(spec.pretrained.label, pretrained_walk(spec.pretrained, spec.n_images,
                                                   spec.machine.data_root, plan, **measure))
    checks, control_tests = {}, {}
    for name in controls.CONTROLS:
        per_image, growth = controls.control(name, spec.control_images)
        checks[name] = phase_excess(per_image, spec.k, growth=growth, n_boot=spec.n_boot)
        control_tests[name] = phase_test(per_image, n_boot=spec.n_boot, power_reps=0)
    power = {f"{controls.partition_name(sizes)} on {decay} decay": smallest_step(
        controls.decay_images(spec.control_images, decay), controls.partition_of(sizes),
        reps=reps) for sizes in controls.REALISTIC_PHASES for decay in controls.STEP_DECAYS}
    S = paper.dinov2b_block_similarity()
    return Result(spec, accuracy, shapes, mats, {name: e.cut for name, e in excess.items()},
                  excess, checks, {k: matrix_excess(S, k) for k in paper.K_VALUES}, records,
                  tests, control_tests, phase_test(S), power)
