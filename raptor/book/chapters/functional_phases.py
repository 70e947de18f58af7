"""Chapter *Are the phases functional?*: max-cut vs random partitions, controls, layer swaps.

§2 of the paper: Raptors on max-cut partitions vs random ones (Fig. 3; C3), layer swaps within
and across phases (Fig. 15; C4), untrained teachers with and without skip branches (C9, C10) and
Raptors of an overfitting run's checkpoints (Fig. 13; C11).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import controls, phases
from raptor.book import plotting
from raptor.book.chapters import functional_phases_claims as judge
from raptor.book.chapters.functional_phases_claims import GROUPS, UNIT_IMAGES
from raptor.book.chapters.finding_phases import ALIGN_TOL, TeacherPhases, c2_boundaries
from raptor.book.chapters.phase_structure import c1_block_excess
from raptor.book.claims import Claim, excess_text, first_line, on_phases, scoped, stated
from raptor.book.experiment import (Walk, batched, images_of, phase_matrices_of, phases_of,
                                    snapshot_of, student_of, teacher_of, walk)
from raptor.book.specs.functional_phases import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student, head_accuracy
from raptor.novelty import novelty_peaks
from raptor.phase_test import PhaseTest
from raptor.phases import Partition
from raptor.stats import HOLDS, aligned
from raptor.structure import boundaries, subset_stability
from raptor.swap import candidate_swaps, swap_accuracy

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


def _r2(student, w: Walk, device: str) -> dict[str, float]:
    """``student``'s mean R² per group on ``w``'s images."""
    ev = w.evaluate(student, device)
    return {g: float(np.mean(ev["r2"][g][1:])) for g in GROUPS}


def planted_spec(spec: Spec) -> Spec:
    """The positive control's spec: the teacher's blocks shared within ``spec.planted``'s groups,
    its Raptors and swaps at ``k = len(spec.planted)``."""
    k = len(spec.planted)
    return replace(spec, teacher=replace(spec.teacher, tied=spec.planted), k_values=(k,),
                   control_k=k, planted=None)


def compute(spec: Spec) -> Result:
    """Every Raptor, control, snapshot and swap of the chapter, and of its positive control
    (models through the cache)."""
    device = resolve_device(spec.machine.device)
    book = [_seed_run(spec, seed, device, full=True) for seed in spec.seeds]
    control = planted_spec(spec) if spec.planted else None
    planted = [_seed_run(control, seed, device, full=False) for seed in spec.seeds] \
        if control else []
    sizes = np.array([min(UNIT_IMAGES, spec.n_images - i)
                      for i in range(0, spec.n_images, UNIT_IMAGES)], dtype=float)
    return Result(spec, sizes, book, planted)


def _seed_run(spec: Spec, seed: int, device: str, *, full: bool) -> SeedRun:
    """One teacher's measurements; ``full``: with the overfitting run and the untrained
    controls (C9–C11), which are not about phases."""
    p = spec.p
    test = images_of(spec, spec.test_images, seed=seed)
    w = walk(teacher_of(spec, p, seed=seed), tuple(x[:spec.n_images] for x in test),
             cuts=spec.k_values, device=device)
    units, cut = w.batches(UNIT_IMAGES), w.cuts[spec.control_k]
    held = tuple(x[spec.n_images:] for x in test)  # none in a dry run's stand-in images
    reproduced = {k: v[spec.subset_images] for k, v in subset_stability(
        w.cuts, phase_matrices_of(w.model, *held, device=device), [spec.subset_images],
        spec.n_subsets).items()} if len(held[1]) else {}
    test = batched(*test)
    partitions, test_acc, r2 = {}, {}, {}
    for k, maxcut in w.cuts.items():
        partitions[k] = [maxcut, *phases.random_partitions(spec.teacher.depth, k, spec.n_random,
                                                           seed, exclude=[maxcut])]
        students = [student_of(spec, p, part, seed=seed)[0] for part in partitions[k]]
        test_acc[k] = np.array([head_accuracy(s, test, device=device) for s in students])
        evals = [_r2(s, w, device) for s in students]
        r2[k] = {g: np.array([e[g] for e in evals]) for g in GROUPS}
    controls = {"trained": _per_unit(student_of(spec, p, cut, seed=seed)[0], w.model, units,
                                     device)}
    val, snapshots = {}, []
    if full:
        overfit = spec.overfit()
        val = teacher_of(spec, p, seed=seed, **overfit)[1]["val"]
        for step in spec.overfit_snapshots:
            snap = snapshot_of(spec, p, step, seed=seed, **overfit)
            student, _ = student_of(spec, p, cut, seed=seed, snapshot=step,
                                    teacher_changes=overfit)
            snapshots.append(_per_unit(student, snap, units, device))
        for name, residual in UNTRAINED.items():
            model, _ = teacher_of(spec, p, seed=seed, trained=False, residual=residual)
            student, _ = student_of(spec, p, cut, seed=seed, trained=False, residual=residual)
            controls[name] = _per_unit(student, model, units, device)
    swap_units = {kind: {} for kind in KINDS}
    for n in spec.swap_counts:
        for kind in KINDS:
            sets = candidate_swaps(cut, n, kind, max_sets=spec.max_swap_sets, seed=seed)
            if sets:
                swap_units[kind][n] = np.stack(
                    [swap_accuracy(w.model, sets, [u], device=device) for u in units], axis=1)
    label = _name("book" if full else "planted", seed)
    return SeedRun(seed, partitions, test_acc, r2, phases_of(spec, p, seed=seed, device=device),
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


def versus_table(result: Result) -> pd.DataFrame:
    """Per seed, k and partition: its blocks, the Raptor's accuracy on the test images and mean
    R² (cls, patches)."""
    return pd.DataFrame([
        {"seed": run.seed, "k": k, "partition": "max-cut" if i == 0 else f"random {i - 1}",
         "blocks": phases.format_partition(part), "student acc": acc,
         "R²": np.mean([run.student_r2[k][g][i] for g in GROUPS])}
        for run in result.seeds for k, parts in run.partitions.items()
        for i, (part, acc) in enumerate(zip(parts, run.test_acc[k]))])


def controls_table(result: Result) -> pd.DataFrame:
    """Per seed and teacher (trained, untrained, untrained without skips): its Raptor's R²; the
    trained one's on all the images at once (as in :func:`versus_table`)."""
    rows = {}
    for run in result.seeds:
        rows[run.seed, "trained"] = {g: run.student_r2[result.spec.control_k][g][0]
                                     for g in GROUPS}
        for name in UNTRAINED:
            rows[run.seed, name] = {g: result.pooled(run.control_units[name][g]) for g in GROUPS}
    return pd.DataFrame(rows).T.rename_axis(["seed", "teacher"])


def snapshots_table(result: Result) -> pd.DataFrame:
    """Per seed and overfit snapshot: validation loss, teacher accuracy and the Raptor's R² per
    group."""
    steps = list(result.spec.overfit_snapshots)
    tables = []
    for run in result.seeds:
        at = [run.val["step"].tolist().index(s) for s in steps]
        tables.append(pd.DataFrame({
            "seed": run.seed, "step": steps, "val loss": run.val["loss"][at],
            "teacher acc": run.val["acc"][at],
            **{f"R² {g}": result.pooled(run.snapshot_units[g]) for g in GROUPS}}))
    return pd.concat(tables).set_index(["seed", "step"])


def swaps_table(result: Result) -> pd.DataFrame:
    """Per seed, count and kind of swaps: the number of swap sets and their accuracy's mean and
    std, and the share of the teacher's accuracy kept."""
    rows = []
    for run in result.seeds:
        for n, kind in itertools.product(result.spec.swap_counts, KINDS):
            if n in run.swap_units[kind]:
                accs = result.pooled(run.swap_units[kind][n])
                rows.append({"seed": run.seed, "swaps": n, "kind": kind, "sets": len(accs),
                             "acc": accs.mean(), "std": accs.std(),
                             "kept": accs.mean() / run.teacher_acc})
    return pd.DataFrame(rows)


def maxcut_vs_random_figure(result: Result) -> plt.Figure:
    """Raptor accuracy of the max-cut partition vs random ones, per k (Fig. 3, right), first
    seed, on the test images C3 reads: random partitions as points, their mean ± one standard
    deviation beside them, max-cut as a star."""
    units = result.seeds[0].test_acc
    fig, ((ax,),) = plotting.figure(width=min(plotting.BOX_WIDTH, 3.5 + 0.9 * len(units)),
                                    height=3.4)
    jitter = np.random.default_rng(0)
    for i, acc in enumerate(units.values()):
        rand = acc[1:]
        ax.scatter(i - 0.12 + jitter.uniform(-0.05, 0.05, rand.size), rand, color="grey",
                   alpha=0.8, label="random partitions")
        ax.errorbar(i + 0.05, rand.mean(), yerr=rand.std(ddof=1), color="black", capsize=4,
                    marker="_", ms=10, label="random: mean ± sd")
        ax.scatter(i + 0.2, acc[0], color="crimson", marker="*", s=140, zorder=3, label="max-cut")
    ax.set(xlabel="number of phases k", ylabel="Raptor accuracy",
           title="max-cut vs random partitions", xlim=(-0.6, len(units) - 0.4))
    ax.set_xticks(range(len(units)), [f"k={k}" for k in units])
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def overfitting_figure(result: Result) -> plt.Figure:
    """R² and teacher accuracy along the first seed's overfitting run, validation loss dotted
    (Fig. 13)."""
    run = result.seeds[0]
    snaps = snapshots_table(result).loc[run.seed]
    step = best_step(run)
    fig, ((ax,),) = plotting.figure(height=3.8)
    for col in ("R² cls", "R² patches", "teacher acc"):
        ax.plot(snaps.index, snaps[col], marker="o", label=col)
    ax2 = ax.twinx()
    ax2.plot(run.val["step"], run.val["loss"], color="grey", ls=":", label="val loss (right)")
    ax2.set_ylabel("validation loss")
    ax.axvline(step, color="grey", ls="--", lw=0.8, label="val-loss minimum")
    ax.set(xlabel="training step", ylabel="R² / accuracy",
           title=f"overfitting run\n(val-loss minimum at step {step})")
    plotting.legend_below(fig, [ax, ax2], ncols=2)
    return fig


def swaps_figure(result: Result) -> plt.Figure:
    """Teacher accuracy after intra- and inter-phase layer swaps, first seed (Fig. 15)."""
    first = result.seeds[0]
    swaps = swaps_table(result)
    swaps = swaps[swaps["seed"] == first.seed]
    fig, ((ax,),) = plotting.figure(width=5.0, height=3.4)
    for kind, color in (("intra", "seagreen"), ("inter", "crimson")):
        sub = swaps[swaps["kind"] == kind]
        ax.errorbar(sub["swaps"], sub["acc"], yerr=sub["std"], marker="o", capsize=3,
                    color=color, label=f"{kind}-phase swaps")
    ax.axhline(first.teacher_acc, color="grey", ls="--", label="teacher, no swap")
    cut = first.partitions[result.spec.control_k][0]
    ax.set(xlabel="layers replaced", ylabel="accuracy",
           title=f"layer swaps, phases {phases.format_partition(cut)}",
           xticks=list(result.spec.swap_counts))
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def _c3(result: Result, runs: list[SeedRun]) -> Claim:
    """C3 on ``runs``: max-cut's accuracy margin in σ per k, its R² margin beside ([ours])."""
    test_acc = runs[0].test_acc
    return judge.c3_maxcut_beats_random(
        {k: [judge.margin(run.test_acc[k][0], run.test_acc[k][1:]) for run in runs]
         for k in test_acc},
        counts={k: len(a) - 1 for k, a in test_acc.items()},
        r2_margins={f"k={k} {judge.TOKEN[g]}": [judge.paired_margin(run.student_r2[k][g])
                                                for run in runs]
                    for k in test_acc for g in GROUPS},
        test_images=result.spec.test_images)


def _c4(result: Result, runs: list[SeedRun]) -> Claim:
    """C4 on ``runs``: the share of accuracy that intra- and inter-phase swaps keep."""
    spec, sizes = result.spec, result.unit_sizes
    kept = {kind: {n: [judge.retained(run.swap_units[kind][n],
                                      run.control_units["trained"]["acc"], sizes)
                       for run in runs if n in run.swap_units[kind]]
                   for n in spec.swap_counts if any(n in run.swap_units[kind] for run in runs)}
            for kind in KINDS}
    ceiling = 1 / min(float(result.pooled(run.control_units["trained"]["acc"])) for run in runs)
    return judge.c4_swaps(kept["intra"], kept["inter"], ceiling=ceiling)


def _c2(result: Result, runs: list[SeedRun]) -> Claim:
    """C2 on ``runs``, as chapter 3 judges it: alignment with novelty boundaries, shift across
    seeds, stability on held-out subsets of the first run's teacher."""
    spec = result.spec
    return c2_boundaries([run.boundaries for run in runs], runs[0].reproduced,
                         images=spec.subset_images, n_resamples=spec.n_subsets,
                         stable=runs[0].boundaries.label)


def _name(kind: str, seed: int) -> str:
    """A teacher's name on the page: the book's ``seed 0``, the positive control's
    ``planted, seed 0`` (other models)."""
    return f"seed {seed}" if kind == "book" else f"planted, seed {seed}"


def _on_phases(result: Result, runs: list[SeedRun], made, kind: str = "book") -> Claim:
    """``made`` judged on the runs whose teacher has phases by C1's test (:func:`on_phases`)."""
    by_seed = {run.seed: run for run in runs}
    return on_phases(lambda seeds: made(result, [by_seed[s] for s in seeds]),
                     {run.seed: run.phases for run in runs},
                     names={run.seed: _name(kind, run.seed) for run in runs})


def claims(result: Result) -> list[Claim]:
    """C3 and C4 on the teachers in which C1 finds phases (*not testable here* where fewer than
    two have them, their numbers beside), C9, C10 and C11 on every teacher: each declared over the
    seeds on the claims engine (one estimate per seed, each a trained teacher with its own
    Raptors; a t interval over them) by
    :mod:`~raptor.book.chapters.functional_phases_claims`."""
    runs, spec, pooled = result.seeds, result.spec, result.pooled

    def control(name: str, group: str) -> list[float]:
        return [float(pooled(run.control_units[name][group])) for run in runs]

    return [
        _on_phases(result, runs, _c3), _on_phases(result, runs, _c4),
        judge.c9_untrained_easier({g: control("untrained", g) for g in GROUPS},
                                  {g: control("trained", g) for g in GROUPS}),
        judge.c10_skip_removal(control("untrained", "patches"),
                               control("untrained, no skip", "patches")),
        judge.c11_overfitting({run.seed: best_step(run) for run in runs}, spec.overfit_snapshots,
                              {run.seed: {key: pooled(u) for key, u in run.snapshot_units.items()}
                               for run in runs}),
    ]


def positive_control(result: Result) -> dict[str, dict[str, Claim]]:
    """C1–C4 on the book's teachers and on the positive control's, the same tests side by side
    (by claim, then ``"book"`` / ``"planted"``): C1 over the seeds' teachers as chapter 1 judges
    it, C2 as chapter 3 does, C3 and C4 as this chapter does, each of C2–C4 on the teachers with
    phases. Not the claims' verdicts: what the tests say on models known to have phases."""
    out: dict[str, dict[str, Claim]] = {}
    for kind, runs in (("book", result.seeds), ("planted", result.planted)):
        if not runs:
            continue
        tests = {_name(kind, run.seed): run.phases for run in runs}
        for cid, made in (("C1", None), ("C2", _c2), ("C3", _c3), ("C4", _c4)):
            out.setdefault(cid, {})[kind] = c1_block_excess(tests) if made is None else \
                _on_phases(result, runs, made, kind)
    return out


def planted_table(result: Result) -> pd.DataFrame:
    """Per planted teacher: C1's largest block excess, its max-cut at the planted k, how many of
    the planted boundaries it finds (within one layer) and those Foote's novelty finds."""
    planted = controls.partition_of(result.spec.planted or ())
    k = len(planted)
    bounds = list(boundaries(planted))
    return pd.DataFrame([{
        "teacher": _name("planted", run.seed), "C1 block excess": excess_text(run.phases),
        "max-cut": phases.format_partition(run.partitions[k][0]),
        "planted found": aligned(list(boundaries(run.partitions[k][0])), bounds, tol=ALIGN_TOL),
        "novelty found": aligned(run.boundaries.novelty, bounds, tol=ALIGN_TOL)}
        for run in result.planted])


def control_table(result: Result) -> pd.DataFrame:
    """:func:`positive_control` as a table: per claim, its verdict and numbers on the book's
    teachers and on the teachers with planted phases."""
    names = {"book": "the book's teachers",
             "planted": f"planted phases {controls.partition_name(result.spec.planted or ())}"}
    def cell(c: Claim) -> str:
        ours, words = first_line(c.ours).split(" (measured on all")[0], scoped(c.verdict)
        return ours if ours.startswith(words) else f"{words}: {ours}"

    return pd.DataFrame([{"claim": cid, **{names[kind]: cell(c)
                                           for kind, c in by_kind.items()}}
                         for cid, by_kind in positive_control(result).items()])


def control_figure(result: Result) -> plt.Figure:
    """The phase matrix of the first seed's book teacher and of its planted-phase teacher, each
    with its max-cut at the planted k (white) and the novelty's boundaries (ticks on top)."""
    k = result.spec.control_k if not result.planted else len(result.spec.planted)
    shown = {"book teacher": result.seeds[0], **({"planted phases": result.planted[0]}
                                                  if result.planted else {})}
    panels, cuts = {}, {}
    for kind, run in shown.items():
        title = f"{kind}, seed {run.seed}\n{phases.format_partition(run.partitions[k][0])}"
        panels[title], cuts[title] = run.boundaries.S, run.partitions[k][0]
    fig = plotting.similarity_panels(panels, ncols=2, partitions=cuts, width=plotting.BOX_WIDTH)
    for ax, run in zip(fig.axes, shown.values()):
        for b in run.boundaries.novelty:
            ax.annotate("", xy=(b - 0.5, -0.5), xytext=(b - 0.5, -2.0),
                        arrowprops=dict(arrowstyle="-|>", color="crimson", lw=1.2),
                        annotation_clip=False)
    return fig


def findings(result: Result) -> dict[str, str]:
    """The chapter's sentences that quote its numbers, as glued text: how many of the book's
    teachers C1 finds phases in, and what the positive control shows."""
    book = [run for run in result.seeds if run.phases.verdict() == HOLDS]
    if not result.planted:
        return {"phased": f"{len(book)} of {len(result.seeds)}",
                "planted": "none (`planted` is None)", "planted-sizes": "none"}
    return {"phased": f"{len(book)} of {len(result.seeds)}",
            "planted": "; ".join(f"{cid} {stated(by_kind['planted'].verdict)}"
                                 for cid, by_kind in positive_control(result).items()),
            "planted-sizes": controls.partition_name(result.spec.planted)}
