"""Tests for raptor.book.runcard: the run card and the profile table each chapter shows."""

from __future__ import annotations

import time

from raptor.book.chapters import phase_structure
from raptor.book.runcard import profile_settings, run_card
from raptor.book.spec import diff, literal, parameters


def test_run_card_lists_the_run_and_every_parameter() -> None:
    spec = phase_structure.SMOKE
    card = run_card(spec, profile="smoke", data="d", models=["a", "b"], seeds=[0, 1],
                    started=time.perf_counter())
    rows = card["run card"]
    assert rows["profile"] == "smoke"
    assert rows["parameters"] == ", ".join(f"{k}={literal(v)}" for k, v in parameters(spec).items())
    assert "p_values=[0.0, 0.2]" in rows["parameters"]  # as the notebook's parameters cell
    assert rows["parameters"].startswith("L=4, D=32, heads=2, patch_size=7, img_size=28, ")
    assert rows["models"] == "a; b" and rows["seeds"] == "0, 1"
    assert rows["wall time"].endswith(" s") and "torch" in rows["machine"]


def test_profile_settings_shows_what_the_profile_changes_and_its_command() -> None:
    changed = diff(phase_structure.PAPER, phase_structure.Spec())
    assert {"dataset", "D", "steps", "p_values", "n_images"} <= set(changed)
    table = profile_settings("phase-structure")["paper profile"]
    assert list(table.index) == [*changed, "command"]
    for name, value in changed.items():
        assert table[name] == literal(value)
    assert table["command"] == "python -m raptor run --profile paper --chapter phase-structure"
    smoke = profile_settings("phase-structure", "smoke")["smoke profile"]
    assert smoke["L"] == "4" and "dataset" not in smoke.index


def test_profile_settings_notes_a_profile_without_changes() -> None:
    table = profile_settings("claims")["paper profile"]
    assert table["note"] == "the paper profile uses the notebook's defaults"
