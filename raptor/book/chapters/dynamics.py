"""Chapter *Depth as a dynamical system*: the teacher's and the Raptor's flow on the sphere (§4,
Figs. 8–12; C16–C24)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import dynamics, phases
from raptor.book import plotting
from raptor.book.chapters import dynamics_claims as judge
from raptor.book.claims import (VERDICTS, Claim, counted, excess_text, listed, rests_on_phases,
                                stated)
from raptor.book.experiment import (images_of, phases_of, student_of, teacher_of, trajectories_of,
                                    walk)
from raptor.book.specs.dynamics import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import on_device, resolve_device
from raptor.low_rank import coherence_rows
from raptor.sphere import MeanStd, directions, updates
from raptor.phase_test import PhaseTest
from raptor.stats import HOLDS
from raptor.structure import boundaries

MODELS = ("teacher", "Raptor")


@dataclass
class Flow:
    """A model's depth curves per group: norms and γ_l ``(L+1,)``, angular speed ``(L,)``."""

    norms: dict[str, np.ndarray]
    convergence: dict[str, np.ndarray]
    speed: dict[str, np.ndarray]


@dataclass
class SeedRun:
    """One seed's teacher (and, in ``flow``, its Raptor) over ``L`` layers; the ``(N, …)`` arrays
    hold one row per image.

    ``pca_paths`` ``(n, L+1, 2)``: the cls paths of the images with a label below ``n_classes``;
    ``distance[g]`` ``(N, L−layer+1)`` follows the perturbation injected at ``perturb_layer``.
    """

    seed: int
    partition: tuple[tuple[int, int], ...]
    phases: PhaseTest  # C1's test of the teacher, as every chapter reads it
    flow: dict[str, Flow]
    effective_rank: dict[str, np.ndarray]
    stable_rank: dict[str, np.ndarray]
    coherence: np.ndarray
    dmd: dict[str, np.ndarray]  # the exact DMD's eigenvalues λ per group (Fig. 12 right)
    pca_paths: np.ndarray
    labels: np.ndarray  # (N,)
    basin_dirs: np.ndarray  # (N, 2, D) cls directions at layers 1 and L (C18)
    perturb_layer: int
    distance: dict[str, np.ndarray]  # (N, L−layer+1) cosine distance, dynamics.image_deviation
    relative_deviation: dict[str, np.ndarray]  # (N, L−layer+1), dynamics.image_deviation
    eps_over_norm: dict[str, float]  # ε / mean ‖x_l‖ at the injection layer, per group
    sensitivity_images: dict[str, np.ndarray]  # (N, L): injection at layer l = 0..L−1
    convergence_images: dict[str, np.ndarray]  # (N, L+1) the teacher's γ_l, token-averaged
    coherence_images: np.ndarray  # (N, L) patch κ_l


@dataclass
class Result:
    """The chapter's spec and one :class:`SeedRun` per teacher seed."""

    spec: Spec
    runs: list[SeedRun]  # one per seed, in the order of ``spec.seeds``


def compute(spec: Spec) -> Result:
    """For each seed, the teacher's and its Raptor's flow metrics (§4), on ``n_images``
    validation images (a subset drawn with that seed)."""
    device = resolve_device(spec.machine.device)
    return Result(spec, [_seed_run(spec, seed, device) for seed in spec.seeds])


def _seed_run(spec: Spec, seed: int, device: str) -> SeedRun:
    depth, mid = spec.teacher.depth, spec.teacher.depth // 2
    w = walk(teacher_of(spec, spec.p, seed=seed), images_of(spec, spec.n_images, seed=seed),
             cuts=(spec.k,), device=device)
    teacher, labels, traj, groups, partition = w.model, w.labels, w.traj, w.groups, w.cuts[spec.k]
    student, _ = student_of(spec, spec.p, partition, seed=seed)
    s_traj, _ = trajectories_of(student, w.images, labels, device=device)
    summary = {}
    for name, x in zip(MODELS, (traj, s_traj)):
        acc = dynamics.DynamicsAccumulator(groups)
        acc.update(x)
        summary[name] = acc.result(dmd_rank=spec.dmd_rank)
    gamma_images = dynamics.image_convergence(traj, groups)  # before d: one copy of traj at a time
    pca = dynamics.pca_paths(traj[labels < spec.n_classes], groups, n_components=2, group="cls")
    with on_device(teacher, device):
        pert = dynamics.perturb(teacher, traj[:, mid].to(device), mid, spec.eps, groups=groups)
        # each injection layer l = 0..L−1 in turn: a perturbation holds two trajectories
        injected = [dynamics.image_deviation(dynamics.perturb(
            teacher, traj[:, layer].to(device), layer, spec.eps, groups=groups), groups)
            for layer in range(depth)]
    deviation = dynamics.image_deviation(pert, groups)
    norm_at = {g: float(np.linalg.norm(traj[:, mid, sl].numpy(), axis=-1).mean())
               for g, sl in groups.items()}
    d = directions(traj)
    s = summary["teacher"]
    return SeedRun(
        seed=seed, partition=tuple(partition),
        phases=phases_of(spec, spec.p, seed=seed, device=device),
        flow={name: Flow(norms=_means(m.norms), convergence=_means(m.convergence),
                         speed=_means(m.speed)) for name, m in summary.items()},
        effective_rank={g: r.effective for g, r in s.ranks.items()},
        stable_rank={g: r.stable for g, r in s.ranks.items()},
        coherence=s.coherence["patches"].mean,
        dmd={g: f.eigenvalues for g, f in s.dmd.items()},
        pca_paths=pca.paths, labels=labels.numpy(),
        basin_dirs=directions(traj[:, :, groups.cls].squeeze(2))[:, [1, -1]].double().numpy(),
        perturb_layer=mid, distance={g: v["distance"] for g, v in deviation.items()},
        relative_deviation={g: v["relative"] for g, v in deviation.items()},
        eps_over_norm={g: abs(spec.eps) / n for g, n in norm_at.items()},
        sensitivity_images={g: np.stack([dev[g]["distance"][:, -1] / abs(spec.eps)
                                         for dev in injected], axis=1) for g in norm_at},
        convergence_images=gamma_images,
        coherence_images=coherence_rows(updates(d), groups.patches).double().numpy())


def _means(stats: dict[str, MeanStd]) -> dict[str, np.ndarray]:
    return {g: v.mean for g, v in stats.items()}


# --------------------------------------------------------------------------- figures and tables


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
            peak, held_out = judge.bend(curves)[2], curves[1::2].mean(axis=0)
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


def claims(result: Result) -> list[Claim]:
    """C16–C24 declared over the seeds' teachers and judged by the claims engine (each seed's
    estimate one unit, :mod:`~raptor.book.chapters.dynamics_claims`); "late" is each seed's last
    max-cut phase, and C21's jumps at its boundaries are judged on the seeds whose teacher has
    phases by C1's test."""
    runs = result.runs
    teachers = [run.flow["teacher"] for run in runs]
    bounds = [list(boundaries(run.partition)) for run in runs]
    return [
        judge.c16_directions_converge([run.convergence_images for run in runs]),
        judge.c17_norms_grow([t.norms for t in teachers]),
        judge.c18_class_basins([run.basin_dirs[:, 0] for run in runs],
                               [run.basin_dirs[:, 1] for run in runs],
                               [run.labels for run in runs]),
        judge.c19_self_correction([run.distance for run in runs],
                                  [run.relative_deviation for run in runs],
                                  [run.eps_over_norm for run in runs],
                                  layer=runs[0].perturb_layer),
        judge.c20_sensitivity_by_depth([run.sensitivity_images for run in runs]),
        judge.c21_angular_speed([t.speed for t in teachers], bounds,
                                phased=[run.phases.verdict() == HOLDS for run in runs],
                                rests_on=rests_on_phases({f"seed {run.seed}": run.phases
                                                          for run in runs})),
        judge.c22_update_rank_falls([run.stable_rank for run in runs],
                                    [run.effective_rank for run in runs], bounds,
                                    width=result.spec.teacher.embed_dim),
        judge.c23_coherence_rises([run.coherence_images for run in runs], bounds),
        judge.c24_dmd_near_one([run.dmd for run in runs], rank=result.spec.dmd_rank),
    ]


# Each claim's phenomenon (§4), a clause that agrees with a singular verb: the subject of its
# verdict in the chapter's Found sentence.
PHENOMENA = {
    "C16": "directions converging along an S-shaped curve",
    "C17": "feature norms growing with depth",
    "C18": "trajectories entering class-dependent basins",
    "C19": "perturbed trajectories bending back",
    "C20": "sensitivity falling with injection depth for patches and rising late for cls",
    "C21": "angular speeds ordering by token group and jumping at phase boundaries",
    "C22": "update ranks falling with depth",
    "C23": "patch coherence rising sharply late",
    "C24": "DMD eigenvalues lying just inside the unit circle, nearest +1 for cls",
}


def findings(result: Result, checks: Sequence[Claim]) -> dict[str, str]:
    """The *Found* sentence's parts, as glued text: the teachers, and the phenomena of §4 grouped
    by their verdict (of ``checks``), in the order of :data:`raptor.book.claims.VERDICTS`."""
    groups = [[f"{PHENOMENA[c.id]} ({c.id})" for c in checks if c.verdict == v] for v in VERDICTS]
    return {
        "teachers": counted(len(result.runs), "teacher"),
        "phenomena": "; ".join(f"{listed(names)} {stated(v, plural=len(names) > 1)}"
                               for v, names in zip(VERDICTS, groups) if names),
    }
