"""Chapter *Depth as a dynamical system*: the teacher's and the Raptor's flow on the sphere (§4,
Figs. 8–12; C16–C24)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from raptor import dynamics, low_rank, phases
from raptor.book import plotting
from raptor.book.chapters import dynamics_claims as judge
from raptor.book.chapters.phase_structure import on_phases
from raptor.book.claims import Claim
from raptor.book.profiles import PAPER_DISTILL, PAPER_TEACHER, SMOKE_DISTILL, SMOKE_TEACHER
from raptor.book.spec import DistillSpec, TeacherSpec, nested, require
from raptor.data import dataset_info
from raptor.experiment import trajectories_of
from raptor.loop import on_device, resolve_device
from raptor.paper import BASIN_CLASSES, DMD_RANK
from raptor.similarity import layer_similarity, phase_matrix
from raptor.low_rank import coherence_rows
from raptor.sphere import MeanStd, directions, updates
from raptor.structure import PhaseExcess, boundaries, image_phase_matrices, phase_excess
from raptor.trajectories import TokenGroups

NAME = "dynamics"
NOTEBOOK = "chapters/dynamics.ipynb"
MODELS = ("teacher", "Raptor")


@dataclass(frozen=True)
class Spec:
    """The teacher trained with stochastic depth ``p``, its max-cut into ``k`` phases, its Raptor.

    ``n_classes``: classes whose cls paths the PCA shows (Fig. 8 left); ``eps``: the perturbation's
    size (Fig. 10); ``dmd_rank``: the exact DMD's rank r (Fig. 12 right).
    """

    teacher: TeacherSpec = nested(TeacherSpec)
    p: float = 0.0
    seed: int = 0
    k: int = 3
    distill: DistillSpec = nested(DistillSpec)
    n_images: int = 1000
    n_classes: int = BASIN_CLASSES
    eps: float = 0.5
    dmd_rank: int = DMD_RANK

    def __post_init__(self) -> None:
        depth = self.teacher.depth
        require(depth >= 2, "L", "≥ 2 (a flow needs two layers)", depth)
        require(0 <= self.p < 1, "p", "in [0, 1)", self.p)
        require(1 <= self.k <= depth, "k", f"in [1, L = {depth}]", self.k)
        require(self.n_images >= 2, "n_images", "≥ 2", self.n_images)
        classes = dataset_info(self.teacher.dataset).num_classes
        require(1 <= self.n_classes <= classes, "n_classes", f"in [1, {classes}]",
                self.n_classes)
        require(math.isfinite(self.eps) and self.eps != 0, "eps", "a finite non-zero number",
                self.eps)
        require(self.dmd_rank >= 1, "dmd_rank", "≥ 1", self.dmd_rank)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, distill=SMOKE_DISTILL, n_images=64,
                            k=2, n_classes=3)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, distill=PAPER_DISTILL, n_images=2_000)


@dataclass
class Flow:
    """A model's depth curves per group: norms and γ_l ``(L+1,)``, angular speed ``(L,)``."""

    norms: dict[str, np.ndarray]
    convergence: dict[str, np.ndarray]
    speed: dict[str, np.ndarray]


@dataclass
class Spectrum:
    """The exact DMD eigenvalues ``λ = real + i·imag`` of one token group (Fig. 12 right)."""

    real: np.ndarray
    imag: np.ndarray

    @property
    def eigenvalues(self) -> np.ndarray:
        return self.real + 1j * self.imag


@dataclass
class Result:
    """Per-group curves of the teacher (and, in ``flow``, its Raptor) over ``L`` layers.

    ``pca_paths`` ``(n, L+1, 2)`` are the cls paths of the images with a label below
    ``n_classes`` (labels ``pca_labels``); ``distance[g]`` ``(L−layer+1,)`` follows the
    perturbation injected at ``perturb_layer``; ``sensitivity[g][l]`` is for injection at layer
    ``l = 0..L−1``; ``share[metric][g]`` is the Pearson r of the teacher's and Raptor's curves.
    """

    spec: Spec
    partition: tuple[tuple[int, int], ...]
    bounds: list[int]
    flow: dict[str, Flow]
    effective_rank: dict[str, np.ndarray]
    stable_rank: dict[str, np.ndarray]
    coherence: np.ndarray
    dmd: dict[str, Spectrum]
    pca_paths: np.ndarray
    pca_labels: np.ndarray
    basin_first: float
    basin_last: float
    perturb_layer: int
    distance: dict[str, np.ndarray]
    sensitivity: dict[str, np.ndarray]
    share: dict[str, dict[str, float]]
    # Per image, for the claims' bootstrap intervals (C19, C20, C23) and DMD radii (C24):
    eps_over_norm: dict[str, float]  # ε / mean ‖x_l‖ at the injection layer, per group
    relative_deviation: dict[str, np.ndarray]  # (N, L−layer+1), dynamics.image_deviation
    sensitivity_images: dict[str, np.ndarray]  # (N, L): injection at layer l = 0..L−1
    coherence_images: np.ndarray  # (N, L) patch κ_l
    dmd_radius_boot: dict[str, np.ndarray]  # (DMD_BOOT,) ρ(A) on resampled images
    basin_dirs: np.ndarray  # (N, 2, D) cls directions at layers 1 and L (C18)
    labels: np.ndarray  # (N,)
    excess: PhaseExcess  # the max-cut's block excess over the stationary null (C1)


def compute(spec: Spec) -> Result:
    """The teacher's and its Raptor's flow metrics (§4), on ``n_images`` validation images."""
    t, depth = spec.teacher, spec.teacher.depth
    device = resolve_device(t.device)
    teacher, _ = t.get_teacher(spec.p, seed=spec.seed)
    images, labels = t.eval_images(spec.n_images, seed=spec.seed)
    traj, groups = trajectories_of(teacher, images, labels, device=device)
    partition = phases.maxcut(phase_matrix(layer_similarity(traj, groups)), spec.k)
    excess = phase_excess(image_phase_matrices(traj, groups), spec.k)
    student, _ = t.get_student(spec.distill, spec.p, partition, seed=spec.seed)
    s_traj, _ = trajectories_of(student, images, labels, device=device)
    summary = {}
    for name, x in zip(MODELS, (traj, s_traj)):
        acc = dynamics.DynamicsAccumulator(groups)
        acc.update(x)
        summary[name] = acc.result(dmd_rank=spec.dmd_rank)
    flow = {name: Flow(norms=_means(s.norms), convergence=_means(s.convergence),
                       speed=_means(s.speed)) for name, s in summary.items()}
    chosen = labels < spec.n_classes
    pca = dynamics.pca_paths(traj[chosen], groups, n_components=2, group="cls")
    unit = directions(traj[:, :, groups.cls].squeeze(2))
    mid = depth // 2
    with on_device(teacher, device):
        pert = dynamics.perturb(teacher, traj[:, mid].to(device), mid, spec.eps, groups=groups)
        sens_images = {g: [] for g in pert.distance}
        for layer in range(depth):  # one injection layer at a time: each holds two trajectories
            dev = dynamics.image_deviation(dynamics.perturb(
                teacher, traj[:, layer].to(device), layer, spec.eps, groups=groups), groups)
            for g, d in dev.items():
                sens_images[g].append(d["distance"][:, -1] / abs(spec.eps))
    sens_images = {g: np.stack(v, axis=1) for g, v in sens_images.items()}
    norm_at = {g: float(np.linalg.norm(traj[:, mid, sl].numpy(), axis=-1).mean())
               for g, sl in groups.items()}
    d = directions(traj)
    s = summary["teacher"]
    return Result(
        spec=spec, partition=tuple(partition), bounds=list(boundaries(partition)), flow=flow,
        effective_rank={g: r.effective for g, r in s.ranks.items()},
        stable_rank={g: r.stable for g, r in s.ranks.items()},
        coherence=s.coherence["patches"].mean,
        dmd={g: Spectrum(d.eigenvalues.real, d.eigenvalues.imag) for g, d in s.dmd.items()},
        pca_paths=pca.paths, pca_labels=labels[chosen].numpy(),
        basin_first=dynamics.basin_compactness(unit[:, 1], labels).ratio,
        basin_last=dynamics.basin_compactness(unit[:, -1], labels).ratio,
        perturb_layer=mid, distance=pert.distance,
        sensitivity={g: v.mean(axis=0) for g, v in sens_images.items()},
        share=_share(flow["teacher"], flow["Raptor"]),
        eps_over_norm={g: abs(spec.eps) / n for g, n in norm_at.items()},
        relative_deviation={g: v["relative"]
                            for g, v in dynamics.image_deviation(pert, groups).items()},
        sensitivity_images=sens_images,
        coherence_images=coherence_rows(updates(d), groups.patches).double().numpy(),
        dmd_radius_boot=_dmd_radius_boot(d, groups, spec.dmd_rank, spec.seed),
        basin_dirs=unit[:, [1, -1]].double().numpy(), labels=labels.numpy(), excess=excess)


DMD_BOOT = 200  # bootstrap resamples of the images for the DMD spectral radius [ours]


def _dmd_radius_boot(d: torch.Tensor, groups: TokenGroups, rank: int, seed: int
                     ) -> dict[str, np.ndarray]:
    """ρ(A) of each group's exact DMD on ``DMD_BOOT`` resamples of the images (directions
    ``d`` ``(N, L+1, T, D)``): the states are the resampled images' re-normalised direction sums."""
    rng = np.random.default_rng(seed)
    draws = [rng.integers(0, len(d), len(d)) for _ in range(DMD_BOOT)]
    out = {}
    for g, sl in groups.items():
        per_image = d[:, :, sl].sum(dim=2).double().numpy()
        out[g] = np.array([low_rank.dmd(low_rank.normalise_rows(per_image[i].sum(0)).T,
                                        rank).spectral_radius for i in draws])
    return out


def _means(stats: dict[str, MeanStd]) -> dict[str, np.ndarray]:
    return {g: v.mean for g, v in stats.items()}


def _share(a: Flow, b: Flow) -> dict[str, dict[str, float]]:
    """Pearson r across layers of two models' curves, per metric and group."""
    return {m: {g: float(np.corrcoef(x, getattr(b, m)[g])[0, 1]) for g, x in getattr(a, m).items()}
            for m in ("convergence", "speed", "norms")}


# --------------------------------------------------------------------------- figures and tables


def norms_convergence_figure(result: Result) -> plt.Figure:
    """Feature norms (Fig. 9) and directional convergence γ_l (Fig. 8 right), both models."""
    fig, axes = plotting.figure(1, 2, height=3.4)
    ax_n, ax_c = axes[0]
    curves = {metric: {f"{model} {g}": v for model in MODELS
                       for g, v in getattr(result.flow[model], metric).items()}
              for metric in ("norms", "convergence")}
    plotting.layer_curves(curves["norms"], ylabel="‖x_l‖", title="feature norms (Fig. 9)",
                          ax=ax_n)
    plotting.layer_curves(curves["convergence"], ylabel="γ_l = ⟨x̂_l, x̂_L⟩",
                          title="directional convergence (Fig. 8, right)", ax=ax_c)
    for ax in axes[0]:
        plotting.phase_lines(ax, result.partition)
    plotting.legend_below(fig, axes, ncols=4)
    return fig


def basins_figure(result: Result, per_class: int = 30) -> plt.Figure:
    """The cls paths of ``per_class`` images of each class in the top-2 PCA plane (Fig. 8 left)."""
    fig, ((ax,),) = plotting.figure(width=5.0, height=4.4)
    palette = plt.get_cmap("tab10")
    for c in range(result.spec.n_classes):
        for path in result.pca_paths[result.pca_labels == c][:per_class]:
            ax.plot(path[:, 0], path[:, 1], color=palette(c), alpha=0.25, lw=0.7)
            ax.scatter(path[-1, 0], path[-1, 1], color=palette(c), s=6)
        ax.plot([], [], color=palette(c), label=f"class {c}")
    ax.set(title="cls trajectories through depth (PCA); dots: layer L", xlabel="PC 1",
           ylabel="PC 2")
    plotting.legend_below(fig, [ax], ncols=5)
    return fig


def perturbation_figure(result: Result) -> plt.Figure:
    """(A) distance to the clean path after a mid-depth injection; (B) sensitivity (Fig. 10)."""
    depth, mid = result.spec.teacher.depth, result.perturb_layer
    fig, axes = plotting.figure(1, 2, height=3.4)
    ax_a, ax_b = axes[0]
    for g, d in result.distance.items():
        ax_a.plot(np.arange(mid, depth + 1), d, marker="o", ms=3, label=g)
        ax_b.plot(np.arange(depth), result.sensitivity[g], marker="o", ms=3, label=g)
    ax_a.set(xlabel="layer", ylabel="d_cos to the clean path",
             title=f"(A) injection at layer {mid}")
    ax_b.set(xlabel="injection layer", ylabel="|ε|⁻¹ d_cos at layer L", yscale="log",
             title="(B) sensitivity")
    plotting.legend_below(fig, axes, ncols=4)
    return fig


def angular_speed_figure(result: Result) -> plt.Figure:
    """Mean angular speed per group, both models; max-cut boundaries dashed (Fig. 11).

    The point at layer ``l`` is the angle block ``l`` turns the tokens by, from layer ``l−1``.
    """
    fig, ((ax,),) = plotting.figure(width=6.0, height=3.6)
    curves = {f"{model} {g}": s for model in MODELS
              for g, s in result.flow[model].speed.items()}
    plotting.layer_curves(curves, ylabel="angle from layer l−1 (rad)", title="angular speed",
                          ax=ax, first_layer=1)
    plotting.phase_lines(ax, result.partition)
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def low_rank_dmd_figure(result: Result) -> plt.Figure:
    """The teacher's update ranks, patch coherence κ_l and DMD eigenvalues (Fig. 12).

    Ranks and κ at layer ``l`` are those of block ``l``'s update (layer ``l`` − layer ``l−1``).
    """
    fig, axes = plotting.figure(1, 3, height=3.3)
    ax_r, ax_k, ax_d = axes[0]
    layers = np.arange(1, result.spec.teacher.depth + 1)
    for g, eff in result.effective_rank.items():
        line, = ax_r.plot(layers, eff, marker="o", ms=3, label=f"{g}, effective")
        ax_r.plot(layers, result.stable_rank[g], ls="--", color=line.get_color(),
                  label=f"{g}, stable")
    ax_k.plot(layers, result.coherence, marker="o", ms=3, color="black")
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    ax_d.plot(circle.real, circle.imag, color="grey", lw=0.8)
    for g, spectrum in result.dmd.items():
        ax_d.scatter(spectrum.real, spectrum.imag, s=14, label=f"{g}, DMD λ")
    ax_r.set(xlabel="layer", ylabel="rank of the update", title="(A) update rank")
    ax_k.set(xlabel="layer", ylabel="κ_l (patches)", title="(B) patch coherence")
    ax_d.set(aspect="equal", xlabel="Re λ", ylabel="Im λ",
             title=f"(C) DMD, rank {result.spec.dmd_rank}")
    for ax in (ax_r, ax_k):
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    plotting.legend_below(fig, axes, ncols=3)
    return fig


def dmd_table(result: Result) -> pd.DataFrame:
    """Spectral radius, median |λ| and the eigenvalue nearest +1, per group (Fig. 12 right)."""
    rows = {}
    for g, spectrum in result.dmd.items():
        lam = spectrum.eigenvalues
        rows[g] = {"spectral radius": float(np.abs(lam).max()),
                   "median |λ|": float(np.median(np.abs(lam))),
                   "closest to +1": float(np.min(np.abs(lam - 1)))}
    return pd.DataFrame(rows).round(4)


def claims(result: Result) -> list[Claim]:
    """C16–C24 on the teacher (:mod:`~raptor.book.chapters.dynamics_claims`); "late" is the last
    max-cut phase."""
    t, s = result.flow["teacher"], result.spec
    return [
        judge.c16_directions_converge(t.convergence),
        judge.c17_norms_grow(t.norms),
        judge.c18_class_basins(result.basin_dirs[:, 0], result.basin_dirs[:, 1], result.labels),
        judge.c19_self_correction(result.relative_deviation, result.eps_over_norm,
                                  layer=result.perturb_layer, distance=result.distance),
        judge.c20_sensitivity_by_depth(result.sensitivity_images),
        on_phases(judge.c21_angular_speed(t.speed, result.bounds), {f"k={s.k}": result.excess}),
        judge.c22_update_rank_falls(result.stable_rank, result.effective_rank, result.bounds,
                                    width=s.teacher.embed_dim),
        judge.c23_coherence_rises(result.coherence_images, result.bounds),
        judge.c24_dmd_near_one({g: d.eigenvalues for g, d in result.dmd.items()},
                               result.dmd_radius_boot, rank=s.dmd_rank),
    ]
