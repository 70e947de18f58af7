"""The artifact tier: the trained teachers and students behind the committed book, in the repository.

``artifacts/<kind>/<fingerprint>.safetensors`` are cache entries (same names, same format) and
``artifacts/manifest.json`` lists each with its configuration, the code version that trained it,
its sha256, training wall time, machine and final metrics. The cache reads the tier read-only,
after its own folder; a file whose sha256 differs from the manifest is an error naming the file,
never a silent retrain. ``python -m raptor artifacts export`` fills the tier from the cache with
the entries a book run used (listed by ``$RAPTOR_CACHE_LOG``); ``artifacts compare`` sets the
entries of a cache retrained from scratch (``make reproduce``) beside the tier's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from raptor.cache import cache_root, entry_name
from raptor.checkpoint import CheckpointError, atomic_write, load_tensors

MANIFEST = "manifest.json"
MAX_BYTES = 64 * 2**20


class ArtifactError(RuntimeError):
    """A tier file that does not match its manifest."""


def artifacts_root() -> Path | None:
    """``$RAPTOR_ARTIFACTS`` (empty: no tier), else the repository's ``artifacts/`` if present."""
    value = os.environ.get("RAPTOR_ARTIFACTS")
    if value is not None:
        return Path(value) if value else None
    default = Path(__file__).resolve().parents[1] / "artifacts"
    return default if default.is_dir() else None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(root: Path) -> dict[str, dict[str, Any]]:
    path = root / MANIFEST
    return json.loads(path.read_text())["entries"] if path.is_file() else {}


def tier_entry(kind: str, config: Mapping[str, Any]
               ) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    """The tier's entry for ``config``, verified by sha256, or ``None`` if the tier lacks it."""
    root = artifacts_root()
    name = entry_name(kind, config)
    if root is None or not (root / name).is_file():
        return None
    path = root / name
    entry = read_manifest(root).get(name)
    if entry is None:
        raise ArtifactError(f"{path} is not listed in {root / MANIFEST}")
    if sha256(path) != entry["sha256"]:
        raise ArtifactError(f"{path} does not match its sha256 in {root / MANIFEST}: the file was "
                            "changed or damaged; restore it (git checkout) or re-export the tier")
    try:
        return load_tensors(path, config)
    except CheckpointError as err:
        raise ArtifactError(str(err)) from err


def metrics(record: Mapping[str, Any]) -> dict[str, Any]:
    """The final numbers of a training record: scalars, and the last validation entry."""
    out = {k: v for k, v in record.items() if isinstance(v, (int, float)) and k != "seconds"}
    if record.get("val"):
        out.update({f"val_{k}": v for k, v in record["val"][-1].items() if k != "step"})
    for stage in ("stage1", "stage2"):
        loss = record.get(stage, {}).get("loss") if isinstance(record.get(stage), dict) else None
        if loss:
            out[f"{stage}_final_loss"] = loss[-1]
    return out


def export(names: Iterable[str], root: Path, *, source: Path | None = None) -> dict[str, Any]:
    """Copy the entries ``names`` (from the cache, else already in the tier) into the tier at
    ``root``, drop the tier's other files and rewrite its manifest."""
    source = source or cache_root()
    sources = {name: source / name if (source / name).is_file() else root / name
               for name in sorted(set(names))}
    for name, src in sources.items():
        if not src.is_file():
            raise ArtifactError(f"{name} is neither in the cache {source} nor in the tier {root}")
    total = sum(src.stat().st_size for src in sources.values())
    if total > MAX_BYTES:  # before anything is copied: a refused export leaves the tier as it was
        raise ArtifactError(f"the tier would hold {total / 2**20:.1f} MiB, over "
                            f"{MAX_BYTES / 2**20:.0f} MiB")
    entries = {}
    for name, src in sources.items():
        meta_config = json.loads(_metadata(src)["config"])
        _, record = load_tensors(src, meta_config)
        dst = root / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(dst, lambda tmp, src=src: shutil.copyfile(src, tmp))
        built = record.get("built", {})
        entries[name] = {"kind": name.split("/")[0], "config": meta_config,
                         "code_version": built.get("code_version", "unknown"),
                         "sha256": sha256(dst), "bytes": dst.stat().st_size,
                         "wall_s": built.get("wall_s", record.get("seconds")),
                         "machine": built.get("machine", "unknown"), "metrics": metrics(record)}
    for stale in root.glob("*/*.safetensors"):
        if str(stale.relative_to(root)) not in entries:
            stale.unlink()
    manifest = {"entries": entries, "total_bytes": total}
    atomic_write(root / MANIFEST,
                 lambda tmp: Path(tmp).write_text(json.dumps(manifest, indent=1) + "\n"))
    return manifest


def _metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return f.metadata() or {}


def verify(root: Path) -> int:
    """Check every file of the tier against the manifest; returns the number of entries."""
    if not (root / MANIFEST).is_file():
        raise ArtifactError(f"no artifact tier at {root}: {root / MANIFEST} is missing")
    entries = read_manifest(root)
    files = {str(p.relative_to(root)) for p in root.glob("*/*.safetensors")}
    if files != set(entries):
        raise ArtifactError(f"{root}: files and manifest differ: "
                            f"{sorted(files ^ set(entries))}")
    for name, entry in entries.items():
        if sha256(root / name) != entry["sha256"]:
            raise ArtifactError(f"{root / name} does not match its sha256 in {root / MANIFEST}")
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
    for path in sorted(cache.glob("*/*.safetensors")):
        if path.name.endswith(".work.safetensors"):
            continue
        name = str(path.relative_to(cache))
        config = json.loads(_metadata(path)["config"])
        if _without_teacher_weights(config) not in tier:
            unmatched.append(name)
            continue
        tier_name, entry = tier[_without_teacher_weights(config)]
        theirs, _ = load_tensors(root / tier_name)
        ours, record = load_tensors(path, config)
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
