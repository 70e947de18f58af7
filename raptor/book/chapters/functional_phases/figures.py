"""The figures and tables of chapter *Are the phases functional?*, each figure drawn from its
table (:mod:`raptor.book.figure_table`), made from its
:class:`~raptor.book.chapters.functional_phases.compute.Result`."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import controls, phases
from raptor.book import plotting
from raptor.book.chapters.finding_phases.claims import ALIGN_TOL
from raptor.book.chapters.functional_phases.claims import positive_control
from raptor.book.chapters.functional_phases.compute import (GROUPS, KINDS, UNTRAINED, Result,
                                                            SeedRun, teacher_name)
from raptor.book.claims import Claim, excess_text, first_line, scoped
from raptor.book.figure_table import Figure
from raptor.stats import aligned
from raptor.structure import boundaries


def _raptors(run: SeedRun, k: int) -> list[tuple[str, tuple, float, float]]:
    """Seed ``run``'s Raptors at ``k``: name, partition, accuracy on the test images and mean
    R² (cls, patches); the max-cut, its replicates, then the random partitions."""
    maxcut, *random = run.partitions[k]
    r2 = lambda scores, i: float(np.mean([scores[g][i] for g in GROUPS]))  # noqa: E731
    return ([("max-cut", maxcut, float(run.test_acc[k][0]), r2(run.student_r2[k], 0))]
            + [(f"max-cut, replicate {r + 1}", maxcut, float(acc), r2(run.replicate_r2[k], r))
               for r, acc in enumerate(run.replicate_acc[k])]
            + [(f"random {i}", part, float(run.test_acc[k][i + 1]),
                r2(run.student_r2[k], i + 1)) for i, part in enumerate(random)])


def versus_table(result: Result) -> pd.DataFrame:
    """Per seed, k and Raptor (max-cut, its replicates, random partitions): its blocks, its
    accuracy on the test images and mean R² (cls, patches)."""
    return pd.DataFrame([
        {"seed": run.seed, "k": k, "partition": name, "blocks": phases.format_partition(part),
         "student acc": acc, "R²": r2}
        for run in result.seeds for k in run.partitions
        for name, part, acc, r2 in _raptors(run, k)])


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
            "seed": run.seed, "step": steps, "validation loss": run.val["loss"][at],
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


def maxcut_vs_random_table(result: Result) -> pd.DataFrame:
    """One row per Raptor of the first seed's teacher, per k (the max-cut and its replicates
    first): its blocks and its accuracy on the test images C3 reads."""
    run = result.seeds[0]
    return pd.DataFrame([
        {"seed": run.seed, "k": k, "partition": name, "blocks": phases.format_partition(part),
         "Raptor accuracy": acc}
        for k in run.partitions for name, part, acc, _ in _raptors(run, k)])


def draw_maxcut_vs_random(table: pd.DataFrame) -> plt.Figure:
    """Raptor accuracy of the max-cut partition vs random ones, per k (Fig. 3, right), first
    seed, on the test images C3 reads: random partitions as points, their mean ± one standard
    deviation beside them, max-cut as a star, its replicates (the training-noise floor) as open
    stars."""
    ks = list(dict.fromkeys(table["k"]))
    fig, ((ax,),) = plotting.figure(width=min(plotting.BOX_WIDTH, 3.5 + 0.9 * len(ks)),
                                    height=3.4)
    jitter = np.random.default_rng(0)
    for i, k in enumerate(ks):
        rows = table[table["k"] == k]
        maxcut = rows["partition"] == "max-cut"
        again = rows["partition"].str.startswith("max-cut, replicate")
        rand = rows.loc[~maxcut & ~again, "Raptor accuracy"].to_numpy()
        ax.scatter(i - 0.12 + jitter.uniform(-0.05, 0.05, rand.size), rand, color="grey",
                   alpha=0.8, label="random partitions")
        ax.errorbar(i + 0.05, rand.mean(), yerr=rand.std(ddof=1), color="black", capsize=4,
                    marker="_", ms=10, label="random: mean ± sd")
        ax.scatter(i + 0.2, rows.loc[maxcut, "Raptor accuracy"].iloc[0], color="crimson",
                   marker="*", s=140, zorder=3, label="max-cut")
        if again.any():
            ax.scatter(np.full(again.sum(), i + 0.32), rows.loc[again, "Raptor accuracy"],
                       facecolors="none", edgecolors="crimson", marker="*", s=140, zorder=3,
                       label="max-cut, distilled again")
    ax.set(xlabel="number of phases k", ylabel="Raptor accuracy",
           title="max-cut vs random partitions", xlim=(-0.6, len(ks) - 0.4))
    ax.set_xticks(range(len(ks)), [f"k={k}" for k in ks])
    replicated = table["partition"].str.startswith("max-cut, replicate").any()
    plotting.legend_below(fig, [ax], ncols=2 if replicated else 3)  # 4 entries: 2 rows of 2
    return fig


def overfitting_table(result: Result) -> pd.DataFrame:
    """One row per validation step of the first seed's overfitting run: its validation loss and,
    at the snapshots (``snapshot``), the teacher's accuracy and its Raptor's R² per group."""
    run = result.seeds[0]
    snaps = snapshots_table(result).loc[run.seed]
    table = pd.DataFrame({"seed": run.seed, "step": run.val["step"],
                          "validation loss": run.val["loss"],
                          "snapshot": np.isin(run.val["step"], snaps.index)})
    return table.join(snaps[["R² cls", "R² patches", "teacher acc"]], on="step")


def draw_overfitting(table: pd.DataFrame) -> plt.Figure:
    """R² and teacher accuracy along the first seed's overfitting run, validation loss dotted
    (Fig. 13)."""
    snaps = table[table["snapshot"]]
    step = int(table["step"].iloc[np.nanargmin(table["validation loss"])])
    fig, ((ax,),) = plotting.figure(height=3.8)
    for col in ("R² cls", "R² patches", "teacher acc"):
        ax.plot(snaps["step"], snaps[col], marker="o", label=col)
    ax2 = ax.twinx()
    ax2.plot(table["step"], table["validation loss"], color="grey", ls=":",
             label="val loss (right)")
    ax2.set_ylabel("validation loss")
    ax.axvline(step, color="grey", ls="--", lw=0.8, label="val-loss minimum")
    ax.set(xlabel="training step", ylabel="R² / accuracy",
           title=f"overfitting run\n(val-loss minimum at step {step})")
    plotting.legend_below(fig, [ax, ax2], ncols=2)
    return fig


def swap_accuracy_table(result: Result) -> pd.DataFrame:
    """One row per count and kind of swaps of the first seed's teacher, every count of
    ``swap_counts`` (no swap sets where no swap of the kind exists): the swap sets' accuracy,
    mean and std; beside it the teacher's accuracy without a swap and its phases (the max-cut at
    ``control_k``)."""
    run = result.seeds[0]
    swaps = swaps_table(result)
    every = pd.MultiIndex.from_product([result.spec.swap_counts, KINDS], names=["swaps", "kind"])
    by = swaps[swaps["seed"] == run.seed].set_index(["swaps", "kind"])
    table = by.reindex(every).reset_index()
    return pd.DataFrame({
        "seed": run.seed, "layers replaced": table["swaps"], "kind": table["kind"],
        "swap sets": table["sets"].fillna(0).astype(int),
        "accuracy (mean over swap sets)": table["acc"],
        "accuracy (sd over swap sets)": table["std"], "teacher, no swap": run.teacher_acc,
        "phases": phases.format_partition(run.partitions[result.spec.control_k][0])})


def draw_swaps(table: pd.DataFrame) -> plt.Figure:
    """Teacher accuracy after intra- and inter-phase layer swaps, first seed (Fig. 15)."""
    fig, ((ax,),) = plotting.figure(width=5.0, height=3.4)
    for kind, color in (("intra", "seagreen"), ("inter", "crimson")):
        sub = table[(table["kind"] == kind) & (table["swap sets"] > 0)]
        ax.errorbar(sub["layers replaced"], sub["accuracy (mean over swap sets)"],
                    yerr=sub["accuracy (sd over swap sets)"], marker="o", capsize=3, color=color,
                    label=f"{kind}-phase swaps")
    ax.axhline(table["teacher, no swap"].iloc[0], color="grey", ls="--",
               label="teacher, no swap")
    ax.set(xlabel="layers replaced", ylabel="accuracy",
           title=f"layer swaps, phases {table['phases'].iloc[0]}",
           xticks=list(dict.fromkeys(table["layers replaced"])))
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def planted_table(result: Result) -> pd.DataFrame:
    """Per planted teacher: C1's largest block excess, its max-cut at the planted k, how many of
    the planted boundaries it finds (within one layer) and those Foote's novelty finds."""
    planted = controls.partition_of(result.spec.planted or ())
    k = len(planted)
    bounds = list(boundaries(planted))
    return pd.DataFrame([{
        "teacher": teacher_name("planted", run.seed), "C1 block excess": excess_text(run.phases),
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


def phase_matrices_table(result: Result) -> pd.DataFrame:
    """The phase matrix of the first seed's book teacher and of its planted-phase teacher
    (:func:`raptor.book.plotting.similarity_table`: one row an entry, ``phase`` its max-cut's at
    the planted k), with ``novelty segment``: the number of the segment between the novelty's
    boundaries that ``layer`` lies in."""
    k = result.spec.control_k if not result.planted else len(result.spec.planted)
    shown = {"book teacher": result.seeds[0], **({"planted phases": result.planted[0]}
                                                  if result.planted else {})}
    panels, cuts, segments = {}, {}, {}
    for kind, run in shown.items():
        title = f"{kind}, seed {run.seed}\n{phases.format_partition(run.partitions[k][0])}"
        panels[title], cuts[title] = run.boundaries.S, run.partitions[k][0]
        segments[title] = 1 + np.searchsorted(run.boundaries.novelty,
                                              np.arange(len(run.boundaries.S)), side="right")
    table = plotting.similarity_table(panels, cuts)
    table["novelty segment"] = [segments[title][layer - 1]
                                for title, layer in zip(table["panel"], table["layer"])]
    return table


def draw_phase_matrices(table: pd.DataFrame) -> plt.Figure:
    """The phase matrix of the first seed's book teacher and of its planted-phase teacher, each
    with its max-cut at the planted k (white) and the novelty's boundaries (ticks on top)."""
    panels, cuts, first = plotting.similarity_matrices(table)
    fig = plotting.similarity_panels(panels, ncols=2, partitions=cuts, first_layer=first,
                                     width=plotting.BOX_WIDTH)
    for ax, (_, rows) in zip(fig.axes, table.groupby("panel", sort=False)):
        segment = rows.groupby("layer", sort=False)["novelty segment"].first().to_numpy()
        for b in np.flatnonzero(np.diff(segment)) + 1:
            ax.annotate("", xy=(b - 0.5, -0.5), xytext=(b - 0.5, -2.0),
                        arrowprops=dict(arrowstyle="-|>", color="crimson", lw=1.2),
                        annotation_clip=False)
    return fig


MAXCUT_VS_RANDOM = Figure("functional_maxcut_vs_random", maxcut_vs_random_table,
                          draw_maxcut_vs_random, "Fig. 3")
OVERFITTING = Figure("functional_overfitting", overfitting_table, draw_overfitting, "Fig. 13")
SWAPS = Figure("functional_swaps", swap_accuracy_table, draw_swaps, "Fig. 15")
CONTROL = Figure("functional_control", phase_matrices_table, draw_phase_matrices)
FIGURES = (MAXCUT_VS_RANDOM, OVERFITTING, SWAPS, CONTROL)
