"""Distillation losses of the two-stage Raptor recipe (paper §3, Eq. 2–3; the authors' code).

All losses are per-layer MSEs against the teacher's trajectory ``a`` (``(N, L+1, T, D)``):

- teacher forcing (TF): a block maps the true ``a_l`` to a prediction of ``a_{l+1}``, averaged
  over the layers of its segment;
- autoregressive (AR) over a segment ``(s, e]``: ``x_0 = a_s``, ``x_{i+1} = B(x_i, z = s+i+1)``,
  ``(1/n) Σ_i MSE(x_{i+1}, a_{s+i+1})``;
- stage 1 mixes them per block, ``λ·TF + (1 − λ)·AR`` with ``λ`` from :func:`raptor.config.tf_lambda`;
  stage 2 chains all blocks from layer 0 to ``L``, AR only.

Token-group weighting (Eq. 3, from the authors' code): ``Σ_g w_g · MSE_g``, each ``MSE_g`` a mean
over its group's tokens. [ours] When a group is absent (a model without registers) its weight is
dropped and the others are renormalised to their original sum, e.g. stage 2's ``(0.45, 0.10,
0.45)`` becomes ``(0.5, 0.5)`` over cls and patches. ``weights=None`` is the plain MSE over all
tokens, which the authors use for every stage-1 block except the one ending at the last layer.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from raptor.model import Raptor, RaptorBlock
from raptor.trajectories import GROUP_NAMES, TokenGroups

Weights = tuple[float, float, float]


def present_weights(groups: TokenGroups, weights: Sequence[float]) -> list[tuple[slice, float]]:
    """``(slice, weight)`` of the present groups, renormalised to the sum of all ``weights``."""
    if len(weights) != len(GROUP_NAMES) or any(w < 0 for w in weights):
        raise ValueError(f"weights must be 3 non-negative numbers (cls, registers, patches), "
                         f"got {tuple(weights)}")
    present = [(s, float(weights[GROUP_NAMES.index(name)])) for name, s in groups.items()]
    kept = sum(w for _, w in present)
    if kept <= 0:
        raise ValueError(f"weights {tuple(weights)} give no weight to the present token groups "
                         f"{[name for name, _ in groups.items()]}")
    return [(s, w * sum(weights) / kept) for s, w in present]


def token_mse(pred: torch.Tensor, target: torch.Tensor, groups: TokenGroups,
              weights: Sequence[float] | None = None) -> torch.Tensor:
    """Group-weighted MSE of ``(..., T, D)`` tensors; ``weights=None``: mean over all tokens."""
    err = (pred.float() - target.float()).square()
    if weights is None:
        return err.mean()
    return sum(w * err[..., s, :].mean() for s, w in present_weights(groups, weights))


def teacher_forced_loss(block: RaptorBlock, traj: torch.Tensor, start: int, stop: int,
                        groups: TokenGroups, weights: Sequence[float] | None) -> torch.Tensor:
    """TF loss of ``block`` on layers ``start+1..stop``: all one-step predictions in one batch."""
    n, batch = stop - start, traj.shape[0]
    inputs = traj[:, start:stop].flatten(0, 1)
    z = torch.arange(start + 1, stop + 1, device=traj.device).repeat(batch)
    pred = block(inputs, z)
    return token_mse(pred.view(batch, n, *pred.shape[1:]), traj[:, start + 1:stop + 1], groups,
                     weights)


def autoregressive_loss(raptor: Raptor, traj: torch.Tensor, start: int, stop: int,
                        groups: TokenGroups, weights: Sequence[float] | None) -> torch.Tensor:
    """AR loss from the true tokens at ``start`` through ``stop``, mean over those layers."""
    pred = raptor.forward_from(traj[:, start], start, stop)[:, 1:]
    return token_mse(pred, traj[:, start + 1:stop + 1], groups, weights)


def segment_loss(block: RaptorBlock, traj: torch.Tensor, start: int, stop: int,
                 groups: TokenGroups, weights: Sequence[float] | None) -> torch.Tensor:
    """AR loss of ``block`` alone over its segment ``(start, stop]``: the ops of
    :func:`autoregressive_loss` on a Raptor whose segment this is, without the Raptor."""
    z = torch.arange(start + 1, stop + 1, dtype=torch.float32, device=traj.device)
    states = [traj[:, start]]
    for scales in block.layer_scales(z):
        states.append(block.step(states[-1], scales))
    return token_mse(torch.stack(states, dim=1)[:, 1:], traj[:, start + 1:stop + 1], groups,
                     weights)


class BlockObjective(nn.Module):
    """Stage 1's loss of one block on its segment, ``λ·TF + (1 − λ)·AR`` (a module so DDP can
    wrap it; it holds only the block, so each block trains, stops and is stored on its own).

    ``forward(traj, lam, terms)`` returns ``(loss, parts)``, ``parts`` being ``loss`` alone.
    ``lam`` may be a tensor (a captured step's input): ``terms`` then says which of TF and AR the
    step computes (by default those with a weight, ``(lam > 0, lam < 1)``).
    """

    def __init__(self, block: RaptorBlock, segment: tuple[int, int], groups: TokenGroups,
                 weights: Weights | None) -> None:
        super().__init__()
        self.block, self.segment, self.groups, self.weights = block, segment, groups, weights

    def forward(self, traj: torch.Tensor, lam: float | torch.Tensor,
                terms: tuple[bool, bool] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        (start, stop), tf_ar = self.segment, terms if terms is not None else (lam > 0, lam < 1)
        loss = traj.new_zeros(())
        if tf_ar[0]:
            loss = loss + lam * teacher_forced_loss(self.block, traj, start, stop, self.groups,
                                                    self.weights)
        if tf_ar[1]:
            loss = loss + (1 - lam) * segment_loss(self.block, traj, start, stop, self.groups,
                                                   self.weights)
        return loss, loss.detach()[None]


class Objective(nn.Module):
    """Stage 2's loss: all blocks chained from layer 0 to ``L``, AR (a module so DDP can wrap
    it). ``forward(traj)`` returns ``(loss, parts)``, ``parts`` being ``loss`` alone."""

    def __init__(self, raptor: Raptor, groups: TokenGroups, weights: Weights | None) -> None:
        super().__init__()
        self.raptor, self.groups, self.weights = raptor, groups, weights

    def forward(self, traj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loss = autoregressive_loss(self.raptor, traj, 0, self.raptor.depth, self.groups,
                                   self.weights)
        return loss, loss.detach()[None]
