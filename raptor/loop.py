"""The one training loop, of the teachers, both Raptor stages (paper §3) and the probes (§5).

AdamW, linear warmup then cosine decay to ``min_lr``, the gradient norm clipped per parameter group
(the authors' recipe: :data:`raptor.paper.RECIPE`, App. A.4's probes), and a guard that stops on a
non-finite loss or gradient naming the stage and the step. The batch order depends only on
``(seed, epoch)``, so a run killed at step ``s`` and resumed from its atomic checkpoint replays
exactly the batches it would have seen. The convergence criterion of every model trained to one
(:func:`improves`, :func:`plateaued`; the students' :func:`flattened`), and on a GPU the step captured as CUDA graphs
(:class:`CapturedStep`).
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
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
_SEEDING = threading.RLock()


class _Gate:
    """Threads doing CUDA work ``shared`` (each between its steps, at ``pause``, lets a waiting
    capture in) and a CUDA-graph capture ``exclusive``: while a stream captures, torch refuses
    host copies, seeding and random draws from every other thread of the process."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0
        self._mine = threading.local()

    def _held(self) -> int:
        return getattr(self._mine, "n", 0)

    def _acquire(self) -> None:
        with self._cond:
            while self._writer or self._waiting:
                self._cond.wait()
            self._readers += 1

    def _release(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        self._acquire()
        self._mine.n = self._held() + 1
        try:
            yield
        finally:
            self._mine.n -= 1
            self._release()

    def pause(self) -> None:
        """Let a waiting capture in, if one waits."""
        held = self._held()
        if not held or not self._waiting:
            return
        for _ in range(held):
            self._release()
        for _ in range(held):
            self._acquire()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        held = self._held()
        for _ in range(held):
            self._release()
        with self._cond:
            self._waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()
            for _ in range(held):
                self._acquire()


GATE = _Gate()


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """The global generators seeded with ``seed`` for the ``with`` block, which no other thread
    of the process enters meanwhile: a model built inside is initialised from ``seed`` alone,
    also while other threads build theirs (:mod:`raptor.student_batch`)."""
    with _SEEDING:
        torch.manual_seed(seed)
        yield


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


def warmup_stable_decay(step: int, warmup: int, base_lr: float, min_lr: float,
                        decay: tuple[int, int] | None) -> float:
    """Learning rate at ``step`` of a warmup–stable–decay schedule (Hu et al. 2024; Hägele et al.
    2024): linear warmup over ``warmup`` steps, then ``base_lr`` until the decay ``(start, stop)``
    is set, then linear to ``min_lr`` at step ``stop - 1``."""
    if step < warmup:
        return base_lr * (step + 1) / warmup
    if decay is None or step < decay[0]:
        return base_lr
    start, stop = decay
    return min_lr + (base_lr - min_lr) * max(0.0, (stop - 1 - step) / max(1, stop - start))


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
        # Its own generator: a DataLoader seeds its workers from the global one otherwise, a
        # draw that would race a model's seeded initialisation in another thread.
        loader = DataLoader(dataset, batch_size=batch_size, sampler=order, num_workers=num_workers,
                            drop_last=True, generator=torch.Generator().manual_seed(seed))
        for batch in loader:
            yield step, batch
            step += 1


def adamw(params: Iterable[nn.Parameter], recipe: Optimisation, *, capturable: bool = False
          ) -> torch.optim.AdamW:
    """AdamW at ``recipe``'s peak learning rate and weight decay (:func:`train` sets ``lr``);
    ``capturable``: its learning rate a tensor on the parameters' device, for
    :class:`CapturedStep`."""
    if not capturable:
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)
    params = list(params)
    lr = torch.tensor(float(recipe.lr), device=params[0].device)
    return torch.optim.AdamW(params, lr=lr, weight_decay=recipe.weight_decay, capturable=True)


def improves(loss: float, best: float, tol: float) -> bool:
    """Whether a validation ``loss`` counts as an improvement on ``best``: lower by a relative
    ``tol`` (the convergence criterion's margin)."""
    return loss < best * (1 - tol)


def plateaued(val: Sequence[Mapping[str, float]], best_step: int, patience: int) -> bool:
    """Whether ``patience`` evaluations (``val``: ``{"step", ...}`` each) have come since the best
    one, at ``best_step``: the convergence criterion's stop."""
    return sum(v["step"] > best_step for v in val) >= patience


def flattened(val: Sequence[Mapping[str, float]], patience: int, tol: float,
              floor: float = 0.0) -> bool:
    """Whether a validation loss (``val``: ``{"loss", ...}`` each) has flattened: the lowest of
    its last ``patience`` readings is less than ``patience · tol`` of the lowest before them (or
    of ``floor``, if that is larger) below it — it falls by less than ``tol`` a reading, a single
    noisy reading aside, and a loss near zero is held to the margin at ``floor``."""
    losses = [v["loss"] for v in val]
    if len(losses) <= patience:
        return False
    best = min(losses[:-patience])
    return min(losses[-patience:]) > best - patience * tol * max(best, floor)


class CapturedStep:
    """:func:`train`'s step — loss, backward, per-group clipping, optimiser step — captured as a
    CUDA graph once per ``key`` and then replayed: a small model's step costs the GPU's time for
    its kernels instead of Python's time to launch them (a Raptor of width 64 runs thousands of
    microsecond-long kernels a step), and steps of models in other threads, each on its own
    stream, run side by side.

    ``loss_of(key)`` returns the loss of that key's steps as a function of the static ``inputs``
    (a dict of tensors, the same shapes every step), giving ``(value, reported)`` like
    :func:`train`'s ``loss``. The optimiser must be :func:`adamw` with ``capturable=True``. Before
    a capture, two warm-up steps run at a learning rate of 0; the parameters and the optimiser's
    state are then put back as they were, so the replayed steps are those :func:`train` would take.
    A step's non-finite values are reported after it (:func:`train` raises then).
    """

    def __init__(self, loss_of: Callable[[Hashable], Callable[[dict[str, torch.Tensor]],
                                                            tuple[torch.Tensor, torch.Tensor]]],
                 optimizer: torch.optim.Optimizer, clip_groups: Sequence[Sequence[nn.Parameter]],
                 recipe: Optimisation) -> None:
        self.loss_of, self.optimizer, self.recipe = loss_of, optimizer, recipe
        self.clip_groups = [list(group) for group in clip_groups]
        self.lr = optimizer.param_groups[0]["lr"]
        if not isinstance(self.lr, torch.Tensor) or not self.lr.is_cuda:
            raise ValueError("CapturedStep needs adamw(..., capturable=True) on a CUDA device")
        self.inputs: dict[str, torch.Tensor] = {}
        self.graphs: dict[Hashable, tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor]] = {}

    def __call__(self, key: Hashable, inputs: Mapping[str, torch.Tensor], lr: float
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step at ``lr`` on ``inputs``: ``(reported, gradient norms)``."""
        for name, value in inputs.items():
            if name not in self.inputs:
                self.inputs[name] = torch.empty_like(value, device=self.lr.device)
            self.inputs[name].copy_(value)
        if key not in self.graphs:
            self.graphs[key] = self._capture(self.loss_of(key))
        graph, reported, norms = self.graphs[key]
        self.lr.fill_(lr)
        graph.replay()
        return reported, norms

    def _step(self, loss: Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, torch.Tensor]]
              ) -> tuple[torch.Tensor, torch.Tensor]:
        value, reported = loss(self.inputs)
        value.backward()
        norms = [nn.utils.clip_grad_norm_(group, self.recipe.grad_clip)
                 if self.recipe.grad_clip is not None else
                 torch.zeros((), device=self.lr.device) for group in self.clip_groups]
        self.optimizer.step()
        return reported.detach().clone(), torch.stack(norms).detach()

    def _capture(self, loss: Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, torch.Tensor]]
                 ) -> tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor]:
        params = [p for group in self.clip_groups for p in group]
        kept = [p.detach().clone() for p in params]
        state = {id(p): {k: v.clone() for k, v in self.optimizer.state[p].items()}
                 for p in params if p in self.optimizer.state}
        lr = self.lr.clone()
        self.lr.zero_()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.optimizer.zero_grad(set_to_none=True)
                self._step(loss)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        self.optimizer.zero_grad(set_to_none=True)
        with GATE.exclusive(), torch.cuda.graph(graph, stream=side,
                                                capture_error_mode="thread_local"):
            reported, norms = self._step(loss)
        with torch.no_grad():
            for p, value in zip(params, kept):
                p.copy_(value)
                for name, tensor in self.optimizer.state[p].items():
                    saved = state.get(id(p), {}).get(name)
                    tensor.copy_(saved) if saved is not None else tensor.zero_()
            self.lr.copy_(lr)
        return graph, reported, norms


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
          progress: bool = False, initial: int = 0, stop: Callable[[], bool] | None = None,
          captured: tuple[CapturedStep, Callable[[int, Batch], tuple[Hashable, dict[str, torch.Tensor]]]]
          | None = None, schedule: Callable[[int], float] | None = None) -> int:
    """One step per ``(step, batch)`` of ``batches`` while ``step < total``; returns the next step.

    A step sets the learning rate of ``step`` of ``total`` (``schedule(step)``; by default
    :func:`warmup_cosine` over ``total``), gets the loss and the detached values
    to report from ``loss(step, batch)``, back-propagates, clips each of ``clip_groups`` to
    ``recipe.grad_clip`` (unless None), steps and calls ``after_step(step, reported, lr)``; then
    ``checkpoint(step + 1)`` every ``checkpoint_every`` steps before the last; it ends early when
    ``stop()`` says so after a step. A non-finite report or gradient norm raises
    :class:`FloatingPointError` before the weights change. ``captured``: the step replayed from
    CUDA graphs, ``(step_fn, inputs)`` with ``inputs(step, batch)`` giving the graph's key and
    input tensors; a non-finite value then raises after the step.
    """
    bar = tqdm(total=total, initial=initial, desc=stage, disable=not progress)
    done = initial
    kept = f"the checkpoint of step {initial} is kept" if initial and checkpoint else \
        "no checkpoint was written"
    for step, batch in batches:
        if step >= total:
            break
        GATE.pause()
        lr = schedule(step) if schedule is not None else \
            warmup_cosine(step, total, recipe.warmup_steps, recipe.lr, recipe.min_lr)
        if captured is not None:
            step_fn, inputs = captured
            reported, norms = step_fn(*inputs(step, batch), lr)
            _guard(reported, "loss", stage, step, kept)
            _guard(norms, "gradient", stage, step, kept)
        else:
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
