"""What every chapter's spec must do: name a bad parameter, and keep its profiles (a snapshot).

Each chapter's own tests (``test_chapter_<name>.py``) hold its claims and its results' content;
``test_smoke_chapters.py`` runs every chapter at ``smoke``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from raptor.book.chapters import PROFILES, chapter, names, spec_for
from raptor.book.spec import SpecError, from_parameters, notebook_values


def named(name: str, *cases: tuple[str, object]) -> list[Any]:
    """Chapter ``name``'s single bad values: the error names the parameter."""
    return [pytest.param(name, {p: v}, f"parameter '{p}'", id=f"{name}:{p}={v!r}")
            for p, v in cases]


BAD = [
    *named("atlas", ("k_values", [8]), ("k_values", []), ("k", 5), ("n_boot", 2),
           ("results", "no/such/folder")),
    *named("finding-phases", ("p_values", [1.0]), ("p_values", []), ("teacher_seeds", []),
           ("teacher_seeds", [-1]), ("n_images", 0), ("k_values", [13]), ("k_values", [0]),
           ("k_values", []), ("eps_values", [0.0]), ("eps_values", []),
           ("image_counts", [2000]), ("image_counts", [0]), ("image_counts", [1000]),
           ("n_resamples", 0), ("held_out", 0)),
    pytest.param("finding-phases", {"weights": "no/such/w.safetensors"},
                 "parameter 'weights'", id="finding-phases:pretrained weights not found"),
    pytest.param("phase-structure", {"weights": __file__, "model": "vit_nope"},
                 "parameter 'model'", id="phase-structure:unknown pretrained model"),
    *named("distillation", ("p", 1.0), ("p", -0.1), ("seeds", [-1]), ("seeds", []),
           ("seeds", [1, 1]), ("k_values", [13]),
           ("k_values", [0]), ("k_values", []), ("n_images", 0), ("probe_images", 0),
           ("distill_lr", 0.0), ("patience", 0), ("half_precision", "yes"),
           ("distill_half_precision", 1)),
    *named("stochastic-depth", ("p_values", [0.0, 1.0]), ("p_values", []), ("seeds", []),
           ("seeds", [0, 0]), ("k", 13), ("k", 0), ("n_images", 0)),
    *named("functional-phases", ("p", 1.0), ("seeds", [-1]), ("seeds", []), ("k_values", [13]), ("k_values", [1]),
           ("k_values", []), ("n_random", 1), ("replicates", 0), ("control_k", 5),
           ("n_images", 0), ("seeds", [1000]), ("overfit_limit", 0),
           ("overfit_steps", 0), ("overfit_snapshots", [700]), ("overfit_snapshots", [300, 50]),
           ("overfit_snapshots", []), ("swap_counts", []), ("swap_counts", [13]),
           ("max_swap_sets", 0), ("planted", [7, 3]), ("planted", [4, 4, 2, 2]), ("subset_images", 0),
           ("subset_images", 300)),
    *named("dynamics", ("k", 13), ("k", 0), ("p", 1.0), ("seeds", []), ("seeds", [0, 0]),
           ("eps", 0.0), ("eps", float("nan")), ("n_images", 1), ("n_classes", 0),
           ("n_classes", 11), ("dmd_rank", 0), ("L", 1)),
    pytest.param("dynamics", {"L": 4, "k": 5}, "parameter 'k'", id="dynamics:k=5 > L=4"),
    *named("scaling", ("p", 1.0), ("seeds", []), ("seeds", [1, 1]), ("k_values", []), ("k_values", [2, 13]), ("ladder_k", 5),
           ("n_images", 0), ("probe_images", 0), ("pipeline_results", "results.json")),
]


@pytest.mark.parametrize("name, values, match", BAD)
def test_bad_parameters_are_named(name: str, values: dict[str, object], match: str) -> None:
    """Refused as the spec is built, or, for the check that needs torch (a pretrained model
    against its weights file), by its ``require_model``, which the runner calls after it."""
    with pytest.raises(SpecError, match=match):
        spec = from_parameters(chapter(name).Spec, values)
        getattr(spec, "require_model", lambda: None)()


@pytest.mark.parametrize("name", names())
def test_unknown_parameters_are_named(name: str) -> None:
    with pytest.raises(SpecError, match="unknown parameter.*'kk'"):
        from_parameters(chapter(name).Spec, {"kk": 5})


SNAPSHOT = Path(__file__).with_name("profiles.json")


def profiles() -> dict[str, dict[str, dict[str, Any]]]:
    """Every chapter's parameters at every profile, as a notebook holds them."""
    return {name: {profile: notebook_values(spec_for(name, profile)) for profile in PROFILES}
            for name in names()}


def test_profiles_are_the_snapshot() -> None:
    """A profile change is deliberate: ``RAPTOR_UPDATE_SNAPSHOT=1 pytest tests/test_chapters.py``
    writes the new snapshot, whose diff the change then shows."""
    if os.environ.get("RAPTOR_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(profiles(), indent=1) + "\n")
    assert profiles() == json.loads(SNAPSHOT.read_text())
