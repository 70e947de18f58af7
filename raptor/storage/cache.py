"""Artifact cache: trained teachers and students stored under a key derived from their config.

A chapter asks for "the teacher with this configuration" and gets it loaded if another chapter
already trained it, or trained (and stored) otherwise. Entries are single safetensors files
written atomically; each carries its configuration, a digest of its tensors and where, when and
by which code version it was built, so a corrupt or foreign entry is detected and rebuilt, never
loaded. A build may keep a resumable work file (``work_path``) next to the entry; an interrupted
build picks it up.

The cache lives in ``$RAPTOR_CACHE`` (default ``~/.cache/raptor``). Below it sits the read-only
*artifact tier* (``artifacts/`` in the repository, or ``$RAPTOR_ARTIFACTS``; empty disables it):
the trained models behind the committed book, each verified against the sha256 in the tier's
``manifest.json`` before it is loaded (see :mod:`raptor.storage.artifacts`).

A planner (:mod:`raptor.sweep`) runs a chapter inside :func:`planning`: then a missing entry is not
built but stood in for, from what its requester asked for (``request``: the configuration objects
behind its key), and in a dry run so are the evaluation images (:func:`planned_images`); there the
requester builds no full-size model either, but notes the entry (:func:`plan_entry`) and goes on
with a small one of its own. The plan is a context variable, set for the ``with`` block alone.
"""

from __future__ import annotations

import fcntl
import os
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from raptor.storage.artifacts import tier_entry
from raptor.storage.build_log import log_built
from raptor.storage.checkpoint import (CheckpointError, digest, fingerprint, load_tensors,
                                       save_tensors)
from raptor.storage.manifest import artifacts_root, cache_root, read_manifest

Tensors = dict[str, torch.Tensor]
Builder = Callable[[Path], tuple[Tensors, dict[str, Any]]]
StandIn = Callable[[str, Mapping[str, Any], object], tuple[Tensors, dict[str, Any]]]
Images = Callable[[str, int | None, int, int], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class _Plan:
    """What :func:`planning` holds: the planner's stand-ins for missing entries and (in a dry
    run) for evaluation images, whether stored entries count as missing (``fresh``), and the
    entries stood in for so far, by name."""

    stand_in: StandIn
    images: Images | None
    fresh: bool
    given: dict[str, tuple[Tensors, dict[str, Any]]] = field(default_factory=dict)


_plan: ContextVar[_Plan | None] = ContextVar("raptor.storage.cache.plan", default=None)


def entry_name(kind: str, config: Mapping[str, Any]) -> str:
    """``<kind>/<fingerprint>.safetensors``: an entry's path below the cache or the tier."""
    if not kind.isidentifier():
        raise ValueError(f"kind must be an identifier, got {kind!r}")
    return f"{kind}/{fingerprint(config)}.safetensors"


def entry_path(kind: str, config: Mapping[str, Any]) -> Path:
    """Where the artifact of ``kind`` with ``config`` is stored."""
    return cache_root() / entry_name(kind, config)


def code_version() -> str:
    """The git commit of the package's checkout (``+dirty`` with local changes), if any."""
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, text=True,
                             capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "raptor"], cwd=root,
                               text=True, capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev}+dirty" if dirty else rev


def load_entry(kind: str, config: Mapping[str, Any]) -> tuple[Tensors, dict[str, Any]] | None:
    """The stored artifact, or ``None`` if absent, corrupt or from another configuration.

    The cache is looked at first, then the artifact tier (whose entries must match their sha256);
    a damaged cache copy is a warning, and the tier's copy is used where there is one. Inside
    :func:`planning`, an entry stood in for is its stand-in.
    """
    path, name, plan = entry_path(kind, config), entry_name(kind, config), _plan.get()
    _log_use(kind, config)
    if plan is not None and name in plan.given:
        return plan.given[name]
    if not path.exists():
        return tier_entry(name, config)
    try:
        tensors, record = load_tensors(path, config)
    except CheckpointError as err:
        damage = str(err)
    else:
        damage = (None if record.get("digest") == digest(tensors)
                  else "its tensors do not match their digest")
    if damage is None:
        return tensors, record
    found = tier_entry(name, config)
    warnings.warn(f"cache entry {path} is damaged ({damage}); "
                  + ("using the artifact tier's verified copy" if found is not None
                     else "it will be rebuilt"), stacklevel=2)
    return found


def get_or_build(kind: str, config: Mapping[str, Any], build: Builder, *, request: object = None
                 ) -> tuple[Tensors, dict[str, Any]]:
    """Load the artifact for ``config``, or run ``build(work_path)`` and store its result.

    ``build`` returns ``(tensors, record)``; ``record`` is JSON-serialisable (training curves,
    metrics). ``work_path`` is where ``build`` may keep a resumable checkpoint; it is removed once
    the entry is stored. Processes asking for the same missing entry build it once: one holds its
    lock (:func:`entry_lock`), the others wait and then load it. Inside :func:`planning` a missing
    entry is not built: the planner's stand-in for ``request`` (what the caller asked for, e.g. a
    :class:`~raptor.teachers.TeacherRequest`) is returned instead. The ranks of a process group
    (``torchrun``) build together: see :func:`_get_or_build_ranks`.
    """
    plan = _plan.get()
    if plan is None and dist.is_available() and dist.is_initialized() and \
            dist.get_world_size() > 1:
        return _get_or_build_ranks(kind, config, build)
    found = load_entry(kind, config)
    if found is not None:
        return found
    if plan is not None:
        plan.given[entry_name(kind, config)] = plan.stand_in(kind, config, request)
        return plan.given[entry_name(kind, config)]
    path = entry_path(kind, config)
    with entry_lock(path):
        found = load_entry(kind, config) if path.exists() else None
        if found is not None:  # built by the process this one waited for
            return found
        why = _why_built(kind, config)
        built = _build(path, config, build)
        log_built(entry_name(kind, config), why)
        # Removed only once the entry exists: whoever still waits on it finds the entry then.
        path.with_suffix(".lock").unlink(missing_ok=True)
        return built


def _get_or_build_ranks(kind: str, config: Mapping[str, Any], build: Builder
                        ) -> tuple[Tensors, dict[str, Any]]:
    """:func:`get_or_build` on every rank: rank 0 alone looks, holding the lock while the entry is
    missing, and tells the others; then every rank runs ``build`` (which must share its work
    between them, as DDP distillation does), rank 0 stores the entry, and the others load it."""
    rank, path = dist.get_rank(), entry_path(kind, config)
    found = load_entry(kind, config) if rank == 0 else None
    with entry_lock(path) if rank == 0 and found is None else nullcontext():
        if rank == 0 and found is None and path.exists():
            found = load_entry(kind, config)  # built by the process this one waited for
        missing = [found is None]
        dist.broadcast_object_list(missing, src=0)
        if missing[0] and rank == 0:
            why = _why_built(kind, config)
            found = _build(path, config, build)
            log_built(entry_name(kind, config), why)
            path.with_suffix(".lock").unlink(missing_ok=True)
        elif missing[0]:
            build(path.with_suffix(".work.safetensors"))
    if missing[0]:
        dist.barrier()
    found = found if rank == 0 else load_entry(kind, config)
    if found is None:
        raise CheckpointError(f"rank {rank} cannot load {entry_name(kind, config)}, which rank 0 "
                              f"found or stored")
    return found


def _build(path: Path, config: Mapping[str, Any], build: Builder
           ) -> tuple[Tensors, dict[str, Any]]:
    work = path.with_suffix(".work.safetensors")
    start = time.perf_counter()
    tensors, record = build(work)
    built = {"code_version": code_version(), "wall_s": round(time.perf_counter() - start, 1),
             "machine": f"{platform.machine()} ({torch.backends.cpu.get_cpu_capability()} "
                        f"kernels), {os.cpu_count()} cores, torch {torch.__version__}"}
    record = {**record, "built": built, "digest": digest(tensors)}
    save_tensors(path, tensors, config, record)
    for leftover in path.parent.glob(f"{path.stem}.work*.safetensors"):
        leftover.unlink(missing_ok=True)
    return tensors, record


@contextmanager
def entry_lock(path: Path) -> Iterator[None]:
    """Hold ``<entry>.lock`` exclusively (``flock``), waiting while another process holds it.

    The kernel releases the lock when its holder exits or is killed, so no stale lock survives a
    crash. The holder writes its host and pid into the file, shown to whoever waits.
    """
    lock = path.with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            print(f"[raptor] waiting for {path.parent.name}/{path.name}, being built by "
                  f"{f.read().strip() or 'another process'}", file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        f.truncate()
        f.write(f"{platform.node()} pid {os.getpid()}\n")
        f.flush()
        yield


@contextmanager
def planning(stand_in: StandIn, images: Images | None = None, *,
             fresh: bool = False) -> Iterator[None]:
    """Plan instead of build: inside, a missing entry is not built; ``stand_in(kind, config,
    request)`` gives what :func:`get_or_build` (and later :func:`load_entry`) return for it, e.g.
    untrained weights, so a chapter runs to its end and names every training it needs
    (:mod:`raptor.sweep`). ``images`` (a dry run) stands in for evaluation images: see
    :func:`planned_images`. ``fresh``: every entry counts as missing, as in an empty cache. The
    plan ends with the block, also when it raises.
    """
    if _plan.get() is not None:
        raise RuntimeError("planning() does not nest")
    token = _plan.set(_Plan(stand_in, images, fresh))
    try:
        yield
    finally:
        _plan.reset(token)


def dry_planning() -> bool:
    """Whether this is a dry run's :func:`planning` (one that stands in for images too)."""
    plan = _plan.get()
    return plan is not None and plan.images is not None


def plan_entry(kind: str, config: Mapping[str, Any], request: object) -> None:
    """In :func:`planning`: hand the entry to the planner's stand-in (which notes it as a job)
    unless it is stored or already noted; what the stand-in returns is not loaded into anything."""
    plan = _plan.get()
    if plan is None:
        raise RuntimeError("plan_entry() outside planning()")
    name = entry_name(kind, config)
    if name not in plan.given and (plan.fresh or load_entry(kind, config) is None):
        plan.given[name] = plan.stand_in(kind, config, request)


def planned_images(dataset: str, img_size: int | None, n: int, seed: int
                   ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """In a dry run's :func:`planning`, the planner's stand-in for ``n`` evaluation images of
    ``dataset`` (at ``img_size``, ``None``: its own) drawn with ``seed``; else ``None``: read
    them."""
    plan = _plan.get()
    if plan is None or plan.images is None:
        return None
    return plan.images(dataset, img_size, n, seed)


def _why_built(kind: str, config: Mapping[str, Any]) -> str:
    """Why a missing entry is built: its cache copy was damaged, its tier file was missing or
    damaged (``--retrain-missing``), or neither held it."""
    path, name, root = entry_path(kind, config), entry_name(kind, config), artifacts_root()
    if path.exists():
        return f"its cache copy {path} was damaged"
    if root is not None and name in read_manifest(root):
        return f"its tier file in {root} was missing or damaged (--retrain-missing)"
    return "neither the cache nor the artifact tier held it"


def _log_use(kind: str, config: Mapping[str, Any]) -> None:
    """Append the entry's name to ``$RAPTOR_CACHE_LOG`` (how the book's artifacts are listed)."""
    log = os.environ.get("RAPTOR_CACHE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(entry_name(kind, config) + "\n")
