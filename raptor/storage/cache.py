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

A planner asks through :mod:`raptor.planning`, which stands in for what this cache lacks.
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


def load_entry(kind: str, config: Mapping[str, Any], *, logged: bool = True
               ) -> tuple[Tensors, dict[str, Any]] | None:
    """The stored artifact, or ``None`` if absent, corrupt or from another configuration;
    ``logged``: its use listed for the artifact tier (:func:`_log_use`).

    The cache is looked at first, then the artifact tier (whose entries must match their sha256);
    a damaged cache copy is a warning, and the tier's copy is used where there is one.
    """
    path, name = entry_path(kind, config), entry_name(kind, config)
    if logged:
        _log_use(kind, config)
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


def get_or_build(kind: str, config: Mapping[str, Any], build: Builder, *,
                 intermediate: bool = False) -> tuple[Tensors, dict[str, Any]]:
    """Load the artifact for ``config``, or run ``build(work_path)`` and store its result.
    ``intermediate``: an entry only builds need (a stage-1 block), never listed for the tier.

    ``build`` returns ``(tensors, record)``; ``record`` is JSON-serialisable (training curves,
    metrics). ``work_path`` is where ``build`` may keep a resumable checkpoint; it is removed once
    the entry is stored. Processes asking for the same missing entry build it once: one holds its
    lock (:func:`entry_lock`), the others wait and then load it. The ranks of a process group
    (``torchrun``) build together: see :func:`_get_or_build_ranks`.
    """
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return _get_or_build_ranks(kind, config, build)
    found = load_entry(kind, config, logged=not intermediate)
    if found is not None:
        return found
    path = entry_path(kind, config)
    with entry_lock(path):
        found = load_entry(kind, config, logged=not intermediate) if path.exists() else None
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
