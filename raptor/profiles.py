"""Chapters of the book and the parameters each profile sets for them.

``cpu`` is the default and the committed book: the notebooks' own ``parameters`` cells hold its
values, so it overrides nothing. ``smoke`` shrinks every chapter to seconds (tests). ``paper`` is
the paper's scale on a GPU (FACTS.md §4–5): CIFAR-100 with ViT-B/14 teachers trained from scratch
and the Raptor recipe's optimiser. The paper leaves the CIFAR image size, epochs and optimiser
open; the values here are [ours].
"""

from __future__ import annotations

from typing import Any

CHAPTERS: dict[str, str] = {
    "phase-structure": "chapters/phase_structure.ipynb",
    "finding-phases": "chapters/finding_phases.ipynb",
    "raptor": "chapters/raptor.ipynb",
    "stochastic-depth": "chapters/stochastic_depth.ipynb",
    "functional-phases": "chapters/functional_phases.ipynb",
    "dynamics": "chapters/dynamics.ipynb",
    "scaling": "chapters/scaling.ipynb",
    "claims": "claims.ipynb",
}

_SMOKE_TEACHER: dict[str, Any] = {"L": 4, "D": 32, "heads": 2, "steps": 30, "batch_size": 64,
                                  "train_limit": 1024}
_SMOKE_STUDENT: dict[str, Any] = {"stage1_steps": 6, "stage2_steps": 6, "distill_warmup": 2,
                                  "distill_limit": 256}
# CIFAR-100, ViT-B/14 at 224 px from scratch: ~40 epochs of 50k images at batch 256 [ours].
_PAPER_TEACHER: dict[str, Any] = {"dataset": "cifar100", "L": 12, "D": 768, "heads": 12,
                                  "patch_size": 14, "img_size": 224, "registers": 0,
                                  "steps": 8_000, "batch_size": 256, "lr": 5e-4,
                                  "train_limit": None}
# The Raptor recipe (FACTS.md §3) with stages shortened to CIFAR-100's size [ours].
_PAPER_STUDENT: dict[str, Any] = {"stage1_steps": 20_000, "stage2_steps": 20_000,
                                  "distill_lr": 3e-4, "distill_warmup": 1_000,
                                  "distill_limit": None}

PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    "smoke": {
        "phase-structure": {**_SMOKE_TEACHER, "n_images": 64, "n_random": 5},
        "finding-phases": {**_SMOKE_TEACHER, "n_images": 64, "k_values": [2, 3],
                           "image_counts": [16, 64], "n_resamples": 3},
        "raptor": {**_SMOKE_TEACHER, **_SMOKE_STUDENT, "n_images": 64, "k_values": [2],
                   "probe_images": 128},
        "stochastic-depth": {**_SMOKE_TEACHER, **_SMOKE_STUDENT, "n_images": 64,
                             "p_values": [0.0, 0.2, 0.4, 0.6], "seeds": [0],
                             "k": 2},
        "functional-phases": {**_SMOKE_TEACHER, **_SMOKE_STUDENT, "n_images": 64,
                              "k_values": [2], "n_random": 2, "overfit_limit": 128,
                              "overfit_steps": 20, "overfit_snapshots": [10, 20],
                              "swap_counts": [1, 2], "max_swap_sets": 3},
        "dynamics": {**_SMOKE_TEACHER, **_SMOKE_STUDENT, "n_images": 64, "k": 2,
                     "n_classes": 3},
        "scaling": {**_SMOKE_TEACHER, **_SMOKE_STUDENT, "n_images": 64, "k_values": [2, 3, 4],
                    "probe_images": 128},
        "claims": {},
    },
    "cpu": {chapter: {} for chapter in CHAPTERS},
    "paper": {
        "phase-structure": {**_PAPER_TEACHER, "p_values": [0.0, 0.2, 0.4, 0.6],
                            "n_images": 10_000},
        "finding-phases": {**_PAPER_TEACHER, "n_images": 10_000,
                           "image_counts": [100, 300, 1000, 3000, 10_000]},
        "raptor": {**_PAPER_TEACHER, **_PAPER_STUDENT, "n_images": 10_000,
                   "k_values": [2, 3, 4], "probe_images": 50_000},
        "stochastic-depth": {**_PAPER_TEACHER, **_PAPER_STUDENT, "n_images": 10_000,
                             "p_values": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
                             "seeds": [0, 1, 2]},
        "functional-phases": {**_PAPER_TEACHER, **_PAPER_STUDENT, "n_images": 10_000,
                              "k_values": [2, 3, 4], "n_random": 10, "overfit_limit": 5_000,
                              "overfit_steps": 8_000,
                              "overfit_snapshots": [500, 1_000, 2_000, 4_000, 8_000]},
        "dynamics": {**_PAPER_TEACHER, **_PAPER_STUDENT, "n_images": 2_000},
        "scaling": {**_PAPER_TEACHER, **_PAPER_STUDENT, "n_images": 10_000,
                    "probe_images": 50_000},
        "claims": {},
    },
}
