"""What each executed chapter shows at its end: how to re-run it (its parameters, their values)
and the run card (what ran, on what, with which settings, how long)."""

from __future__ import annotations

import os
import platform
import shlex
import time
from collections.abc import Sequence
from html import escape
from typing import Any

import pandas as pd
import torch
from IPython.display import HTML

from raptor.book.chapters import chapter, spec_for
from raptor.book.spec import diff, literal, parameters


def value(v: Any) -> str:
    """A parameter's value as the page shows it: as ``-p`` takes it, ``None`` as "unset"."""
    return "unset" if v is None else literal(v)


def run_card(spec: Any, *, profile: str, data: str, models: Sequence[str], seeds: Sequence[int],
             started: float) -> pd.DataFrame:
    """A one-column table: profile, parameters, data, models, seeds, wall time and machine.

    ``started`` is ``time.perf_counter()`` taken in the chapter's first cell.
    """
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    threads = torch.get_num_threads()
    rows = {
        "profile": profile,
        "parameters": ", ".join(f"{k}={value(v)}" for k, v in parameters(spec).items()),
        "data": data,
        "models": "; ".join(models),
        "seeds": ", ".join(map(str, seeds)),
        "wall time": f"{time.perf_counter() - started:.0f} s",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {device}, "
                   f"torch {torch.__version__}, {threads} thread{'s' * (threads != 1)}",
    }
    return pd.DataFrame({"run card": rows})


def profile_settings(name: str, profile: str = "paper") -> HTML:
    """The "Re-run this chapter" box of chapter ``name``: the command that re-runs the page, one
    that changes a parameter (``-p NAME VALUE``) and one at ``profile``; every parameter with its
    ``cpu`` value (the committed book's) and, where it differs, its ``profile`` value; and that the
    launch buttons (Colab, Binder) run the ``smoke`` profile, whose numbers differ from the page's."""
    cpu = parameters(chapter(name).Spec())
    other = diff(spec_for(name, profile), chapter(name).Spec())
    command = f"python -m raptor run --chapter {name}"
    lines = [f"{command}   # the book's page, at the cpu profile"]
    if other:
        key, changed = next(iter(other.items()))
        lines.append(f"{command} -p {key} {shlex.quote(literal(changed))}   # one parameter changed")
    lines.append(f"python -m raptor run --profile {profile} --chapter {name}   # the {profile} profile")
    rows = "".join(f"<tr><td><code>{escape(k)}</code></td><td>{escape(value(v))}</td>"
                   f"<td>{escape(value(other[k])) if k in other else '—'}</td></tr>"
                   for k, v in cpu.items())
    table = (f'<div class="rc-scroll"><table class="rc-params"><thead><tr><th>parameter</th>'
             f"<th>cpu (the book)</th><th>{escape(profile)}</th></tr></thead><tbody>{rows}"
             "</tbody></table></div>" if cpu else "<p>This chapter has no parameters.</p>")
    return HTML('<div class="rc rc-rerun"><p class="rc-rerun-title">Re-run this chapter</p>'
                f"<pre>{escape(chr(10).join(lines))}</pre>{table}"
                '<p class="rc-rerun-note">The launch buttons (Colab, Binder) run this chapter at '
                "the <code>smoke</code> profile, in seconds: tiny models whose numbers differ from "
                "this page's. Re-run its parameters cell for <code>cpu</code>.</p></div>")
