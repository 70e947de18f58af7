"""The figures and tables of chapter *Your own ViT*, drawn from its
:class:`~raptor.book.chapters.own_vit.compute.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.chapters.own_vit.compute import Result
from raptor.book.chapters.phase_structure.figures import c1_summary, excess_row


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


def similarity_figure(result: Result) -> plt.Figure:
    """The phase matrix (blocks 1..L; cls and mean patch) with its max-cut outlined, one panel
    per k, beside the paper's DINOv2-B matrix: two panels a row, so that no title overlaps its
    neighbour's and the figure stays legible on a phone."""
    panels = {f"k = {k}: {phases.format_partition(c)}": result.S for k, c in result.cuts.items()}
    panels["DINOv2-B (the paper's)"] = paper.dinov2b_block_similarity()
    return plotting.similarity_panels(panels, ncols=2, partitions=dict(
        zip(panels, result.cuts.values())))


def flow_figure(result: Result) -> plt.Figure:
    """The flow of §4 per token group: feature norms (Fig. 9), directional convergence γ_l
    (Fig. 8, right), angular speed (Fig. 11), patch coherence κ_l and the update ranks (Fig. 12),
    and the DMD eigenvalues of the mean directions (Fig. 12, App. D)."""
    d = result.dynamics
    fig, axes = plotting.grid(6, row_height=2.6, extra=0.7)
    ax_n, ax_c, ax_s, ax_k, ax_r, ax_d = axes
    for ax, stats, ylabel, title, first in (
            (ax_n, d.norms, r"$\Vert x_l \Vert$", "(A) feature norms", 0),
            (ax_c, d.convergence, r"$\gamma_l = \langle \hat x_l, \hat x_L \rangle$",
             "(B) directional convergence", 0),
            (ax_s, d.speed, r"angle $\hat x_{l-1} \to \hat x_l$ (rad)", "(C) angular speed",
             1)):
        plotting.layer_curves({g: m.mean for g, m in stats.items()}, ylabel=ylabel, title=title,
                              ax=ax, first_layer=first)
    plotting.layer_curves({"patches": d.coherence["patches"].mean}, ylabel=r"$\kappa_l$",
                          title="(D) patch coherence", ax=ax_k, first_layer=1)
    plotting.layer_curves({f"{g} {kind}": getattr(r, kind) for g, r in d.ranks.items()
                           for kind in ("effective", "stable")},
                          ylabel="rank of the update", title="(E) update rank", ax=ax_r,
                          first_layer=1, logy=True)
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    ax_d.plot(circle.real, circle.imag, color="grey", lw=0.8, label="_unit circle")
    for color, (g, m) in zip(sns.color_palette("colorblind"), d.dmd.items()):
        ax_d.scatter(m.eigenvalues.real, m.eigenvalues.imag, s=12, color=color,
                     label=f"_{g}, DMD λ")
    used = max(m.rank for m in d.dmd.values())
    ax_d.set(aspect="equal", xlabel=r"Re $\lambda$", ylabel=r"Im $\lambda$",
             title=f"(F) DMD, rank {used}")
    plotting.legend_below(fig, [ax_n, ax_r], ncols=3)
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


def fit_figure(result: Result) -> plt.Figure:
    """Each k's Raptor against the model, layer by layer: the mean cosine of the cls token (or
    the mean patch without one) for the max-cut and each random partition (Fig. 14); a note in
    place of the panels where no Raptor was fitted."""
    if not result.fits:
        fig, axes = plotting.figure(1, 1, height=1.0)
        axes[0, 0].set_axis_off()
        axes[0, 0].text(0.5, 0.5, "no Raptor fitted: set fit_raptor (--fit-raptor STEPS)",
                        ha="center", va="center")
        return fig
    fig, axes = plotting.grid(len(result.fits), row_height=3.0, extra=0.0, sharey=True)
    group = "cls" if "cls" in next(iter(result.fits.values()))[0].cosine else "patches"
    for ax, (k, fits) in zip(axes, result.fits.items()):
        for i, f in enumerate(fits):  # the max-cut's first, then the random partitions'
            style = dict(color="black", lw=1.6, marker="o", ms=3) if f.kind == "max-cut" else \
                dict(color="grey", lw=0.8, alpha=0.7)
            ax.plot(f.cosine[group], label=f.kind if i < 2 else "_random", **style)
        ax.set(title=f"k = {k}: max-cut\n{phases.format_partition(fits[0].partition)}",
               xlabel="layer", ylabel=f"cosine to the model ({group})")
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

FIGURES = ()  # converting: each figure a Figure drawn from its table
