"""The figures and tables of chapter *Emergent phase structure*, made from its
:class:`~raptor.book.chapters.phase_structure.compute.Result`; each figure is drawn from its table
(:mod:`raptor.book.figure_table`)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.chapters.phase_structure.claims import cut_text, step_text
from raptor.book.chapters.phase_structure.compute import PHASED, Result
from raptor.book.claims import LEVEL
from raptor.book.figure_table import Figure
from raptor.catalog import dataset_info
from raptor.phase_test import EXCESS_MIN, K_TRIED, POWER, PhaseTest
from raptor.stats import Interval
from raptor.structure import NULLS, WARP_ORIGINS, PhaseExcess, contrast, warped_decay_null


def training_table(result: Result) -> pd.DataFrame:
    """Each trained teacher's training: converged or not, the step (and epoch) of the weights
    kept, where it stopped, its validation accuracy there and its wall time."""
    t = result.spec.train
    images = t.train_limit or dataset_info(t.dataset).train_size
    rows = {}
    for name, r in result.records.items():
        kept = r.get("best", {}).get("step", r["val"][-1]["step"])
        rows[name] = {"converged": r.get("converged", "no criterion"), "kept step": kept,
                      "epoch": round(kept * t.batch_size / images, 1),
                      "stopped at": r.get("stopped", len(r["loss"])), "budget": t.steps,
                      "val acc": result.accuracy[name],
                      "train minutes (wall)": round(r["seconds"] / 60, 1)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("teacher")


def similarity_table(result: Result) -> pd.DataFrame:
    """The similarity matrices of the first seed's teachers and the pretrained model, layers
    1..L: one row an entry of a model's token group's matrix (:func:`plotting.similarity_table`,
    one panel a model and token group; one row without a layer where the model has no such
    group), the phase of the model's max-cut its layer lies in."""
    first = f"seed {result.spec.teacher_seeds[0]}"
    mats = {name: m for name, m in result.similarity.items()
            if name.endswith(first) or name == result.spec.pretrained.label}
    groups = [g for g in ("cls", "registers", "patches") if any(g in m for m in mats.values())]
    shown = {f"{model}\n{g}": (model, g) for model in mats for g in groups}
    table = plotting.similarity_table(
        {title: mats[model][g][1:, 1:] if g in mats[model] else None
         for title, (model, g) in shown.items()},
        {title: result.cuts[model] for title, (model, _) in shown.items()})
    table.insert(1, "model", table["panel"].map(lambda title: shown[title][0]))
    table.insert(2, "token group", table["panel"].map(lambda title: shown[title][1]))
    return table


def draw_similarity(table: pd.DataFrame) -> plt.Figure:
    """One panel a model (the first seed's teachers and the pretrained model) and token group,
    two a row, layers 1..L; the max-cut's blocks outlined (Fig. 1)."""
    panels, partitions, first = plotting.similarity_matrices(table)
    return plotting.similarity_panels(panels, ncols=table["token group"].nunique(),
                                      partitions=partitions, first_layer=first)


SYMLOG_LINEAR = 0.02  # the excess axis is linear where the teachers and C1's threshold lie
KIND_COLOURS = {"teacher": "C0", "untrained": "0.55", "control with phases": "C2",
                "control without phases": "C3"}
PAPER = "the paper's matrix"  # the kind of the excess table's DINOv2-B row


def best_excess_table(result: Result) -> pd.DataFrame:
    """C1's statistic for every model and control: one row a model, its row of the excess
    figure (``group``: a rate's seeds, the untrained seeds, each kind of control), its kind, its
    excess at the best k and the interval corrected for the k's tried; the last row the paper's
    DINOv2-B matrix (no group, no interval: not cross-fitted)."""
    trained = result.trained_tests()
    kinds = {"teacher": trained,
             "untrained": {n: t for n, t in result.tests.items() if n not in trained},
             "control with phases": {n: t for n, t in result.control_tests.items()
                                     if n in PHASED},
             "control without phases": {n: t for n, t in result.control_tests.items()
                                        if n not in PHASED}}
    rows = [{"model": name,
             "group": kind.replace("control", "controls") if kind.startswith("control")
             else name.split(", seed ")[0],
             "kind": kind, "excess at the best k": t.excess,
             "interval low": t.interval()[0], "interval high": t.interval()[1]}
            for kind, models in kinds.items() for name, t in models.items()]
    rows.append({"model": "DINOv2-B (the paper's matrix, not cross-fitted)", "kind": PAPER,
                 "excess at the best k": result.paper_test.excess})
    table = pd.DataFrame(rows)
    # the groups in the order of their first model: the figure's rows, top to bottom
    order = {g: i for i, g in enumerate(dict.fromkeys(table["group"].dropna()))}
    return table.sort_values("group", key=lambda g: g.map(order), kind="stable",
                             na_position="last", ignore_index=True)


def draw_excess(table: pd.DataFrame) -> plt.Figure:
    """C1's statistic — the excess at the best k of the partition chosen on the residual over the
    warped decay, cross-fitted, with its interval corrected for the k's tried — for every model
    and control, against C1's threshold and the paper's DINOv2-B matrix (Fig. 1). One row a
    group (a rate's seeds, the untrained seeds, each kind of control), so that the rows stay
    legible however many models a profile has."""
    models = table[table["kind"] != PAPER]
    groups = dict(tuple(models.groupby("group", sort=False)))
    # one row a group, its models spread within it: one row a model needs 0.15 in each, more
    # than the result box's height
    fig, ((ax,),) = plotting.figure(width=plotting.BOX_WIDTH,
                                    height=min(plotting.BOX_TALLEST, 1.9 + 0.3 * len(groups)))
    for row, members in enumerate(groups.values()):
        n = len(members)
        spread = min(0.5, 0.15 * (n - 1))  # rows stay apart: a gap of 0.5 at least
        for j, (name, kind, x, lo, hi) in enumerate(zip(*(members[c] for c in (
                "model", "kind", "excess at the best k", "interval low", "interval high")))):
            y = row + (spread * (j / (n - 1) - 0.5) if n > 1 else 0.0)
            ax.hlines(y, lo, hi, color=KIND_COLOURS[kind], lw=1, label=f"_{name}")
            ax.scatter(x, y, s=10, color=KIND_COLOURS[kind], label=f"_{name}")
    for kind, color in KIND_COLOURS.items():
        ax.scatter([], [], s=10, color=color, label=kind)  # the legend's key, no data
    (dinov2b,) = table.loc[table["kind"] == PAPER, "excess at the best k"]
    ax.axvline(EXCESS_MIN.value, color="black", ls="--", lw=0.8, label="C1's threshold")
    ax.axvline(dinov2b, color="C3", ls=":",
               label="DINOv2-B (the paper's matrix,\nnot cross-fitted)")
    ax.set_yticks(range(len(groups)), [
        f"{group} ({len(members)})" if group.startswith("control") else group
        if len(members) == 1 else f"{group}, {len(members)} seeds"
        for group, members in groups.items()])
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xscale("symlog", linthresh=SYMLOG_LINEAR, linscale=1.5)  # the threshold's scale visible
    low = 1.2 * min(-SYMLOG_LINEAR, dinov2b, models["interval low"].min())
    high = 1.5 * max(EXCESS_MIN.value, dinov2b, models["interval high"].max())
    ticks = [t for t in (-0.3, -0.02, 0, 0.02, 0.3) if low <= t <= high]
    ax.set(xlim=(low, high))
    ax.set_xticks(ticks, [f"{t:+g}".replace("-", "−") if t else "0" for t in ticks])
    ax.set(ylabel="model or synthetic control", xlabel="excess over warped decay (best k)",
           title=f"C1: phases at some k of {', '.join(map(str, K_TRIED))},\nchosen on the "
                 f"residual (Fig. 1);\nlinear within ±{SYMLOG_LINEAR},\nlogarithmic beyond")
    plotting.legend_below(fig, [ax], ncols=2)
    return fig


def _shown(e: PhaseExcess, null: str) -> str:
    x = e.ladder.get(null)
    if x is None:
        return "—"
    return f"{Interval(x.excess, x.low, x.high, LEVEL):+.3f}"


def excess_row(e: PhaseExcess) -> dict[str, object]:
    """One model's C1 statistics as a table row: max-cut, excess over each null (interval), the
    warped-decay fit's error, the cut's agreement over resamples and its contrast rank."""
    return {"max-cut": phases.format_partition(e.cut),
            **{f"over {null}": _shown(e, null) for null in NULLS},
            "fit RMSE": round(e.fit_rmse, 3),
            "cut agreement": "—" if np.isnan(e.agreement) else round(e.agreement, 2),
            "contrast rank": f"{e.rank.rank}/{e.rank.total}"}


def c1_summary(t: PhaseTest | None) -> dict[str, object]:
    """C1's test in a few columns: the best k, its excess and corrected interval, its cut, d*
    and the verdict (dashes without the test)."""
    if t is None:
        return dict.fromkeys(("C1: best k", "C1: excess", "C1: cut", "d*", "C1"), "—")
    b, (lo, hi) = t.best(), t.interval()
    return {"C1: best k": b.k,
            "C1: excess": f"{Interval(b.excess, lo, hi, LEVEL):+.3f}",
            "C1: cut": cut_text(b), "d*": step_text(t.d_star),
            "C1": t.verdict() if t.n_images > 1 else "— (no images)"}


def excess_table(result: Result) -> pd.DataFrame:
    """The ladder of nulls for the max-cut of every model, every synthetic control (with its
    built-in answer) and the paper's DINOv2-B matrix, and beside it C1's test (the partition
    chosen on the residual over the warped decay, best k, d*)."""
    rows = [{"model": name, "kind": "untrained" if name.startswith("untrained") else "teacher",
             **excess_row(e), **c1_summary(result.tests.get(name))}
            for name, e in result.excess.items()]
    rows += [{"model": name,
              "kind": "control with phases" if name in PHASED else "control without phases",
              **excess_row(e), **c1_summary(result.control_tests.get(name))}
             for name, e in result.controls.items()]
    rows.append({"model": "DINOv2-B (the paper's matrix)", "kind": "calibration",
                 **excess_row(result.paper_dinov2b[result.spec.k]),
                 **c1_summary(result.paper_test)})
    return pd.DataFrame(rows).set_index("model")


def paper_matrix_table(result: Result) -> pd.DataFrame:
    """The ladder for the paper's DINOv2-B matrix at each k of the paper; the warped decay's excess
    with the warp from the first or the last block only (C1 takes the better fit); and the excess
    of the paper's own partitions (Table 1)."""
    S = paper.dinov2b_block_similarity()
    residual = {origin: S - warped_decay_null(S, (origin,)) for origin in WARP_ORIGINS}
    judged = S - warped_decay_null(S)
    rows = []
    for k, e in result.paper_dinov2b.items():
        theirs = paper.DINOV2_B_PARTITIONS[k]
        rows.append({"k": k, **excess_row(e),
                     **{f"warp from the {origin} block": f"{contrast(r, e.cut):+.3f}"
                        for origin, r in residual.items()},
                     "paper's partition": phases.format_partition(theirs),
                     "its excess over warped decay": f"{contrast(judged, theirs):+.3f}",
                     **({"C1: chosen on the residual": phases.format_partition(
                         result.paper_test.per_k[k].cut),
                         "its excess": f"{result.paper_test.per_k[k].excess:+.3f}"}
                        if k in result.paper_test.per_k else {})})
    return pd.DataFrame(rows).set_index("k").drop(columns=["over random walk", "cut agreement"])


def c1_row(t: PhaseTest, level: float = 0.95) -> dict[str, object]:
    """One model's C1 test as a table row: per k the excess of the partition chosen on the
    residual (interval at the corrected level) and the cut; the paper's partitions' excess; the
    best k; d*; the largest visible step (one minus adjacent similarity); the verdict."""
    row: dict[str, object] = {}
    for k, e in t.per_k.items():
        lo, hi = e.interval(t.level_k(level))
        row[f"k = {k}"] = f"{Interval(e.excess, lo, hi, t.level_k(level)):+.3f}"
        row[f"cut at k = {k}"] = cut_text(e)
    for k, r in t.reference.items():
        row[f"paper's partition at k = {k}"] = f"{phases.format_partition(r.cut)}: {r.excess:+.3f}"
    row |= {"best k": t.best().k, f"d* ({POWER:.0%} power)": step_text(t.d_star),
            "largest adjacent step": round(float(np.max(t.steps)), 2),
            "C1": t.verdict(level) if t.n_images > 1 else "— (no images)"}
    return row


def c1_table(result: Result) -> pd.DataFrame:
    """C1's test for every model and the paper's DINOv2-B matrix (not cross-fitted, no
    interval): the chosen partitions at each k, the paper's partitions beside them, d*."""
    rows = {name: c1_row(t) for name, t in result.tests.items()}
    rows["DINOv2-B (the paper's matrix)"] = c1_row(result.paper_test)
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def power_table(result: Result) -> pd.DataFrame:
    """The test's power on the controls' shapes: d*, the smallest drop of similarity across each
    boundary detected with 80% probability at ``control_images`` images, by phases and decay."""
    rows = [{"phases": name.split(" on ")[0], "decay": name.split(" on ")[1].removesuffix(
        " decay"), "d*": step_text(d)}
            for name, d in result.power.items()]
    return pd.DataFrame(rows).pivot(index="phases", columns="decay", values="d*")


SIMILARITY = Figure("phase_structure_similarity", similarity_table, draw_similarity, "Fig. 1")
EXCESS = Figure("phase_structure_excess", best_excess_table, draw_excess, "Fig. 1")
FIGURES = (SIMILARITY, EXCESS)
