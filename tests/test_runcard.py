"""Tests for raptor.book.runcard: the run card and the profile table each chapter shows."""

from __future__ import annotations

import re
import time
from html import unescape

from raptor.book.chapters import phase_structure
from raptor.book.runcard import profile_settings, run_card
from raptor.book.spec import diff, literal, parameters


def test_run_card_lists_the_run_and_every_parameter() -> None:
    spec = phase_structure.SMOKE
    card = run_card(spec, profile="smoke", data="d", models=["a", "b"], seeds=[0, 1],
                    started=time.perf_counter())
    rows = card["run card"]
    assert rows["profile"] == "smoke"
    assert rows["parameters"] == ", ".join(f"{k}={'unset' if v is None else literal(v)}"
                                           for k, v in parameters(spec).items())
    assert "None" not in rows["parameters"] and "data_root=unset" in rows["parameters"]
    assert "p_values=[0.0, 0.2]" in rows["parameters"]  # as the notebook's parameters cell
    assert rows["parameters"].startswith("L=4, D=32, heads=2, patch_size=7, img_size=28, ")
    assert rows["models"] == "a; b" and rows["seeds"] == "0, 1"
    assert rows["wall time"].endswith(" s") and "torch" in rows["machine"]


def test_the_rerun_box_gives_the_commands_every_cpu_value_and_what_the_profile_changes() -> None:
    changed = diff(phase_structure.PAPER, phase_structure.Spec())
    assert {"dataset", "D", "steps", "p_values", "n_images"} <= set(changed)
    html = profile_settings("phase-structure").data
    assert "Re-run this chapter" in html and "smoke</code> profile" in html
    assert "python -m raptor run --chapter phase-structure   #" in html
    assert "python -m raptor run --profile paper --chapter phase-structure" in html
    first, value = next(iter(changed.items()))
    assert f"--chapter phase-structure -p {first} {literal(value)}" in html
    rows = re.findall(r"<tr><td><code>(\w+)</code></td><td>(.*?)</td><td>(.*?)</td></tr>", html)
    cpu = parameters(phase_structure.Spec())
    assert [r[0] for r in rows] == list(cpu)  # every parameter, in the spec's order
    for name, shown, paper in rows:
        assert unescape(shown) == ("unset" if cpu[name] is None else literal(cpu[name]))
        want = changed.get(name)
        assert unescape(paper) == ("—" if name not in changed else
                                   "unset" if want is None else literal(want))
    assert ("train_limit", "5000", "unset") in rows  # the paper profile trains on every image
    smoke = profile_settings("phase-structure", "smoke").data
    assert "<td><code>L</code></td><td>12</td><td>4</td>" in smoke


def test_the_rerun_box_of_a_chapter_without_parameters() -> None:
    html = profile_settings("claims").data
    assert "This chapter has no parameters." in html and " -p " not in html
