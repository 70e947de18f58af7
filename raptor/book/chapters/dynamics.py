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
from raptor.book.chapters.phase_structure import on_phases
from raptor.book.claims import (FAILS, HOLDS, INCONCLUSIVE, Claim, Threshold, all_of, claim,
                                versus)
from raptor.book.profiles import PAPER_DISTILL, PAPER_TEACHER, SMOKE_DISTILL, SMOKE_TEACHER
from raptor.book.spec import DistillSpec, TeacherSpec, nested, require
from raptor.data import dataset_info
from raptor.experiment import trajectories_of
from raptor.paper import BASIN_CLASSES, DMD_RANK, FINAL_UPDATE_RANK
from raptor.similarity import layer_similarity, phase_matrix
from raptor.low_rank import coherence_rows
from raptor.sphere import MeanStd, directions, updates
from raptor.stats import (SigmoidFit, aligned, bootstrap, bootstrap_mean, change_points,
                          log_slope, sigmoid_vs_linear, trend)
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
    teacher, _ = t.get_teacher(spec.p, seed=spec.seed)
    images, labels = t.eval_images(spec.n_images, seed=spec.seed)
    traj, groups = trajectories_of(teacher, images, labels)
    partition = phases.maxcut(phase_matrix(layer_similarity(traj, groups)), spec.k)
    excess = phase_excess(image_phase_matrices(traj, groups), spec.k)
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
    sens_images = {g: [] for g in pert.distance}
    for layer in range(depth):  # one injection layer at a time: each holds two trajectories
        dev = dynamics.image_deviation(
            dynamics.perturb(teacher, traj[:, layer], layer, spec.eps, groups=groups), groups)
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


# --------------------------------------------------------------------------- claims (C16–C24)

AICC_MIN = Threshold(2.0, "[ours] γ_l follows 'smooth S-shaped curves' (§4, Fig. 8 right): a "
                          "logistic beats a line by ΔAICc > 2, the usual bar for substantial "
                          "support (Burnham & Anderson 2002); < −2 favours the line")
GAMMA_NEAR = Threshold(0.9, "[ours] 'registers approach their terminal directions earliest, "
                            "patches follow ..., and cls saturates only in the final phase' (§4): "
                            "the order of the layers where γ first reaches 0.9")
GAMMA_ORDER = ("registers", "patches", "cls")
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
RANK_P_MAX = Threshold(0.05, "[ours] 'both the stable rank and effective rank decrease steadily "
                             "with depth' (§4, Fig. 12 left): a negative Spearman ρ with "
                             "p < 0.05; negative but not significant is inconclusive")
FINAL_RANK = Threshold(float(FINAL_UPDATE_RANK),
                       "the ranks reach 'values near six in the final phase' (§4, Fig. 12 left), "
                       "for DINOv2-B (D = 768)")
FINAL_RANK_TOL = Threshold(3.0, "[ours] 'near six' (§4) without a tolerance: within ±3 of 6")
PAPER_WIDTH = 768  # DINOv2-B's width, the only one at which "≈ 6" is a statement
SHARP_SHARE = Threshold(0.5, "[ours] κ_l 'rises sharply and peaks late' (§4, Fig. 12 middle) "
                             "without a number: sharp = one layer carries at least half the rise "
                             "to the peak (a steady rise gives 1/(L−1) per layer)")
RADIUS_TOL = Threshold(1e-3, "[ours] eigenvalues 'just inside the unit circle' (§4, Fig. 12 "
                             "right): |λ| ≤ 1 up to round-off; float32 states carry ~1e-7 relative "
                             "error, so 1e-3 is far above round-off and far below a real excess")
SPEED_ORDER = ("registers", "patches", "cls")  # "stable small speeds for registers,
# intermediate speeds for patches, and sharp late reorientations for cls" (§4, Fig. 11)


def _judged(parts: dict[str, str]) -> tuple[str, str]:
    """The conjunction of named sub-verdicts, and a note naming the parts that do not hold or
    are inconclusive (empty when all hold)."""
    notes = [f"{name}: " + ", ".join(p for p, v in parts.items() if v == which)
             for name, which in (("does not hold", FAILS), ("inconclusive", INCONCLUSIVE))
             if which in parts.values()]
    return all_of(parts.values()), "".join(f"; {n}" for n in notes)


def _last_phase(bounds: list[int], depth: int) -> slice:
    return slice(bounds[-1], depth) if bounds else slice(0, depth)


def crossing(curve: np.ndarray, level: float) -> float:
    """The first (linearly interpolated) layer where ``curve`` reaches ``level``; ``inf`` if
    never."""
    above = np.flatnonzero(curve >= level)
    if not above.size:
        return float("inf")
    i = int(above[0])
    if i == 0:
        return 0.0
    return float(i - 1 + (level - curve[i - 1]) / (curve[i] - curve[i - 1]))


def c16_directions_converge(gamma: dict[str, np.ndarray]) -> Claim:
    """C16: every group's γ_l ``(L+1,)`` is S-shaped (a logistic with its midpoint inside the
    depth range beats a line by ``AICC_MIN``), near 1 at layer L−1, and the groups reach
    ``GAMMA_NEAR`` in the order ``GAMMA_ORDER``. Not testable on fewer than 6 layers."""
    depth = len(next(iter(gamma.values()))) - 1
    if depth + 1 < 6:
        return claim("C16", paper="γ_l S-shaped, saturating near 1 (§4, Fig. 8 right)",
                     ours=f"{depth + 1} layers", holds=None,
                     detail="a 4-parameter logistic against a line needs ≥ 6 layers (AICc)")
    fits = {g: sigmoid_vs_linear(v) for g, v in gamma.items()}
    reach = {g: crossing(v, GAMMA_NEAR.value) for g, v in gamma.items()}
    order = [g for g in GAMMA_ORDER if g in gamma]
    t = AICC_MIN.value

    def s_shape(f: SigmoidFit) -> str:
        if not 0 < f.mid < depth:
            return FAILS  # no inflection inside the depth range: not an S
        return HOLDS if f.delta_aicc > t else FAILS if f.delta_aicc < -t else INCONCLUSIVE

    verdict, why = _judged({
        **{f"{g} S-shape": s_shape(f) for g, f in fits.items()},
        **{f"{g} near 1": HOLDS if v[-2] > GAMMA_LATE_MIN.value else FAILS
           for g, v in gamma.items()},
        "group order": HOLDS if all(reach[a] < reach[b] for a, b in zip(order, order[1:]))
        else FAILS})
    return claim(
        "C16", paper="γ_l S-shaped, saturating near 1; registers earliest, then patches, cls "
                     "last (§4, Fig. 8 right)",
        ours=", ".join(f"{g}: ΔAICc={f.delta_aicc:.1f}, midpoint {f.mid:.1f}, "
                       f"γ_(L-1)={gamma[g][-2]:.2f}" for g, f in fits.items())
        + "; γ reaches " + f"{GAMMA_NEAR.value:g} at layer "
        + " / ".join(f"{g} {reach[g]:.1f}" for g in order),
        holds=verdict,
        detail=f"logistic vs line by AICc (> {t:g}: S-shaped, < −{t:g}: a line), logistic "
               f"midpoint inside (0, L); γ at layer L−1 > {GAMMA_LATE_MIN.value:g}; order "
               f"{' < '.join(order)} of the layer where γ reaches {GAMMA_NEAR.value:g}; on the "
               "mean curves (no interval)" + why)


def c17_norms_grow(norms: dict[str, np.ndarray]) -> Claim:
    """C17: the mean norm ``(L+1,)`` of every group rises with depth, significantly."""
    t = {g: trend(v) for g, v in norms.items()}
    return claim(
        "C17", paper="feature norms grow with depth (Fig. 9)",
        ours=", ".join(f"{g}: ρ={r.rho:.2f}" for g, r in t.items()),
        holds=all(r.rho > NORM_RHO_MIN.value and r.p < NORM_P_MAX.value for r in t.values()),
        detail=f"Spearman ρ of mean norm with depth, p < {NORM_P_MAX.value:g}")


def c18_class_basins(first: np.ndarray, last: np.ndarray, labels: np.ndarray) -> Claim:
    """C18: the cls within/between-class angle ratio (:func:`raptor.dynamics.basin_compactness`
    of the directions ``first``, ``last`` ``(N, D)`` at layers 1 and L) falls from layer 1 to L
    and ends below ``BASIN_RATIO_MAX``, both judged on bootstrap intervals over images."""
    seen: dict[bytes, float] = {}  # both intervals draw the same resamples (same seed)

    def at_last(i: np.ndarray) -> float:
        if i.tobytes() not in seen:
            seen[i.tobytes()] = dynamics.basin_compactness(last[i], labels[i]).ratio
        return seen[i.tobytes()]

    end = bootstrap(at_last, len(labels), n_boot=300)
    fall = bootstrap(lambda i: at_last(i) - dynamics.basin_compactness(first[i], labels[i]).ratio,
                     len(labels), n_boot=300)
    verdict, why = _judged({
        "ratio falls": versus(fall.low, fall.high, 0.0, above=False),
        "ratio at L below 1": versus(end.low, end.high, BASIN_RATIO_MAX.value, above=False)})
    return claim(
        "C18", paper="trajectories enter class-dependent basins (§4, Fig. 8 left)",
        ours=f"within/between: layer 1 {end.estimate - fall.estimate:.2f} → layer L "
             f"{end.estimate:.2f} [{end.low:.2f}, {end.high:.2f}]; change {fall.estimate:+.2f} "
             f"[{fall.low:+.2f}, {fall.high:+.2f}]",
        holds=verdict,
        detail="mean within-class angle over mean between-class-mean angle, cls tokens; 95% "
               "bootstrap over images" + why)


def c19_self_correction(relative: dict[str, np.ndarray], eps_over_norm: dict[str, float], *,
                        layer: int, distance: dict[str, np.ndarray] | None = None) -> Claim:
    """C19: the perturbed path bends back: each group's deviation from the clean path, in units
    of the state's norm at the injection ``layer`` (``relative[g]`` ``(N, L−layer+1)`` per image,
    :func:`raptor.dynamics.image_deviation`), ends below its peak; judged on the bootstrap
    interval of the per-image change from the peak to layer L. The peak layer is located on the
    even-numbered images and the change measured on the odd-numbered ones, so that picking the
    maximum of a noisy curve cannot manufacture a fall. ``distance[g]``: the mean cosine distance
    to the clean path (Fig. 10A's curve); a group whose cosine distance falls while the claim
    does not hold for it is named in the detail: there the fall is norm growth."""
    change, text = {}, []
    for g, dev in relative.items():
        peak, held_out = int(np.argmax(dev[::2].mean(axis=0))), dev[1::2]
        change[g] = bootstrap_mean(held_out[:, -1] - held_out[:, peak])
        m = held_out.mean(axis=0)
        text.append(f"{g}: ε = {eps_over_norm[g]:.1%} of ‖x‖, deviation {m[0]:.3f} → peak "
                    f"{m[peak]:.3f} at layer {layer + peak} → {m[-1]:.3f} at L (change "
                    f"[{change[g].low:+.4f}, {change[g].high:+.4f}])")
    parts = {g: versus(iv.low, iv.high, 0.0, above=False) for g, iv in change.items()}
    verdict, why = _judged(parts)
    norm_only = [g for g, v in parts.items() if v != HOLDS and distance is not None
                 and distance[g][-1] < distance[g].max()]
    if norm_only:
        why += (f"; the cosine distance does fall for {', '.join(norm_only)}, but no more than "
                "norm growth explains")
    return claim(
        "C19", paper="perturbed trajectories bend back (§4, Fig. 10A)", ours="; ".join(text),
        holds=verdict,
        detail=f"injection at layer {layer}; deviation = angle to the clean path × ‖x_j‖ / "
               f"‖x_{layer}‖ (so norm growth alone does not shrink it), its change from the "
               "peak (located on half the images) to layer L (on the other half); 95% "
               "bootstrap over images" + why)


def c20_sensitivity_by_depth(sensitivity: dict[str, np.ndarray]) -> Claim:
    """C20: patch sensitivity decays log-linearly with injection layer (slope of log mean
    sensitivity over layers 0..L−2 below 0); cls sensitivity rises when injected late (at layer
    L−1 over at layer L/2 above 1). ``sensitivity[g]`` ``(N, L)``: per image, injection at layer
    ``l = 0..L−1``; both judged on bootstrap intervals over images."""
    patches, cls = sensitivity["patches"], sensitivity["cls"]
    depth = patches.shape[1]
    mid, fit = depth // 2, slice(0, max(2, depth - 1))
    slope = bootstrap(lambda i: log_slope(patches[i].mean(axis=0)[fit]), len(patches))
    rise = bootstrap(lambda i: float(cls[i, -1].mean() / cls[i, mid].mean()), len(cls))
    verdict, why = _judged({"patch decay": versus(slope.low, slope.high, 0.0, above=False),
                            "late cls rise": versus(rise.low, rise.high, 1.0)})
    return claim(
        "C20", paper="patch sensitivity decays with injection depth; cls rises when injected "
                     "late (§4, Fig. 10B)",
        ours=f"patch log-slope {slope.estimate:.3f} [{slope.low:.3f}, {slope.high:.3f}]/layer; "
             f"cls at layer {depth - 1} / at layer {mid} = {rise.estimate:.2f} "
             f"[{rise.low:.2f}, {rise.high:.2f}]",
        holds=verdict,
        detail=f"slope of log mean sensitivity vs injection layer 0..{depth - 2} (patches) below "
               "0; cls sensitivity injected at L−1 over at L/2 above 1; 95% bootstrap over "
               "images" + why)


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


def _falls(curve: np.ndarray) -> str:
    t = trend(curve)
    return FAILS if t.rho >= 0 else HOLDS if t.p < RANK_P_MAX.value else INCONCLUSIVE


def c22_update_rank_falls(stable: dict[str, np.ndarray], effective: dict[str, np.ndarray],
                          bounds: list[int], *, width: int) -> Claim:
    """C22: the stable and effective rank of the updates ``(L,)`` fall with depth in every group
    (Spearman ρ < 0, p < ``RANK_P_MAX``); at the paper's width (``PAPER_WIDTH``) their mean over
    the last max-cut phase is also within ``FINAL_RANK_TOL`` of ``FINAL_RANK``.

    "≈ 6" is a number for D = 768; ranks are bounded by the width, and the paper gives no law
    for how the end value scales with it, so at other widths that part is not tested.
    """
    last = _last_phase(bounds, len(next(iter(stable.values()))))
    end = {(kind, g): float(np.mean(v[last])) for kind, ranks in
           (("stable", stable), ("effective", effective)) for g, v in ranks.items()}
    parts = {f"{g} {kind} falls": _falls(v) for kind, ranks in (("stable", stable),
                                                               ("effective", effective))
             for g, v in ranks.items()}
    near = width == PAPER_WIDTH
    if near:
        parts |= {f"{g} {kind} ≈ {FINAL_RANK.value:g}":
                  HOLDS if abs(e - FINAL_RANK.value) <= FINAL_RANK_TOL.value else FAILS
                  for (kind, g), e in end.items()}
    verdict, why = _judged(parts)
    rho = {(kind, g): trend(v).rho for kind, ranks in (("stable", stable),
                                                       ("effective", effective))
           for g, v in ranks.items()}
    return claim(
        "C22", paper=f"stable and effective rank of updates fall with depth (≈ "
                     f"{FINAL_RANK.value:g} at the end, DINOv2-B) (§4, Fig. 12 left)",
        ours=", ".join(f"{g}: ρ stable/effective {rho['stable', g]:.2f}/"
                       f"{rho['effective', g]:.2f}, last phase {end['stable', g]:.1f}/"
                       f"{end['effective', g]:.1f}" for g in stable),
        holds=verdict,
        detail=f"Spearman ρ of each rank with depth < 0 with p < {RANK_P_MAX.value:g}; "
               + (f"last-phase mean within ±{FINAL_RANK_TOL.value:g} of "
                  f"{FINAL_RANK.value:g}" if near else
                  f"'≈ {FINAL_RANK.value:g}' not tested: it is DINOv2-B's number at D = "
                  f"{PAPER_WIDTH}, here D = {width} bounds the ranks differently") + why)


def sharpness(kappa: np.ndarray) -> tuple[float, int]:
    """The largest one-layer rise of ``kappa`` as a share of its rise from layer 1 to its peak
    (0 when it never rises), and the index of the value that rise reaches."""
    steps = np.diff(kappa)
    total = float(kappa.max() - kappa[0])
    i = int(np.argmax(steps))
    return (float(steps[i]) / total if total > 0 else 0.0), i + 1


def c23_coherence_rises(kappa: np.ndarray, bounds: list[int]) -> Claim:
    """C23: the patch coherence κ_l rises sharply late: its largest one-layer rise carries at
    least ``SHARP_SHARE`` of the rise to the peak (bootstrap interval over images of
    ``kappa`` ``(N, L)``) and lands in the last max-cut phase."""
    mean = kappa.mean(axis=0)
    share = bootstrap(lambda i: sharpness(kappa[i].mean(axis=0))[0], len(kappa))
    at = sharpness(mean)[1]
    late = at >= _last_phase(bounds, len(mean)).start
    verdict, why = _judged({"sharp": versus(share.low, share.high, SHARP_SHARE.value),
                            "late": HOLDS if late else FAILS})
    return claim(
        "C23", paper="patch-token coherence rises sharply late (§4, Fig. 12 middle)",
        ours=f"κ {mean[0]:.3f} → peak {mean.max():.3f}; largest one-layer rise "
             f"{share.estimate:.0%} [{share.low:.0%}, {share.high:.0%}] of it, at layer l+1 = "
             f"{at + 1}" + (" (last phase)" if late else " (before the last phase)"),
        holds=verdict,
        detail=f"sharp: the largest one-layer rise ≥ {SHARP_SHARE.value:.0%} of the rise to the "
               "peak [ours]; late: it lands in the last max-cut phase; 95% bootstrap over images"
               + why)


def c24_dmd_near_one(eigenvalues: dict[str, np.ndarray], radius_boot: dict[str, np.ndarray], *,
                     rank: int) -> Claim:
    """C24: every group's DMD spectral radius stays ≤ 1 up to ``RADIUS_TOL`` (its bootstrap
    interval over images, ``radius_boot[g]``), and cls's eigenvalues come closest to +1.
    ``rank``: the rank asked for; the number of eigenvalues is the rank used."""
    closest = {g: float(np.min(np.abs(lam - 1))) for g, lam in eigenvalues.items()}
    radius = {g: (float(np.abs(lam).max()), *np.quantile(radius_boot[g], [0.025, 0.975]))
              for g, lam in eigenvalues.items()}
    used = max(len(lam) for lam in eigenvalues.values())
    verdict, why = _judged({
        **{f"{g} |λ| ≤ 1": versus(lo, hi, 1 + RADIUS_TOL.value, above=False)
           for g, (_, lo, hi) in radius.items()},
        "cls closest to +1": HOLDS if min(closest, key=closest.get) == "cls" else FAILS})
    return claim(
        "C24", paper="DMD eigenvalues inside the unit circle near +1; cls closest to +1 "
                     "(§4, Fig. 12 right)",
        ours="ρ(A) " + ", ".join(f"{g} {r:.4f} [{lo:.4f}, {hi:.4f}]"
                                 for g, (r, lo, hi) in radius.items())
        + "; nearest λ to +1: " + ", ".join(f"{g} {d:.3f}" for g, d in closest.items()),
        holds=verdict,
        detail=f"exact DMD of rank {used} on group-averaged directions"
               + ("" if used == rank else f" (the paper's r = {rank} needs ≥ {rank} layer "
                                          f"transitions; this teacher has {used})")
               + f"; |λ| ≤ 1 + {RADIUS_TOL.value:g} judged on a 95% bootstrap over images of "
                 "ρ(A)" + why)


def claims(result: Result) -> list[Claim]:
    """C16–C24 on the teacher; "late" is the last max-cut phase."""
    t, s = result.flow["teacher"], result.spec
    return [
        c16_directions_converge(t.convergence),
        c17_norms_grow(t.norms),
        c18_class_basins(result.basin_dirs[:, 0], result.basin_dirs[:, 1], result.labels),
        c19_self_correction(result.relative_deviation, result.eps_over_norm,
                            layer=result.perturb_layer, distance=result.distance),
        c20_sensitivity_by_depth(result.sensitivity_images),
        on_phases(c21_angular_speed(t.speed, result.bounds), {f"k={s.k}": result.excess}),
        c22_update_rank_falls(result.stable_rank, result.effective_rank, result.bounds,
                              width=s.teacher.embed_dim),
        c23_coherence_rises(result.coherence_images, result.bounds),
        c24_dmd_near_one({g: d.eigenvalues for g, d in result.dmd.items()},
                         result.dmd_radius_boot, rank=s.dmd_rank),
    ]
