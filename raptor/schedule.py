"""Optimisation schedule and resumable, deterministic batch order shared by every training loop.

Warmup + cosine learning rate (FACTS.md §3: linear warmup, cosine to ``min_lr``) and a batch
order that depends only on ``(seed, epoch)``, so a run killed at step ``s`` and resumed replays
exactly the batches it would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset


def warmup_cosine(step: int, total: int, warmup: int, base_lr: float, min_lr: float = 0.0) -> float:
    """Learning rate at ``step``: linear warmup over ``warmup`` steps, then cosine to ``min_lr``."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def batches_from(dataset: Dataset, *, batch_size: int, seed: int, start_step: int = 0,
                 num_workers: int = 0, shuffle: bool = True) -> Iterator[tuple[int, object]]:
    """Endless ``(step, batch)`` pairs from ``start_step`` on, in an order fixed by ``seed``.

    Epoch ``e`` visits the dataset in the permutation drawn from ``seed`` and ``e``; the last
    partial batch of an epoch is dropped so every step has ``batch_size`` images.
    """
    n = len(dataset)
    if batch_size < 1 or batch_size > n:
        raise ValueError(f"batch_size must be in [1, {n}] (dataset size), got {batch_size}")
    per_epoch = n // batch_size
    step = start_step
    while True:
        epoch, offset = divmod(step, per_epoch)
        if shuffle:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        else:
            order = torch.arange(n)
        order = order[offset * batch_size: per_epoch * batch_size].tolist()
        loader = DataLoader(dataset, batch_size=batch_size, sampler=order, num_workers=num_workers,
                            drop_last=True)
        for batch in loader:
            yield step, batch
            step += 1
