"""Chapter *Depth as a dynamical system*: the teacher's and the Raptor's flow on the sphere (§4,
Figs. 8–12; C16–C24)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import dynamics, phases
from raptor.book.claims import Claim, Threshold, claim
from raptor.book.profiles import PAPER_DISTILL, PAPER_TEACHER, SMOKE_DISTILL, SMOKE_TEACHER
from raptor.book.spec import DistillSpec, TeacherSpec, nested, require
from raptor.data import dataset_info
from raptor.experiment import trajectories_of
from raptor.paper import BASIN_CLASSES, DMD_RANK, FINAL_UPDATE_RANK
from raptor.similarity import layer_similarity, phase_matrix
from raptor.sphere import MeanStd, directions
from raptor.stats import aligned, change_points, log_slope, trend
from raptor.structure import boundaries

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


def compute(spec: Spec) -> Result:
    """The teacher's and its Raptor's flow metrics (§4), on ``n_images`` validation images."""
    t, depth = spec.teacher, spec.teacher.depth
    teacher, _ = t.get_teacher(spec.p, seed=spec.seed)
    images, labels = t.eval_images(spec.n_images, seed=spec.seed)
    traj, groups = trajectories_of(teacher, images, labels)
    partition = phases.maxcut(phase_matrix(layer_similarity(traj, groups)), spec.k)
    student, _ = t.get_student(spec.distill, spec.p, partition, seed=spec.seed)
    s_traj, _ = trajectories_of(student, images, labels)
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
    pert = dynamics.perturb(teacher, traj[:, mid], mid, spec.eps, groups=groups)
    sens = dynamics.sensitivity_profile(teacher, traj, groups, spec.eps, layers=list(range(depth)))
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
        perturb_layer=mid, distance=pert.distance, sensitivity=sens.sensitivity,
        share=_share(flow["teacher"], flow["Raptor"]))


def _means(stats: dict[str, MeanStd]) -> dict[str, np.ndarray]:
    return {g: v.mean for g, v in stats.items()}


def _share(a: Flow, b: Flow) -> dict[str, dict[str, float]]:
    """Pearson r across layers of two models' curves, per metric and group."""
    return {m: {g: float(np.corrcoef(x, getattr(b, m)[g])[0, 1]) for g, x in getattr(a, m).items()}
            for m in ("convergence", "speed", "norms")}


# --------------------------------------------------------------------------- figures and tables


def _boundary_lines(ax: plt.Axes, bounds: list[int], offset: float = 0.0) -> None:
    for b in bounds:
        ax.axvline(b + offset, color="grey", ls=":", lw=0.8)


def norms_convergence_figure(result: Result) -> plt.Figure:
    """Feature norms (Fig. 9) and directional convergence γ_l (Fig. 8 right), both models."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for model, ls in zip(MODELS, ("-", "--")):
        f = result.flow[model]
        for g in f.norms:
            axes[0].plot(f.norms[g], ls=ls, marker="o", ms=3, label=f"{model} {g}")
            axes[1].plot(f.convergence[g], ls=ls, marker="o", ms=3, label=f"{model} {g}")
    axes[0].set(xlabel="layer", ylabel="‖x_l‖", title="feature norms (Fig. 9)")
    axes[1].set(xlabel="layer", ylabel="γ_l = ⟨x̂_l, x̂_L⟩",
                title="directional convergence (Fig. 8 right)")
    for ax in axes:
        _boundary_lines(ax, result.bounds)
        ax.legend(fontsize=7)
    return fig


def basins_figure(result: Result, per_class: int = 30) -> plt.Figure:
    """The cls paths of ``per_class`` images of each class in the top-2 PCA plane (Fig. 8 left)."""
    fig, ax = plt.subplots(figsize=(5, 4.2))
    palette = plt.get_cmap("tab10")
    for c in range(result.spec.n_classes):
        for path in result.pca_paths[result.pca_labels == c][:per_class]:
            ax.plot(path[:, 0], path[:, 1], color=palette(c), alpha=0.25, lw=0.7)
            ax.scatter(path[-1, 0], path[-1, 1], color=palette(c), s=6)
    ax.set(title="cls trajectories through depth (PCA)", xlabel="PC 1", ylabel="PC 2")
    return fig


def perturbation_figure(result: Result) -> plt.Figure:
    """(A) distance to the clean path after a mid-depth injection; (B) sensitivity (Fig. 10)."""
    depth, mid = result.spec.teacher.depth, result.perturb_layer
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for g, d in result.distance.items():
        axes[0].plot(np.arange(mid, depth + 1), d, marker="o", ms=3, label=g)
        axes[1].plot(np.arange(depth), result.sensitivity[g], marker="o", ms=3, label=g)
    axes[0].set(xlabel="layer", ylabel="d_cos to the clean path", title=f"injection at layer {mid}")
    axes[1].set(xlabel="injection layer", ylabel="|ε|⁻¹ d_cos at layer L", yscale="log",
                title="sensitivity")
    for ax in axes:
        ax.legend(fontsize=8)
    return fig


def angular_speed_figure(result: Result) -> plt.Figure:
    """Mean angular speed s_l per group, both models; max-cut boundaries dashed (Fig. 11)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    layers = np.arange(1, result.spec.teacher.depth + 1)
    for model, ls in zip(MODELS, ("-", "--")):
        for g, s in result.flow[model].speed.items():
            ax.plot(layers, s, ls=ls, marker="o", ms=3, label=f"{model} {g}")
    _boundary_lines(ax, result.bounds, offset=0.5)
    ax.set(xlabel="layer l+1", ylabel="s_l (rad)", title="angular speed")
    ax.legend(fontsize=7)
    return fig


def low_rank_dmd_figure(result: Result) -> plt.Figure:
    """The teacher's update ranks, patch coherence κ_l and DMD eigenvalues (Fig. 12)."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    layers = np.arange(1, result.spec.teacher.depth + 1)
    for g, eff in result.effective_rank.items():
        axes[0].plot(layers, eff, marker="o", ms=3, label=f"{g} effective")
        axes[0].plot(layers, result.stable_rank[g], ls="--", label=f"{g} stable")
    axes[1].plot(layers, result.coherence, marker="o", ms=3, label="patches")
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    axes[2].plot(circle.real, circle.imag, color="grey", lw=0.8)
    for g, spectrum in result.dmd.items():
        axes[2].scatter(spectrum.real, spectrum.imag, s=14, label=g)
    axes[0].set(xlabel="layer l+1", ylabel="rank of updates", title="stable / effective rank")
    axes[1].set(xlabel="layer l+1", ylabel="κ_l", title="patch-token coherence")
    axes[2].set(aspect="equal", title=f"DMD eigenvalues (r={result.spec.dmd_rank})")
    for ax in axes:
        ax.legend(fontsize=7)
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


# --------------------------------------------------------------------------- claims (C16–C24)

GAMMA_RHO_MIN = Threshold(0.9, "[ours] the paper's γ_l follows 'smooth S-shaped curves that "
                               "approach 1' (§4, Fig. 8 right): a near-monotone rise with depth")
GAMMA_LATE_MIN = Threshold(0.8, "[ours] γ_l 'saturate[s] in late layers' (§4, Fig. 8 right): "
                                "γ at layer L−1 already close to γ_L = 1")
NORM_RHO_MIN = Threshold(0.7, "[ours] 'feature norms increase steadily with depth' (§4, Fig. 9): "
                              "a strong rank correlation with depth")
NORM_P_MAX = Threshold(0.05, "[ours] the conventional significance level for that correlation")
BASIN_RATIO_MAX = Threshold(1.0, "[ours] 'compact terminal regions' (§4, Fig. 8 left): classes "
                                 "spread less around their mean than class means lie apart")
ALIGN_TOL = Threshold(1, "[ours] 'abrupt changes aligned with previously discovered block "
                         "boundaries' (§4, Fig. 11): a change point within a layer of one")
ALIGNED_MIN = Threshold(0.5, "[ours] the paper shows the jumps (§4, Fig. 11) without a count: "
                             "at least half the max-cut boundaries have one")
RANK_RHO_MAX = Threshold(0.0, "[ours] 'both the stable rank and effective rank decrease steadily "
                              "with depth' (§4, Fig. 12 left): a negative rank correlation")
RADIUS_TOL = Threshold(0.02, "[ours] eigenvalues 'just inside the unit circle' (§4, Fig. 12 "
                             "right), allowing for a rank-r fit on finitely many images")
SPEED_ORDER = ("registers", "patches", "cls")  # "stable small speeds for registers,
# intermediate speeds for patches, and sharp late reorientations for cls" (§4, Fig. 11)


def _last_phase(bounds: list[int], depth: int) -> slice:
    return slice(bounds[-1], depth) if bounds else slice(0, depth)


def c16_directions_converge(gamma: dict[str, np.ndarray]) -> Claim:
    """C16: every group's γ_l ``(L+1,)`` rises with depth (Spearman ρ), near 1 at layer L−1."""
    rho = {g: trend(v).rho for g, v in gamma.items()}
    return claim(
        "C16", paper="γ_l S-shaped, saturating near 1 (Fig. 8 right)",
        ours=", ".join(f"{g}: ρ={rho[g]:.2f}, γ_(L-1)={v[-2]:.2f}" for g, v in gamma.items()),
        holds=all(rho[g] > GAMMA_RHO_MIN.value and v[-2] > GAMMA_LATE_MIN.value
                  for g, v in gamma.items()),
        detail=f"Spearman ρ of γ with depth > {GAMMA_RHO_MIN.value:g} and γ at layer L−1 > "
               f"{GAMMA_LATE_MIN.value:g}")


def c17_norms_grow(norms: dict[str, np.ndarray]) -> Claim:
    """C17: the mean norm ``(L+1,)`` of every group rises with depth, significantly."""
    t = {g: trend(v) for g, v in norms.items()}
    return claim(
        "C17", paper="feature norms grow with depth (Fig. 9)",
        ours=", ".join(f"{g}: ρ={r.rho:.2f}" for g, r in t.items()),
        holds=all(r.rho > NORM_RHO_MIN.value and r.p < NORM_P_MAX.value for r in t.values()),
        detail=f"Spearman ρ of mean norm with depth, p < {NORM_P_MAX.value:g}")


def c18_class_basins(ratio_first: float, ratio_last: float) -> Claim:
    """C18: the cls within/between-class angle ratio falls from layer 1 to L, and ends below 1."""
    return claim(
        "C18", paper="trajectories enter class-dependent basins (Fig. 8 left)",
        ours=f"within/between: layer 1 {ratio_first:.2f} → layer L {ratio_last:.2f}",
        holds=ratio_last < ratio_first and ratio_last < BASIN_RATIO_MAX.value,
        detail="mean within-class angle over mean between-class-mean angle, cls tokens")


def c19_self_correction(distance: dict[str, np.ndarray], *, layer: int, eps: float) -> Claim:
    """C19: the distance to the clean path (injection ``layer`` to L) ends below its peak."""
    return claim(
        "C19", paper="perturbed trajectories bend back (Fig. 10A)",
        ours=", ".join(f"{g}: {d[1]:.3f} → {d[-1]:.3f}" for g, d in distance.items()),
        holds=all(d[-1] < max(d[1:]) for d in distance.values()),
        detail=f"cosine distance to the clean path after injection at layer {layer}, ε={eps}")


def c20_sensitivity_by_depth(sensitivity: dict[str, np.ndarray]) -> Claim:
    """C20: patch sensitivity decays log-linearly with injection layer; cls rises late.

    ``sensitivity[g][l]`` is for injection at layer ``l = 0..L−1``.
    """
    patches, cls = sensitivity["patches"], sensitivity["cls"]
    depth = len(cls)
    slope = log_slope(patches[: max(2, depth - 1)])
    return claim(
        "C20", paper="patch sensitivity decays with injection depth; cls rises late (Fig. 10B)",
        ours=f"patch log-slope {slope:.3f}/layer; cls last/first {cls[-1] / cls[0]:.2f}",
        holds=slope < 0 and cls[-1] > cls[depth // 2],
        detail="slope of log sensitivity vs injection layer (patches); cls at L−1 vs L/2")


def c21_angular_speed(speed: dict[str, np.ndarray], bounds: list[int]) -> Claim:
    """C21: in the last phase, speed orders registers < patches < cls; patch speed jumps at bounds.

    ``speed[g]`` ``(L,)``; ``bounds``: the max-cut's inner boundaries.
    """
    last = _last_phase(bounds, len(next(iter(speed.values()))))
    late = {g: float(np.mean(s[last])) for g, s in speed.items()}
    ranked = sorted(late, key=late.get)
    cps = change_points(speed["patches"], len(bounds)) if bounds else []
    tol = int(ALIGN_TOL.value)
    return claim(
        "C21", paper="late angular speed: registers < patches < cls; jumps at phase boundaries "
                     "(Fig. 11)",
        ours=" < ".join(f"{g} {late[g]:.3f}" for g in ranked)
             + f"; patch change points {cps} vs boundaries {bounds}",
        holds=ranked == [g for g in SPEED_ORDER if g in late]
              and (not bounds or aligned(cps, bounds, tol=tol) >= ALIGNED_MIN.value),
        detail=f"mean speed in the last phase; largest speed changes within ±{tol} layer of a "
               "boundary")


def c22_update_rank_falls(effective: dict[str, np.ndarray]) -> Claim:
    """C22: the effective rank of the updates ``(L,)`` falls with depth in every group."""
    rho = {g: trend(v).rho for g, v in effective.items()}
    return claim(
        "C22", paper="stable and effective rank of updates fall with depth "
                     f"(≈ {FINAL_UPDATE_RANK} at the end, DINOv2-B)",
        ours=", ".join(f"{g}: ρ={rho[g]:.2f}, last {v[-1]:.1f}" for g, v in effective.items()),
        holds=all(r < RANK_RHO_MAX.value for r in rho.values()),
        detail="Spearman ρ of the effective rank with depth")


def c23_coherence_rises(kappa: np.ndarray, bounds: list[int]) -> Claim:
    """C23: the patch coherence κ_l ``(L,)`` is higher in the last phase than in the first."""
    first = np.mean(kappa[: bounds[0]] if bounds else kappa)
    last = np.mean(kappa[_last_phase(bounds, len(kappa))])
    return claim(
        "C23", paper="patch-token coherence rises sharply late (Fig. 12 middle)",
        ours=f"κ first phase {first:.3f}, last phase {last:.3f}",
        holds=bool(last > first), detail="mean κ over the first vs the last phase")


def c24_dmd_near_one(eigenvalues: dict[str, np.ndarray], *, rank: int) -> Claim:
    """C24: every group's DMD eigenvalues lie inside the unit circle; cls's come closest to +1."""
    radius = max(float(np.abs(lam).max()) for lam in eigenvalues.values())
    closest = {g: float(np.min(np.abs(lam - 1))) for g, lam in eigenvalues.items()}
    return claim(
        "C24", paper="DMD eigenvalues inside the unit circle near +1; cls closest to +1 "
                     "(Fig. 12 right)",
        ours=f"ρ(A) max {radius:.3f}; distance of nearest λ to +1: "
             + ", ".join(f"{g} {d:.3f}" for g, d in closest.items()),
        holds=radius <= 1 + RADIUS_TOL.value and min(closest, key=closest.get) == "cls",
        detail=f"exact DMD, rank {rank}, on group-averaged directions; tolerance "
               f"{RADIUS_TOL.value:g}")


def claims(result: Result) -> list[Claim]:
    """C16–C24 on the teacher; "late" is the last max-cut phase."""
    t, s = result.flow["teacher"], result.spec
    return [
        c16_directions_converge(t.convergence),
        c17_norms_grow(t.norms),
        c18_class_basins(result.basin_first, result.basin_last),
        c19_self_correction(result.distance, layer=result.perturb_layer, eps=s.eps),
        c20_sensitivity_by_depth(result.sensitivity),
        c21_angular_speed(t.speed, result.bounds),
        c22_update_rank_falls(result.effective_rank),
        c23_coherence_rises(result.coherence, result.bounds),
        c24_dmd_near_one({g: d.eigenvalues for g, d in result.dmd.items()}, rank=s.dmd_rank),
    ]
