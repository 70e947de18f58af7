"""Chapter *Are the phases functional?*: max-cut vs random partitions, controls, layer swaps.

§2 of the paper: Raptors on max-cut partitions vs random ones (Fig. 3; C3), layer swaps within
and across phases (Fig. 15; C4), untrained teachers with and without skip branches (C9, C10) and
Raptors of an overfitting run's checkpoints (Fig. 13; C11).
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import phases
from raptor.book import plotting
from raptor.book.chapters import functional_phases_claims as judge
from raptor.book.chapters.functional_phases_claims import GROUPS, UNIT_IMAGES
from raptor.book.claims import Claim, across_seeds, resting_on_phases
from raptor.book.experiment import Walk, images_of, snapshot_of, student_of, teacher_of, walk
from raptor.book.specs.functional_phases import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student, head_accuracy
from raptor.phases import Partition
from raptor.structure import PhaseExcess
from raptor.swap import candidate_swaps, swap_accuracy

KINDS = ("intra", "inter")


@dataclass
class SeedChecks:
    """One seed's teacher, on its max-cut at ``control_k``: the controls (C9, C10) and the layer
    swaps (C4). Per unit of images as :class:`Result`'s ``unit_sizes``."""

    seed: int
    partition: Partition  # the max-cut at control_k
    teacher_acc: float
    teacher_units: np.ndarray  # the teacher's accuracy per unit (C4's reference)
    controls: dict[str, dict[str, float]]  # teacher -> token group -> R²
    control_units: dict[str, dict[str, np.ndarray]]  # teacher -> token group -> R² per unit
    swap_units: dict[str, dict[int, np.ndarray]]  # kind -> layers swapped -> (swap sets, units)
    excess: PhaseExcess  # the max-cut at control_k vs the warped-decay null (C1)


@dataclass
class SeedVersus:
    """One seed's teacher: max-cut vs random partitions (C3) and the overfitting run (C11). Per
    unit of images as :class:`Result`'s ``unit_sizes``; per-group R² is the mean over layers
    1..L of the Raptor's R² against its teacher."""

    seed: int
    partitions: dict[int, list[Partition]]  # per k: the max-cut, then the random others
    student_units: dict[int, np.ndarray]  # per k: accuracy per unit, (partitions, units)
    student_r2: dict[int, dict[str, np.ndarray]]  # per k and token group, per partition
    excess: dict[int, PhaseExcess]  # per k: the teacher's max-cut vs the warped-decay null (C1)
    val_steps: np.ndarray  # the overfitting run's validation record
    val_loss: np.ndarray
    val_acc: np.ndarray
    snapshot_units: dict[str, np.ndarray]  # token group, "acc" -> (snapshots, units)


@dataclass
class Result:
    """The chapter's measurements: C3 and C11 per versus seed, C4, C9 and C10 per seed."""

    spec: Spec
    unit_sizes: np.ndarray  # images per unit of ≤ UNIT_IMAGES (the bootstrap units)
    versus: list[SeedVersus]  # one per seed, in the order of ``spec.seeds``
    seeds: list[SeedChecks]  # one per seed, in the order of ``spec.seeds``

    def student_acc(self, k: int, run: SeedVersus | None = None) -> np.ndarray:
        """Each Raptor's accuracy at ``k`` on all the images, in the order of the partitions of
        ``run`` (default: the first seed's)."""
        run = run or self.versus[0]
        return np.average(run.student_units[k], axis=1, weights=self.unit_sizes)

    def swap_acc(self, checks: SeedChecks, kind: str, n: int) -> np.ndarray | None:
        """Each ``kind`` swap set's accuracy on all the images when swapping ``n`` layers of
        ``checks``' teacher; None where there is no such set."""
        units = checks.swap_units[kind].get(n)
        return None if units is None else np.average(units, axis=1, weights=self.unit_sizes)

    def snapshot_r2(self, run: SeedVersus | None = None) -> dict[str, np.ndarray]:
        """Token group -> the Raptor's R² per overfit snapshot of ``run`` (default: the first
        seed's)."""
        units = (run or self.versus[0]).snapshot_units
        return {g: np.average(units[g], axis=1, weights=self.unit_sizes) for g in GROUPS}


def _per_unit(student, teacher, units, device: str) -> dict[str, np.ndarray]:
    """Per unit of images: the Raptor's mean R² over layers 1..L per group and the teacher's
    head accuracy ("acc")."""
    evs = [evaluate_student(student, teacher, [u], device=device) for u in units]
    return {**{g: np.array([np.mean(e["r2"][g][1:]) for e in evs]) for g in GROUPS},
            "acc": np.array([e["teacher_acc"] for e in evs])}


def _evaluate(student, w: Walk, device: str) -> tuple[np.ndarray, dict[str, float]]:
    """``student`` on ``w``'s images: its head accuracy per unit, its mean R² per group."""
    ev = evaluate_student(student, w.model, w.batches(), device=device, teacher_traj=w.traj)
    ends = np.cumsum([len(y) for _, y in w.batches(UNIT_IMAGES)])
    return (np.array([part.mean() for part in np.split(ev["student_correct"], ends[:-1])]),
            {g: float(np.mean(ev["r2"][g][1:])) for g in GROUPS})


def compute(spec: Spec) -> Result:
    """Every Raptor, control, snapshot and swap of the chapter (models through the cache)."""
    device = resolve_device(spec.machine.device)
    versus, checks = [], []
    for seed in spec.seeds:
        w = walk(teacher_of(spec, spec.p, seed=seed), images_of(spec, spec.n_images, seed=seed),
                 cuts=spec.k_values, excess=spec.k_values, device=device)
        sizes = np.array([len(y) for _, y in w.batches(UNIT_IMAGES)], dtype=float)
        versus.append(_seed_versus(spec, seed, w, device))
        checks.append(_seed_checks(spec, seed, w, sizes, device))
    return Result(spec, sizes, versus, checks)


def _seed_versus(spec: Spec, seed: int, w: Walk, device: str) -> SeedVersus:
    t, p, units = spec.teacher, spec.p, w.batches(UNIT_IMAGES)
    partitions, acc_units, r2 = {}, {}, {}
    for k, cut in w.cuts.items():
        partitions[k] = [cut, *phases.random_partitions(t.depth, k, spec.n_random, seed,
                                                        exclude=[cut])]
        evals = [_evaluate(student_of(spec, p, part, seed=seed)[0], w, device)
                 for part in partitions[k]]
        acc_units[k] = np.array([a for a, _ in evals])
        r2[k] = {g: np.array([e[g] for _, e in evals]) for g in GROUPS}
    overfit = spec.overfit()
    _, record = teacher_of(spec, p, seed=seed, **overfit)
    val = record["val"]
    snapshot_units = {key: [] for key in (*GROUPS, "acc")}
    for step in spec.overfit_snapshots:
        snap = snapshot_of(spec, p, step, seed=seed, **overfit)
        student, _ = student_of(spec, p, partitions[spec.control_k][0], seed=seed,
                                snapshot=step, teacher_changes=overfit)
        for key, v in _per_unit(student, snap, units, device).items():
            snapshot_units[key].append(v)
    return SeedVersus(seed, partitions, acc_units, r2, w.excess,
                      np.array([r["step"] for r in val]), np.array([r["loss"] for r in val]),
                      np.array([r["acc"] for r in val]),
                      {key: np.array(v) for key, v in snapshot_units.items()})


def _seed_checks(spec: Spec, seed: int, w: Walk, sizes: np.ndarray, device: str) -> SeedChecks:
    p, units = spec.p, w.batches(UNIT_IMAGES)
    cut = w.cuts[spec.control_k]
    student, _ = student_of(spec, p, cut, seed=seed)
    controls = {"trained": _evaluate(student, w, device)[1]}
    control_units = {"trained": _per_unit(student, w.model, units, device)}
    for name, residual in (("untrained", True), ("untrained, no skip", False)):
        model, _ = teacher_of(spec, p, seed=seed, trained=False, residual=residual)
        student, _ = student_of(spec, p, cut, seed=seed, trained=False, residual=residual)
        control_units[name] = _per_unit(student, model, units, device)
        controls[name] = {g: float(np.average(control_units[name][g], weights=sizes))
                          for g in GROUPS}
    swap_units = {kind: {} for kind in KINDS}
    for n in spec.swap_counts:
        for kind in KINDS:
            sets = candidate_swaps(cut, n, kind, max_sets=spec.max_swap_sets, seed=seed)
            if sets:  # per unit, so that C4's interval pairs the units across models
                swap_units[kind][n] = np.stack(
                    [swap_accuracy(w.model, sets, [u], device=device) for u in units], axis=1)
    return SeedChecks(seed, cut, head_accuracy(w.model, w.batches(), device=device),
                      control_units["trained"]["acc"], controls,
                      {name: {g: u[g] for g in GROUPS} for name, u in control_units.items()},
                      swap_units, w.excess[spec.control_k])


def best_step(run: SeedVersus) -> int:
    """The overfitting run's step of minimal validation loss."""
    return int(run.val_steps[np.nanargmin(run.val_loss)])


def _snapshot_val(run: SeedVersus, values: np.ndarray, steps: tuple[int, ...]) -> np.ndarray:
    where = {int(s): i for i, s in enumerate(run.val_steps)}
    return np.array([values[where[s]] for s in steps])


def versus_table(result: Result) -> pd.DataFrame:
    """Per seed, k and partition: its blocks, the Raptor's accuracy and mean R² (cls,
    patches)."""
    return pd.DataFrame([
        {"seed": run.seed, "k": k, "partition": "max-cut" if i == 0 else f"random {i - 1}",
         "blocks": phases.format_partition(part), "student acc": result.student_acc(k, run)[i],
         "R²": np.mean([run.student_r2[k][g][i] for g in GROUPS])}
        for run in result.versus for k, parts in run.partitions.items()
        for i, part in enumerate(parts)])


def controls_table(result: Result) -> pd.DataFrame:
    """Per seed and teacher (trained, untrained, untrained without skips): its Raptor's R²."""
    return pd.DataFrame({(c.seed, name): r2 for c in result.seeds
                         for name, r2 in c.controls.items()}).T.rename_axis(["seed", "teacher"])


def snapshots_table(result: Result) -> pd.DataFrame:
    """Per seed and overfit snapshot: validation loss, teacher accuracy and the Raptor's R² per
    group."""
    steps = result.spec.overfit_snapshots
    return pd.concat([pd.DataFrame({
        "seed": run.seed, "step": list(steps),
        "val loss": _snapshot_val(run, run.val_loss, steps),
        "teacher acc": _snapshot_val(run, run.val_acc, steps),
        **{f"R² {g}": r2 for g, r2 in result.snapshot_r2(run).items()}})
        for run in result.versus]).set_index(["seed", "step"])


def swaps_table(result: Result) -> pd.DataFrame:
    """Per seed, count and kind of swaps: the number of swap sets and their accuracy's mean and
    std, and the share of the teacher's accuracy kept."""
    return pd.DataFrame([
        {"seed": c.seed, "swaps": n, "kind": kind, "sets": len(accs), "acc": np.mean(accs),
         "std": np.std(accs), "kept": np.mean(accs) / c.teacher_acc}
        for c in result.seeds for n in result.spec.swap_counts for kind in KINDS
        if (accs := result.swap_acc(c, kind, n)) is not None])


def maxcut_vs_random_figure(result: Result) -> plt.Figure:
    """Raptor accuracy of the max-cut partition vs random ones, per k (Fig. 3, right), first
    seed: random partitions as points, their mean ± one standard deviation beside them, max-cut
    as a star."""
    ks = list(result.versus[0].partitions)
    fig, ((ax,),) = plotting.figure(width=min(plotting.WIDTH, 3.5 + 0.9 * len(ks)), height=3.2)
    jitter = np.random.default_rng(0)
    for i, k in enumerate(ks):
        rand = result.student_acc(k)[1:]
        ax.scatter(i - 0.12 + jitter.uniform(-0.05, 0.05, rand.size), rand, color="grey",
                   alpha=0.8, label="random partitions")
        ax.errorbar(i + 0.05, rand.mean(), yerr=rand.std(ddof=1), color="black", capsize=4,
                    marker="_", ms=10, label="random: mean ± sd")
        ax.scatter(i + 0.2, result.student_acc(k)[0], color="crimson", marker="*", s=140,
                   zorder=3, label="max-cut")
    ax.set(xlabel="number of phases k", ylabel="Raptor accuracy",
           title="max-cut vs random partitions", xlim=(-0.6, len(ks) - 0.4))
    ax.set_xticks(range(len(ks)), [f"k={k}" for k in ks])
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def overfitting_figure(result: Result) -> plt.Figure:
    """R² and teacher accuracy along the first seed's overfitting run, validation loss dotted
    (Fig. 13)."""
    run = result.versus[0]
    snaps = snapshots_table(result).loc[run.seed]
    step = best_step(run)
    fig, ((ax,),) = plotting.figure(width=6.0, height=3.4)
    for col in ("R² cls", "R² patches", "teacher acc"):
        ax.plot(snaps.index, snaps[col], marker="o", label=col)
    ax2 = ax.twinx()
    ax2.plot(run.val_steps, run.val_loss, color="grey", ls=":", label="val loss (right)")
    ax2.set_ylabel("validation loss")
    ax.axvline(step, color="grey", ls="--", lw=0.8, label="val-loss minimum")
    ax.set(xlabel="training step", ylabel="R² / accuracy",
           title=f"overfitting run (val-loss minimum at step {step})")
    plotting.legend_below(fig, [ax, ax2], ncols=3)
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
    ax.set(xlabel="layers replaced", ylabel="accuracy",
           title=f"layer swaps, phases {phases.format_partition(first.partition)}",
           xticks=list(result.spec.swap_counts))
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def _c4(c: SeedChecks, sizes: np.ndarray, control_k: int) -> Claim:
    kept = {kind: {n: judge.retained_interval(u, c.teacher_units, sizes) for n, u in by_n.items()}
            for kind, by_n in c.swap_units.items()}
    return resting_on_phases(judge.c4_swaps(kept["intra"], kept["inter"]),
                             {f"k={control_k}": c.excess})


def _c3(run: SeedVersus, sizes: np.ndarray) -> Claim:
    units = run.student_units
    return resting_on_phases(judge.c3_maxcut_beats_random(
        {k: judge.margin_interval(u, sizes) for k, u in units.items()},
        counts={k: len(u) - 1 for k, u in units.items()}),
        {f"k={k}": e for k, e in run.excess.items()})


def claims(result: Result) -> list[Claim]:
    """C3, C4, C9, C10 and C11 on every seed, the seeds' verdicts combined by
    :func:`~raptor.book.claims.across_seeds`' binomial test; each judged by
    :mod:`~raptor.book.chapters.functional_phases_claims`."""
    s, sizes = result.spec, result.unit_sizes
    controls = {c.seed: c.control_units for c in result.seeds}
    return [
        across_seeds({run.seed: _c3(run, sizes) for run in result.versus}),
        across_seeds({c.seed: _c4(c, sizes, s.control_k) for c in result.seeds}),
        across_seeds({seed: judge.c9_untrained_easier(u["untrained"], u["trained"], sizes)
                      for seed, u in controls.items()}),
        across_seeds({seed: judge.c10_skip_removal(u["untrained"]["patches"],
                                                   u["untrained, no skip"]["patches"], sizes)
                      for seed, u in controls.items()}),
        across_seeds({run.seed: judge.c11_overfitting(
            best_step(run), s.overfit_snapshots, {g: run.snapshot_units[g] for g in GROUPS},
            run.snapshot_units["acc"], sizes) for run in result.versus}),
    ]
