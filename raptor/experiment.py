"""Steps every experiment shares: a model's trajectories on images held in memory, in batches."""

from __future__ import annotations

from pathlib import Path

import torch

from raptor.trajectories import TokenGroups, collect_trajectories


def trajectories_of(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                    batch_size: int = 250) -> tuple[torch.Tensor, TokenGroups]:
    """The model's trajectories ``(N, L+1, T, D)`` on ``images`` and its token groups."""
    traj, _ = collect_trajectories(model, batched(images, labels, batch_size), progress=False)
    return traj, TokenGroups.from_model(model)


def batched(images: torch.Tensor, labels: torch.Tensor, batch_size: int = 250
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(images, labels)`` cut into batches, for the streaming evaluators."""
    return [(images[i:i + batch_size], labels[i:i + batch_size])
            for i in range(0, len(images), batch_size)]


def weights_path(path: str | None) -> Path | None:
    """A user-given weights file, checked to exist before any long work."""
    if path is None:
        return None
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"weights file {p} does not exist")
    return p
