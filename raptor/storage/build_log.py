"""The log of the cache entries built (not loaded), with why: a run reports each model a chapter
trained (``$RAPTOR_BUILT_LOG``, shared with the papermill kernels and jobs it starts)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

BUILT_LOG = "RAPTOR_BUILT_LOG"  # where built entries are logged, with why (builds_reported)


def log_built(name: str, why: str) -> None:
    """Append ``name: why`` to ``$RAPTOR_BUILT_LOG`` (:func:`builds_reported`)."""
    log = os.environ.get(BUILT_LOG)
    if log:
        with open(log, "a") as f:
            f.write(f"{name}: {why}\n")


@contextmanager
def builds_reported() -> Iterator[Callable[[], list[str]]]:
    """Inside, every entry this process or its children (papermill kernels, sweep jobs) build is
    logged with why (``$RAPTOR_BUILT_LOG``); yields a function that gives the lines logged since
    its last call."""
    own = BUILT_LOG not in os.environ
    if own:
        fd, name = tempfile.mkstemp(prefix="raptor-built-", suffix=".log")
        os.close(fd)
        os.environ[BUILT_LOG] = name
    log = Path(os.environ[BUILT_LOG])
    seen = [log.stat().st_size if log.exists() else 0]

    def new() -> list[str]:
        if not log.exists():
            return []
        with open(log, "rb") as f:
            f.seek(seen[0])
            text = f.read()
        seen[0] += len(text)
        return text.decode().splitlines()

    try:
        yield new
    finally:
        if own:
            del os.environ[BUILT_LOG]
            log.unlink(missing_ok=True)
