"""The figures of chapter *Stochastic depth and recurrent compressibility* (Fig. 4), each drawn
from its table (:mod:`raptor.book.figure_table`), made from the chapter's
:class:`~raptor.book.chapters.stochastic_depth.compute.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor.book import plotting
from raptor.book.chapters.stochastic_depth.compute import Result, sweep_table
from raptor.book.figure_table import Figure
from raptor.stats import correlation

GROUP_STYLES = {"cls": "-", "patches": "--"}


def similarity_table(result: Result) -> pd.DataFrame:
    """Each rate's similarity matrix (first seed, layers 1..L) with its max-cut's phases."""
    first = [r for r in result.runs if r.seed == result.spec.seeds[0]]
    return plotting.similarity_table({f"p={r.p}": r.similarity for r in first},
                                     {f"p={r.p}": r.partition for r in first})


def draw_similarity(table: pd.DataFrame) -> plt.Figure:
    """(A) each rate's similarity matrix with its max-cut outlined (Fig. 4A)."""
    panels, partitions, first = plotting.similarity_matrices(table)
    return plotting.similarity_panels(panels, ncols=2, partitions=partitions, first_layer=first)


def layerwise_table(result: Result) -> pd.DataFrame:
    """Each rate's Raptor R² to its teacher at each layer and token group, mean over seeds."""
    rows = []
    for p in result.spec.p_values:
        runs = [r for r in result.runs if r.p == p]
        for g in GROUP_STYLES:
            mean = np.mean([r.r2[g] for r in runs], axis=0)
            rows += [{"p": p, "group": g, "layer": layer, "R² (mean over seeds)": float(y)}
                     for layer, y in enumerate(mean)]
    return pd.DataFrame(rows)


def draw_layerwise(table: pd.DataFrame) -> plt.Figure:
    """(B) each rate's Raptor R² to its teacher through depth (Fig. 4B)."""
    fig, ((ax,),) = plotting.figure(height=3.2)
    cmap = plt.get_cmap("viridis")
    p_values = list(dict.fromkeys(table["p"]))
    for i, p in enumerate(p_values):
        color = cmap(i / max(1, len(p_values) - 1))
        for g, ls in GROUP_STYLES.items():
            rows = table[(table["p"] == p) & (table["group"] == g)]
            ax.plot(rows["layer"], rows["R² (mean over seeds)"], ls=ls, color=color,
                    label=f"_p={p} {g}")
        ax.plot([], [], color=color, label=f"p={p}")
    for g, ls in GROUP_STYLES.items():
        ax.plot([], [], color="grey", ls=ls, label=g)
    ax.set(xlabel="layer", ylabel="R² to the teacher", title="(B) R² through depth")
    plotting.legend_below(fig, [ax], ncols=4)
    return fig


def draw_sweep(sweep: pd.DataFrame) -> plt.Figure:
    """(C) accuracy and (D) R² against p, mean ± sd over seeds; (E) similarity vs R², one point a
    teacher (Fig. 4C–E): what C6–C8 judge."""
    by_p = sweep.drop(columns="partition").groupby("p").agg(["mean", "std"])
    p_values = by_p.index.to_numpy()
    fig, axes = plotting.grid(3, width=plotting.BOX_WIDTH, row_height=1.6, extra=0.6)
    ax_c, ax_d, ax_e = axes
    for col, label in (("teacher acc", "teacher"), ("student acc", "Raptor")):
        ax_c.errorbar(p_values, by_p[(col, "mean")], yerr=by_p[(col, "std")].fillna(0),
                      marker="o", label=label, capsize=3)
    ax_c.set(xlabel="stochastic-depth rate p", ylabel="accuracy", title="(C) accuracy")
    ax_d.errorbar(p_values, by_p[("R²", "mean")], yerr=by_p[("R²", "std")].fillna(0),
                  marker="o", capsize=3, color="black", label="_mean R²")
    ax_d.set(xlabel="stochastic-depth rate p", ylabel="mean R² (layers 1..L)",
             title="(D) reconstruction")
    sc = ax_e.scatter(sweep["mean similarity"], sweep["R²"], c=sweep["p"], cmap="viridis",
                      label="_teachers (value: p)")
    fig.colorbar(sc, ax=ax_e, label="p")
    assoc = correlation(sweep["mean similarity"], sweep["R²"])
    ax_e.set(xlabel="mean layer–layer similarity", ylabel="mean R²",
             title=f"(E) r = {assoc.interval:.2f}")
    plotting.legend_below(fig, axes, ncols=2)
    return fig


SIMILARITY = Figure("stochastic_depth_similarity", similarity_table, draw_similarity, "Fig. 4A")
LAYERWISE = Figure("stochastic_depth_layerwise", layerwise_table, draw_layerwise, "Fig. 4B")
SWEEP = Figure("stochastic_depth_sweep", sweep_table, draw_sweep, "Fig. 4C–E")
FIGURES = (SIMILARITY, LAYERWISE, SWEEP)
