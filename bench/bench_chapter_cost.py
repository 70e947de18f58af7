"""What each chapter's students cost at ``cpu``, in core-hours, before and after the convergence
criterion (issue: students converged on two cores). A chapter's students are those its plan under
:data:`~raptor.book.profiles.CONVERGED` asks for: the ones stored (each listed as it is looked up,
``$RAPTOR_CACHE_LOG``) and the ones missing (the plan's jobs). Per chapter:

- *book*: the committed book's students (100 + 100 steps), the wall time the tier records for
  each, trained on the 2-core machine (in core-hours between once and twice that);
- *fixed budget*: 2,000 + 2,000 steps, the budget the criterion replaced, at the
  :data:`FIXED_BUDGET_S` core-seconds a student measured for it;
- *converged*: the processor seconds each converged student recorded (a stage-1 block shared
  with an earlier student costs only the student that trained it), for those trained so far
  that recorded them, and projected to all at their mean.

    python bench/bench_chapter_cost.py [--chapter C ...] [-p replicates 2] [--queue FILE]

``--queue``: also write the missing students for :mod:`raptor.student_batch` (planning a chapter
runs its computation on the stored models: functional phases ~25 minutes on one core). Writes the
chapters' students to ``results/students/chapters.json`` and prints the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import tempfile
from pathlib import Path

import pandas as pd

from raptor.book.chapters import names
from raptor.book.profiles import CONVERGED, DISTILL
from raptor.book.runner import parse_value, resolve
from raptor.book.spec import notebook_values
from raptor.config import DistillConfig
from raptor.storage.artifacts import artifacts_root
from raptor.storage.cache import entry_name
from raptor.storage.checkpoint import atomic_write, metadata
from raptor.storage.manifest import cache_root, read_manifest
from raptor.sweep import plan
from raptor.train import distill_key

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "results" / "students" / "chapters.json"
# A student of the seed-0 teacher distilled for 2,000 + 2,000 steps on one core of the 2-core
# EPYC, from the step times of bench/bench_train_step.py (issue: students converged on two cores)
FIXED_BUDGET_S = 959.0


def chapter_students(name: str, overrides: dict) -> tuple[dict[str, dict], dict[str, object]]:
    """The student entries chapter ``name`` asks for at ``cpu`` under ``overrides`` (those it
    accepts), stored or not, each with its key; and the missing ones' requests."""
    accepted = notebook_values(resolve(name, "cpu"))
    given = {k: v for k, v in overrides.items() if k in accepted}
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        os.environ["RAPTOR_CACHE_LOG"] = log.name
        try:
            jobs, _ = plan(name, "cpu", given)
        finally:
            del os.environ["RAPTOR_CACHE_LOG"]
        used = [line.strip() for line in log if line.startswith("student/")]
    missing = {entry_name("student", job.key): job for job in jobs if job.kind == "student"}
    keys = {n: missing[n].key if n in missing else _key(n) for n in [*used, *missing]}
    return keys, {n: job.request for n, job in missing.items()}


def _stored(name: str) -> tuple[str, dict] | None:
    """A cache entry's key (as JSON) and record, or None where the cache lacks it."""
    path = cache_root() / name
    if not path.is_file():
        return None
    meta = metadata(path.read_bytes())
    return meta["config"], json.loads(meta["record"])


def _key(name: str) -> dict:
    """The key of a stored student (the converged ones are in the cache: ``raptor artifacts
    unstage`` writes the staged ones there)."""
    stored = _stored(name)
    if stored is None:
        raise SystemExit(f"{name} is neither in the cache nor missing: unstage the converged "
                         "students into the cache first")
    return json.loads(stored[0])


def book_key(key: dict) -> dict:
    """The committed book's student (100 + 100 steps, no criterion) of the same teacher,
    partition and seed as the converged student of ``key`` (as :func:`raptor.train.student_key`
    writes a key without a criterion)."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in key["distill"].items()}
    cfg = dataclasses.replace(DistillConfig(**fields), stage1_steps=DISTILL.stage1_steps,
                              stage2_steps=DISTILL.stage2_steps, anneal_steps=None,
                              val_limit=None, patience=None)
    return {**key, "distill": distill_key(cfg)}


def costs(keys: dict[str, dict]) -> dict[str, float]:
    """Book wall-hours, fixed-budget and converged core-hours of the students of ``keys``: the
    converged ones' where they recorded processor seconds (the first few recorded wall time
    only, run beside other work: left out)."""
    tier = read_manifest(artifacts_root())
    book = converged = 0.0
    done = timed = 0
    for name, key in keys.items():
        # a student new with the criterion (C3's replicates) has no counterpart in the book
        book += tier.get(entry_name("student", book_key(key)), {}).get("wall_s", 0.0)
        stored = _stored(name)
        if stored is not None:
            done += 1
            if "cpu_seconds" in stored[1]:
                timed += 1
                converged += stored[1]["cpu_seconds"]
    return {"students": len(keys), "book wall-h": book / 3600,
            "fixed budget core-h": len(keys) * FIXED_BUDGET_S / 3600,
            "converged": done, "of them timed": timed, "their core-h": converged / 3600,
            "core-s a student": converged / timed if timed else float("nan")}


def projected(row: dict[str, float], mean_s: float) -> float:
    """A chapter's converged core-hours once all its students are: those timed, and the rest at
    ``mean_s`` core-seconds a student (the book's mean so far)."""
    return row["their core-h"] + (row["students"] - row["of them timed"]) * mean_s / 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", action="append", choices=names())
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    parser.add_argument("--queue", type=Path)
    args = parser.parse_args()
    overrides = {**CONVERGED, **{k: parse_value(v) for k, v in args.p}}
    chapters = json.loads(CHAPTERS.read_text()) if CHAPTERS.is_file() else {}
    queue, every = {}, {}
    for name in args.chapter or [n for n in names() if n != "claims"]:
        keys, missing = chapter_students(name, overrides)
        if keys:
            chapters[name] = sorted(keys)
            queue.update(missing)
            every[name] = keys
    atomic_write(CHAPTERS, lambda tmp: Path(tmp).write_text(json.dumps(chapters, indent=1)))
    if args.queue:
        atomic_write(args.queue,
                     lambda tmp: Path(tmp).write_bytes(pickle.dumps(list(queue.values()))))
        print(f"{len(queue)} missing students written to {args.queue}")
    rows = {name: costs(keys) for name, keys in every.items()}
    rows["the book (distinct students)"] = costs({n: k for keys in every.values()
                                                   for n, k in keys.items()})
    table = pd.DataFrame(rows).T
    mean_s = rows["the book (distinct students)"]["core-s a student"]
    table["projected core-h"] = [projected(row, mean_s) for row in rows.values()]
    print(table.round(2).to_markdown())


if __name__ == "__main__":
    main()
