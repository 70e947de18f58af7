"""The computation of chapter *Are the phases functional?*: every Raptor, control, snapshot and
swap of the book's teachers, and of its positive control's."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from raptor import phases
from raptor.book.chapters.finding_phases.compute import TeacherPhases
from raptor.book.chapters.functional_phases.spec import Spec
from raptor.book.experiment import (Walk, batched, images_of, phase_matrices_of, phases_of,
                                    snapshot_of, student_of, teacher_of, walk)
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student, head_accuracy, head_correct
from raptor.novelty import novelty_peaks
from raptor.phase_test import PhaseTest
from raptor.phases import Partition
from raptor.planning import Plan
from raptor.structure import subset_stability
from raptor.swap import candidate_swaps, swap_accuracy

GROUPS = ("cls", "patches")

#: Images per unit of the chapter's per-unit scores (accuracy, R²), pooled over the units.
UNIT_IMAGES = 50

KINDS = ("intra", "inter")
UNTRAINED = {"untrained": True, "untrained, no skip": False}  # control -> with skip branches


@dataclass
class SeedRun:
    """One seed's teacher: Raptors on its max-cut and random partitions (C3), and on its max-cut
    at ``control_k`` the controls (C9, C10), layer swaps (C4) and overfitting run (C11). Per unit
    of images as :class:`Result`'s ``unit_sizes``; R² is the mean over layers 1..L on the
    chapter's images, C3's accuracy on ``spec.test_images`` test images."""

    seed: int
    partitions: dict[int, list[Partition]]  # per k: the max-cut, then the random others
    test_acc: dict[int, np.ndarray]  # per k: accuracy on the test images, per partition
    student_r2: dict[int, dict[str, np.ndarray]]  # per k and token group, per partition
    replicate_acc: dict[int, np.ndarray]  # per k: the max-cut's replicates' test accuracy
    replicate_r2: dict[int, dict[str, np.ndarray]]  # per k and token group, per replicate
    phases: PhaseTest  # C1's test of the teacher, as every chapter reads it
    boundaries: TeacherPhases  # its phase matrix, max-cuts and novelty boundaries (C2)
    reproduced: dict[int, float]  # per k: the share of held-out subsets giving its max-cut (C2)
    teacher_acc: float
    control_units: dict[str, dict[str, np.ndarray]]  # teacher -> group, "acc" -> per unit
    swap_units: dict[str, dict[int, np.ndarray]]  # kind -> layers swapped -> (swap sets, units)
    val: dict[str, np.ndarray]  # the overfitting run's validation record: step, loss, acc
    snapshot_units: dict[str, np.ndarray]  # token group, "acc" -> (snapshots, units)


@dataclass
class Result:
    """The chapter's measurements, one :class:`SeedRun` per seed of ``spec.seeds``, and as many
    of the positive control, the teachers with ``spec.planted`` phases (``planted``: their
    Raptors at ``k = len(spec.planted)`` and swaps only)."""

    spec: Spec
    unit_sizes: np.ndarray  # images per unit of ≤ UNIT_IMAGES (scores pooled over them)
    seeds: list[SeedRun]
    planted: list[SeedRun]

    def pooled(self, units: np.ndarray) -> np.ndarray:
        """Values per unit of images (the last axis) over all the images."""
        return np.average(units, axis=-1, weights=self.unit_sizes)


def _per_unit(student, teacher, units, device: str) -> dict[str, np.ndarray]:
    """Per unit of images: the Raptor's mean R² over layers 1..L per group and the teacher's
    head accuracy ("acc")."""
    evs = [evaluate_student(student, teacher, [u], device=device) for u in units]
    return {**{g: np.array([np.mean(e["r2"][g][1:]) for e in evs]) for g in GROUPS},
            "acc": np.array([e["teacher_acc"] for e in evs])}


def _scores(student, w: Walk, rest: list, device: str) -> tuple[float, dict[str, float]]:
    """``student``'s accuracy on the test images (``w``'s, then the batches ``rest``) and its
    mean R² per group on ``w``'s images: those run once, for both (the forward pass of
    :func:`~raptor.metrics.head_correct`)."""
    ev = w.evaluate(student, device)
    correct = ev["student_correct"]
    if rest:
        correct = np.concatenate([correct, head_correct(student, rest, device=device)])
    return (float(correct.mean()),
            {g: float(np.mean(ev["r2"][g][1:])) for g in GROUPS})


def planted_spec(spec: Spec) -> Spec:
    """The positive control's spec: the teacher's blocks shared within ``spec.planted``'s groups,
    its Raptors and swaps at ``k = len(spec.planted)``."""
    k = len(spec.planted)
    return replace(spec, teacher=replace(spec.teacher, tied=spec.planted), k_values=(k,),
                   control_k=k, planted=None)


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """Every Raptor, control, snapshot and swap of the chapter, and of its positive control
    (models through the cache)."""
    device = resolve_device(spec.machine.device)
    book = [_seed_run(spec, seed, device, plan, full=True) for seed in spec.seeds]
    control = planted_spec(spec) if spec.planted else None
    planted = [_seed_run(control, seed, device, plan, full=False) for seed in spec.seeds] \
        if control else []
    sizes = np.array([min(UNIT_IMAGES, spec.n_images - i)
                      for i in range(0, spec.n_images, UNIT_IMAGES)], dtype=float)
    return Result(spec, sizes, book, planted)


def _seed_run(spec: Spec, seed: int, device: str, plan: Plan | None, *, full: bool
              ) -> SeedRun:
    """One teacher's measurements; ``full``: with the overfitting run and the untrained
    controls (C9–C11), which are not about phases."""
    p = spec.p
    test = images_of(spec, spec.test_images, seed=seed, plan=plan)
    w = walk(teacher_of(spec, p, seed=seed, plan=plan), tuple(x[:spec.n_images] for x in test),
             cuts=spec.k_values, device=device)
    units, cut = w.batches(UNIT_IMAGES), w.cuts[spec.control_k]
    held = tuple(x[spec.n_images:] for x in test)  # none in a dry run's stand-in images
    reproduced = {k: v[spec.subset_images] for k, v in subset_stability(
        w.cuts, phase_matrices_of(w.model, *held, device=device), [spec.subset_images],
        spec.n_subsets).items()} if len(held[1]) else {}
    rest = batched(*held) if len(held[1]) else []
    partitions, test_acc, r2, rep_acc, rep_r2 = {}, {}, {}, {}, {}
    for k, maxcut in w.cuts.items():
        partitions[k] = [maxcut, *phases.random_partitions(spec.teacher.depth, k, spec.n_random,
                                                           seed, exclude=[maxcut])]
        students = [student_of(spec, p, part, seed=seed, plan=plan)[0] for part in partitions[k]]
        replicas = [student_of(spec, p, maxcut, seed=seed, replicate=r, plan=plan)[0]
                    for r in range(1, spec.replicates)]
        scores = [_scores(s, w, rest, device) for s in students + replicas]
        acc = np.array([a for a, _ in scores])
        by_group = {g: np.array([r[g] for _, r in scores]) for g in GROUPS}
        n = len(students)
        test_acc[k], rep_acc[k] = acc[:n], acc[n:]
        r2[k], rep_r2[k] = ({g: v[:n] for g, v in by_group.items()},
                            {g: v[n:] for g, v in by_group.items()})
    controls = {"trained": _per_unit(student_of(spec, p, cut, seed=seed, plan=plan)[0], w.model,
                                     units, device)}
    val, snapshots = {}, []
    if full:
        overfit = spec.overfit()
        val = teacher_of(spec, p, seed=seed, plan=plan, **overfit)[1]["val"]
        for step in spec.overfit_snapshots:
            snap = snapshot_of(spec, p, step, seed=seed, plan=plan, **overfit)
            student, _ = student_of(spec, p, cut, seed=seed, snapshot=step,
                                    teacher_changes=overfit, plan=plan)
            snapshots.append(_per_unit(student, snap, units, device))
        for name, residual in UNTRAINED.items():
            model, _ = teacher_of(spec, p, seed=seed, trained=False, residual=residual, plan=plan)
            student, _ = student_of(spec, p, cut, seed=seed, trained=False, residual=residual,
                                    plan=plan)
            controls[name] = _per_unit(student, model, units, device)
    swap_units = {kind: {} for kind in KINDS}
    for n in spec.swap_counts:
        for kind in KINDS:
            sets = candidate_swaps(cut, n, kind, max_sets=spec.max_swap_sets, seed=seed)
            if sets:
                swap_units[kind][n] = np.stack(
                    [swap_accuracy(w.model, sets, [u], device=device) for u in units], axis=1)
    label = teacher_name("book" if full else "planted", seed)
    return SeedRun(seed, partitions, test_acc, r2, rep_acc, rep_r2,
                   phases_of(spec, p, seed=seed, device=device, plan=plan),
                   TeacherPhases(label, p, seed, w.accuracy, w.S, w.cuts, novelty_peaks(w.S),
                                 None),
                   reproduced, head_accuracy(w.model, w.batches(), device=device), controls,
                   swap_units,
                   {key: np.array([r[key] for r in val]) for key in ("step", "loss", "acc")}
                   if full else {},
                   {key: np.array([s[key] for s in snapshots]) for key in (*GROUPS, "acc")}
                   if full else {})


def best_step(run: SeedRun) -> int:
    """The overfitting run's step of minimal validation loss."""
    return int(run.val["step"][np.nanargmin(run.val["loss"])])


def teacher_name(kind: str, seed: int) -> str:
    """A teacher's name on the page: the book's ``seed 0``, the positive control's
    ``planted, seed 0`` (other models)."""
    return f"seed {seed}" if kind == "book" else f"planted, seed {seed}"
