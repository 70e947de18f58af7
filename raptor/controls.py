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
* ``smooth rotation``: the state turns at a constant angle a block in a plane of its own (per
  image), with noise: no phases.

Phases of realistic strength (issue 44) are steps planted into smooth decays: per-image matrices
``S = exp(−|G(l) − G(m)|) · (1 − step)^b(l, m)``, ``G`` one of :data:`DECAYS` and ``b`` the number
of phase boundaries between layers l and m, so each boundary drops similarity by the fraction
``step`` below the decay (:func:`decay_images`). The positives put the unequal and end-placed
phases of :data:`REALISTIC_PHASES` on the stationary, random-walk and accelerating decays at
:data:`STEP`; the negatives are the decays without a step (accelerating, decelerating, warped at
one end) and a *gradual plateau*, whose decay speeds up over several layers. A *plateau* — slow for
six layers, fast after, the rate changing at one layer — has no step, yet it is a phase by the
paper's description (§4: "near-stationary behavior that is reset at phase transitions"): a
positive by decision (:mod:`raptor.phase_test`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from itertools import pairwise

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


def rotation_stream(n: int, *, speed: float = 0.2, noise: float = 0.2,
                    seed: int = 0) -> torch.Tensor:
    """No phases: the state turns by ``speed`` radians a block in a random plane per image,
    its norm growing by 10% a block, with isotropic noise of ``noise`` times the norm."""
    g = torch.Generator().manual_seed(seed)
    u, v = _unit(torch.randn(2, n, DIM, generator=g, dtype=torch.float64))
    v = _unit(v - (u * v).sum(-1, keepdim=True) * u)
    angle = speed * torch.arange(L + 1, dtype=torch.float64)[None, :, None]
    norm = 1.1 ** torch.arange(L + 1, dtype=torch.float64)[None, :, None]
    x = norm * (angle.cos() * u[:, None] + angle.sin() * v[:, None])
    x = x + noise * norm * torch.randn(n, L + 1, DIM, generator=g, dtype=torch.float64) / DIM ** 0.5
    return x[:, :, None]


#: The smooth decays ``G(l)`` of :func:`decay_images`, blocks ``l = 1..L``: adjacent layers'
#: similarity ``exp(−|G(l+1) − G(l)|)``.
DECAYS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "stationary": lambda l: 0.15 * l,  # 0.86 between every two adjacent layers
    "random walk": lambda l: 0.5 * np.log(l),  # √(l / m): a walk of equal updates
    "accelerating": lambda l: 0.012 * l ** 2,  # 0.96 at the start, 0.76 at the end
    "decelerating": lambda l: 0.6 * np.sqrt(l),
    "warped at one end": lambda l: 1.2 * (1 - l ** -1.7),  # most of the decay in 3 blocks
    "plateau": lambda l: np.where(l <= 6, 0.02 * l, 0.12 + 0.1 * (l - 6)),  # the rate jumps at 6
    "gradual plateau": lambda l: 0.02 * l + 0.08 * np.log1p(np.exp(l - 6.0)),  # over ~4 blocks
}
#: The positives' phases (block counts): unequal and end-placed, the paper's 7 | 3 | 2 among them.
REALISTIC_PHASES = ((3, 9), (10, 2), (7, 3, 2), (4, 3, 3, 2))
STEP_DECAYS = ("stationary", "random walk", "accelerating")  # the decays the steps are put on
STEP = 0.25  # the positives' step: every boundary drops similarity by 25% below the decay
NOISE = 0.1  # the matrix controls' image-level noise (standard deviation per entry)


def partition_of(sizes: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The contiguous partition with phases of ``sizes`` blocks (``(7, 3, 2)``: 1–7 | 8–10 |
    11–12, 0-based half-open)."""
    return tuple(pairwise((0, *np.cumsum(sizes).tolist())))


def decay_images(n: int, decay: str, sizes: Sequence[int] = (L,), step: float = 0.0, *,
                 noise: float = NOISE, seed: int = 0) -> np.ndarray:
    """Per-image matrices ``(n, L, L)`` of the decay ``DECAYS[decay]`` with phases of ``sizes``
    blocks, each boundary a step: similarity times ``1 − step`` (symmetric Gaussian noise of
    ``noise`` per image)."""
    if decay not in DECAYS or sum(sizes) != L or not 0 <= step < 1:
        raise ValueError(f"need a decay of {', '.join(DECAYS)}, sizes summing to {L} and a step "
                         f"in [0, 1); got {decay!r}, {tuple(sizes)}, {step}")
    g = DECAYS[decay](np.arange(1, L + 1, dtype=float))
    phase = np.repeat(np.arange(len(sizes)), sizes)
    S = np.exp(-np.abs(g[:, None] - g[None, :])) * (1 - step) ** np.abs(phase[:, None]
                                                                          - phase[None, :])
    return _noisy(S, n, noise, seed)


def partition_name(sizes: Sequence[int]) -> str:
    """``(7, 3, 2)`` as ``"7 | 3 | 2"``."""
    return " | ".join(map(str, sizes))


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
    "smooth rotation": (False, _stream_case(lambda n, s: rotation_stream(n, seed=s))),
    **{f"{partition_name(sizes)} on {decay} decay": (True, functools.partial(
        lambda n, s, d, z: (decay_images(n, d, z, STEP, seed=s), None), d=decay, z=sizes))
       for sizes in REALISTIC_PHASES for decay in STEP_DECAYS},
    **{name: (decay == "plateau", functools.partial(
        lambda n, s, d: (decay_images(n, d, seed=s), None), d=decay))
       for name, decay in (("accelerating decay", "accelerating"),
                           ("decelerating decay", "decelerating"),
                           ("decay warped at one end", "warped at one end"),
                           ("plateau", "plateau"), ("gradual plateau", "gradual plateau"))},
}


def control(name: str, n: int = 200, seed: int = 0) -> Case:
    """The control ``name`` of :data:`CONTROLS` on ``n`` images."""
    if name not in CONTROLS:
        raise ValueError(f"unknown control {name!r}; valid: {', '.join(CONTROLS)}")
    return CONTROLS[name][1](n, seed)
