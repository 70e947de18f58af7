"""Low-rank structure of the flow (paper §4, Fig. 12, App. D): ranks and coherence of the update
matrices ``M_l`` (rows: a group's angular updates ``Δ_l = x̂_{l+1} − x̂_l``, tokens × images),
from their Gram matrices ``M_lᵀ M_l`` as :class:`raptor.dynamics.DynamicsAccumulator` streams
them, and exact DMD.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from raptor.paper import DMD_RANK
from raptor.sphere import (EPS, ArrayLike, MeanStd, Moments, as_tensor, check_traj, directions,
                           is_int, updates)
from raptor.trajectories import TokenGroups


def check_rank(r: int) -> None:
    if not is_int(r) or r < 1:
        raise ValueError(f"r (DMD rank) must be an integer >= 1, got {r!r}")


def _singular_values(m: ArrayLike) -> np.ndarray:
    a = as_tensor(m, "M")
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


def gram(upd: Tensor, s: slice) -> np.ndarray:
    """``Σ M_lᵀ M_l`` per layer ``(L, D, D)`` in float64, rows of ``M_l`` = the group's updates."""
    return np.stack([(m.T @ m).cpu().numpy() for m in
                     (upd[:, l, s].reshape(-1, upd.shape[-1]).to(torch.float64)
                      for l in range(upd.shape[1]))])


def ranks_from_gram(gram: np.ndarray) -> UpdateRanks:
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
    x, items = check_traj(traj, groups)
    upd = updates(directions(x))
    return {name: ranks_from_gram(gram(upd, s)) for name, s in items}


def coherence_rows(upd: Tensor, s: slice, eps: float = EPS) -> Tensor:
    return torch.linalg.vector_norm(directions(upd[:, :, s], eps).mean(dim=2), dim=-1)


def coherence(traj: ArrayLike, groups: TokenGroups) -> dict[str, MeanStd]:
    """Coherence ``κ_l = ‖mean_t Δ_l^t / ‖Δ_l^t‖‖`` over a group's tokens t (Fig. 12 middle).

    Mean and std over images, shape ``(L,)``. ``κ = 1`` when all tokens move the same way, ``≈
    1/√n`` for n independent isotropic updates; trivially 1 for a one-token group (cls). A zero
    update counts as the zero vector.
    """
    x, items = check_traj(traj, groups)
    upd = updates(directions(x))
    return {name: Moments().add(coherence_rows(upd, s)).result() for name, s in items}


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
    check_rank(r)
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
    x, items = check_traj(traj, groups)
    d = directions(x)
    return {n: normalise_rows(d[:, :, s].sum(dim=(0, 2)).to("cpu", torch.float64).numpy())
            for n, s in items}


def normalise_rows(a: np.ndarray) -> np.ndarray:
    return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), EPS)


def dmd_by_group(traj: ArrayLike, groups: TokenGroups, r: int = DMD_RANK) -> dict[str, DMDResult]:
    """:func:`dmd` of each group's states :func:`group_states` (snapshots ``X = x̄ᵀ``), rank r."""
    check_rank(r)
    return {n: dmd(states.T, r) for n, states in group_states(traj, groups).items()}
