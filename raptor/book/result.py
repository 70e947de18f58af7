"""A chapter's result on disk: its arrays in one safetensors file, everything else in JSON.

A result is a dataclass of arrays (complex ones as their real and imaginary parts), numbers,
strings and (nested) lists, dicts and dataclasses.
:func:`save` writes ``<path>.safetensors`` and ``<path>.json`` atomically; :func:`load` rebuilds
the same dataclass, so a chapter's figures and claims can be re-rendered without recomputing.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raptor.storage.checkpoint import atomic_write

FORMAT = 1


def _split(value: Any, key: str, arrays: dict[str, torch.Tensor]) -> Any:
    """``value`` as JSON, its arrays moved to ``arrays`` under slash-joined keys."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        is_tensor = isinstance(value, torch.Tensor)
        # a copy: safetensors refuses tensors that share memory
        array = np.array(value.detach().cpu().numpy() if is_tensor else value, order="C")
        if array.dtype.kind == "c" and not is_tensor:  # e.g. DMD eigenvalues
            arrays[f"{key}/real"] = torch.from_numpy(np.ascontiguousarray(array.real))
            arrays[f"{key}/imag"] = torch.from_numpy(np.ascontiguousarray(array.imag))
            return {"__complex__": key}
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{key}: cannot store an array of dtype {array.dtype} in a result")
        arrays[key] = torch.from_numpy(array)
        return {"__array__": key, "numpy": not is_tensor}
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value):
        return {f.name: _split(getattr(value, f.name), f"{key}/{f.name}", arrays)
                for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        if not all(isinstance(k, (str, int, float)) for k in value):
            raise TypeError(f"{key}: dict keys must be str, int or float")
        return {"__dict__": [[k, _split(v, f"{key}/{i}", arrays)]
                             for i, (k, v) in enumerate(value.items())]}
    if isinstance(value, (list, tuple)):
        items = [_split(v, f"{key}/{i}", arrays) for i, v in enumerate(value)]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"{key}: cannot store a {type(value).__name__} in a result")


def _join(value: Any, hint: Any, arrays: dict[str, torch.Tensor]) -> Any:
    hint = _optional(hint)
    if isinstance(value, dict) and "__array__" in value:
        t = arrays[value["__array__"]]
        return t.numpy() if value["numpy"] else t
    if isinstance(value, dict) and "__complex__" in value:
        key = value["__complex__"]
        return arrays[f"{key}/real"].numpy() + 1j * arrays[f"{key}/imag"].numpy()
    if isinstance(value, dict) and "__dict__" in value:
        args = typing.get_args(hint)
        sub = args[1] if len(args) == 2 else Any
        return {k: _join(v, sub, arrays) for k, v in value["__dict__"]}
    if isinstance(value, dict) and "__tuple__" in value:
        args = typing.get_args(hint)
        subs = [args[0]] * len(value["__tuple__"]) if len(args) == 2 and args[1] is ... else args
        return tuple(_join(v, subs[i] if i < len(subs) else Any, arrays)
                     for i, v in enumerate(value["__tuple__"]))
    if isinstance(value, list):
        args = typing.get_args(hint)
        return [_join(v, args[0] if args else Any, arrays) for v in value]
    cls = _dataclass_in(hint)
    if isinstance(value, dict) and cls is not None:
        hints = typing.get_type_hints(cls)
        return cls(**{k: _join(v, hints.get(k, Any), arrays) for k, v in value.items()})
    return value


def _optional(hint: Any) -> Any:
    """``X`` for ``X | None``; any other hint unchanged."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


def _dataclass_in(hint: Any) -> type | None:
    if dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        if dataclasses.is_dataclass(arg):
            return arg
    return None


def save(result: Any, path: str | Path) -> Path:
    """Write ``result`` (a dataclass) to ``path.safetensors`` and ``path.json``; returns ``path``."""
    from safetensors.torch import save_file

    if not dataclasses.is_dataclass(result):
        raise TypeError(f"result must be a dataclass, got {type(result).__name__}")
    path = Path(path)
    arrays: dict[str, torch.Tensor] = {}
    tree = {f.name: _split(getattr(result, f.name), f.name, arrays)
            for f in dataclasses.fields(result)}
    meta = {"format": FORMAT, "type": f"{type(result).__module__}.{type(result).__qualname__}",
            "fields": tree}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path.with_suffix(".safetensors"), lambda p: save_file(arrays, str(p)))
    atomic_write(path.with_suffix(".json"),
                 lambda p: Path(p).write_text(json.dumps(meta, indent=1, allow_nan=True)))
    return path


def load(cls: type, path: str | Path) -> Any:
    """The ``cls`` result stored at ``path`` by :func:`save`."""
    from safetensors.torch import load_file

    path = Path(path)
    meta = json.loads(path.with_suffix(".json").read_text())
    expected = f"{cls.__module__}.{cls.__qualname__}"
    if meta.get("format") != FORMAT or meta.get("type") != expected:
        raise ValueError(f"{path} holds a {meta.get('type')!r} result (format "
                         f"{meta.get('format')}), not {expected!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    if set(meta["fields"]) != names:
        raise ValueError(f"{path} does not match {expected}: fields "
                         f"{sorted(set(meta['fields']) ^ names)} are in one but not the other")
    arrays = load_file(str(path.with_suffix(".safetensors")))
    hints = typing.get_type_hints(cls)
    return cls(**{k: _join(v, hints.get(k, Any), arrays) for k, v in meta["fields"].items()})
