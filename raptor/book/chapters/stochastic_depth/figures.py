"""The figures of chapter *Stochastic depth and recurrent compressibility*, drawn from its
:class:`~raptor.book.chapters.stochastic_depth.compute.Result` (Fig. 4)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from raptor.book import plotting
from raptor.book.chapters.stochastic_depth.compute import Result, sweep_table
from raptor.stats import correlation


def similarity_figure(result: Result) -> plt.Figure:
    """(A) each rate's similarity matrix (first seed, layers 1..L) with its max-cut (Fig. 4A)."""
    first = [r for r in result.runs if r.seed == result.spec.seeds[0]]
    return plotting.similarity_panels(
        {f"p={r.p}": r.similarity for r in first}, ncols=2,
        partitions={f"p={r.p}": r.partition for r in first})


def layerwise_figure(result: Result) -> plt.Figure:
    """(B) each rate's Raptor R² to its teacher through depth, mean over seeds (Fig. 4B)."""
    fig, ((ax,),) = plotting.figure(height=3.2)
    cmap = plt.get_cmap("viridis")
    p_values, styles = result.spec.p_values, {"cls": "-", "patches": "--"}
    for i, p in enumerate(p_values):
        runs = [r for r in result.runs if r.p == p]
        color = cmap(i / max(1, len(p_values) - 1))
        for g, ls in styles.items():
            ax.plot(np.mean([r.r2[g] for r in runs], axis=0), ls=ls, color=color,
                    label=f"_p={p} {g}")
        ax.plot([], [], color=color, label=f"p={p}")
    for g, ls in styles.items():
        ax.plot([], [], color="grey", ls=ls, label=g)
    ax.set(xlabel="layer", ylabel="R² to the teacher", title="(B) R² through depth")
    plotting.legend_below(fig, [ax], ncols=4)
    return fig


def sweep_figure(result: Result) -> plt.Figure:
    """(C) accuracy and (D) R² against p, mean ± sd over seeds; (E) similarity vs R², one point a
    teacher (Fig. 4C–E): what C6–C8 judge."""
    spec, sweep = result.spec, sweep_table(result)
    by_p = sweep.drop(columns="partition").groupby("p").agg(["mean", "std"])
    fig, axes = plotting.grid(3, width=plotting.BOX_WIDTH, row_height=1.6, extra=0.6)
    ax_c, ax_d, ax_e = axes
    for col, label in (("teacher acc", "teacher"), ("student acc", "Raptor")):
        ax_c.errorbar(spec.p_values, by_p[(col, "mean")], yerr=by_p[(col, "std")].fillna(0),
                      marker="o", label=label, capsize=3)
    ax_c.set(xlabel="stochastic-depth rate p", ylabel="accuracy", title="(C) accuracy")
    ax_d.errorbar(spec.p_values, by_p[("R²", "mean")], yerr=by_p[("R²", "std")].fillna(0),
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
