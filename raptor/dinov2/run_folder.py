"""The state of a pipeline run (:mod:`raptor.dinov2.pipeline`): one checkpoint per step, nothing
else.

Each step writes an atomic safetensors checkpoint (:func:`raptor.storage.checkpoint.save_tensors`)
that holds the configuration the step ran with (its *key*) and its record: ``stage1`` the
distillation's work file (:func:`raptor.train.distill` resumes from it), ``stage2`` the student's
blocks, ``probe:<who>:<probe>`` the probe's head. A step is done when its file holds the key of
this run, so a rerun skips it and a run can move between machines with its folder.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raptor.storage.checkpoint import CheckpointError, metadata, tensors_from_bytes

STUDENT_FILE = "student.safetensors"
WORK_FILE = "distill.work.safetensors"
Keys = Mapping[str, Mapping[str, Any]]


def step_path(out: Path, step: str) -> Path:
    """The checkpoint ``step`` writes in the run folder ``out``."""
    if step.startswith("probe:"):
        _, who, probe = step.split(":")
        return out / "probes" / f"{who}_{probe}.safetensors"
    return out / (WORK_FILE if step == "stage1" else STUDENT_FILE)


def saved(path: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(config, record)`` of the checkpoint at ``path``, verified against its digest; ``None``
    if there is none, or (with a warning naming the file) if it is damaged: its step is redone."""
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
        _, record = tensors_from_bytes(data, where=str(path))
        return json.loads(metadata(data)["config"]), record
    except (CheckpointError, OSError, KeyError, ValueError) as err:
        warnings.warn(f"{path} is damaged ({err}); its step will be run again", stacklevel=2)
        return None


def jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples as lists, paths as strings)."""
    return json.loads(json.dumps(value, default=str))


def step_record(out: Path, keys: Keys, step: str) -> dict[str, Any] | None:
    """The record of ``step`` if its checkpoint holds ``keys[step]``, else ``None``.

    ``stage1`` is done once the student is saved or the work file of this distillation
    (``keys["stage1"]["distill"]``) has reached stage 2; its record is empty."""
    if step == "stage1":
        work = saved(step_path(out, step))
        at_stage2 = work is not None and int(work[1].get("stage", 1)) >= 2 and \
            work[0].get("distill") == jsonable(keys[step]["distill"])
        return {} if at_stage2 or step_record(out, keys, "stage2") is not None else None
    found = saved(step_path(out, step))
    return found[1] if found is not None and found[0] == jsonable(keys[step]) else None


def done_records(out: Path, keys: Keys) -> dict[str, dict[str, Any]]:
    """``{step: record}`` of the finished steps."""
    return {step: record for step in keys if (record := step_record(out, keys, step)) is not None}


def check_distillation(out: Path, key: Mapping[str, Any]) -> None:
    """Refuse a run folder whose student or work file belongs to a distillation with another
    configuration than ``key`` (a student is never discarded silently)."""
    now = jsonable(key)
    for step in ("stage2", "stage1"):
        found = saved(step_path(out, step))
        if found is None:
            continue
        old = found[0] if step == "stage2" else {"distill": found[0].get("distill")}
        diff = sorted(k for k in old if old.get(k) != now.get(k))
        inner = [f"{k}.{f}" for k in diff if isinstance(now.get(k), dict)
                 for f in sorted(set(old.get(k) or {}) | set(now[k]))
                 if (old.get(k) or {}).get(f) != now[k].get(f)]
        if diff:
            raise ValueError(f"{out} holds a distillation ({step_path(out, step).name}) done "
                             f"with another configuration (differs in: "
                             f"{', '.join(inner or diff)}); use a new --out, or the original "
                             f"options to resume")
