"""Atomic, verifiable safetensors checkpoints (never pickle).

A checkpoint is one ``.safetensors`` file: the model's (and optionally the optimiser's) tensors,
plus string metadata holding the configuration it belongs to, a JSON record of everything that
is not a tensor and a digest of all three, so a flipped byte anywhere is caught on reading. Writes go to a temporary file in the same folder, are fsynced, and are renamed
into place, so a reader sees either the old or the new file, never a partial one.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load, load_file, save_file
from torch import nn


NARROWED = "narrowed"  # the metadata key listing the float32 tensors a file stores in float16


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, or belongs to another configuration."""


def fingerprint(config: Mapping[str, Any]) -> str:
    """A stable hash of a JSON-serialisable configuration (keys sorted)."""
    blob = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 over names, dtypes, shapes and bytes of ``tensors``."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _file_digest(tensors: Mapping[str, torch.Tensor], meta: Mapping[str, str]) -> str:
    """The digest a checkpoint carries: its tensors, configuration and record together."""
    return hashlib.sha256("|".join((digest(tensors), meta.get("config", ""), meta.get("record", ""))).encode()
                          ).hexdigest()


def atomic_write(path: str | os.PathLike, write: Any) -> None:
    """Call ``write(tmp_path)`` and move the result onto ``path`` atomically. The file gets the
    mode the umask gives a new file (not ``mkstemp``'s 0600, which would hide a shared cache's
    entries from the group)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = str(path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp")
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    mode = os.stat(tmp).st_mode & 0o777  # 0o666 under the umask
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fchmod(f.fileno(), mode)  # a writer may have replaced the file (safetensors: 0600)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_tensors(path: str | os.PathLike, tensors: Mapping[str, torch.Tensor],
                 config: Mapping[str, Any], record: Mapping[str, Any] | None = None) -> None:
    """Write ``tensors`` with the configuration's fingerprint and a JSON ``record``."""
    meta = {"config": json.dumps(config, sort_keys=True, default=str),
            "fingerprint": fingerprint(config),
            "record": json.dumps(record or {}, default=str)}
    flat, seen = {}, set()
    for k, v in tensors.items():  # a tensor sharing memory with one before it (a tied block's)
        v = v.detach().contiguous().cpu()  # is stored as a copy: safetensors holds each apart
        flat[k] = v.clone() if v.untyped_storage().data_ptr() in seen else v
        seen.add(v.untyped_storage().data_ptr())
    meta["digest"] = _file_digest(flat, meta)
    atomic_write(path, lambda tmp: save_file(flat, tmp, metadata=meta))


def load_tensors(path: str | os.PathLike, config: Mapping[str, Any] | None = None
                 ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read a checkpoint, verified against its digest (files written before digests existed
    have none); if ``config`` is given it must match the one it was saved with."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    return tensors_from_bytes(path.read_bytes(), config, where=str(path))


def half_rounded(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` with each float32 one rounded to the nearest float16 value, still float32: the
    weights of a model trained with ``half_weights`` (:class:`~raptor.config.TrainConfig`), which
    the artifact tier stores in half the bytes, losslessly."""
    out = {k: v.half().float() if v.dtype == torch.float32 else v for k, v in tensors.items()}
    if not all(v.isfinite().all() for v in out.values() if v.is_floating_point()):
        raise ValueError("half_weights: a weight is beyond float16's range (±65,504)")
    return out


def narrowed(tensors: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``tensors`` with each float32 one that float16 holds exactly in float16, and the names of
    those, sorted (a file lists them under ``NARROWED`` for :func:`tensors_from_bytes` to widen;
    sorted, so that a file packed twice is the same bytes whatever order ``tensors`` came in)."""
    names = sorted(k for k, v in tensors.items()
                   if v.dtype == torch.float32 and torch.equal(v.half().float(), v))
    return {**tensors, **{k: tensors[k].half() for k in names}}, names


def metadata(data: bytes) -> dict[str, str]:
    """The string metadata of a safetensors file's bytes."""
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]).get("__metadata__") or {}


def tensors_from_bytes(data: bytes, config: Mapping[str, Any] | None = None, *, where: str
                       ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """:func:`load_tensors` of a checkpoint's bytes; ``where`` names it in errors. Tensors stored
    :func:`narrowed` are read back as float32."""
    try:
        meta = metadata(data)
        wide = set(json.loads(meta.get(NARROWED, "[]")))
        tensors = {k: v.float() if k in wide else v for k, v in load(data).items()}
        record = json.loads(meta["record"])
    except (SafetensorError, KeyError, ValueError) as err:
        raise CheckpointError(f"corrupt checkpoint {where}: {err}") from err
    if "digest" in meta and meta["digest"] != _file_digest(tensors, meta):
        raise CheckpointError(f"corrupt checkpoint {where}: its contents do not match its digest")
    if config is not None and meta.get("fingerprint") != fingerprint(config):
        saved = json.loads(meta.get("config", "{}"))
        diff = sorted(k for k in set(saved) | set(config) if saved.get(k) != config.get(k))
        raise CheckpointError(f"checkpoint {where} belongs to another configuration "
                              f"(differs in: {', '.join(map(str, diff)) or 'format'})")
    return tensors, record


def save_training_state(path: str | os.PathLike, *, model: nn.Module,
                        optimizer: torch.optim.Optimizer | None, config: Mapping[str, Any],
                        record: Mapping[str, Any]) -> None:
    """Model weights, optimiser state (flattened into tensors) and a JSON record, atomically."""
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    record = dict(record)
    if optimizer is not None:
        state = optimizer.state_dict()
        for idx, slots in state["state"].items():
            for name, value in slots.items():
                tensors[f"optim.{idx}.{name}"] = torch.as_tensor(value)
        record["optim_param_groups"] = state["param_groups"]
    save_tensors(path, tensors, config, record)


def load_training_state(path: str | os.PathLike, *, model: nn.Module,
                        optimizer: torch.optim.Optimizer | None,
                        config: Mapping[str, Any],
                        check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Restore what :func:`save_training_state` wrote; returns the record.

    ``check(record)`` may raise :class:`CheckpointError` (e.g. a file the record names is
    missing); it runs after the file is verified and before ``model`` or ``optimizer`` change."""
    tensors, record = load_tensors(path, config)
    if check is not None:
        check(record)
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    groups = record.pop("optim_param_groups", None)
    if optimizer is not None:
        slots: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, idx, name = key.split(".", 2)
                slots.setdefault(int(idx), {})[name] = value
        optimizer.load_state_dict({"state": slots, "param_groups": groups})
    return record


def read_state_dict(path: str | os.PathLike, *, shapes_only: bool = False
                    ) -> dict[str, torch.Tensor]:
    """Tensors of a weights file: safetensors, or a torch file read with ``weights_only=True``;
    ``shapes_only``: as tensors on the meta device (their names and shapes, no data read), to
    check a file against a model before any work."""
    path = Path(path)
    allowed = ("allowed: a safetensors file, or a torch file (torch.save) of a state dict, "
               "possibly under 'model' or 'state_dict'")
    if not path.is_file():
        raise CheckpointError(f"weights file not found: {path}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"weights file {path} is empty; {allowed}")
    try:
        if path.suffix == ".safetensors" and shapes_only:
            with safe_open(path, "pt") as f:
                return {k: torch.empty(f.get_slice(k).get_shape(), device="meta")
                        for k in f.keys()}
        if path.suffix == ".safetensors":
            return load_file(path)
        state = torch.load(path, map_location="meta" if shapes_only else "cpu",
                           weights_only=True)
    # bytes that are no torch archive fail anywhere in the unpickler (KeyError, EOFError,
    # IndexError, ...): any failure to read the file is the user's file, not a bug here
    except Exception as err:
        raise CheckpointError(f"unreadable weights file {path} ({type(err).__name__}: {err}); "
                              f"{allowed}") from err
    for key in ("model", "state_dict"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise CheckpointError(f"weights file {path} holds a {type(state).__name__}, not a state "
                              f"dict of named tensors; {allowed}")
    return state


def load_state_checked(model: nn.Module, state: Mapping[str, torch.Tensor], *,
                       source: str = "state dict") -> None:
    """``model.load_state_dict(state)``, with one clear error naming every key that does not fit."""
    mismatch(model, state, source=source)
    model.load_state_dict(state)


def mismatch(model: nn.Module, state: Mapping[str, torch.Tensor], *,
             source: str = "state dict") -> None:
    """Raise :class:`CheckpointError` naming every key of ``state`` that does not fit ``model``
    (missing, unexpected, of another shape)."""
    own = model.state_dict()
    shape_bad = [f"{k}: file {tuple(v.shape)} vs model {tuple(own[k].shape)}"
                 for k, v in state.items() if k in own and own[k].shape != v.shape]
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if shape_bad or missing or unexpected:
        raise CheckpointError(
            f"{source} does not match the architecture: {len(missing)} missing keys "
            f"{missing[:4]}, {len(unexpected)} unexpected keys {unexpected[:4]}, "
            f"{len(shape_bad)} shape mismatches {shape_bad[:4]}")
