"""What every chapter's spec must do: name a bad parameter, and keep the profiles it had.

Each chapter's own tests (``test_chapter_<name>.py``) hold its claims and its results' content;
``test_smoke_chapters.py`` runs every chapter at ``smoke``.
"""

from __future__ import annotations

from typing import Any

import pytest

from raptor.book.chapters import MODULES, chapter
from raptor.book.spec import SpecError, from_parameters


def named(name: str, *cases: tuple[str, object]) -> list[Any]:
    """Chapter ``name``'s single bad values: the error names the parameter."""
    return [pytest.param(name, {p: v}, f"parameter '{p}'", id=f"{name}:{p}={v!r}")
            for p, v in cases]


BAD = [
    *named("phase-search", ("families", [[2, 400], [8, 400]]), ("k_values", [8]),
           ("n_boot", 2)),
    pytest.param("phase-search", {"families": [[12, 400]]},
                 r"parameter 'L' must be with steps one of families \[\[12, 400\]\]",
                 id="phase-search:families=[[12, 400]]"),
    *named("finding-phases", ("p_values", [1.0]), ("p_values", []), ("teacher_seeds", []),
           ("teacher_seeds", [-1]), ("n_images", 0), ("k_values", [13]), ("k_values", [0]),
           ("k_values", []), ("eps_values", [0.0]), ("eps_values", []),
           ("image_counts", [2000]), ("image_counts", [0]), ("image_counts", [1000]),
           ("n_resamples", 0)),
    pytest.param("finding-phases", {"dinov2_weights": "w.safetensors"},
                 "parameter 'imagenet_root'", id="finding-phases:dinov2 without imagenet"),
    *named("raptor", ("p", 1.0), ("p", -0.1), ("seeds", [-1]), ("seeds", []), ("seeds", [1, 1]),
           ("k_values", [9]),
           ("k_values", [0]), ("k_values", []), ("n_images", 0), ("probe_images", 0),
           ("distill_lr", 0.0)),
    *named("stochastic-depth", ("p_values", [0.0, 1.0]), ("p_values", []), ("seeds", []),
           ("seeds", [0, 0]), ("k", 9), ("k", 0), ("n_images", 0)),
    *named("functional-phases", ("p", 1.0), ("seeds", [-1]), ("seeds", []), ("k_values", [9]), ("k_values", [1]),
           ("k_values", []), ("n_random", 1), ("control_k", 5), ("n_images", 0),
           ("overfit_limit", 0),
           ("overfit_steps", 0), ("overfit_snapshots", [700]), ("overfit_snapshots", [300, 50]),
           ("overfit_snapshots", []), ("swap_counts", []), ("swap_counts", [9]),
           ("max_swap_sets", 0), ("versus_seeds", 0), ("versus_seeds", 4)),
    *named("dynamics", ("k", 9), ("k", 0), ("p", 1.0), ("seeds", []), ("seeds", [0, 0]),
           ("eps", 0.0), ("eps", float("nan")), ("n_images", 1), ("n_classes", 0),
           ("n_classes", 11), ("dmd_rank", 0), ("L", 1)),
    pytest.param("dynamics", {"L": 4, "k": 5}, "parameter 'k'", id="dynamics:k=5 > L=4"),
    *named("scaling", ("p", 1.0), ("seeds", []), ("seeds", [1, 1]), ("k_values", []), ("k_values", [2, 9]), ("ladder_k", 5),
           ("n_images", 0), ("probe_images", 0), ("pipeline_results", "results.json")),
]


@pytest.mark.parametrize("name, values, match", BAD)
def test_bad_parameters_are_named(name: str, values: dict[str, object], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        from_parameters(chapter(name).Spec, values)


@pytest.mark.parametrize("name", list(MODULES))
def test_unknown_parameters_are_named(name: str) -> None:
    with pytest.raises(SpecError, match="unknown parameter.*'kk'"):
        from_parameters(chapter(name).Spec, {"kk": 5})


# The smoke and paper profiles written out as parameters, as the old raptor/profiles.py set
# them (finding-phases: its image counts are proper subsets of its images).
SMOKE_TEACHER = {"L": 4, "D": 32, "heads": 2, "steps": 30, "batch_size": 64, "train_limit": 1024}
SMOKE_STUDENT = {**SMOKE_TEACHER, "stage1_steps": 6, "stage2_steps": 6, "distill_warmup": 2,
                 "distill_limit": 256}
PAPER_TEACHER = {"dataset": "cifar100", "L": 12, "D": 768, "heads": 12, "patch_size": 14,
                 "img_size": 224, "registers": 0, "steps": 8_000, "batch_size": 256,
                 "lr": 5e-4, "train_limit": None}
PAPER_STUDENT = {**PAPER_TEACHER, "stage1_steps": 20_000, "stage2_steps": 20_000,
                 "distill_lr": 3e-4, "distill_warmup": 1_000, "distill_limit": None}
OLD_PROFILES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "finding-phases": (
        {**SMOKE_TEACHER, "n_images": 64, "k_values": [2, 3], "image_counts": [16, 32],
         "n_resamples": 3},
        {**PAPER_TEACHER, "n_images": 10_000, "image_counts": [100, 300, 1000, 3000, 5000]}),
    "raptor": (
        {**SMOKE_STUDENT, "n_images": 64, "k_values": [2], "probe_images": 128, "seeds": [0]},
        {**PAPER_STUDENT, "n_images": 10_000, "k_values": [2, 3, 4], "probe_images": 50_000}),
    "stochastic-depth": (
        {**SMOKE_STUDENT, "n_images": 64, "p_values": [0.0, 0.2, 0.4, 0.6], "seeds": [0],
         "k": 2},
        {**PAPER_STUDENT, "n_images": 10_000, "seeds": [0, 1, 2],
         "p_values": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]}),
    "functional-phases": (
        {**SMOKE_STUDENT, "n_images": 64, "seeds": [0], "k_values": [2], "control_k": 2, "n_random": 2,
         "overfit_limit": 128,
         "overfit_steps": 20, "overfit_snapshots": [10, 20], "swap_counts": [1, 2],
         "max_swap_sets": 3},
        {**PAPER_STUDENT, "n_images": 10_000, "k_values": [2, 3, 4], "overfit_limit": 5_000, "overfit_steps": 8_000,
         "overfit_snapshots": [500, 1_000, 2_000, 4_000, 8_000], "versus_seeds": None}),
    "dynamics": (
        {**SMOKE_STUDENT, "n_images": 64, "k": 2, "n_classes": 3, "seeds": [0]},
        {**PAPER_STUDENT, "n_images": 2_000}),
    "scaling": (
        {**SMOKE_STUDENT, "n_images": 64, "k_values": [2, 3, 4], "probe_images": 128,
         "seeds": [0]},
        {**PAPER_STUDENT, "n_images": 10_000, "probe_images": 50_000}),
}


@pytest.mark.parametrize("name", list(OLD_PROFILES))
def test_profiles_are_the_old_ones(name: str) -> None:
    mod, (smoke, paper) = chapter(name), OLD_PROFILES[name]
    assert mod.SMOKE == from_parameters(mod.Spec, smoke)
    assert mod.PAPER == from_parameters(mod.Spec, paper)
