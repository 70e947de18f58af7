"""Chapter *Emergent phase structure*: layer–layer similarity and its blocks (§2, Fig. 1; C1).

The max-cut's block excess over a ladder of nulls (:mod:`raptor.structure`) for every teacher, the
untrained networks, the synthetic controls (:mod:`raptor.controls`) and the paper's DINOv2-B
matrix (:func:`raptor.paper.dinov2b_block_similarity`). C1 is judged on the warped decay, the one
null the controls show to tell phases from smooth decays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import controls, paper, phases
from raptor.catalog import dataset_info
from raptor.book import plotting
from raptor.book.claims import EXCESS_MIN, FAILS, HOLDS, Claim, conjoined, part
from raptor.book.experiment import Walk, images_of, pretrained_walk, teacher_of, walk
from raptor.book.specs.phase_structure import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.structure import (JUDGED_NULL, NULLS, WARP_ORIGINS, PhaseExcess, contrast,
                              matrix_excess, phase_excess, warped_decay_null)


@dataclass
class Result:
    """Per model (``"p=0.0, seed 0"``, ``"untrained, seed 0"``, a pretrained one) its walk and
    C1's :class:`PhaseExcess`; the same per control, and per k of the paper for its DINOv2-B
    matrix (:func:`~raptor.structure.matrix_excess`, no interval)."""

    spec: Spec
    accuracy: dict[str, float]
    trajectory_shape: dict[str, list[int]]
    similarity: dict[str, dict[str, np.ndarray]]
    cuts: dict[str, tuple[tuple[int, int], ...]]
    excess: dict[str, PhaseExcess]
    controls: dict[str, PhaseExcess]
    paper_dinov2b: dict[int, PhaseExcess]
    records: dict[str, dict[str, Any]]  # each trained teacher's training record

    def trained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if not name.startswith("untrained")}

    def untrained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if name.startswith("untrained")}


def compute(spec: Spec) -> Result:
    """Similarity per model and token group, max-cuts, and C1's block excess for every model,
    control and the paper's DINOv2-B matrix."""
    spec.require_model()
    images = images_of(spec, spec.n_images)
    measure = dict(excess=(spec.k,), n_boot=spec.n_boot, device=resolve_device(spec.machine.device))
    accuracy, shapes, mats, excess, records = {}, {}, {}, {}, {}

    def add(name: str, w: Walk) -> None:
        accuracy[name], shapes[name], mats[name] = w.accuracy, list(w.traj.shape), w.similarity
        excess[name] = w.excess[spec.k]
        if "val" in w.record:
            records[name] = w.record

    for p in spec.p_values:
        for seed in spec.teacher_seeds:
            add(f"p={p}, seed {seed}", walk(teacher_of(spec, p, seed=seed), images, **measure))
    for seed in spec.teacher_seeds:
        add(f"untrained, seed {seed}",
            walk(teacher_of(spec, seed=seed, trained=False), images, **measure))
    if spec.pretrained.weights is not None:
        add(spec.pretrained.label, pretrained_walk(spec.pretrained, spec.n_images,
                                                   spec.machine.data_root, **measure))
    checks = {}
    for name in controls.CONTROLS:
        per_image, growth = controls.control(name, spec.control_images)
        checks[name] = phase_excess(per_image, spec.k, growth=growth, n_boot=spec.n_boot)
    return Result(spec, accuracy, shapes, mats, {name: e.cut for name, e in excess.items()},
                  excess, checks,
                  {k: matrix_excess(paper.dinov2b_block_similarity(), k) for k in paper.K_VALUES},
                  records)


def training_table(result: Result) -> pd.DataFrame:
    """Each trained teacher's training: converged or not, the step (and epoch) of the weights
    kept, where it stopped, its validation accuracy there and its wall time."""
    t = result.spec.train
    images = t.train_limit or dataset_info(t.dataset).train_size
    rows = {}
    for name, r in result.records.items():
        kept = r.get("best", {}).get("step", r["val"][-1]["step"])
        rows[name] = {"converged": r.get("converged", "no criterion"), "kept step": kept,
                      "epoch": round(kept * t.batch_size / images, 1),
                      "stopped at": r.get("stopped", len(r["loss"])), "budget": t.steps,
                      "val acc": result.accuracy[name],
                      "train minutes (wall)": round(r["seconds"] / 60, 1)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("teacher")


def similarity_figure(result: Result) -> plt.Figure:
    """Rows are the first seed's teachers (and the pretrained model), columns token groups,
    layers 1..L; the max-cut's blocks outlined (Fig. 1)."""
    first = f"seed {result.spec.teacher_seeds[0]}"
    mats = {name: m for name, m in result.similarity.items()
            if name.endswith(first) or name == result.spec.pretrained.label}
    groups = [g for g in ("cls", "registers", "patches") if any(g in m for m in mats.values())]
    panels = {f"{model}\n{g}": m[g][1:, 1:] if g in m else None
              for model, m in mats.items() for g in groups}
    cuts = {f"{model}\n{g}": result.cuts[model] for model in mats for g in groups}
    return plotting.similarity_panels(panels, ncols=len(groups), partitions=cuts)


SYMLOG_LINEAR = 0.02  # the excess axis is linear where the teachers and C1's threshold lie
PHASED = {name for name, (has_phases, _) in controls.CONTROLS.items() if has_phases}


def excess_figure(result: Result) -> plt.Figure:
    """C1's statistic (block excess over the warped decay, bootstrap interval) for every model and
    control, against C1's threshold and the paper's DINOv2-B matrix."""
    kinds = {"teacher": result.trained(), "untrained": result.untrained(),
             "control with phases": {n: e for n, e in result.controls.items() if n in PHASED},
             "control without phases": {n: e for n, e in result.controls.items()
                                        if n not in PHASED}}
    fig, ((ax,),) = plotting.figure(height=3.8)
    names: list[str] = []
    for (kind, models), color in zip(kinds.items(), ("C0", "0.55", "C2", "C3")):
        x = np.arange(len(names), len(names) + len(models))
        e = list(models.values())
        ax.vlines(x, [m.low for m in e], [m.high for m in e], color=color, label=f"_{kind}")
        ax.scatter(x, [m.excess for m in e], s=16, color=color, label=kind)
        names += list(models)
    every = [m for models in kinds.values() for m in models.values()]
    dinov2b = result.paper_dinov2b[result.spec.k].excess
    ax.axhline(EXCESS_MIN.value, color="black", ls="--", lw=0.8, label="C1's threshold")
    ax.axhline(dinov2b, color="C3", ls=":", label="DINOv2-B (the paper's matrix)")
    ax.set_xticks(range(len(names)), names, rotation=50, ha="right", rotation_mode="anchor")
    ax.set_yscale("symlog", linthresh=SYMLOG_LINEAR, linscale=1.5)  # the threshold's scale visible
    low = 1.2 * min(-SYMLOG_LINEAR, dinov2b, *(m.low for m in every))
    high = 1.5 * max(EXCESS_MIN.value, *(m.high for m in every))
    ticks = [t for t in (-0.3, -0.1, -0.02, -0.01, 0, 0.01, 0.02, 0.1, 0.3) if low <= t <= high]
    ax.set(ylim=(low, high))
    ax.set_yticks(ticks, [f"{t:+g}".replace("-", "−") if t else "0" for t in ticks])
    ax.set(xlabel="model or synthetic control", ylabel="block excess over warped decay",
           title=f"C1: max-cut into k = {result.spec.k} phases (Fig. 1); linear within "
                 f"±{SYMLOG_LINEAR}, logarithmic beyond")
    plotting.legend_below(fig, [ax], ncols=3)
    return fig


def _shown(e: PhaseExcess, null: str) -> str:
    x = e.ladder.get(null)
    if x is None:
        return "—"
    return f"{x.excess:+.3f}" + ("" if np.isnan(x.low) else f" [{x.low:+.3f}, {x.high:+.3f}]")


def excess_row(e: PhaseExcess) -> dict[str, object]:
    """One model's C1 statistics as a table row: max-cut, excess over each null (interval), the
    warped-decay fit's error, the cut's agreement over resamples and its contrast rank."""
    return {"max-cut": phases.format_partition(e.cut),
            **{f"over {null}": _shown(e, null) for null in NULLS},
            "fit RMSE": round(e.fit_rmse, 3),
            "cut agreement": "—" if np.isnan(e.agreement) else round(e.agreement, 2),
            "contrast rank": f"{e.rank.rank}/{e.rank.total}"}


def excess_table(result: Result) -> pd.DataFrame:
    """The ladder of nulls (C1) for every model, every synthetic control (with its built-in
    answer) and the paper's DINOv2-B matrix; C1 is judged on the last rung, the warped decay."""
    rows = [{"model": name, "kind": "untrained" if name.startswith("untrained") else "teacher",
             **excess_row(e)} for name, e in result.excess.items()]
    rows += [{"model": name,
              "kind": "control with phases" if name in PHASED else "control without phases",
              **excess_row(e)} for name, e in result.controls.items()]
    rows.append({"model": "DINOv2-B (the paper's matrix)", "kind": "calibration",
                 **excess_row(result.paper_dinov2b[result.spec.k])})
    return pd.DataFrame(rows).set_index("model")


def paper_matrix_table(result: Result) -> pd.DataFrame:
    """The ladder for the paper's DINOv2-B matrix at each k of the paper; the warped decay's excess
    with the warp from the first or the last block only (C1 takes the better fit); and the excess
    of the paper's own partitions (Table 1)."""
    S = paper.dinov2b_block_similarity()
    residual = {origin: S - warped_decay_null(S, (origin,)) for origin in WARP_ORIGINS}
    judged = S - warped_decay_null(S)
    rows = []
    for k, e in result.paper_dinov2b.items():
        theirs = paper.DINOV2_B_PARTITIONS[k]
        rows.append({"k": k, **excess_row(e),
                     **{f"warp from the {origin} block": f"{contrast(r, e.cut):+.3f}"
                        for origin, r in residual.items()},
                     "paper's partition": phases.format_partition(theirs),
                     "its excess over warped decay": f"{contrast(judged, theirs):+.3f}"})
    return pd.DataFrame(rows).set_index("k").drop(columns=["over random walk", "cut agreement"])


def _span(values: list[float], fmt: str = "+.3f") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}} … {hi:{fmt}}"


def _ks(ks: list[int]) -> str:
    return "no k" if not ks else "k = " + " and ".join(map(str, ks))


def findings(result: Result) -> dict[str, str]:
    """What the chapter finds, as text for its prose: the trained models' excess over each rung,
    the controls' verdicts, the paper's matrix at every k, and C1's verdict."""
    trained, dinov2b = result.trained(), result.paper_dinov2b
    passed = {name: c1_block_excess({name: e}, k=result.spec.k).verdict
              for name, e in result.controls.items()}
    negative = [n for n in controls.CONTROLS if n not in PHASED]
    return {
        "k": str(result.spec.k),
        "teachers": str(len(trained)),
        "stationary": _span([e.ladder["stationary"].excess for e in trained.values()]),
        "warped": _span([e.excess for e in trained.values()]),
        "warped-high": _span([e.high for e in trained.values()]),
        "teacher-rmse": _span([e.fit_rmse for e in trained.values()], ".3f"),
        "positive": f"{sum(passed[n] == HOLDS for n in PHASED)} of {len(PHASED)}",
        "negative": f"{sum(passed[n] == FAILS for n in negative)} of {len(negative)}",
        "dinov2b-stationary": " / ".join(f"{e.ladder['stationary'].excess:+.3f}"
                                         for e in dinov2b.values()),
        "dinov2b-warped": " / ".join(f"{e.excess:+.3f}" for e in dinov2b.values()),
        "dinov2b-k": " / ".join(str(k) for k in dinov2b),
        "dinov2b-above": _ks([k for k, e in dinov2b.items() if e.excess > EXCESS_MIN.value]),
        "dinov2b-below": _ks([k for k, e in dinov2b.items() if e.excess <= EXCESS_MIN.value]),
        "dinov2b-rmse": f"{next(iter(dinov2b.values())).fit_rmse:.3f}",
        "verdict": claims(result)[0].verdict,
    }


def c1_block_excess(excess: dict[str, PhaseExcess], *, k: int) -> Claim:
    """C1: every model's max-cut has block excess over the warped-decay null above
    ``EXCESS_MIN`` (:func:`~raptor.book.claims.all_of` over their bootstrap intervals). It holds
    on every positive control of :mod:`raptor.controls` and fails on every negative one."""
    level = next(iter(excess.values())).level
    parts = {name: part((e.excess, e.low, e.high), EXCESS_MIN.value)
             for name, e in excess.items()}
    return conjoined(
        "C1", parts, paper="contiguous blocks visible in every model (Fig. 1)",
        ours="; ".join(f"{name}: excess {e.excess:+.3f} [{e.low:+.3f}, {e.high:+.3f}]"
                       for name, e in excess.items()),
        detail=f"max-cut k={k}, cross-fitted block excess over the {JUDGED_NULL} null (a "
               f"monotone decay along a Box-Cox-warped depth axis, fitted per image half), "
               f"{level:.0%} bootstrap interval; holds if every model's interval lies "
               f"above {EXCESS_MIN.value}")


def claims(result: Result) -> list[Claim]:
    """C1 on the trained models (the untrained ones and the controls are shown beside them, not
    judged: the paper finds untrained ViTs easier to reconstruct, C9)."""
    return [c1_block_excess(result.trained(), k=result.spec.k)]
