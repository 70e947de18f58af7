"""Directions on the unit sphere and per-group statistics of trajectories (paper §4).

The building blocks of :mod:`raptor.dynamics` and :mod:`raptor.low_rank`. A trajectory ``traj``
has shape ``(N, L+1, T, D)`` (N images; layer 0 = the embedding, layer ``l`` = the output of
block ``l``; T tokens in timm order; width D), as a torch tensor or a numpy array, read with
:class:`~raptor.trajectories.TokenGroups`. Directions are ``x̂ = x / max(‖x‖, eps)`` on
``S^{D-1}``. Per-group statistics pool the group's tokens over all images. Elementwise work runs
in the input's dtype and device; every sum is accumulated in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from raptor.trajectories import TokenGroups

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


class Moments:
    """Running per-column mean and squared deviations, merged batch by batch (Chan et al. 1979)."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2 = 0, np.zeros(()), np.zeros(())

    def add(self, rows: Tensor) -> Moments:
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


def as_tensor(x: ArrayLike, name: str) -> Tensor:
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a real floating dtype, got {x.dtype}")
    return x.detach()


def check_groups(groups: TokenGroups, n_tokens: int) -> list[tuple[str, slice]]:
    if not isinstance(groups, TokenGroups):
        raise TypeError(f"groups must be a TokenGroups, got {type(groups).__name__}")
    items = list(groups.items())
    if not items:
        raise ValueError("groups must contain at least one non-empty token group")
    for name, s in items:
        if s.step not in (None, 1) or not 0 <= s.start < s.stop <= n_tokens:
            raise ValueError(f"groups.{name} = {s} does not fit the T = {n_tokens} tokens of the "
                             "input (need 0 <= start < stop <= T, step 1)")
    return items


def check_traj(traj: ArrayLike, groups: TokenGroups) -> tuple[Tensor, list[tuple[str, slice]]]:
    x = as_tensor(traj, "traj")
    if x.ndim != 4:
        raise ValueError(f"traj must have shape (N, L+1, T, D), got ndim = {x.ndim}")
    if x.shape[0] < 1 or x.shape[1] < 2 or x.shape[3] < 1:
        raise ValueError(f"traj needs N >= 1 images, L+1 >= 2 layers and D >= 1, got shape "
                         f"{tuple(x.shape)}")
    return x, check_groups(groups, x.shape[2])


def is_int(v: object) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)



# --------------------------------------------------------------------------- geometry


def directions(x: ArrayLike, eps: float = EPS) -> ArrayLike:
    """Directions ``x̂ = x / max(‖x‖₂, eps)`` along the last axis (§4, "normalize states").

    Returns the input's type (tensor or array); a zero vector maps to zero.
    """
    t = as_tensor(x, "x")
    out = t / torch.linalg.vector_norm(t, dim=-1, keepdim=True).clamp_min(eps)
    return out.numpy() if isinstance(x, np.ndarray) else out


def angle_unit(u: Tensor, v: Tensor) -> Tensor:
    # 2·atan2(‖u−v‖, ‖u+v‖) = arccos⟨u, v⟩ for unit u, v, without arccos's loss near 0 and π.
    return 2 * torch.atan2(torch.linalg.vector_norm(u - v, dim=-1),
                           torch.linalg.vector_norm(u + v, dim=-1))


def cos_dist_unit(u: Tensor, v: Tensor) -> Tensor:
    # d_cos = 1 − ⟨u, v⟩ = ‖u − v‖² / 2 for unit u, v: exactly 0 when u == v.
    return torch.linalg.vector_norm(u - v, dim=-1) ** 2 / 2


def angle(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Angle ``∠(a, b) = arccos⟨â, b̂⟩`` along the last axis, in radians.

    Computed as ``2·atan2(‖â − b̂‖, ‖â + b̂‖)``, which keeps full relative accuracy for angles
    near 0 and near π where ``arccos`` loses half the digits.
    """
    u, v = directions(as_tensor(a, "a")), directions(as_tensor(b, "b"))
    return angle_unit(u, v).cpu().numpy()


def token_rows(values: Tensor, s: slice) -> Tensor:
    """``(N, K, T)`` per-token values → ``(N·T_g, K)`` rows for the tokens of group ``s``."""
    return values[:, :, s].transpose(1, 2).reshape(-1, values.shape[1])


def per_group(values: Tensor, items: list[tuple[str, slice]]) -> dict[str, MeanStd]:
    return {name: Moments().add(token_rows(values, s)).result() for name, s in items}


def updates(d: Tensor) -> Tensor:
    return d[:, 1:] - d[:, :-1]
