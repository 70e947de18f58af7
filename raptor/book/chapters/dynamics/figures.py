"""The figures and tables of chapter *Depth as a dynamical system*, each figure drawn from its
table (:mod:`raptor.book.figure_table`), made from the chapter's
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
from raptor.book.figure_table import Figure

NORM, GAMMA = "feature norm ‖x_l‖", "directional convergence γ_l"
SPEED = "angle from layer l−1 (rad)"
SENSITIVITY = "sensitivity, injected at this layer"
DISTANCE, RESCALED = "cosine distance to the clean path", "rescaled deviation"
PEAK = {DISTANCE: "distance: peak before L", RESCALED: "rescaled deviation: peak before L"}
EFFECTIVE, STABLE, COHERENCE = "effective rank", "stable rank", "patch coherence κ_l"
RANK_ASKED = "DMD rank asked (r)"


def _curves(run: SeedRun, metric: str) -> dict[str, np.ndarray]:
    """Both models' ``metric`` curves, named ``"<model> <group>"``."""
    return {f"{model} {g}": v for model in MODELS
            for g, v in getattr(run.flow[model], metric).items()}


def with_phases(table: pd.DataFrame, partition: plotting.Partition) -> pd.DataFrame:
    """``table`` with the column ``phase``: the number of the phase of ``partition`` that each
    row's ``layer`` lies in (a phase matrix's index ``i`` is layer ``i + 1``; the embedding,
    layer 0, in none)."""
    phase = [next((i + 1 for i, (start, stop) in enumerate(partition) if start < layer <= stop),
                  None) for layer in table["layer"]]
    return table.assign(phase=pd.array(phase, dtype="Int64"))


def partition_of(table: pd.DataFrame) -> plotting.Partition:
    """The partition back from :func:`with_phases`'s ``phase`` column."""
    layers = table.dropna(subset=["phase"]).groupby("phase", sort=False)["layer"]
    return [(int(lo) - 1, int(hi)) for lo, hi in zip(layers.min(), layers.max())]


def norms_convergence_table(result: Result) -> pd.DataFrame:
    """One row a layer of a model's token group, first seed: its feature norm and directional
    convergence γ_l, and the teacher's max-cut phase the layer lies in."""
    run = result.runs[0]
    norms = plotting.curves_table(_curves(run, "norms"), NORM)
    gamma = plotting.curves_table(_curves(run, "convergence"), GAMMA)
    return with_phases(norms.merge(gamma, on=["series", "layer"], how="left"), run.partition)


def draw_norms_convergence(table: pd.DataFrame) -> plt.Figure:
    """Feature norms (Fig. 9) and directional convergence γ_l (Fig. 8 right), both models, for
    the first seed; max-cut boundaries dashed."""
    fig, axes = plotting.figure(1, 2, width=plotting.BOX_WIDTH, height=3.4)
    panels = ((NORM, r"$\Vert x_l \Vert$", "feature norms\n(Fig. 9)"),
              (GAMMA, r"$\gamma_l = \langle \hat{x}_l, \hat{x}_L \rangle$",
               "directional convergence\n(Fig. 8, right)"))
    for ax, (value, ylabel, title) in zip(axes[0], panels):
        plotting.layer_curves(plotting.curves_of(table, value), ylabel=ylabel, title=title,
                              ax=ax, first_layer=int(table["layer"].min()))
        plotting.phase_lines(ax, partition_of(table))
    plotting.legend_below(fig, axes, ncols=2)
    return fig


FASHION_MNIST = ("T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt",
                 "sneaker", "bag", "ankle boot")  # its labels 0–9, as the data set names them


def class_name(dataset: str, label: int) -> str:
    """Class ``label``'s name where the book knows the data set's names, else ``class <label>``."""
    return FASHION_MNIST[label] if dataset == "fashion-mnist" else f"class {label}"


def basins_table(result: Result, per_class: int = 30) -> pd.DataFrame:
    """One row a point of an image's cls path in the top-2 PCA plane (layers 0..L), for
    ``per_class`` images of each class, first seed."""
    run, spec = result.runs[0], result.spec
    labels = run.labels[run.labels < spec.n_classes]  # those of ``pca_paths``
    return pd.DataFrame([{"class": class_name(spec.train.dataset, c), "label": c, "image": i + 1,
                          "layer": layer, "PC 1": float(x), "PC 2": float(y)}
                         for c in range(spec.n_classes)
                         for i, path in enumerate(run.pca_paths[labels == c][:per_class])
                         for layer, (x, y) in enumerate(path)])


def draw_basins(table: pd.DataFrame) -> plt.Figure:
    """The cls paths of each class's images in the top-2 PCA plane, a dot at layer L (Fig. 8
    left), first seed."""
    fig, ((ax,),) = plotting.figure(width=5.0, height=4.4)
    palette = plt.get_cmap("tab10")
    for (name, label), paths in table.groupby(["class", "label"], sort=False):
        color = palette(int(label))
        for image, path in paths.groupby("image", sort=False):
            ax.plot(path["PC 1"], path["PC 2"], color=color, alpha=0.25, lw=0.7,
                    label=f"_{name}, image {image}")
            ax.scatter(path["PC 1"].iloc[-1], path["PC 2"].iloc[-1], color=color, s=6,
                       label=f"_{name}, image {image}, layer L")
        ax.plot([], [], color=color, label=name)
    ax.set(title="cls trajectories through depth (PCA);\ndots: layer $L$", xlabel="PC 1",
           ylabel="PC 2")
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def perturbation_table(result: Result) -> pd.DataFrame:
    """One row a layer of a token group, first seed: its sensitivity to an injection there (the
    mean over images of the cosine distance at layer L over |ε|; layers 0..L−1) and, from the
    mid-depth injection on, the cosine distance to the clean path and that deviation in units of
    the norm at the injection layer, each the mean over the odd images, with whether the layer is
    the curve's peak before L located on the even images (C19's rule, :func:`bend`)."""
    run = result.runs[0]
    depth, mid = result.spec.teacher.depth, run.perturb_layer
    frames = []
    for g in run.distance:
        frame = pd.DataFrame({"group": g, "layer": np.arange(depth + 1)})
        frame[SENSITIVITY] = pd.Series(run.sensitivity_images[g].mean(axis=0), dtype=float)
        for value, curves in ((DISTANCE, run.distance[g]), (RESCALED, run.relative_deviation[g])):
            frame[value] = pd.Series(curves[1::2].mean(axis=0), np.arange(mid, depth + 1), float)
            frame[PEAK[value]] = frame["layer"] == mid + bend(curves)[2]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def draw_perturbation(table: pd.DataFrame) -> plt.Figure:
    """(A) the cosine distance to the clean path after a mid-depth injection, what C19 judges
    (Fig. 10A): on the images it measures, its peak before layer L (located on the other images)
    dotted, layer L to end below it; (B) sensitivity (Fig. 10B); (C) the same deviation in units
    of the norm at the injection layer, beside C19. First seed."""
    mid = int(table.dropna(subset=[DISTANCE])["layer"].min())
    fig, axes = plotting.grid(3, row_height=2.9, extra=0.8)
    ax_a, ax_b, ax_c = axes
    for g, rows in table.groupby("group", sort=False):
        after = rows.dropna(subset=[DISTANCE])
        for ax, value in ((ax_a, DISTANCE), (ax_c, RESCALED)):
            line, = ax.plot(after["layer"], after[value], marker="o", ms=3, label=g)
            ax.axhline(after.loc[after[PEAK[value]], value].item(), color=line.get_color(),
                       ls=":", lw=0.8, label=f"_{g}: peak before L")
        injected = rows.dropna(subset=[SENSITIVITY])
        ax_b.plot(injected["layer"], injected[SENSITIVITY], marker="o", ms=3, label=g)
    ax_a.plot([], [], color="grey", ls=":", label="C19: peak before L, layer L to end below")
    ax_a.set(xlabel="layer", ylabel=r"$d_{\cos}$ to the clean path",
             title=f"(A) injection at layer {mid} (C19)")
    ax_b.set(xlabel="injection layer", ylabel=r"$|\varepsilon|^{-1}\, d_{\cos}$ at layer $L$",
             yscale="log", title="(B) sensitivity")
    ax_c.set(xlabel="layer",
             ylabel=rf"angle $\times \Vert x_l \Vert / \Vert x_{{{mid}}} \Vert$",
             title="(C) rescaled deviation (beside C19)")
    for ax in (ax_a, ax_c):
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    plotting.legend_below(fig, axes, ncols=2)
    return fig


def angular_speed_table(result: Result) -> pd.DataFrame:
    """One row a layer of a model's token group, first seed: the mean angle block ``l`` turns
    its tokens by, from layer ``l−1``, and the teacher's max-cut phase the layer lies in."""
    run = result.runs[0]
    return with_phases(plotting.curves_table(_curves(run, "speed"), SPEED, first_layer=1),
                       run.partition)


def draw_angular_speed(table: pd.DataFrame) -> plt.Figure:
    """Mean angular speed per group, both models, first seed; max-cut boundaries dashed (Fig. 11).
    The point at layer ``l`` is the angle block ``l`` turns the tokens by, from layer ``l−1``."""
    fig, ((ax,),) = plotting.figure(height=3.8)
    plotting.layer_curves(plotting.curves_of(table, SPEED), ylabel=r"angle from layer $l-1$ (rad)",
                          title="angular speed", ax=ax, first_layer=int(table["layer"].min()))
    plotting.phase_lines(ax, partition_of(table))
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def low_rank_dmd_table(result: Result) -> pd.DataFrame:
    """The first seed's teacher: one row a layer of a token group, the effective and stable
    rank of block ``l``'s update (layer ``l`` − layer ``l−1``) and, for the patches, its coherence
    κ_l; then one row an eigenvalue λ of a group's exact DMD, with the rank r asked."""
    run = result.runs[0]
    rows = [{"group": g, "layer": i + 1, EFFECTIVE: float(eff[i]),
             STABLE: float(run.stable_rank[g][i]),
             COHERENCE: float(run.coherence[i]) if g == "patches" else None}
            for g, eff in run.effective_rank.items() for i in range(len(eff))]
    rows += [{"group": g, "Re λ": float(lam.real), "Im λ": float(lam.imag),
              RANK_ASKED: result.spec.dmd_rank} for g, eigenvalues in run.dmd.items()
             for lam in eigenvalues]
    columns = ["group", "layer", EFFECTIVE, STABLE, COHERENCE, "Re λ", "Im λ", RANK_ASKED]
    return pd.DataFrame(rows, columns=columns).astype({"layer": "Int64", RANK_ASKED: "Int64"})


def draw_low_rank_dmd(table: pd.DataFrame) -> plt.Figure:
    """The first seed's teacher's update ranks, patch coherence κ_l and DMD eigenvalues (Fig. 12).
    Ranks and κ at layer ``l`` are those of block ``l``'s update (layer ``l`` − layer ``l−1``)."""
    ranks, eigenvalues = table.dropna(subset=["layer"]), table.dropna(subset=["Re λ"])
    fig, axes = plotting.grid(3, row_height=2.9, extra=0.8)
    ax_r, ax_k, ax_d = axes
    for g, rows in ranks.groupby("group", sort=False):
        line, = ax_r.plot(rows["layer"], rows[EFFECTIVE], marker="o", ms=3,
                          label=f"{g}, effective")
        ax_r.plot(rows["layer"], rows[STABLE], ls="--", color=line.get_color(),
                  label=f"{g}, stable")
    kappa = ranks.dropna(subset=[COHERENCE])
    ax_k.plot(kappa["layer"], kappa[COHERENCE], marker="o", ms=3, color="black", label="_patches")
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    ax_d.plot(circle.real, circle.imag, color="grey", lw=0.8, label="_unit circle")
    for g, rows in eigenvalues.groupby("group", sort=False):
        ax_d.scatter(rows["Re λ"], rows["Im λ"], s=14, label=f"{g}, DMD λ")
    ax_r.set(xlabel="layer", ylabel="rank of the update", title="(A) update rank")
    ax_k.set(xlabel="layer", ylabel=r"$\kappa_l$ (patches)", title="(B) patch coherence")
    used = int(eigenvalues.groupby("group").size().max())
    asked = int(eigenvalues[RANK_ASKED].iloc[0])
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


NORMS_CONVERGENCE = Figure("dynamics_norms_convergence", norms_convergence_table,
                           draw_norms_convergence, "Figs. 8–9")
BASINS = Figure("dynamics_pca_basins", basins_table, draw_basins, "Fig. 8")
PERTURBATION = Figure("dynamics_perturbation", perturbation_table, draw_perturbation, "Fig. 10")
ANGULAR_SPEED = Figure("dynamics_angular_speed", angular_speed_table, draw_angular_speed,
                       "Fig. 11")
LOW_RANK_DMD = Figure("dynamics_low_rank_dmd", low_rank_dmd_table, draw_low_rank_dmd, "Fig. 12")
FIGURES = (NORMS_CONVERGENCE, BASINS, PERTURBATION, ANGULAR_SPEED, LOW_RANK_DMD)
