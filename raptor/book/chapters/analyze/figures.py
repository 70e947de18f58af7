"""The figures and tables of chapter *Your own ViT*, each figure drawn from its table
(:mod:`raptor.book.figure_table`), made from the chapter's
:class:`~raptor.book.chapters.analyze.compute.Result`."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.chapters.analyze.compute import Result
from raptor.book.chapters.phase_structure.figures import c1_summary, excess_row
from raptor.book.figure_table import Figure


def table(result: Result) -> pd.DataFrame:
    """The max-cut's excess over each null of the ladder at each k (a description, not C1's
    test) beside the paper's DINOv2-B matrix's, then C1's test
    (:func:`~raptor.phase_test.phase_test`: phases at some k, d*) for both, which alone judges
    phases."""
    rows = []
    for k, e in result.excess.items():
        rows.append({"k": k, "model": "yours", **excess_row(e)})
        rows.append({"k": k, "model": "DINOv2-B (the paper's matrix)",
                     **excess_row(result.dinov2b[k])})
    for model, t in (("yours", result.test), ("DINOv2-B (the paper's matrix)",
                                              result.dinov2b_test)):
        rows.append({"k": "some k", "model": model, **c1_summary(t)})
    return pd.DataFrame(rows).set_index(["k", "model"])


def similarity_table(result: Result) -> pd.DataFrame:
    """The phase matrix (blocks 1..L) with each k's max-cut, one panel per k, then the paper's
    DINOv2-B matrix: one row an entry (:func:`~raptor.book.plotting.similarity_table`)."""
    panels = {f"k = {k}: {phases.format_partition(c)}": result.S for k, c in result.cuts.items()}
    partitions = dict(zip(panels, result.cuts.values()))
    panels["DINOv2-B (the paper's)"] = paper.dinov2b_block_similarity()
    return plotting.similarity_table(panels, partitions)


def draw_similarity(table: pd.DataFrame) -> plt.Figure:
    """The phase matrix (blocks 1..L; cls and mean patch) with its max-cut outlined, one panel
    per k, beside the paper's DINOv2-B matrix (Fig. 1): two panels a row, so that no title
    overlaps its neighbour's and the figure stays legible on a phone."""
    panels, partitions, first = plotting.similarity_matrices(table)
    return plotting.similarity_panels(panels, ncols=2, partitions=partitions, first_layer=first)


# the flow's panels: each quantity's title, y label and whether its axis is logarithmic
FLOW_PANELS = {
    "feature norm": ("(A) feature norms", r"$\Vert x_l \Vert$", False),
    "directional convergence γ": ("(B) directional convergence",
                                  r"$\gamma_l = \langle \hat x_l, \hat x_L \rangle$", False),
    "angular speed (rad)": ("(C) angular speed", r"angle $\hat x_{l-1} \to \hat x_l$ (rad)",
                            False),
    "patch coherence κ": ("(D) patch coherence", r"$\kappa_l$", False),
    "update rank": ("(E) update rank", "rank of the update", True),
}
DMD = "DMD eigenvalue"


def flow_figure_table(result: Result) -> pd.DataFrame:
    """The flow of §4 per token group: one row a point of a curve (``quantity``, ``series``,
    ``layer``, ``value``: feature norms, γ_l and the angular speed from layer l − 1 to l, mean
    over tokens and images, the patches' coherence κ_l, each update's effective and stable rank)
    or a DMD eigenvalue of a group's mean directions (``Re λ``, ``Im λ``, with the ``DMD rank``
    used)."""
    d = result.dynamics
    curves = [(q, {g: m.mean for g, m in stats.items()}, first) for q, stats, first in (
        ("feature norm", d.norms, 0), ("directional convergence γ", d.convergence, 0),
        ("angular speed (rad)", d.speed, 1))]
    curves += [("patch coherence κ", {"patches": d.coherence["patches"].mean}, 1),
               ("update rank", {f"{g} {kind}": getattr(r, kind) for g, r in d.ranks.items()
                                for kind in ("effective", "stable")}, 1)]
    rows: list[dict[str, Any]] = [
        {"quantity": q, "series": name, "layer": first + i, "value": float(y)}
        for q, series, first in curves for name, curve in series.items()
        for i, y in enumerate(curve)]
    rows += [{"quantity": DMD, "series": g, "Re λ": float(e.real), "Im λ": float(e.imag),
              "DMD rank": m.rank} for g, m in d.dmd.items() for e in m.eigenvalues]
    return pd.DataFrame(rows, columns=["quantity", "series", "layer", "value", "Re λ", "Im λ",
                                       "DMD rank"])


def draw_flow(table: pd.DataFrame) -> plt.Figure:
    """The flow of §4 per token group: feature norms (Fig. 9), directional convergence γ_l
    (Fig. 8, right), angular speed (Fig. 11), patch coherence κ_l and the update ranks (Fig. 12),
    and the DMD eigenvalues of the mean directions (Fig. 12, App. D)."""
    fig, axes = plotting.grid(6, row_height=2.6, extra=0.7)
    for ax, (quantity, (title, ylabel, logy)) in zip(axes, FLOW_PANELS.items()):
        rows = table[table["quantity"] == quantity]
        plotting.layer_curves({name: c["value"].to_numpy(float)
                               for name, c in rows.groupby("series", sort=False)},
                              ylabel=ylabel, title=title, ax=ax,
                              first_layer=int(rows["layer"].min()), logy=logy)
    ax_d = axes[-1]
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    ax_d.plot(circle.real, circle.imag, color="grey", lw=0.8, label="_unit circle")
    dmd = table[table["quantity"] == DMD]
    for color, (g, m) in zip(sns.color_palette("colorblind"), dmd.groupby("series", sort=False)):
        ax_d.scatter(m["Re λ"].to_numpy(float), m["Im λ"].to_numpy(float), s=12, color=color,
                     label=f"_{g}, DMD λ")
    ax_d.set(aspect="equal", xlabel=r"Re $\lambda$", ylabel=r"Im $\lambda$",
             title=f"(F) DMD, rank {int(dmd['DMD rank'].max())}")
    plotting.legend_below(fig, [axes[0], axes[4]], ncols=3)
    return fig


def flow_table(result: Result) -> pd.DataFrame:
    """The flow's summary numbers per token group: γ at the middle layer, the mean angular speed
    over the first and last thirds of depth, the last update's ranks, the DMD's largest |λ| and
    its distance to +1 (C16, C21, C22, C24's quantities)."""
    d, L = result.dynamics, result.depth
    third = max(1, L // 3)
    return pd.DataFrame({g: {
        "γ at layer L/2": d.convergence[g].mean[L // 2],
        "speed, first third": d.speed[g].mean[:third].mean(),
        "speed, last third": d.speed[g].mean[-third:].mean(),
        "stable rank, last block": d.ranks[g].stable[-1],
        "effective rank, last block": d.ranks[g].effective[-1],
        "DMD max |λ|": np.abs(d.dmd[g].eigenvalues).max(),
        "DMD min |λ − 1|": np.abs(d.dmd[g].eigenvalues - 1).min(),
    } for g in d.norms}).T.round(3)


def fit_figure_table(result: Result) -> pd.DataFrame:
    """Each k's Raptors against the model, layer by layer: one row a layer of a Raptor (``fit``
    1 the max-cut's, then the random partitions'), with its ``kind``, ``partition`` and the
    mean cosine to the model of the cls token (the mean patch's without one); no rows where no
    Raptor was fitted."""
    rows = []
    for k, fits in result.fits.items():
        group = "cls" if "cls" in fits[0].cosine else "patches"
        rows += [{"k": k, "fit": i + 1, "kind": f.kind,
                  "partition": phases.format_partition(f.partition), "group": group,
                  "layer": layer, "cosine to the model": float(y)}
                 for i, f in enumerate(fits) for layer, y in enumerate(f.cosine[group])]
    return pd.DataFrame(rows, columns=["k", "fit", "kind", "partition", "group", "layer",
                                       "cosine to the model"])


def draw_fit(table: pd.DataFrame) -> plt.Figure:
    """Each k's Raptor against the model, layer by layer: the mean cosine of the cls token (or
    the mean patch without one) for the max-cut and each random partition (Fig. 14); a note in
    place of the panels where no Raptor was fitted."""
    if table.empty:
        fig, axes = plotting.figure(1, 1, height=1.0)
        axes[0, 0].set_axis_off()
        axes[0, 0].text(0.5, 0.5, "no Raptor fitted: set fit_raptor (--fit-raptor STEPS)",
                        ha="center", va="center")
        return fig
    by_k = table.groupby("k", sort=False)
    fig, axes = plotting.grid(len(by_k), row_height=3.0, extra=0.0, sharey=True)
    for ax, (k, rows) in zip(axes, by_k):
        fits = list(rows.groupby("fit", sort=False))
        for i, (_, f) in enumerate(fits):  # the max-cut's first, then the random partitions'
            kind = f["kind"].iloc[0]
            style = dict(color="black", lw=1.6, marker="o", ms=3) if kind == "max-cut" else \
                dict(color="grey", lw=0.8, alpha=0.7)
            ax.plot(f["layer"], f["cosine to the model"], label=kind if i < 2 else "_random",
                    **style)
        ax.set(title=f"k = {k}: max-cut\n{rows['partition'].iloc[0]}", xlabel="layer",
               ylabel=f"cosine to the model ({rows['group'].iloc[0]})")
        if len(fits) > 1:
            ax.legend(frameon=False)
    return fig


def fit_table(result: Result) -> pd.DataFrame:
    """Each Raptor's match with the model on the analysed images: last-layer cosine and R² per
    group, the authors' global R² and the top-1 agreement through the model's head."""
    rows = []
    for k, fits in result.fits.items():
        for f in fits:
            rows.append({"k": k, "partition": f"{f.kind} {phases.format_partition(f.partition)}",
                         **{f"cosine {g}": v[-1] for g, v in f.cosine.items()},
                         **{f"R² {g}": v[-1] for g, v in f.r2.items()},
                         "global R²": f.global_r2, "agreement": f.agreement,
                         "steps": f.steps})
    frame = pd.DataFrame(rows)
    return frame.set_index(["k", "partition"]).round(3) if rows else frame

SIMILARITY = Figure("analyze_similarity", similarity_table, draw_similarity, "Fig. 1")
FLOW = Figure("analyze_flow", flow_figure_table, draw_flow, "Figs. 8–12")
FIT = Figure("analyze_raptor", fit_figure_table, draw_fit, "Fig. 14")
FIGURES = (SIMILARITY, FLOW, FIT)
