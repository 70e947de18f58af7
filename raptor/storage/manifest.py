"""Where the cache and the artifact tier are, and the tier's manifest, read without torch (so
that a run checks it before any work; :mod:`raptor.storage.artifacts` reads and writes the tier's
files)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
PACKED = ".xz"  # a tier file is its cache entry's name and this suffix
RETRAIN_MISSING = "RAPTOR_RETRAIN_MISSING"  # set: retrain a listed tier file that is missing


class ArtifactError(RuntimeError):
    """A tier file that does not match its manifest."""


def cache_root() -> Path:
    """The cache folder: ``$RAPTOR_CACHE`` or ``~/.cache/raptor``."""
    return Path(os.environ.get("RAPTOR_CACHE", Path.home() / ".cache" / "raptor"))


def artifacts_root() -> Path | None:
    """``$RAPTOR_ARTIFACTS`` (empty: no tier), else the repository's ``artifacts/`` if present."""
    value = os.environ.get("RAPTOR_ARTIFACTS")
    if value is not None:
        return Path(value) if value else None
    default = Path(__file__).resolve().parents[2] / "artifacts"
    return default if default.is_dir() else None


def read_manifest(root: Path) -> dict[str, dict[str, Any]]:
    """The tier's entries by name (none where it has no manifest); a malformed manifest is an
    error naming it."""
    path = root / MANIFEST
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())["entries"]
    except (ValueError, KeyError, TypeError) as err:
        raise ArtifactError(f"{path} is not a valid manifest ({type(err).__name__}: {err}); "
                            "restore it (git checkout -- artifacts/)") from None


def missing_files(root: Path) -> list[str]:
    """One line each for the files the tier's manifest lists but the disk lacks, naming the file
    and the fix: checked before a run begins (a chapter would otherwise fail inside its kernel)."""
    return [missing_file(root, name) for name in read_manifest(root)
            if not (root / (name + PACKED)).is_file()]


def missing_file(root: Path, name: str) -> str:
    """Why the tier's entry ``name`` cannot be read, and the fix."""
    return (f"{root / (name + PACKED)} is listed in {root / MANIFEST} but missing: restore it "
            "(git checkout -- artifacts/), or retrain it with --retrain-missing")


def retrain_missing() -> bool:
    """Whether ``$RAPTOR_RETRAIN_MISSING`` is set (``--retrain-missing``): a tier file the
    manifest lists but the disk lacks, or whose sha256 differs, is retrained with a warning
    instead of being an error."""
    return os.environ.get(RETRAIN_MISSING, "") not in ("", "0")
