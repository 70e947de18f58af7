"""The one training loop, of the teachers, both Raptor stages (paper §3) and the probes (§5).

AdamW, linear warmup then cosine decay to ``min_lr``, the gradient norm clipped per parameter group
(the authors' recipe: :data:`raptor.paper.RECIPE`, App. A.4's probes), and a guard that stops on a
non-finite loss or gradient naming the stage and the step. The batch order depends only on
``(seed, epoch)``, so a run killed at step ``s`` and resumed from its atomic checkpoint replays
exactly the batches it would have seen.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from raptor.config import Optimisation, check_device
from raptor.storage.checkpoint import CheckpointError, load_training_state

Batch = TypeVar("Batch")


def resolve_device(device: str) -> str:
    """``device`` checked (:func:`~raptor.config.check_device`): ``"auto"`` is ``"cuda"`` when
    CUDA is available, else ``"cpu"``; any other is kept."""
    check_device(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


@contextmanager
def on_device(model: nn.Module, device: str | torch.device) -> Iterator[torch.device]:
    """``model`` in eval mode on ``device`` (:func:`resolve_device`) for the ``with`` block, then
    given back on the device it came on."""
    on, home = torch.device(resolve_device(str(device))), next(model.parameters()).device
    model.eval().to(on)
    try:
        yield on
    finally:
        model.to(home)


def warmup_cosine(step: int, total: int, warmup: int, base_lr: float, min_lr: float = 0.0) -> float:
    """Learning rate at ``step``: linear warmup over ``warmup`` steps, then cosine to ``min_lr``."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


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
            seeded = torch.Generator().manual_seed(seed * 100_003 + epoch)
            order = torch.randperm(n, generator=seeded)
        else:
            order = torch.arange(n)
        order = order[offset * batch_size: per_epoch * batch_size].tolist()
        loader = DataLoader(dataset, batch_size=batch_size, sampler=order, num_workers=num_workers,
                            drop_last=True)
        for batch in loader:
            yield step, batch
            step += 1


def adamw(params: Iterable[nn.Parameter], recipe: Optimisation) -> torch.optim.AdamW:
    """AdamW at ``recipe``'s peak learning rate and weight decay (:func:`train` sets ``lr``)."""
    return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)


def resume(path: Path | None, *, model: nn.Module, optimizer: torch.optim.Optimizer,
           config: dict[str, Any], check: Callable[[dict[str, Any]], None] | None = None
           ) -> dict[str, Any] | None:
    """The record at ``path``, ``model`` and ``optimizer`` restored from it; ``None`` (start
    afresh, ``model`` and ``optimizer`` untouched) without a checkpoint there, or with a warning
    naming the file when it is corrupt, of another ``config`` or fails ``check(record)`` (see
    :func:`~raptor.storage.checkpoint.load_training_state`)."""
    if path is None or not path.exists():
        return None
    try:
        return load_training_state(path, model=model, optimizer=optimizer, config=config,
                                   check=check)
    except CheckpointError as err:
        warnings.warn(f"not resuming from {path}: {err}; training starts from step 0",
                      stacklevel=2)
        return None


def train(stage: str, batches: Iterable[tuple[int, Batch]],
          loss: Callable[[int, Batch], tuple[torch.Tensor, torch.Tensor]],
          optimizer: torch.optim.Optimizer, clip_groups: Sequence[Sequence[nn.Parameter]],
          recipe: Optimisation, total: int, *,
          after_step: Callable[[int, torch.Tensor, float], None] | None = None,
          checkpoint: Callable[[int], None] | None = None, checkpoint_every: int = 200,
          progress: bool = False, initial: int = 0, stop: Callable[[], bool] | None = None
          ) -> int:
    """One step per ``(step, batch)`` of ``batches`` while ``step < total``; returns the next step.

    A step sets the learning rate of ``step`` of ``total``, gets the loss and the detached values
    to report from ``loss(step, batch)``, back-propagates, clips each of ``clip_groups`` to
    ``recipe.grad_clip`` (unless None), steps and calls ``after_step(step, reported, lr)``; then
    ``checkpoint(step + 1)`` every ``checkpoint_every`` steps before the last; it ends early when
    ``stop()`` says so after a step. A non-finite report or gradient norm raises
    :class:`FloatingPointError` before the weights change.
    """
    bar = tqdm(total=total, initial=initial, desc=stage, disable=not progress)
    done = initial
    kept = f"the checkpoint of step {initial} is kept" if initial and checkpoint else \
        "no checkpoint was written"
    for step, batch in batches:
        if step >= total:
            break
        lr = warmup_cosine(step, total, recipe.warmup_steps, recipe.lr, recipe.min_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        value, reported = loss(step, batch)
        _guard(reported, "loss", stage, step, kept)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        if recipe.grad_clip is not None:
            norms = [nn.utils.clip_grad_norm_(group, recipe.grad_clip) for group in clip_groups]
            _guard(torch.stack(norms), "gradient", stage, step, kept)
        optimizer.step()
        if after_step is not None:
            after_step(step, reported, lr)
        done = step + 1
        if progress:
            bar.update(1)
            bar.set_postfix(loss=f"{reported.sum().item():.4g}")
        if stop is not None and stop():
            break
        if checkpoint is not None and done % checkpoint_every == 0 and done < total:
            checkpoint(done)
            kept = f"the checkpoint of step {done} is kept"
    bar.close()
    return done


def _guard(values: torch.Tensor, what: str, stage: str, step: int, kept: str) -> None:
    if not torch.isfinite(values).all():
        raise FloatingPointError(f"non-finite {what} in {stage} at step {step}; {kept}")
