"""Steps every experiment shares: a model's trajectories on images held in memory, in batches."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from raptor.trajectories import TokenGroups, collect_trajectories


def trajectories_of(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                    batch_size: int = 250, device: str = "auto"
                    ) -> tuple[torch.Tensor, TokenGroups]:
    """The model's trajectories ``(N, L+1, T, D)`` on ``images`` (on the CPU) and its token groups.

    Computed on ``device`` (:func:`~raptor.loop.resolve_device`); the model is given back on the
    device it came on. No images is an error, non-finite pixels a warning.
    """
    if len(images) == 0 or len(images) != len(labels):
        raise ValueError(f"trajectories_of needs at least one image and one label per image, got "
                         f"{len(images)} images and {len(labels)} labels")
    bad = int((~torch.isfinite(images.flatten(1))).any(1).sum())
    if bad:
        warnings.warn(f"trajectories_of: {bad} of {len(images)} images hold NaN or infinite "
                      f"pixels; their trajectories will not be finite", stacklevel=2)
    traj, _ = collect_trajectories(model, batched(images, labels, batch_size), device=device,
                                   progress=False)
    return traj, TokenGroups.from_model(model)


def batched(images: torch.Tensor, labels: torch.Tensor, batch_size: int = 250
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(images, labels)`` cut into batches, for the streaming evaluators."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
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
