"""The artifact tier: the trained teachers and students behind the committed book, in the repository.

``artifacts/<kind>/<fingerprint>.safetensors.xz`` are cache entries (same names), stored packed
(:func:`pack`: lossless, ~18% smaller; weights trained with ``half_weights`` in float16,
:func:`~raptor.storage.checkpoint.narrowed`; read back they are the cache's tensors), and
``artifacts/manifest.json`` lists each under its cache name with its configuration, the code
version that trained it, the sha256 of the stored file, training wall time, machine and final
metrics. The cache reads the tier read-only, after its own folder; a file whose sha256 differs
from the manifest is an error naming the file, never a silent retrain (``--retrain-missing``,
:func:`~raptor.storage.manifest.retrain_missing`: retrained with a warning). ``python -m raptor artifacts export`` fills the
tier from the cache with the entries a book run used (listed by ``$RAPTOR_CACHE_LOG``); ``artifacts compare`` sets the
entries of a cache retrained from scratch (``make reproduce``) beside the tier's.

The cache (:mod:`raptor.storage.cache`) reads the tier, so this module imports nothing of it; where
the cache and the tier are, and the manifest, are :mod:`raptor.storage.manifest`'s.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load, save

from raptor.storage.checkpoint import (NARROWED, CheckpointError, atomic_write, metadata, narrowed,
                                       tensors_from_bytes)
from raptor.storage.manifest import (MANIFEST, PACKED, ArtifactError, artifacts_root, cache_root,
                                     missing_file, read_manifest, retrain_missing)

# The tier in all, manifest included: 96 MB (room for the planted-phase teachers and their students).
MAX_BYTES = 96_000_000


def finished(path: Path) -> bool:
    """Whether a cache file is a finished entry (``<fingerprint>.safetensors``), not a build's
    work files (``<fingerprint>.work.safetensors``, ``<fingerprint>.work.best.safetensors``)."""
    return "." not in path.name.removesuffix(".safetensors")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pack(data: bytes) -> bytes:
    """``data`` regrouped by byte position within each 4-byte word, then xz-compressed: the sign
    and exponent bytes of float32 weights compress well, their low mantissa bytes hardly at all,
    and apart they compress better than interleaved."""
    n = len(data) // 4 * 4
    words = np.frombuffer(data, dtype=np.uint8, count=n).reshape(-1, 4)
    return lzma.compress(words.T.tobytes() + data[n:], preset=9 | lzma.PRESET_EXTREME)


def unpack(blob: bytes) -> bytes:
    """The inverse of :func:`pack`."""
    data = lzma.decompress(blob)
    n = len(data) // 4 * 4
    return np.frombuffer(data, dtype=np.uint8, count=n).reshape(4, -1).T.tobytes() + data[n:]


def tier_entry(name: str, config: Mapping[str, Any]
               ) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    """The tier's entry ``name`` (its cache name, :func:`raptor.storage.cache.entry_name`) for
    ``config``, verified by sha256, or ``None`` if the tier lacks it; a file its manifest lists
    but the disk lacks, or one that fails its sha256, is an error (:func:`~raptor.storage.manifest.retrain_missing`: a
    warning, and ``None``)."""
    root = artifacts_root()
    if root is None:
        return None
    try:
        if not (root / (name + PACKED)).is_file():
            if name in read_manifest(root):
                raise ArtifactError(missing_file(root, name))
            return None
        return _load(root, name, config)
    except ArtifactError as err:
        if not retrain_missing() or name not in read_manifest(root):
            raise
        warnings.warn(f"{err}; retraining it (--retrain-missing)", stacklevel=2)
        return None


def _load(root: Path, name: str, config: Mapping[str, Any] | None = None
          ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A tier entry's tensors and record, its file checked against the manifest's sha256."""
    path = root / (name + PACKED)
    entry = read_manifest(root).get(name)
    if entry is None:
        raise ArtifactError(f"{path} is not listed in {root / MANIFEST}")
    blob = path.read_bytes()
    if hashlib.sha256(blob).hexdigest() != entry["sha256"]:
        raise ArtifactError(f"{path} does not match its sha256 in {root / MANIFEST}: the file was "
                            "changed or damaged; restore it (git checkout) or re-export the tier, "
                            "or retrain it with --retrain-missing")
    try:
        return tensors_from_bytes(unpack(blob), config, where=str(path))
    except CheckpointError as err:
        raise ArtifactError(str(err)) from err


def metrics(record: Mapping[str, Any]) -> dict[str, Any]:
    """The final numbers of a training record: scalars, and the last validation entry."""
    out = {k: v for k, v in record.items() if isinstance(v, (int, float)) and k != "seconds"}
    if record.get("val"):
        out.update({f"val_{k}": v for k, v in record["val"][-1].items() if k != "step"})
    for stage in ("stage1", "stage2"):
        curves = record.get(stage)
        if not isinstance(curves, dict):
            continue
        if "blocks" in curves:  # stage 1, one curve a block
            for name in ("stopped", "why"):
                if any(name in b for b in curves["blocks"]):
                    out[f"{stage}_{name}"] = [b.get(name) for b in curves["blocks"]]
            if curves["blocks"] and all(b["loss"] for b in curves["blocks"]):
                final = sum(b["loss"][-1] for b in curves["blocks"])
                out[f"{stage}_final_loss"] = float(f"{final:.6g}")
            continue
        if curves.get("loss"):
            out[f"{stage}_final_loss"] = curves["loss"][-1]
        for name in ("stopped", "why"):
            if name in curves:
                out[f"{stage}_{name}"] = curves[name]
    return out


def _narrowed(data: bytes) -> bytes:
    """A cache file's bytes, its weights rounded to float16 values (``half_weights``) rewritten in
    float16 (:func:`~raptor.storage.checkpoint.narrowed`); the file itself if it has none."""
    small, names = narrowed(load(data))
    if not names:
        return data
    return _sorted_header(save(small, metadata={**metadata(data), NARROWED: json.dumps(names)}))


def _sorted_header(data: bytes) -> bytes:
    """A safetensors file's bytes with its header's keys sorted: safetensors writes its metadata in
    no fixed order, and a file packed twice must be the same bytes (one blob in git's history)."""
    n = int.from_bytes(data[:8], "little")
    header = json.dumps(json.loads(data[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)  # the tensors' data stays 8-byte aligned
    return len(header).to_bytes(8, "little") + header + data[8 + n:]


def export(names: Iterable[str], root: Path, *, source: Path | None = None) -> dict[str, Any]:
    """Pack the entries ``names`` (from the cache, else already in the tier) into the tier at
    ``root``, drop the tier's other files and rewrite its manifest."""
    source = source or cache_root()
    blobs = {}
    for name in sorted(set(names)):
        if (source / name).is_file():
            blobs[name] = pack(_narrowed((source / name).read_bytes()))
        elif (root / (name + PACKED)).is_file():
            blobs[name] = (root / (name + PACKED)).read_bytes()
        else:
            raise ArtifactError(f"{name} is neither in the cache {source} nor in the tier {root}")
    total = sum(map(len, blobs.values()))
    entries = {}
    for name, blob in blobs.items():
        data = unpack(blob)
        config = json.loads(metadata(data)["config"])
        _, record = tensors_from_bytes(data, config, where=name)
        built = record.get("built", {})
        entries[name] = {"kind": name.split("/")[0], "config": config,
                         "code_version": built.get("code_version", "unknown"),
                         "sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
                         "wall_s": built.get("wall_s", record.get("seconds")),
                         "machine": built.get("machine", "unknown"), "metrics": metrics(record)}
    text = json.dumps({"entries": entries, "total_bytes": total}, indent=1) + "\n"
    size = total + len(text.encode())
    if size > MAX_BYTES:  # before anything is written: a refused export leaves the tier as it was
        raise ArtifactError(f"the tier would hold {size / 1e6:.2f} MB, over {MAX_BYTES / 1e6:g} MB")
    for name, blob in blobs.items():
        atomic_write(root / (name + PACKED), lambda tmp, blob=blob: Path(tmp).write_bytes(blob))
    for stale in root.glob("*/*"):
        if stale.is_file() and str(stale.relative_to(root)) not in {n + PACKED for n in entries}:
            stale.unlink()
    atomic_write(root / MANIFEST, lambda tmp: Path(tmp).write_text(text))
    return json.loads(text)


def stage(root: Path, kind: str = "student") -> dict[str, Any]:
    """Add every ``kind`` entry of the cache distilled under the convergence criterion (its
    ``distill`` configuration has a ``patience``) that the book's tier lacks to the tier at
    ``root``, keeping the entries it holds: models trained in stages (over sessions, or on another
    machine) gathered in a tier of their own until all are final, then moved into the book's tier
    at once. Returns the manifest."""
    cache, book = cache_root(), artifacts_root()
    stored = set(read_manifest(book)) if book is not None else set()

    def converged(path: Path) -> bool:
        config = json.loads(metadata(path.read_bytes())["config"])
        return config.get("distill", {}).get("patience") is not None

    built = [name for p in (cache / kind).glob("*.safetensors")
             if finished(p) and (name := str(p.relative_to(cache))) not in stored
             and converged(p)]
    kept = list(read_manifest(root)) if (root / MANIFEST).is_file() else []
    return export([*built, *kept], root)


def unstage(root: Path) -> int:
    """Write every entry of the tier at ``root`` (each checked against its sha256) into the cache
    that lacks it, as the cache stores it: a staged training resumes where it was left. Returns the
    number written."""
    written = 0
    for name in read_manifest(root):
        path = cache_root() / name
        if path.is_file():
            continue
        _load(root, name)  # verified before it is written
        data = unpack((root / (name + PACKED)).read_bytes())
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda tmp, data=data: Path(tmp).write_bytes(data))
        written += 1
    return written


def verify(root: Path) -> int:
    """Check every file of the tier against the manifest; returns the number of entries."""
    if not (root / MANIFEST).is_file():
        raise ArtifactError(f"no artifact tier at {root}: {root / MANIFEST} is missing")
    entries = read_manifest(root)
    files = {str(p.relative_to(root)) for p in root.glob("*/*") if p.is_file()}
    expected = {name + PACKED for name in entries}
    if files != expected:
        raise ArtifactError(f"{root}: files and manifest differ: {sorted(files ^ expected)}")
    for name, entry in entries.items():
        if sha256(root / (name + PACKED)) != entry["sha256"]:
            raise ArtifactError(f"{root / (name + PACKED)} does not match its sha256 in "
                                f"{root / MANIFEST}")
    return len(entries)


def _without_teacher_weights(config: Mapping[str, Any]) -> str:
    """A configuration as JSON, less the digest of a student's teacher weights: a student
    retrained from a retrained teacher keeps its counterpart in the tier."""
    return json.dumps({k: v for k, v in config.items() if k != "teacher_weights"}, sort_keys=True)


def compare_retrained(root: Path, cache: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Each entry of ``cache`` (retrained from scratch) beside its counterpart in the tier at
    ``root``: the same configuration, a student's teacher weights aside. For each pair: whether the
    tensors are bit-identical, the largest absolute weight difference, both entries' metrics and
    wall times. Also returns the retrained entries without a counterpart (e.g. a student whose
    retrained teacher has another max-cut partition)."""
    tier = {_without_teacher_weights(e["config"]): (name, e)
            for name, e in read_manifest(root).items()}
    rows, unmatched = [], []
    for path in sorted(p for p in cache.glob("*/*.safetensors") if finished(p)):
        name = str(path.relative_to(cache))
        data = path.read_bytes()
        config = json.loads(metadata(data)["config"])
        if _without_teacher_weights(config) not in tier:
            unmatched.append(name)
            continue
        tier_name, entry = tier[_without_teacher_weights(config)]
        theirs, _ = _load(root, tier_name)
        ours, record = tensors_from_bytes(data, config, where=str(path))
        if theirs.keys() != ours.keys():
            raise ArtifactError(f"{path} holds other tensors than {root / tier_name}")
        delta = max((float((ours[k].double() - theirs[k].double()).abs().max()) for k in ours
                     if ours[k].numel()), default=0.0)
        rows.append({"name": tier_name, "identical": all(torch.equal(theirs[k], ours[k])
                                                         for k in ours),
                     "max_abs_diff": delta, "metrics": metrics(record),
                     "tier_metrics": entry["metrics"], "wall_s": record["built"]["wall_s"],
                     "tier_wall_s": entry["wall_s"]})
    return rows, unmatched
