"""The figures and tables of chapter *Depth as a dynamical system*, drawn from its
:class:`~raptor.book.chapters.dynamics.compute.Result`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import dynamics, phases
from raptor.book import plotting
from raptor.book.chapters.dynamics.claims import bend
from raptor.book.chapters.dynamics.compute import MODELS, Result, SeedRun
from raptor.book.claims import excess_text


def _curves(run: SeedRun, metric: str) -> dict[str, np.ndarray]:
    """Both models' ``metric`` curves, named ``"<model> <group>"``."""
    return {f"{model} {g}": v for model in MODELS
            for g, v in getattr(run.flow[model], metric).items()}


def norms_convergence_figure(result: Result) -> plt.Figure:
    """Feature norms (Fig. 9) and directional convergence γ_l (Fig. 8 right), both models, for
    the first seed."""
    run = result.runs[0]
    fig, axes = plotting.figure(1, 2, width=plotting.BOX_WIDTH, height=3.4)
    panels = (("norms", r"$\Vert x_l \Vert$", "feature norms\n(Fig. 9)"),
              ("convergence", r"$\gamma_l = \langle \hat{x}_l, \hat{x}_L \rangle$",
               "directional convergence\n(Fig. 8, right)"))
    for ax, (metric, ylabel, title) in zip(axes[0], panels):
        plotting.layer_curves(_curves(run, metric), ylabel=ylabel, title=title, ax=ax)
        plotting.phase_lines(ax, run.partition)
    plotting.legend_below(fig, axes, ncols=2)
    return fig


FASHION_MNIST = ("T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt",
                 "sneaker", "bag", "ankle boot")  # its labels 0–9, as the data set names them


def class_name(dataset: str, label: int) -> str:
    """Class ``label``'s name where the book knows the data set's names, else ``class <label>``."""
    return FASHION_MNIST[label] if dataset == "fashion-mnist" else f"class {label}"


def basins_figure(result: Result, per_class: int = 30) -> plt.Figure:
    """The cls paths of ``per_class`` images of each class in the top-2 PCA plane (Fig. 8 left),
    first seed."""
    run = result.runs[0]
    labels = run.labels[run.labels < result.spec.n_classes]  # those of ``pca_paths``
    fig, ((ax,),) = plotting.figure(width=5.0, height=4.4)
    palette = plt.get_cmap("tab10")
    for c in range(result.spec.n_classes):
        name = class_name(result.spec.train.dataset, c)
        for i, path in enumerate(run.pca_paths[labels == c][:per_class]):
            ax.plot(path[:, 0], path[:, 1], color=palette(c), alpha=0.25, lw=0.7,
                    label=f"_{name}, image {i + 1}")
            ax.scatter(path[-1, 0], path[-1, 1], color=palette(c), s=6,
                       label=f"_{name}, image {i + 1}, layer L")
        ax.plot([], [], color=palette(c), label=name)
    ax.set(title="cls trajectories through depth (PCA);\ndots: layer $L$", xlabel="PC 1",
           ylabel="PC 2")
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def perturbation_figure(result: Result) -> plt.Figure:
    """(A) the cosine distance to the clean path after a mid-depth injection, what C19 judges
    (Fig. 10A): on the images it measures, its peak before layer L (located on the other images)
    dotted, layer L to end below it; (B) sensitivity (Fig. 10B); (C) the same deviation in units
    of the norm at the injection layer, beside C19. First seed."""
    run = result.runs[0]
    depth, mid = result.spec.teacher.depth, run.perturb_layer
    fig, axes = plotting.grid(3, row_height=2.9, extra=0.8)
    ax_a, ax_b, ax_c = axes
    after = np.arange(mid, depth + 1)
    for g in run.distance:
        for ax, curves in ((ax_a, run.distance[g]), (ax_c, run.relative_deviation[g])):
            peak, held_out = bend(curves)[2], curves[1::2].mean(axis=0)
            line, = ax.plot(after, held_out, marker="o", ms=3, label=g)
            ax.axhline(held_out[peak], color=line.get_color(), ls=":", lw=0.8,
                       label=f"_{g}: peak before L")
        ax_b.plot(np.arange(depth), run.sensitivity_images[g].mean(axis=0), marker="o", ms=3,
                  label=g)
    ax_a.plot([], [], color="grey", ls=":", label="C19: peak before L, layer L to end below")
    ax_a.set(xlabel="layer", ylabel=r"$d_{\cos}$ to the clean path",
             title=f"(A) injection at layer {mid} (C19)")
    ax_b.set(xlabel="injection layer", ylabel=r"$|\varepsilon|^{-1}\, d_{\cos}$ at layer $L$",
             yscale="log", title="(B) sensitivity")
    ax_c.set(xlabel="layer", ylabel=rf"angle $\times \Vert x_l \Vert / \Vert x_{{{mid}}} \Vert$",
             title="(C) rescaled deviation (beside C19)")
    for ax in (ax_a, ax_c):
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    plotting.legend_below(fig, axes, ncols=2)
    return fig


def angular_speed_figure(result: Result) -> plt.Figure:
    """Mean angular speed per group, both models, first seed; max-cut boundaries dashed (Fig. 11).
    The point at layer ``l`` is the angle block ``l`` turns the tokens by, from layer ``l−1``."""
    run = result.runs[0]
    fig, ((ax,),) = plotting.figure(height=3.8)
    plotting.layer_curves(_curves(run, "speed"), ylabel=r"angle from layer $l-1$ (rad)",
                          title="angular speed", ax=ax, first_layer=1)
    plotting.phase_lines(ax, run.partition)
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def low_rank_dmd_figure(result: Result) -> plt.Figure:
    """The first seed's teacher's update ranks, patch coherence κ_l and DMD eigenvalues (Fig. 12).
    Ranks and κ at layer ``l`` are those of block ``l``'s update (layer ``l`` − layer ``l−1``)."""
    run = result.runs[0]
    fig, axes = plotting.grid(3, row_height=2.9, extra=0.8)
    ax_r, ax_k, ax_d = axes
    layers = np.arange(1, result.spec.teacher.depth + 1)
    for g, eff in run.effective_rank.items():
        line, = ax_r.plot(layers, eff, marker="o", ms=3, label=f"{g}, effective")
        ax_r.plot(layers, run.stable_rank[g], ls="--", color=line.get_color(),
                  label=f"{g}, stable")
    ax_k.plot(layers, run.coherence, marker="o", ms=3, color="black", label="_patches")
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    ax_d.plot(circle.real, circle.imag, color="grey", lw=0.8, label="_unit circle")
    for g, lam in run.dmd.items():
        ax_d.scatter(lam.real, lam.imag, s=14, label=f"{g}, DMD λ")
    ax_r.set(xlabel="layer", ylabel="rank of the update", title="(A) update rank")
    ax_k.set(xlabel="layer", ylabel=r"$\kappa_l$ (patches)", title="(B) patch coherence")
    used, asked = max(len(lam) for lam in run.dmd.values()), result.spec.dmd_rank
    ax_d.set(aspect="equal", xlabel=r"Re $\lambda$", ylabel=r"Im $\lambda$",
             title=f"(C) DMD, rank {used}" + ("" if used == asked else f"\n(paper: r = {asked})"))
    for ax in (ax_r, ax_k):
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    plotting.legend_below(fig, axes, ncols=3)
    return fig


def dmd_table(result: Result) -> pd.DataFrame:
    """Per seed and group: spectral radius, median |λ| and the eigenvalue nearest +1 (Fig. 12
    right)."""
    rows = {(run.seed, g): {"spectral radius": float(np.abs(lam).max()),
                            "median |λ|": float(np.median(np.abs(lam))),
                            "closest to +1": float(np.min(np.abs(lam - 1)))}
            for run in result.runs for g, lam in run.dmd.items()}
    return pd.DataFrame(rows).T.rename_axis(["seed", "group"]).round(4).reset_index()


def seeds_table(result: Result) -> pd.DataFrame:
    """Per seed: the teacher's max-cut, C1's largest block excess (its test as every chapter reads
    it) and the class-basin ratio within / between at layers 1 and L (C18)."""
    def basins(run: SeedRun, at: int) -> float:
        return round(dynamics.basin_compactness(run.basin_dirs[:, at], run.labels).ratio, 3)

    return pd.DataFrame([{"seed": run.seed, "max-cut": phases.format_partition(run.partition),
                          "C1 block excess": excess_text(run.phases),
                          "basins, layer 1": basins(run, 0), "basins, layer L": basins(run, 1)}
                         for run in result.runs])


def share_table(result: Result) -> pd.DataFrame:
    """Per seed and metric, the Pearson r across layers of the teacher's and its Raptor's curves,
    per token group."""
    rows = {}
    for run in result.runs:
        teacher, raptor = (run.flow[model] for model in MODELS)
        for metric in ("convergence", "speed", "norms"):
            rows[run.seed, metric] = {g: float(np.corrcoef(x, getattr(raptor, metric)[g])[0, 1])
                                      for g, x in getattr(teacher, metric).items()}
    return pd.DataFrame(rows).T.rename_axis(["seed", "metric"]).round(3).reset_index()

FIGURES = ()  # converting: each figure a Figure drawn from its table
