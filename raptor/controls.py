"""Synthetic cases with the answer built in, for the phase statistics of C1 (paper §2, Fig. 1).

Positive controls are residual streams of 12 blocks with true phases 1–4 | 5–8 | 9–12
(:data:`PHASES`) of three kinds; negative controls have no phases. A test of block structure
must pass every positive control and fail every negative one (``tests/test_controls.py``; the
book shows them beside its teachers). Streams are ``(N, L+1, 1, D)`` trajectories of one cls
token (layer 0 the embedding, as :mod:`raptor.trajectories` gives them); matrix controls are
per-image phase matrices ``(N, L, L)`` with image noise.

* ``orthogonal jumps``: the stream stays put within a phase (small noise) and jumps orthogonally
  to itself, by a growing length, at each phase's start: the textbook block matrix.
* ``jumps along the state``: the same jumps with 30% of their length along the state.
* ``shared direction``: within each phase every block adds the same direction (per image) with
  noise, 3× longer each phase, so a phase's direction takes over the state.
* ``random walk``, ``growing random walk``: uncorrelated updates of equal norms, or norms growing
  by 25% a block.
* ``Toeplitz``: a stationary decay ``exp(−0.15 |l − m|)``; ``smooth decay``: a non-stationary one,
  ``1 / (1 + 2 |log l − log m|)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from raptor.structure import image_growth_nulls, image_phase_matrices
from raptor.trajectories import TokenGroups

L, DIM = 12, 256
PHASES = ((0, 4), (4, 8), (8, 12))  # the true phases, 0-based half-open over blocks 1..12
CLS = TokenGroups.from_counts(1, 0, 0)


def _starts() -> list[int]:
    return [start for start, _ in PHASES]


def _phase_of(block: int) -> int:
    return next(i for i, (start, stop) in enumerate(PHASES) if start <= block < stop)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def jump_stream(n: int, *, along: float = 0.0, seed: int = 0) -> torch.Tensor:
    """Phases as jumps: at each phase's start the state jumps by ``1.5 (phase + 1) ‖x‖`` in a
    random direction with the share ``along`` of its length along the state, the rest orthogonal
    to it; within a phase each block adds noise of 5% of the embedding's norm."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
    states = [x]
    for block in range(L):
        x = x + 0.05 * torch.randn(n, DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
        if block in _starts():
            u, x_hat = torch.randn(n, DIM, generator=g, dtype=torch.float64), _unit(x)
            u_perp = _unit(u - (u * x_hat).sum(-1, keepdim=True) * x_hat)
            jump = along * x_hat + (1 - along ** 2) ** 0.5 * u_perp
            x = x + 1.5 * (_phase_of(block) + 1) * x.norm(dim=-1, keepdim=True) * jump
        states.append(x)
    return torch.stack(states, dim=1)[:, :, None]


def shared_direction_stream(n: int, *, growth: float = 3.0, noise: float = 0.3,
                            seed: int = 0) -> torch.Tensor:
    """Phases as shared directions: every block of phase ``p`` adds ``growth^p (d_p + noise·ε)``,
    ``d_p`` a random direction per image and phase, ``ε`` fresh noise per block."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
    directions = torch.randn(n, len(PHASES), DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
    states = [x]
    for block in range(L):
        p = _phase_of(block)
        eps = torch.randn(n, DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
        x = x + growth ** p * (directions[:, p] + noise * eps)
        states.append(x)
    return torch.stack(states, dim=1)[:, :, None]


def random_walk_stream(n: int, *, growth: float = 1.0, seed: int = 0) -> torch.Tensor:
    """No phases: block ``l`` adds an uncorrelated update of expected norm ``growth^l``."""
    g = torch.Generator().manual_seed(seed)
    steps = torch.randn(n, L + 1, DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
    steps[:, 1:] *= growth ** torch.arange(L, dtype=torch.float64)[None, :, None]
    return steps.cumsum(dim=1)[:, :, None]


def _noisy(S: np.ndarray, n: int, noise: float, seed: int) -> np.ndarray:
    x = S + np.random.default_rng(seed).normal(0, noise, (n, *S.shape))
    return (x + x.transpose(0, 2, 1)) / 2


def toeplitz_images(n: int, *, noise: float = 0.1, seed: int = 0) -> np.ndarray:
    """No phases: ``exp(−0.15 |l − m|)`` with symmetric Gaussian noise per image."""
    layer = np.arange(1, L + 1)
    return _noisy(np.exp(-0.15 * np.abs(layer[:, None] - layer[None, :])), n, noise, seed)


def smooth_decay_images(n: int, *, noise: float = 0.1, seed: int = 0) -> np.ndarray:
    """No phases: ``1 / (1 + 2 |log l − log m|)``, outside the warped-decay family's ``exp``
    shapes yet smooth, with symmetric Gaussian noise per image."""
    g = np.log(np.arange(1, L + 1))
    return _noisy(1 / (1 + 2 * np.abs(g[:, None] - g[None, :])), n, noise, seed)


Case = tuple[np.ndarray, np.ndarray | None]  # per-image matrices and their random-walk nulls


def _stream_case(make: Callable[[int, int], torch.Tensor]) -> Callable[[int, int], Case]:
    def case(n: int, seed: int) -> Case:
        traj = make(n, seed)
        return image_phase_matrices(traj, CLS), image_growth_nulls(traj, CLS)
    return case


#: Every control by name: ``(has phases, case(n, seed))``.
CONTROLS: dict[str, tuple[bool, Callable[[int, int], Case]]] = {
    "orthogonal jumps": (True, _stream_case(lambda n, s: jump_stream(n, seed=s))),
    "jumps along the state": (True, _stream_case(lambda n, s: jump_stream(n, along=0.3, seed=s))),
    "shared direction": (True, _stream_case(lambda n, s: shared_direction_stream(n, seed=s))),
    "random walk": (False, _stream_case(lambda n, s: random_walk_stream(n, seed=s))),
    "growing random walk": (False, _stream_case(
        lambda n, s: random_walk_stream(n, growth=1.25, seed=s))),
    "Toeplitz": (False, lambda n, s: (toeplitz_images(n, seed=s), None)),
    "smooth decay": (False, lambda n, s: (smooth_decay_images(n, seed=s), None)),
}


def control(name: str, n: int = 200, seed: int = 0) -> Case:
    """The control ``name`` of :data:`CONTROLS` on ``n`` images."""
    if name not in CONTROLS:
        raise ValueError(f"unknown control {name!r}; valid: {', '.join(CONTROLS)}")
    return CONTROLS[name][1](n, seed)
