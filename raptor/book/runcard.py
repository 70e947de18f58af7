"""The run card each executed chapter shows: what ran, on what, with which settings, how long."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from raptor.book.chapters import chapter
from raptor.book.specs import spec_for
from raptor.book.spec import diff, literal, parameters


def run_card(spec: Any, *, profile: str, data: str, models: Sequence[str], seeds: Sequence[int],
             started: float) -> pd.DataFrame:
    """A one-column table: profile, parameters, data, models, seeds, wall time and machine.

    ``started`` is ``time.perf_counter()`` taken in the chapter's first cell.
    """
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    threads = torch.get_num_threads()
    rows = {
        "profile": profile,
        "parameters": ", ".join(f"{k}={literal(v)}" for k, v in parameters(spec).items()),
        "data": data,
        "models": "; ".join(models),
        "seeds": ", ".join(map(str, seeds)),
        "wall time": f"{time.perf_counter() - started:.0f} s",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {device}, "
                   f"torch {torch.__version__}, {threads} thread{'s' * (threads != 1)}",
    }
    return pd.DataFrame({"run card": rows})


def profile_settings(name: str, profile: str = "paper") -> pd.DataFrame:
    """What ``profile`` changes in chapter ``name`` (vs the ``cpu`` defaults), and its command."""
    rows = {k: literal(v) for k, v in diff(spec_for(name, profile), chapter(name).Spec()).items()}
    rows["command"] = f"python -m raptor run --profile {profile} --chapter {name}"
    if len(rows) == 1:
        rows["note"] = f"the {profile} profile uses the notebook's defaults"
    return pd.DataFrame({f"{profile} profile": rows})
