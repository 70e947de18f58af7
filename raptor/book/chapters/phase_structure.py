"""Chapter *Emergent phase structure*: layer–layer similarity and its blocks (§2, Fig. 1; C1).

Block structure is tested against two nulls of each matrix (:mod:`raptor.structure`), the
stationary decay and the norm-growth null (updates orthogonal to the stream): the max-cut's block
excess over the stronger of the two, cross-fitted over images, with a bootstrap interval.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import phases
from raptor.book import plotting
from raptor.book.claims import (EXCESS_MIN, FAILS, HOLDS, INCONCLUSIVE, Claim, all_of, claim,
                                versus)
from raptor.book.experiment import Walk, dinov2_walk, walk, weights_path
from raptor.book.profiles import PAPER_TEACHER, PHASE_TEACHER, SMOKE_TEACHER
from raptor.book.spec import TeacherSpec, nested, require
from raptor.loop import resolve_device
from raptor.structure import PhaseExcess

NAME = "phase-structure"
NOTEBOOK = "chapters/phase_structure.ipynb"


@dataclass(frozen=True)
class Spec:
    """Teachers trained with each stochastic-depth rate in ``p_values`` and each seed in
    ``teacher_seeds``, and untrained ones (the control).

    ``dinov2_weights`` (a local file of ``vit_base_patch14_reg4_dinov2.lvd142m``) with
    ``imagenet_root`` (ImageFolder layout) adds DINOv2-B on ImageNet images (Fig. 1).
    """

    teacher: TeacherSpec = nested(PHASE_TEACHER)
    p_values: tuple[float, ...] = (0.0, 0.3)
    teacher_seeds: tuple[int, ...] = (0, 1, 2)
    n_images: int = 1000
    k: int = 3
    n_boot: int = 200
    dinov2_weights: str | None = None
    imagenet_root: str | None = None

    def __post_init__(self) -> None:
        require(all(0 <= p < 1 for p in self.p_values), "p_values", "rates in [0, 1)",
                self.p_values)
        require(len(self.teacher_seeds) >= 1 and all(s >= 0 for s in self.teacher_seeds),
                "teacher_seeds", "a non-empty list of seeds ≥ 0", self.teacher_seeds)
        require(self.n_images >= 8, "n_images", "≥ 8", self.n_images)
        require(2 <= self.k < self.teacher.depth, "k", f"in [2, L − 1 = {self.teacher.depth - 1}]",
                self.k)
        require(self.n_boot >= 10, "n_boot", "≥ 10", self.n_boot)
        require(self.dinov2_weights is None or self.imagenet_root is not None, "imagenet_root",
                "an ImageFolder root when dinov2_weights is given", self.imagenet_root)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, teacher_seeds=(0, 1), n_images=64,
                            k=2, n_boot=20)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, p_values=(0.0, 0.2, 0.4, 0.6),
                            n_images=10_000)


@dataclass
class Result:
    """Per model (``"p=0.0, seed 0"``, ``"untrained, seed 0"``, ``"DINOv2-B"``): accuracy,
    trajectory shape, similarity per token group, max-cut and :class:`PhaseExcess`."""

    spec: Spec
    accuracy: dict[str, float]
    trajectory_shape: dict[str, list[int]]
    similarity: dict[str, dict[str, np.ndarray]]
    cuts: dict[str, tuple[tuple[int, int], ...]]
    excess: dict[str, PhaseExcess]

    def trained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if not name.startswith("untrained")}

    def untrained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if name.startswith("untrained")}


def compute(spec: Spec) -> Result:
    """Similarity matrices per model and token group, max-cuts, and C1's block excess."""
    dinov2 = weights_path(spec.dinov2_weights)
    t = spec.teacher
    images = t.eval_images(spec.n_images)
    measure = dict(excess=(spec.k,), n_boot=spec.n_boot, device=resolve_device(t.device))
    accuracy, shapes, mats, excess = {}, {}, {}, {}

    def add(name: str, w: Walk) -> None:
        accuracy[name], shapes[name], mats[name] = w.accuracy, list(w.traj.shape), w.similarity
        excess[name] = w.excess[spec.k]

    for p in spec.p_values:
        for seed in spec.teacher_seeds:
            add(f"p={p}, seed {seed}", walk(t.get_teacher(p, seed=seed), images, **measure))
    for seed in spec.teacher_seeds:
        add(f"untrained, seed {seed}",
            walk(t.get_teacher(seed=seed, trained=False), images, **measure))
    if dinov2 is not None:
        add("DINOv2-B", dinov2_walk(t, dinov2, spec.imagenet_root, spec.n_images, **measure))
    return Result(spec, accuracy, shapes, mats, {name: e.cut for name, e in excess.items()},
                  excess)


def similarity_figure(result: Result) -> plt.Figure:
    """Rows are the first seed's teachers (and DINOv2-B), columns token groups, layers 1..L; the
    max-cut's blocks outlined (Fig. 1)."""
    first = f"seed {result.spec.teacher_seeds[0]}"
    mats = {name: m for name, m in result.similarity.items()
            if name.endswith(first) or name == "DINOv2-B"}
    groups = [g for g in ("cls", "registers", "patches") if any(g in m for m in mats.values())]
    panels = {f"{model}\n{g}": m[g][1:, 1:] if g in m else None
              for model, m in mats.items() for g in groups}
    cuts = {f"{model}\n{g}": result.cuts[model] for model in mats for g in groups}
    return plotting.similarity_panels(panels, ncols=len(groups), partitions=cuts)


def excess_row(e: PhaseExcess) -> dict[str, object]:
    """One model's C1 statistics as a table row (cuts in the paper's layer numbering)."""
    return {"max-cut": phases.format_partition(e.cut),
            "null's cut": phases.format_partition(e.null_cut),
            "over stationary": round(e.stationary, 4), "over growth": round(e.growth, 4),
            "excess": round(e.excess, 4),
            f"{e.level:.0%} interval": f"[{e.low:+.4f}, {e.high:+.4f}]",
            "cut agreement": round(e.agreement, 2),
            "contrast rank": f"{e.rank.rank}/{e.rank.total}"}


def excess_table(result: Result) -> pd.DataFrame:
    """Every model's max-cut, its stationary null's cut, the excess over each null, the excess
    over the stronger and its interval (C1)."""
    return pd.DataFrame([{"model": name, "val acc": result.accuracy[name], **excess_row(e)}
                         for name, e in result.excess.items()]).set_index("model")


def c1_block_excess(excess: dict[str, PhaseExcess], *, k: int,
                    control: dict[str, PhaseExcess] | None = None) -> Claim:
    """C1: each model's max-cut has block excess over the stronger of its two nulls (stationary,
    norm growth) above ``EXCESS_MIN``, judged on its bootstrap interval (inconclusive when the
    interval spans the threshold).

    With a ``control`` (untrained networks of the same shape), a pass is only evidence of block
    structure from training when the control does not pass too; if it does, the verdict is
    inconclusive: the excess is then a property of the architecture, not of phases.
    """
    first = next(iter(excess.values()))
    verdict = all_of(versus(e.low, e.high, EXCESS_MIN.value) for e in excess.values())
    note = ""
    if control:
        control_verdict = c1_block_excess(control, k=k).verdict
        note = f"; untrained control: {control_verdict}"
        if verdict == HOLDS and control_verdict != FAILS:
            verdict = INCONCLUSIVE
    return claim(
        "C1", paper="contiguous blocks visible in every model (Fig. 1)",
        ours="; ".join(f"{name}: excess {e.excess:+.3f} [{e.low:+.3f}, {e.high:+.3f}]"
                       for name, e in excess.items()),
        holds=verdict,
        detail=f"max-cut k={k}, cross-fitted block excess over the stronger of the stationary "
               f"and norm-growth nulls, "
               f"{first.level:.0%} bootstrap interval; holds if every interval lies above "
               f"{EXCESS_MIN.value} (and the untrained control's does not){note}")


def claims(result: Result) -> list[Claim]:
    """C1 on the trained models, against the untrained control."""
    return [c1_block_excess(result.trained(), k=result.spec.k, control=result.untrained())]
