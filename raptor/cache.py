"""Artifact cache: trained teachers and students stored under a key derived from their config.

A chapter asks for "the teacher with this configuration" and gets it loaded if another chapter
already trained it, or trained (and stored) otherwise. Entries are single safetensors files
written atomically; each carries its configuration and a digest of its tensors, so a corrupt or
foreign entry is detected and rebuilt, never loaded. A build may keep a resumable work file
(``work_path``) next to the entry; an interrupted build picks it up.

The cache lives in ``$RAPTOR_CACHE`` (default ``~/.cache/raptor``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from raptor.checkpoint import CheckpointError, fingerprint, load_tensors, save_tensors

Tensors = dict[str, torch.Tensor]
Builder = Callable[[Path], tuple[Tensors, dict[str, Any]]]


def cache_root() -> Path:
    """The cache folder: ``$RAPTOR_CACHE`` or ``~/.cache/raptor``."""
    return Path(os.environ.get("RAPTOR_CACHE", Path.home() / ".cache" / "raptor"))


def entry_path(kind: str, config: Mapping[str, Any]) -> Path:
    """Where the artifact of ``kind`` with ``config`` is stored."""
    if not kind.isidentifier():
        raise ValueError(f"kind must be an identifier, got {kind!r}")
    return cache_root() / kind / f"{fingerprint(config)}.safetensors"


def digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes of ``tensors``."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def load_entry(kind: str, config: Mapping[str, Any]) -> tuple[Tensors, dict[str, Any]] | None:
    """The stored artifact, or ``None`` if absent, corrupt or from another configuration."""
    path = entry_path(kind, config)
    if not path.exists():
        return None
    try:
        tensors, record = load_tensors(path, config)
    except CheckpointError:
        return None
    if record.get("digest") != digest(tensors):
        return None
    return tensors, record


def get_or_build(kind: str, config: Mapping[str, Any], build: Builder
                 ) -> tuple[Tensors, dict[str, Any]]:
    """Load the artifact for ``config``, or run ``build(work_path)`` and store its result.

    ``build`` returns ``(tensors, record)``; ``record`` is JSON-serialisable (training curves,
    metrics). ``work_path`` is where ``build`` may keep a resumable checkpoint; it is removed once
    the entry is stored.
    """
    found = load_entry(kind, config)
    if found is not None:
        return found
    path = entry_path(kind, config)
    work = path.with_suffix(".work.safetensors")
    tensors, record = build(work)
    record = {**record, "digest": digest(tensors)}
    save_tensors(path, tensors, config, record)
    for leftover in path.parent.glob(f"{path.stem}.work*.safetensors"):
        leftover.unlink(missing_ok=True)
    return tensors, record
