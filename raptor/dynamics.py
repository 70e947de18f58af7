"""Dynamical interpretability: ViT depth as a flow on the unit sphere (paper §4, Figs. 8–11).

Metrics of a trajectory ``(N, L+1, T, D)`` per token group, built on :mod:`raptor.sphere`; the
low-rank ones (Fig. 12) are in :mod:`raptor.low_rank`. :class:`DynamicsAccumulator` streams all
of them over batches of images with memory independent of N; the batch functions are its
one-batch case (same kernels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from raptor.low_rank import (DMDResult, UpdateRanks, check_rank, coherence_rows, dmd, gram,
                             normalise_rows, ranks_from_gram)
from raptor.paper import DMD_RANK
from raptor.sphere import (EPS, ArrayLike, MeanStd, Moments, angle_unit, as_tensor, check_groups,
                           check_traj, cos_dist_unit, directions, is_int, per_group, token_rows,
                           updates)
from raptor.trajectories import TokenGroups, run_layers, trajectory_model


def feature_norms(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Feature norms ``‖x_l‖`` per layer: mean and std over the group's tokens × images (Fig. 9).

    Returns ``{group: MeanStd}`` with arrays of shape ``(L+1,)``.
    """
    x, items = check_traj(traj, groups)
    return per_group(torch.linalg.vector_norm(x, dim=-1), items)


def directional_convergence(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Directional convergence ``γ_l = ⟨x̂_l, x̂_L⟩`` per token, pooled per group (Fig. 8 right).

    Computed as ``1 − ‖x̂_l − x̂_L‖²/2`` so that ``γ_L = 1`` exactly. Arrays of shape ``(L+1,)``.
    """
    x, items = check_traj(traj, groups)
    return per_group(_gamma(directions(x)), items)


def image_convergence(traj: ArrayLike, groups: TokenGroups) -> dict[str, np.ndarray]:
    """Per image, γ_l averaged over the group's tokens ``(N, L+1)``: the curves whose mean over
    images is :func:`directional_convergence`'s mean (every image has the same tokens), for
    intervals by resampling images (C16)."""
    x, items = check_traj(traj, groups)
    g = _gamma(directions(x))
    return {name: g[:, :, s].double().mean(2).numpy() for name, s in items}


def _gamma(d: Tensor) -> Tensor:
    """γ per token ``(N, L+1, T)`` of the directions ``d``."""
    return 1 - cos_dist_unit(d, d[:, -1:])


def angular_speed(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Angular speed ``s_l = arccos⟨x̂_{l+1}, x̂_l⟩`` (radians), mean and spread (Fig. 11).

    ``s_l`` is the angle travelled by a token from layer ``l`` to ``l+1`` (computed with the
    accurate formula of :func:`angle`); ``MeanStd.var`` is the variance the figure shows.
    Arrays of shape ``(L,)``.
    """
    x, items = check_traj(traj, groups)
    d = directions(x)
    return per_group(angle_unit(d[:, 1:], d[:, :-1]), items)


# --------------------------------------------------------------------------- basins (Fig. 8 left)


def _group_direction(x: Tensor, s: slice) -> Tensor:
    """Mean of the group's token directions, re-normalised: ``(N, K, D)``."""
    return directions(directions(x[:, :, s]).mean(dim=2))


@dataclass(frozen=True)
class PCAPaths:
    """Depth paths ``(N, L+1, k)`` projected on the top ``k`` principal axes ``(k, D)``."""

    paths: np.ndarray
    components: np.ndarray
    mean: np.ndarray
    explained_variance_ratio: np.ndarray


def pca_paths(traj: ArrayLike, groups: TokenGroups, n_components: int = 2,
              group: str = "cls") -> PCAPaths:
    """PCA of a group's directions pooled over images and layers: depth paths (Fig. 8 left).

    The state of an image at layer ``l`` is the group's mean token direction, re-normalised (for
    cls: ``x̂_l`` itself). PCA = SVD of the centred ``(N·(L+1), D)`` point cloud.
    """
    x, items = check_traj(traj, groups)
    if group not in dict(items):
        raise ValueError(f"group must be one of {[n for n, _ in items]}, got {group!r}")
    pts = _group_direction(x, dict(items)[group]).to("cpu", torch.float64).numpy()
    n, k1, dim = pts.shape
    if not is_int(n_components) or not 1 <= n_components <= min(n * k1, dim):
        raise ValueError(f"n_components must be in [1, {min(n * k1, dim)}], got {n_components!r}")
    flat = pts.reshape(-1, dim)
    mean = flat.mean(axis=0)
    _, s, vh = np.linalg.svd(flat - mean, full_matrices=False)
    comps = vh[:n_components]
    total = (s**2).sum()
    ratio = s[:n_components] ** 2 / total if total > 0 else np.zeros(n_components)
    return PCAPaths(paths=((flat - mean) @ comps.T).reshape(n, k1, n_components),
                    components=comps, mean=mean, explained_variance_ratio=ratio)


@dataclass(frozen=True)
class Basins:
    """Angular compactness of class basins; ``ratio = within / between`` (≪ 1: compact, apart)."""

    within: float
    between: float
    ratio: float
    classes: np.ndarray
    class_means: np.ndarray


def basin_compactness(terminal_dirs: ArrayLike, labels: ArrayLike) -> Basins:
    """Within- vs between-class angular spread of terminal directions (Fig. 8 left, "basins").

    With ``μ_c`` the re-normalised mean of the directions ``x̂_i`` of class ``c`` (C ≥ 2 classes):
    ``within = mean_c mean_{i∈c} ∠(x̂_i, μ_c)`` (classes weigh equally),
    ``between = mean_{c<c'} ∠(μ_c, μ_c')``, ``ratio = within / between``; angles in radians.
    """
    d = directions(as_tensor(terminal_dirs, "terminal_dirs")).to("cpu", torch.float64)
    y = np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels)
    if d.ndim != 2 or y.shape != (d.shape[0],):
        raise ValueError(f"terminal_dirs must be (N, D) and labels (N,), got {tuple(d.shape)} and "
                         f"{y.shape}")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"labels must contain at least 2 classes, got {classes.size}")
    masks = [torch.from_numpy(y == c) for c in classes]
    mu = directions(torch.stack([d[m].mean(dim=0) for m in masks]))
    within = float(np.mean([angle_unit(d[m], mu[i]).mean() for i, m in enumerate(masks)]))
    iu = np.triu_indices(classes.size, k=1)
    between = float(angle_unit(mu[iu[0]], mu[iu[1]]).mean())
    return Basins(within=within, between=between, ratio=within / between, classes=classes,
                  class_means=mu.numpy())


# --------------------------------------------------------------------------- perturbation (Fig. 10)


@dataclass(frozen=True)
class Perturbation:
    """An ε-perturbation injected at ``layer`` and followed to layer L (Fig. 10).

    ``clean`` / ``perturbed`` are ``(N, L−layer+1, T, D)`` (index 0 = the injection layer);
    ``direction`` is the unit ``u`` per token ``(N, T, D)``. ``distance[g]`` is the self-correction
    curve: mean ``d_cos(x̂^{(ε)}, x̂)`` over the group's tokens × images per layer. ``sensitivity[g]
    = |ε|⁻¹ d_cos`` at layer L (the paper's scaled sensitivity, Fig. 10B; note ``d_cos ≈ θ²/2`` is
    second order, so it scales with ε) and ``angular_sensitivity[g] = |ε|⁻¹ ∠`` at L (first order:
    it tends to the directional gain as ε → 0).
    """

    layer: int
    eps: float
    direction: np.ndarray
    clean: np.ndarray
    perturbed: np.ndarray
    distance: dict[str, np.ndarray]
    sensitivity: dict[str, float]
    angular_sensitivity: dict[str, float]


def _check_eps(eps: float) -> float:
    finite = isinstance(eps, int | float | np.floating) and math.isfinite(eps)
    if isinstance(eps, bool) or not finite or eps == 0:
        raise ValueError(f"eps must be a finite non-zero number, got {eps!r}")
    return float(eps)


def _unit_direction(direction: ArrayLike | None, tokens: Tensor, seed: int) -> Tensor:
    if direction is None:
        gen = torch.Generator().manual_seed(seed)
        u = torch.randn(tokens.shape, generator=gen, dtype=torch.float64)
    else:
        u = as_tensor(direction, "direction")
        try:
            u = u.expand(tokens.shape)
        except RuntimeError as err:
            raise ValueError(f"direction of shape {tuple(u.shape)} does not broadcast to tokens "
                             f"{tuple(tokens.shape)}") from err
        if bool((torch.linalg.vector_norm(u, dim=-1) == 0).any()):
            raise ValueError("direction must be non-zero for every token")
    return directions(u.to(tokens.device, tokens.dtype))


def perturb(model: nn.Module, tokens: ArrayLike, layer: int, eps: float,
            direction: ArrayLike | None = None, seed: int = 0, *,
            groups: TokenGroups) -> Perturbation:
    """Inject ``ε·u`` into the layer-``layer`` tokens ``(N, T, D)`` and run blocks ``layer+1..L``.

    ``u`` is a unit vector per token: seeded Gaussian directions, or ``direction`` (broadcast to
    ``(N, T, D)``, normalised per token). ε is absolute (not relative to ``‖x_l‖``). The clean and
    perturbed continuations are two separate :func:`~raptor.trajectories.run_layers` calls of the
    same shape, so their difference holds no batch-dependent round-off.
    """
    t = as_tensor(tokens, "tokens")
    if t.ndim != 3:
        raise ValueError(f"tokens must have shape (N, T, D), got ndim = {t.ndim}")
    items = check_groups(groups, t.shape[1])
    eps = _check_eps(eps)
    depth = trajectory_model(model).depth
    if not is_int(layer) or not 0 <= layer <= depth:
        raise ValueError(f"layer must be an integer in [0, L={depth}], got {layer!r}")
    u = _unit_direction(direction, t, seed)
    with torch.no_grad():
        clean = run_layers(model, t, layer)
        pert = run_layers(model, t + eps * u, layer)
    dc, dp = directions(clean), directions(pert)
    dist = {n: v.mean for n, v in per_group(cos_dist_unit(dp, dc), items).items()}
    ang = per_group(angle_unit(dp[:, -1:], dc[:, -1:]), items)
    return Perturbation(
        layer=layer, eps=eps, direction=u.cpu().numpy(), clean=clean.cpu().numpy(),
        perturbed=pert.cpu().numpy(), distance=dist,
        sensitivity={n: float(v[-1]) / abs(eps) for n, v in dist.items()},
        angular_sensitivity={n: float(v.mean[0]) / abs(eps) for n, v in ang.items()})


def image_deviation(p: Perturbation, groups: TokenGroups) -> dict[str, dict[str, np.ndarray]]:
    """Per image and layer after the injection ``(N, L−layer+1)``, means over the group's tokens:
    ``"distance"``, ``d_cos(x̂^{(ε)}, x̂)`` (its mean over images is ``p.distance``), and
    ``"relative"``, the angle ``∠(x̂^{(ε)}_j, x̂_j)`` times ``‖x_j‖ / ‖x_layer‖`` (clean norms):
    the deviation's on-sphere size in units of the state's norm at the injection layer, which
    norm growth alone does not shrink (Fig. 10A)."""
    clean, pert = torch.from_numpy(p.clean), torch.from_numpy(p.perturbed)
    items = check_groups(groups, clean.shape[2])
    dc, dp = directions(clean), directions(pert)
    norms = torch.linalg.vector_norm(clean, dim=-1)
    relative = angle_unit(dp, dc) * norms / norms[:, :1].clamp_min(EPS)
    return {name: {"distance": cos_dist_unit(dp, dc)[:, :, s].mean(2).double().numpy(),
                   "relative": relative[:, :, s].mean(2).double().numpy()}
            for name, s in items}


# --------------------------------------------------------------------------- streaming


@dataclass(frozen=True)
class DynamicsSummary:
    """All streamed metrics; each field equals its batch function on the concatenated images."""

    n_images: int
    norms: dict[str, MeanStd]
    convergence: dict[str, MeanStd]
    speed: dict[str, MeanStd]
    coherence: dict[str, MeanStd]
    ranks: dict[str, UpdateRanks]
    states: dict[str, np.ndarray]
    dmd: dict[str, DMDResult]


class DynamicsAccumulator:
    """Streams norms, γ, angular speed, coherence, update ranks and DMD states over image batches.

    State per group: moments ``O(L)``, the Gram matrices ``Σ M_lᵀ M_l`` ``(L, D, D)`` (exact
    singular values, ~57 MB per group at L = 12, D = 768) and the direction sums ``(L+1, D)`` —
    independent of the number of images. Call :meth:`update` with ``(n, L+1, T, D)`` batches; each
    call needs about 4–6 times the batch's own size in temporaries (directions, updates).
    """

    def __init__(self, groups: TokenGroups) -> None:
        self.groups = groups
        self._shape: tuple[int, ...] | None = None
        self._n = 0
        self._moments: dict[str, dict[str, Moments]] = {}
        self.gram: dict[str, np.ndarray] = {}
        self._sums: dict[str, np.ndarray] = {}

    def update(self, traj_batch: ArrayLike) -> None:
        x, items = check_traj(traj_batch, self.groups)
        if self._shape is None:
            self._shape = tuple(x.shape[1:])
            self._moments = {k: {n: Moments() for n, _ in items}
                             for k in ("norms", "convergence", "speed", "coherence")}
            self.gram = {n: np.zeros((x.shape[1] - 1, x.shape[3], x.shape[3])) for n, _ in items}
            self._sums = {n: np.zeros((x.shape[1], x.shape[3])) for n, _ in items}
        elif tuple(x.shape[1:]) != self._shape:
            raise ValueError(f"traj_batch must have shape (n, {', '.join(map(str, self._shape))}) "
                             f"like the first batch, got {tuple(x.shape)}")
        d = directions(x)
        upd = updates(d)
        values = {"norms": torch.linalg.vector_norm(x, dim=-1),
                  "convergence": _gamma(d),
                  "speed": angle_unit(d[:, 1:], d[:, :-1])}
        for n, s in items:
            for k, v in values.items():
                self._moments[k][n].add(token_rows(v, s))
            self._moments["coherence"][n].add(coherence_rows(upd, s))
            self.gram[n] += gram(upd, s)
            self._sums[n] += d[:, :, s].sum(dim=(0, 2)).to("cpu", torch.float64).numpy()
        self._n += x.shape[0]

    def result(self, dmd_rank: int = DMD_RANK) -> DynamicsSummary:
        check_rank(dmd_rank)
        if self._shape is None:
            raise ValueError("no batch seen: call update() before result()")
        m = {k: {n: v.result() for n, v in d.items()} for k, d in self._moments.items()}
        states = {n: normalise_rows(v) for n, v in self._sums.items()}
        return DynamicsSummary(
            n_images=self._n, norms=m["norms"], convergence=m["convergence"], speed=m["speed"],
            coherence=m["coherence"], ranks={n: ranks_from_gram(g) for n, g in self.gram.items()},
            states=states, dmd={n: dmd(v.T, dmd_rank) for n, v in states.items()})
