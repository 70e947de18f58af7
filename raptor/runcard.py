"""The run card each executed chapter shows: what ran, on what, with which settings, how long."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from raptor.profiles import PROFILES
from raptor.runner import resolve_parameters


def run_card(*, profile: str, parameters: Mapping[str, Any], data: str, models: Sequence[str],
             seeds: Sequence[int], started: float) -> pd.DataFrame:
    """A one-column table: profile, parameters, data, models, seeds, wall time and machine.

    ``started`` is ``time.perf_counter()`` taken in the chapter's first cell.
    """
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    rows = {
        "profile": profile,
        "parameters": ", ".join(f"{k}={v!r}" for k, v in parameters.items()),
        "data": data,
        "models": "; ".join(models),
        "seeds": ", ".join(map(str, seeds)),
        "wall time": f"{time.perf_counter() - started:.0f} s",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {device}, "
                   f"torch {torch.__version__}, {torch.get_num_threads()} threads",
    }
    return pd.DataFrame({"run card": rows})


def profile_settings(chapter: str, profile: str = "paper") -> pd.DataFrame:
    """What ``profile`` changes in ``chapter`` (vs the notebook's ``cpu`` defaults), and the
    command that runs it."""
    params = resolve_parameters(chapter, profile)
    rows = {name: repr(value) for name, value in params.items() if name != "profile"}
    rows["command"] = f"python -m raptor run --profile {profile} --chapter {chapter}"
    if not PROFILES[profile].get(chapter):
        rows["note"] = f"the {profile} profile uses the notebook's defaults"
    return pd.DataFrame({f"{profile} profile": rows})
