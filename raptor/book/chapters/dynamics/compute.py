"""The computation of chapter *Depth as a dynamical system*: per seed the teacher's and its
Raptor's flow metrics (§4) on the validation images."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raptor import dynamics
from raptor.book.chapters.dynamics.spec import Spec
from raptor.book.experiment import (images_of, phases_of, student_of, teacher_of, trajectories_of,
                                    walk)
from raptor.loop import on_device, resolve_device
from raptor.low_rank import coherence_rows
from raptor.phase_test import PhaseTest
from raptor.planning import Plan
from raptor.sphere import MeanStd, directions, updates

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


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """For each seed, the teacher's and its Raptor's flow metrics (§4), on ``n_images``
    validation images (a subset drawn with that seed)."""
    device = resolve_device(spec.machine.device)
    return Result(spec, [_seed_run(spec, seed, device, plan) for seed in spec.seeds])


def _seed_run(spec: Spec, seed: int, device: str, plan: Plan | None) -> SeedRun:
    depth, mid = spec.teacher.depth, spec.teacher.depth // 2
    w = walk(teacher_of(spec, spec.p, seed=seed, plan=plan),
             images_of(spec, spec.n_images, seed=seed, plan=plan),
             cuts=(spec.k,), device=device)
    teacher, labels, traj, groups, partition = w.model, w.labels, w.traj, w.groups, w.cuts[spec.k]
    student, _ = student_of(spec, spec.p, partition, seed=seed, plan=plan)
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
        phases=phases_of(spec, spec.p, seed=seed, device=device, plan=plan),
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
