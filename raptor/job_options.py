"""Where and how a sweep's jobs run (:class:`Options`, the command line's job options), checked
before any work and without torch (:mod:`raptor.sweep` runs the jobs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raptor.book.runner import RunnerError

EXECUTORS = ("local", "slurm", "debug")


@dataclass(frozen=True)
class Options:
    """Where and how jobs run: submitit's ``local``, ``slurm`` or in-process ``debug`` executor.
    A student job runs ``ranks`` processes under ``torchrun`` (default: one per GPU,
    ``gpus_per_node``, or 1) and gets ``gpus_per_node`` GPUs on SLURM; a teacher job is one
    process with at most one GPU. On SLURM each job gets ``cpus_per_task`` cores (data loading,
    torch threads)."""

    executor: str = "local"
    folder: Path = Path("runs/sweeps")
    partition: str | None = None
    time_min: int = 24 * 60
    gpus_per_node: int = 0
    array_parallelism: int = 64
    ranks: int | None = None
    cpus_per_task: int = 8

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise RunnerError(f"--executor must be one of {', '.join(EXECUTORS)}, got "
                              f"{self.executor!r}")
        if self.ranks is None:
            object.__setattr__(self, "ranks", max(1, self.gpus_per_node))
        for name, low in (("time_min", 1), ("gpus_per_node", 0), ("array_parallelism", 1),
                          ("ranks", 1), ("cpus_per_task", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                flag = "--time" if name == "time_min" else "--" + name.replace("_", "-")
                raise RunnerError(f"{flag} must be an integer >= {low}, got {value!r}")
        if self.gpus_per_node and self.ranks > self.gpus_per_node:
            raise RunnerError(f"--ranks must be at most --gpus-per-node ({self.gpus_per_node}): "
                              f"one rank a GPU, got {self.ranks}")
