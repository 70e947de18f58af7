"""Dynamical interpretability: ViT depth as a flow on the unit sphere (paper §4, Figs. 8–12).

Every metric reads a trajectory ``traj`` of shape ``(N, L+1, T, D)`` (N images; layer 0 = the
embedding, layer ``l`` = the output of block ``l``; T tokens in timm order; width D), as a torch
tensor or a numpy array, together with :class:`~raptor.trajectories.TokenGroups`. Directions are
``x̂ = x / max(‖x‖, eps)`` on ``S^{D-1}``. Per-group statistics pool the group's tokens over all
images and are returned as numpy arrays in small frozen dataclasses, keyed by group name.

Elementwise work runs in the trajectory's dtype and device; every sum is accumulated in float64.
:class:`DynamicsAccumulator` streams the per-image metrics over batches of images with memory
independent of N; the batch functions are its one-batch case (same kernels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from raptor.trajectories import TokenGroups, num_layers, run_layers

ArrayLike = Tensor | np.ndarray
EPS = 1e-12


@dataclass(frozen=True)
class MeanStd:
    """Per-layer mean and standard deviation (ddof = 0) of a statistic over ``count`` samples."""

    mean: np.ndarray
    std: np.ndarray
    count: int

    @property
    def var(self) -> np.ndarray:
        return self.std**2


class _Moments:
    """Running per-column mean and squared deviations, merged batch by batch (Chan et al. 1979)."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2 = 0, np.zeros(()), np.zeros(())

    def add(self, rows: Tensor) -> _Moments:
        v = rows.detach().to("cpu", torch.float64).numpy()
        n, mean = v.shape[0], v.mean(axis=0)
        delta, total = mean - self.mean, self.count + n
        self.m2 = self.m2 + ((v - mean) ** 2).sum(axis=0) + delta**2 * self.count * n / total
        self.mean = self.mean + delta * n / total
        self.count = total
        return self

    def result(self) -> MeanStd:
        return MeanStd(mean=self.mean, std=np.sqrt(self.m2 / self.count), count=self.count)


# --------------------------------------------------------------------------- input checks


def _as_tensor(x: ArrayLike, name: str) -> Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a real floating dtype, got {x.dtype}")
    return x.detach()


def _check_groups(groups: TokenGroups, n_tokens: int) -> list[tuple[str, slice]]:
    if not callable(getattr(groups, "items", None)):
        raise TypeError(f"groups must be a TokenGroups, got {type(groups).__name__}")
    items = list(groups.items())
    if not items:
        raise ValueError("groups must contain at least one non-empty token group")
    for name, s in items:
        if s.step not in (None, 1) or not 0 <= s.start < s.stop <= n_tokens:
            raise ValueError(f"groups.{name} = {s} does not fit the T = {n_tokens} tokens of the "
                             "input (need 0 <= start < stop <= T, step 1)")
    return items


def _check_traj(traj: ArrayLike, groups: TokenGroups) -> tuple[Tensor, list[tuple[str, slice]]]:
    x = _as_tensor(traj, "traj")
    if x.ndim != 4:
        raise ValueError(f"traj must have shape (N, L+1, T, D), got ndim = {x.ndim}")
    if x.shape[0] < 1 or x.shape[1] < 2 or x.shape[3] < 1:
        raise ValueError(f"traj needs N >= 1 images, L+1 >= 2 layers and D >= 1, got shape "
                         f"{tuple(x.shape)}")
    return x, _check_groups(groups, x.shape[2])


def _is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _check_rank(r: int) -> None:
    if not _is_int(r) or r < 1:
        raise ValueError(f"r (DMD rank) must be an integer >= 1, got {r!r}")


# --------------------------------------------------------------------------- geometry


def directions(x: ArrayLike, eps: float = EPS) -> ArrayLike:
    """Directions ``x̂ = x / max(‖x‖₂, eps)`` along the last axis (§4, "normalize states").

    Returns the input's type (tensor or array); a zero vector maps to zero.
    """
    t = _as_tensor(x, "x")
    out = t / torch.linalg.vector_norm(t, dim=-1, keepdim=True).clamp_min(eps)
    return out.numpy() if isinstance(x, np.ndarray) else out


def _angle_unit(u: Tensor, v: Tensor) -> Tensor:
    # 2·atan2(‖u−v‖, ‖u+v‖) = arccos⟨u, v⟩ for unit u, v, without arccos's loss near 0 and π.
    return 2 * torch.atan2(torch.linalg.vector_norm(u - v, dim=-1),
                           torch.linalg.vector_norm(u + v, dim=-1))


def _cos_dist_unit(u: Tensor, v: Tensor) -> Tensor:
    # d_cos = 1 − ⟨u, v⟩ = ‖u − v‖² / 2 for unit u, v: exactly 0 when u == v.
    return torch.linalg.vector_norm(u - v, dim=-1) ** 2 / 2


def angle(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Angle ``∠(a, b) = arccos⟨â, b̂⟩`` along the last axis, in radians.

    Computed as ``2·atan2(‖â − b̂‖, ‖â + b̂‖)``, which keeps full relative accuracy for angles
    near 0 and near π where ``arccos`` loses half the digits.
    """
    u, v = directions(_as_tensor(a, "a")), directions(_as_tensor(b, "b"))
    return _angle_unit(u, v).cpu().numpy()


def _token_rows(values: Tensor, s: slice) -> Tensor:
    """``(N, K, T)`` per-token values → ``(N·T_g, K)`` rows for the tokens of group ``s``."""
    return values[:, :, s].transpose(1, 2).reshape(-1, values.shape[1])


def _per_group(values: Tensor, items: list[tuple[str, slice]]) -> dict[str, MeanStd]:
    return {name: _Moments().add(_token_rows(values, s)).result() for name, s in items}


def _updates(d: Tensor) -> Tensor:
    return d[:, 1:] - d[:, :-1]


def feature_norms(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Feature norms ``‖x_l‖`` per layer: mean and std over the group's tokens × images (Fig. 9).

    Returns ``{group: MeanStd}`` with arrays of shape ``(L+1,)``.
    """
    x, items = _check_traj(traj, groups)
    return _per_group(torch.linalg.vector_norm(x, dim=-1), items)


def directional_convergence(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Directional convergence ``γ_l = ⟨x̂_l, x̂_L⟩`` per token, pooled per group (Fig. 8 right).

    Computed as ``1 − ‖x̂_l − x̂_L‖²/2`` so that ``γ_L = 1`` exactly. Arrays of shape ``(L+1,)``.
    """
    x, items = _check_traj(traj, groups)
    d = directions(x)
    return _per_group(1 - _cos_dist_unit(d, d[:, -1:]), items)


def angular_speed(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Angular speed ``s_l = arccos⟨x̂_{l+1}, x̂_l⟩`` (radians), mean and spread (Fig. 11).

    ``s_l`` is the angle travelled by a token from layer ``l`` to ``l+1`` (computed with the
    accurate formula of :func:`angle`); ``MeanStd.var`` is the variance the figure shows.
    Arrays of shape ``(L,)``.
    """
    x, items = _check_traj(traj, groups)
    d = directions(x)
    return _per_group(_angle_unit(d[:, 1:], d[:, :-1]), items)


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
    x, items = _check_traj(traj, groups)
    if group not in dict(items):
        raise ValueError(f"group must be one of {[n for n, _ in items]}, got {group!r}")
    pts = _group_direction(x, dict(items)[group]).to("cpu", torch.float64).numpy()
    n, k1, dim = pts.shape
    if not _is_int(n_components) or not 1 <= n_components <= min(n * k1, dim):
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
    d = directions(_as_tensor(terminal_dirs, "terminal_dirs")).to("cpu", torch.float64)
    y = np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels)
    if d.ndim != 2 or y.shape != (d.shape[0],):
        raise ValueError(f"terminal_dirs must be (N, D) and labels (N,), got {tuple(d.shape)} and "
                         f"{y.shape}")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"labels must contain at least 2 classes, got {classes.size}")
    masks = [torch.from_numpy(y == c) for c in classes]
    mu = directions(torch.stack([d[m].mean(dim=0) for m in masks]))
    within = float(np.mean([_angle_unit(d[m], mu[i]).mean() for i, m in enumerate(masks)]))
    iu = np.triu_indices(classes.size, k=1)
    between = float(_angle_unit(mu[iu[0]], mu[iu[1]]).mean())
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
        u = _as_tensor(direction, "direction")
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
    t = _as_tensor(tokens, "tokens")
    if t.ndim != 3:
        raise ValueError(f"tokens must have shape (N, T, D), got ndim = {t.ndim}")
    items = _check_groups(groups, t.shape[1])
    eps = _check_eps(eps)
    depth = num_layers(model)
    if not _is_int(layer) or not 0 <= layer <= depth:
        raise ValueError(f"layer must be an integer in [0, L={depth}], got {layer!r}")
    u = _unit_direction(direction, t, seed)
    with torch.no_grad():
        clean = run_layers(model, t, layer)
        pert = run_layers(model, t + eps * u, layer)
    dc, dp = directions(clean), directions(pert)
    dist = {n: v.mean for n, v in _per_group(_cos_dist_unit(dp, dc), items).items()}
    ang = _per_group(_angle_unit(dp[:, -1:], dc[:, -1:]), items)
    return Perturbation(
        layer=layer, eps=eps, direction=u.cpu().numpy(), clean=clean.cpu().numpy(),
        perturbed=pert.cpu().numpy(), distance=dist,
        sensitivity={n: float(v[-1]) / abs(eps) for n, v in dist.items()},
        angular_sensitivity={n: float(v.mean[0]) / abs(eps) for n, v in ang.items()})


@dataclass(frozen=True)
class SensitivityProfile:
    """Scaled sensitivities per injection layer: ``{group: (len(layers),)}`` (Fig. 10B)."""

    layers: np.ndarray
    eps: float
    sensitivity: dict[str, np.ndarray]
    angular_sensitivity: dict[str, np.ndarray]


def sensitivity_profile(model: nn.Module, traj: ArrayLike, groups: TokenGroups, eps: float,
                        layers: Sequence[int] | None = None, seed: int = 0
                        ) -> SensitivityProfile:
    """:func:`perturb` from ``traj[:, l]`` at each injection layer l in ``layers`` (default all)."""
    x, _ = _check_traj(traj, groups)
    eps = _check_eps(eps)
    depth = x.shape[1] - 1
    layers = list(range(depth + 1)) if layers is None else list(layers)
    if not layers or any(not _is_int(l) or not 0 <= l <= depth for l in layers):
        raise ValueError(f"layers must be a non-empty list of integers in [0, L={depth}], "
                         f"got {layers!r}")
    if num_layers(model) != depth:
        raise ValueError(f"traj has L = {depth} but the model has {num_layers(model)} layers")
    runs = [perturb(model, x[:, int(l)], int(l), eps, seed=seed, groups=groups) for l in layers]
    names = list(runs[0].sensitivity)
    return SensitivityProfile(
        layers=np.asarray(layers), eps=eps,
        sensitivity={n: np.array([p.sensitivity[n] for p in runs]) for n in names},
        angular_sensitivity={n: np.array([p.angular_sensitivity[n] for p in runs]) for n in names})


# --------------------------------------------------------------------------- low rank (Fig. 12)


def angular_updates(traj: ArrayLike) -> Tensor:
    """Token-wise angular updates ``Δ_l = x̂_{l+1} − x̂_l``, shape ``(N, L, T, D)`` (Fig. 12).

    The update of a token's direction on the sphere (chord vector, ``‖Δ_l‖ = 2 sin(s_l / 2)``).
    """
    x = _as_tensor(traj, "traj")
    if x.ndim != 4:
        raise ValueError(f"traj must have shape (N, L+1, T, D), got ndim = {x.ndim}")
    return _updates(directions(x))


def _singular_values(m: ArrayLike) -> np.ndarray:
    a = _as_tensor(m, "M")
    if a.ndim != 2:
        raise ValueError(f"M must be a matrix (2-D), got ndim = {a.ndim}")
    return np.linalg.svd(a.to("cpu", torch.float64).numpy(), compute_uv=False)


def _stable_from_sv(sv: np.ndarray) -> float:
    return float((sv**2).sum() / sv.max() ** 2) if sv.size and sv.max() > 0 else 0.0


def _effective_from_sv(sv: np.ndarray) -> float:
    if not sv.size or sv.sum() <= 0:
        return 0.0
    p = sv[sv > 0] / sv.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def stable_rank(m: ArrayLike) -> float:
    """Stable rank ``‖M‖_F² / ‖M‖_2² = Σσ_i² / σ_1²`` ∈ [1, rank M]; 0 for M = 0 (Fig. 12 left)."""
    return _stable_from_sv(_singular_values(m))


def effective_rank(m: ArrayLike) -> float:
    """Effective rank ``exp(−Σ p_i log p_i)``, ``p_i = σ_i / Σσ`` (Roy & Vetterli 2007).

    In [1, rank M]; 0 for M = 0 (Fig. 12 left).
    """
    return _effective_from_sv(_singular_values(m))


@dataclass(frozen=True)
class UpdateRanks:
    """Per-layer ranks ``(L,)`` of the update matrices ``M_l``; their singular values ``(L, D)``."""

    stable: np.ndarray
    effective: np.ndarray
    singular_values: np.ndarray


def _gram(upd: Tensor, s: slice) -> np.ndarray:
    """``Σ M_lᵀ M_l`` per layer ``(L, D, D)`` in float64, rows of ``M_l`` = the group's updates."""
    return np.stack([(m.T @ m).cpu().numpy() for m in
                     (upd[:, l, s].reshape(-1, upd.shape[-1]).to(torch.float64)
                      for l in range(upd.shape[1]))])


def _ranks_from_gram(gram: np.ndarray) -> UpdateRanks:
    # σ_i = sqrt(eig(MᵀM)): exact in exact arithmetic, and small σ only touch the entropy slightly.
    sv = np.sqrt(np.clip(np.linalg.eigvalsh(gram)[:, ::-1], 0, None))
    return UpdateRanks(stable=np.array([_stable_from_sv(s) for s in sv]),
                       effective=np.array([_effective_from_sv(s) for s in sv]),
                       singular_values=sv)


def update_ranks(traj: ArrayLike, groups: TokenGroups) -> dict[str, UpdateRanks]:
    """Stable and effective rank of ``M_l`` (rows: the group's ``Δ_l``, tokens × images), Fig. 12.

    ``M_l`` is not centred. Singular values come from the Gram matrix ``M_lᵀ M_l`` (D × D), which
    is also how :class:`DynamicsAccumulator` streams them.
    """
    x, items = _check_traj(traj, groups)
    upd = _updates(directions(x))
    return {name: _ranks_from_gram(_gram(upd, s)) for name, s in items}


def _coherence_rows(upd: Tensor, s: slice, eps: float = EPS) -> Tensor:
    return torch.linalg.vector_norm(directions(upd[:, :, s], eps).mean(dim=2), dim=-1)


def coherence(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Coherence ``κ_l = ‖mean_t Δ_l^t / ‖Δ_l^t‖‖`` over a group's tokens t (Fig. 12 middle).

    Mean and std over images, shape ``(L,)``. ``κ = 1`` when all tokens move the same way, ``≈
    1/√n`` for n independent isotropic updates; trivially 1 for a one-token group (cls). A zero
    update counts as the zero vector.
    """
    x, items = _check_traj(traj, groups)
    upd = _updates(directions(x))
    return {name: _Moments().add(_coherence_rows(upd, s)).result() for name, s in items}


# ------------------------------------------------------------------ exact DMD (Fig. 12 right)


@dataclass(frozen=True)
class DMDResult:
    """Exact DMD of ``x_{l+1} ≈ A x_l``: ``rank`` eigenvalues, modes ``(D, rank)``, σ of ``X1``."""

    eigenvalues: np.ndarray
    modes: np.ndarray
    singular_values: np.ndarray
    rank: int

    @property
    def spectral_radius(self) -> float:
        return float(np.abs(self.eigenvalues).max())

    @property
    def median_modulus(self) -> float:
        return float(np.median(np.abs(self.eigenvalues)))


def dmd(X: ArrayLike, r: int) -> DMDResult:
    """Exact DMD (Tu et al. 2014; paper App. D) of snapshots ``X`` ``(D, L+1)``, columns x_0..x_L.

    ``X1 = X[:, :-1] = U Σ V*`` truncated to rank r, ``Ã = U* X2 V Σ⁻¹``, ``Ã W = W Λ``, exact modes
    ``Φ = X2 V Σ⁻¹ W``. ``r`` above the numerical rank of ``X1`` (σ_i > σ_1 · max(shape) · ε_mach)
    is clipped to it, so no Σ⁻¹ blows up; ``rank`` reports the rank used. ``singular_values`` is the
    full spectrum of ``X1``.
    """
    _check_rank(r)
    a = np.asarray(X.detach().cpu() if isinstance(X, Tensor) else X)
    if a.ndim != 2 or a.shape[1] < 2 or not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"X must be a real (D, L+1) snapshot matrix with L+1 >= 2, got shape "
                         f"{a.shape}, dtype {a.dtype}")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError("X must be finite")
    x1, x2 = a[:, :-1], a[:, 1:]
    u, s, vh = np.linalg.svd(x1, full_matrices=False)
    k = min(r, int((s > s[0] * max(x1.shape) * np.finfo(np.float64).eps).sum()))
    if k == 0:
        raise ValueError("X[:, :-1] is zero: there is no dynamics to fit")
    b = x2 @ vh[:k].conj().T / s[:k]
    lam, w = np.linalg.eig(u[:, :k].conj().T @ b)
    return DMDResult(eigenvalues=lam, modes=b @ w, singular_values=s, rank=k)


def group_states(traj: ArrayLike, groups: TokenGroups) -> dict[str, np.ndarray]:
    """Group-averaged ℓ2-normalised states ``x̄_l`` ``(L+1, D)``: token directions averaged over the
    group's tokens and all images, re-normalised (the DMD input of Fig. 12 right)."""
    x, items = _check_traj(traj, groups)
    d = directions(x)
    return {n: _normalise_rows(d[:, :, s].sum(dim=(0, 2)).to("cpu", torch.float64).numpy())
            for n, s in items}


def _normalise_rows(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), EPS)


def dmd_by_group(traj: ArrayLike, groups: TokenGroups, r: int = 10) -> dict[str, DMDResult]:
    """:func:`dmd` of each group's states :func:`group_states` (snapshots ``X = x̄ᵀ``), rank r."""
    _check_rank(r)
    return {n: dmd(states.T, r) for n, states in group_states(traj, groups).items()}


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
        self._moments: dict[str, dict[str, _Moments]] = {}
        self._gram: dict[str, np.ndarray] = {}
        self._sums: dict[str, np.ndarray] = {}

    def update(self, traj_batch: ArrayLike) -> None:
        x, items = _check_traj(traj_batch, self.groups)
        if self._shape is None:
            self._shape = tuple(x.shape[1:])
            self._moments = {k: {n: _Moments() for n, _ in items}
                             for k in ("norms", "convergence", "speed", "coherence")}
            self._gram = {n: np.zeros((x.shape[1] - 1, x.shape[3], x.shape[3])) for n, _ in items}
            self._sums = {n: np.zeros((x.shape[1], x.shape[3])) for n, _ in items}
        elif tuple(x.shape[1:]) != self._shape:
            raise ValueError(f"traj_batch must have shape (n, {', '.join(map(str, self._shape))}) "
                             f"like the first batch, got {tuple(x.shape)}")
        d = directions(x)
        upd = _updates(d)
        values = {"norms": torch.linalg.vector_norm(x, dim=-1),
                  "convergence": 1 - _cos_dist_unit(d, d[:, -1:]),
                  "speed": _angle_unit(d[:, 1:], d[:, :-1])}
        for n, s in items:
            for k, v in values.items():
                self._moments[k][n].add(_token_rows(v, s))
            self._moments["coherence"][n].add(_coherence_rows(upd, s))
            self._gram[n] += _gram(upd, s)
            self._sums[n] += d[:, :, s].sum(dim=(0, 2)).to("cpu", torch.float64).numpy()
        self._n += x.shape[0]

    def result(self, dmd_rank: int = 10) -> DynamicsSummary:
        _check_rank(dmd_rank)
        if self._shape is None:
            raise ValueError("no batch seen: call update() before result()")
        m = {k: {n: v.result() for n, v in d.items()} for k, d in self._moments.items()}
        states = {n: _normalise_rows(v) for n, v in self._sums.items()}
        return DynamicsSummary(
            n_images=self._n, norms=m["norms"], convergence=m["convergence"], speed=m["speed"],
            coherence=m["coherence"], ranks={n: _ranks_from_gram(g) for n, g in self._gram.items()},
            states=states, dmd={n: dmd(v.T, dmd_rank) for n, v in states.items()})
