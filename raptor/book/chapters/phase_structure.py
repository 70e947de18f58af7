"""Chapter *Emergent phase structure*: layer–layer similarity and its blocks (§2, Fig. 1; C1).

The max-cut's block excess over a ladder of nulls (:mod:`raptor.structure`) for every teacher, the
untrained networks, the synthetic controls (:mod:`raptor.controls`) and the paper's DINOv2-B
matrix (:func:`raptor.paper.dinov2b_block_similarity`), the ladder showing why the warped decay is
the null. C1 is judged by :func:`raptor.phase_test.phase_test`: the partition chosen on the
cross-fitted residual over the warped decay at every k of the paper, corrected for the k's tried,
with each model's smallest detectable step d* beside its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import controls, paper, phases
from raptor.catalog import dataset_info
from raptor.book import plotting
from raptor.book.claims import FAILS, HOLDS, LEVEL, Claim, excess_text, stated
from raptor.book.engine import Declaration, Part, judge, of_model
from raptor.book.experiment import Walk, images_of, pretrained_walk, teacher_of, walk
from raptor.book.specs.phase_structure import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.phase_test import (EXCESS_MIN, K_TRIED, POWER, SPLITS, KExcess, PhaseTest,
                               phase_test, smallest_step)
from raptor.stats import Interval
from raptor.structure import (JUDGED_NULL, NULLS, WARP_ORIGINS, PhaseExcess, contrast,
                              matrix_excess, phase_excess, warped_decay_null)


@dataclass
class Result:
    """Per model (``"p=0.0, seed 0"``, ``"untrained, seed 0"``, a pretrained one) its walk, its
    max-cut's :class:`PhaseExcess` (the ladder) and C1's :class:`~raptor.phase_test.PhaseTest`;
    the same per control, and for the paper's DINOv2-B matrix (no interval); ``power`` the d* of
    each realistic control shape (phases on a decay without its step)."""

    spec: Spec
    accuracy: dict[str, float]
    trajectory_shape: dict[str, list[int]]
    similarity: dict[str, dict[str, np.ndarray]]
    cuts: dict[str, tuple[tuple[int, int], ...]]
    excess: dict[str, PhaseExcess]
    controls: dict[str, PhaseExcess]
    paper_dinov2b: dict[int, PhaseExcess]
    records: dict[str, dict[str, Any]]  # each trained teacher's training record
    tests: dict[str, PhaseTest]
    control_tests: dict[str, PhaseTest]
    paper_test: PhaseTest
    power: dict[str, float]

    def trained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if not name.startswith("untrained")}

    def untrained(self) -> dict[str, PhaseExcess]:
        return {name: e for name, e in self.excess.items() if name.startswith("untrained")}

    def trained_tests(self) -> dict[str, PhaseTest]:
        return {name: t for name, t in self.tests.items() if not name.startswith("untrained")}


def power_reps(n_boot: int) -> int:
    """The replicates of d* (:func:`~raptor.phase_test.smallest_step`) at ``n_boot`` resamples:
    half as many, at least 20."""
    return max(20, n_boot // 2)


def compute(spec: Spec) -> Result:
    """Similarity per model and token group, max-cuts, and C1's block excess for every model,
    control and the paper's DINOv2-B matrix."""
    spec.require_model()
    images = images_of(spec, spec.n_images)
    measure = dict(excess=(spec.k,), n_boot=spec.n_boot, device=resolve_device(spec.machine.device))
    accuracy, shapes, mats, excess, records, tests = {}, {}, {}, {}, {}, {}
    reps = power_reps(spec.n_boot)

    def add(name: str, w: Walk) -> None:
        accuracy[name], shapes[name], mats[name] = w.accuracy, list(w.traj.shape), w.similarity
        excess[name] = w.excess[spec.k]
        tests[name] = phase_test(w.per_image, n_boot=spec.n_boot, power_reps=reps)
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
    checks, control_tests = {}, {}
    for name in controls.CONTROLS:
        per_image, growth = controls.control(name, spec.control_images)
        checks[name] = phase_excess(per_image, spec.k, growth=growth, n_boot=spec.n_boot)
        control_tests[name] = phase_test(per_image, n_boot=spec.n_boot, power_reps=0)
    power = {f"{controls.partition_name(sizes)} on {decay} decay": smallest_step(
        controls.decay_images(spec.control_images, decay), controls.partition_of(sizes),
        reps=reps) for sizes in controls.REALISTIC_PHASES for decay in controls.STEP_DECAYS}
    S = paper.dinov2b_block_similarity()
    return Result(spec, accuracy, shapes, mats, {name: e.cut for name, e in excess.items()},
                  excess, checks, {k: matrix_excess(S, k) for k in paper.K_VALUES}, records,
                  tests, control_tests, phase_test(S), power)


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
    """One panel a model (the first seed's teachers and the pretrained model) and token group,
    two a row, layers 1..L; the max-cut's blocks outlined (Fig. 1)."""
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
    """C1's statistic — the excess at the best k of the partition chosen on the residual over the
    warped decay, cross-fitted, with its interval corrected for the k's tried — for every model
    and control, against C1's threshold and the paper's DINOv2-B matrix. One row a group (a
    rate's seeds, the untrained seeds, each kind of control; each model a series of the CSV),
    so that the rows stay legible however many models a profile has."""
    tests = result.tests
    kinds = {"teacher": result.trained_tests(),
             "untrained": {n: t for n, t in tests.items() if n not in result.trained_tests()},
             "control with phases": {n: t for n, t in result.control_tests.items()
                                     if n in PHASED},
             "control without phases": {n: t for n, t in result.control_tests.items()
                                        if n not in PHASED}}
    # one row a group (a rate's seeds, the untrained seeds, each kind of control), its models
    # spread within it: one row a model needs 0.15 in each, more than the result box's height
    colors = dict(zip(kinds, ("C0", "0.55", "C2", "C3")))
    groups: dict[str, list[tuple[str, PhaseTest, str]]] = {}
    for kind, models in kinds.items():
        for name, t in models.items():
            group = kind.replace("control", "controls") if kind.startswith("control") \
                else name.split(", seed ")[0]
            groups.setdefault(group, []).append((name, t, colors[kind]))
    fig, ((ax,),) = plotting.figure(width=plotting.BOX_WIDTH,
                                    height=min(plotting.BOX_TALLEST, 1.9 + 0.3 * len(groups)))
    lows, highs = [], []
    for row, members in enumerate(groups.values()):
        spread = min(0.5, 0.15 * (len(members) - 1))  # rows stay apart: a gap of 0.5 at least
        for j, (name, t, color) in enumerate(members):
            y = row + (spread * (j / (len(members) - 1) - 0.5) if len(members) > 1 else 0.0)
            lo, hi = t.interval()
            lows.append(lo)
            highs.append(hi)
            ax.hlines(y, lo, hi, color=color, lw=1, label=f"_{name}")
            ax.scatter(t.excess, y, s=10, color=color, label=f"_{name}")
    for kind, color in colors.items():
        ax.scatter([], [], s=10, color=color, label=kind)  # the legend's key, no data
    dinov2b = result.paper_test.excess
    ax.axvline(EXCESS_MIN.value, color="black", ls="--", lw=0.8, label="C1's threshold")
    ax.axvline(dinov2b, color="C3", ls=":",
               label="DINOv2-B (the paper's matrix,\nnot cross-fitted)")
    ax.set_yticks(range(len(groups)), [
        f"{group} ({len(members)})" if group.startswith("control") else group
        if len(members) == 1 else f"{group}, {len(members)} seeds"
        for group, members in groups.items()])
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xscale("symlog", linthresh=SYMLOG_LINEAR, linscale=1.5)  # the threshold's scale visible
    low = 1.2 * min(-SYMLOG_LINEAR, dinov2b, *lows)
    high = 1.5 * max(EXCESS_MIN.value, dinov2b, *highs)
    ticks = [t for t in (-0.3, -0.02, 0, 0.02, 0.3) if low <= t <= high]
    ax.set(xlim=(low, high))
    ax.set_xticks(ticks, [f"{t:+g}".replace("-", "−") if t else "0" for t in ticks])
    ax.set(ylabel="model or synthetic control", xlabel="excess over warped decay (best k)",
           title=f"C1: phases at some k of {', '.join(map(str, K_TRIED))},\nchosen on the "
                 f"residual (Fig. 1);\nlinear within ±{SYMLOG_LINEAR},\nlogarithmic beyond")
    plotting.legend_below(fig, [ax], ncols=2)
    return fig


def _shown(e: PhaseExcess, null: str) -> str:
    x = e.ladder.get(null)
    if x is None:
        return "—"
    return f"{Interval(x.excess, x.low, x.high, LEVEL):+.3f}"


def excess_row(e: PhaseExcess) -> dict[str, object]:
    """One model's C1 statistics as a table row: max-cut, excess over each null (interval), the
    warped-decay fit's error, the cut's agreement over resamples and its contrast rank."""
    return {"max-cut": phases.format_partition(e.cut),
            **{f"over {null}": _shown(e, null) for null in NULLS},
            "fit RMSE": round(e.fit_rmse, 3),
            "cut agreement": "—" if np.isnan(e.agreement) else round(e.agreement, 2),
            "contrast rank": f"{e.rank.rank}/{e.rank.total}"}


def c1_summary(t: PhaseTest | None) -> dict[str, object]:
    """C1's test in a few columns: the best k, its excess and corrected interval, its cut, d*
    and the verdict (dashes without the test)."""
    if t is None:
        return dict.fromkeys(("C1: best k", "C1: excess", "C1: cut", "d*", "C1"), "—")
    b, (lo, hi) = t.best(), t.interval()
    return {"C1: best k": b.k,
            "C1: excess": f"{Interval(b.excess, lo, hi, LEVEL):+.3f}",
            "C1: cut": _cut(b), "d*": _step(t.d_star),
            "C1": t.verdict() if t.n_images > 1 else "— (no images)"}


def excess_table(result: Result) -> pd.DataFrame:
    """The ladder of nulls for the max-cut of every model, every synthetic control (with its
    built-in answer) and the paper's DINOv2-B matrix, and beside it C1's test (the partition
    chosen on the residual over the warped decay, best k, d*)."""
    rows = [{"model": name, "kind": "untrained" if name.startswith("untrained") else "teacher",
             **excess_row(e), **c1_summary(result.tests.get(name))}
            for name, e in result.excess.items()]
    rows += [{"model": name,
              "kind": "control with phases" if name in PHASED else "control without phases",
              **excess_row(e), **c1_summary(result.control_tests.get(name))}
             for name, e in result.controls.items()]
    rows.append({"model": "DINOv2-B (the paper's matrix)", "kind": "calibration",
                 **excess_row(result.paper_dinov2b[result.spec.k]),
                 **c1_summary(result.paper_test)})
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
                     "its excess over warped decay": f"{contrast(judged, theirs):+.3f}",
                     **({"C1: chosen on the residual": phases.format_partition(
                         result.paper_test.per_k[k].cut),
                         "its excess": f"{result.paper_test.per_k[k].excess:+.3f}"}
                        if k in result.paper_test.per_k else {})})
    return pd.DataFrame(rows).set_index("k").drop(columns=["over random walk", "cut agreement"])


def _span(values: list[float], fmt: str = "+.3f") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}} … {hi:{fmt}}"


def _ks(ks: list[int]) -> str:
    return "no k" if not ks else "k = " + " and ".join(map(str, ks))


def _cut(e: KExcess) -> str:
    """The partition judged at one k and the share of the halves that chose it."""
    return phases.format_partition(e.cut) + (f" ({e.share:.0%} of halves)" if e.share < 1 else "")


def _step(d: float) -> str:
    """A step d* as text: ``none up to 0.95`` when no step in the range is detected."""
    return "none up to 0.95" if np.isinf(d) else "—" if np.isnan(d) else f"{d:.2f}"


def findings(result: Result) -> dict[str, str]:
    """What the chapter finds, as text for its prose: the trained models' max-cut excess over
    each rung, the controls' verdicts under C1's test, the paper's matrix at every k, each
    model's d*, and C1's verdict."""
    trained, dinov2b, tests = result.trained(), result.paper_dinov2b, result.trained_tests()
    passed = {name: c1_block_excess({name: t}).verdict
              for name, t in result.control_tests.items()}
    negative = [n for n in controls.CONTROLS if n not in PHASED]
    best = {name: t.best() for name, t in tests.items()}
    paper_test = result.paper_test
    return {
        "k": str(result.spec.k),
        "teachers": str(len(trained)),
        "stationary": _span([e.ladder["stationary"].excess for e in trained.values()]),
        "warped": _span([e.excess for e in trained.values()]),
        "warped-high": _span([e.high for e in trained.values()]),
        "teacher-rmse": _span([e.fit_rmse for e in trained.values()], ".3f"),
        "positive": f"{sum(passed[n] == HOLDS for n in PHASED)} of {len(PHASED)}",
        "negative": f"{sum(passed[n] == FAILS for n in negative)} of {len(negative)}",
        "negative-max": f"{max(result.control_tests[n].best().excess for n in negative):+.3f}",
        "power": _span(list(result.power.values()), ".2f"),
        "teacher-excess": _span([b.excess for b in best.values()]),
        "teacher-tests": "; ".join(f"{name} {excess_text(t)}" for name, t in tests.items()),
        "teacher-d-star": _span([t.d_star for t in tests.values()], ".2f"),
        "dinov2b-stationary": " / ".join(f"{e.ladder['stationary'].excess:+.3f}"
                                         for e in dinov2b.values()),
        "dinov2b-warped": " / ".join(f"{e.excess:+.3f}" for e in dinov2b.values()),
        "dinov2b-k": " / ".join(str(k) for k in paper_test.per_k),
        "dinov2b-best": f"{paper_test.excess:+.3f} at k = {paper_test.best().k}",
        "dinov2b-above": _ks([k for k, e in dinov2b.items() if e.excess > EXCESS_MIN.value]),
        "dinov2b-below": _ks([k for k, e in dinov2b.items() if e.excess <= EXCESS_MIN.value]),
        "dinov2b-rmse": f"{next(iter(dinov2b.values())).fit_rmse:.3f}",
        "dinov2b-chosen": " / ".join(f"{e.excess:+.3f}" for e in paper_test.per_k.values()),
        "dinov2b-paper": " / ".join(f"{r.excess:+.3f}" for r in paper_test.reference.values()),
        "dinov2b-d-star": _step(paper_test.d_star),
        "dinov2b-steps": f"{paper_test.steps[6]:.2f} (blocks 7–8) and {paper_test.steps[9]:.2f} "
                         f"(10–11)",
        "verdict": stated(claims(result)[0].verdict),
        "covered": _covered(result),
        "untrained-pass": _passing({n: t for n, t in result.tests.items()
                                    if n not in result.trained_tests()}),
        "smooth-pass": _passing({n: result.control_tests[n] for n in negative}),
        "untrained-max": _span([t.excess for n, t in result.tests.items()
                                if n not in result.trained_tests()]),
        "calibration": calibration(result),
    }


def calibration(result: Result) -> str:
    """C1's threshold against what has no trained phases, in words: the share of the untrained
    networks and of the smooth negative controls that it passes, and what that means."""
    untrained = {n: t for n, t in result.tests.items() if n not in result.trained_tests()}
    smooth = {n: result.control_tests[n] for n in controls.CONTROLS if n not in PHASED}
    passed = [n for n, t in (*untrained.items(), *smooth.items()) if t.verdict() == HOLDS]
    text = (f"C1's threshold {EXCESS_MIN.value} against models without trained phases: of the "
            f"untrained networks {_passing(untrained)}; of the smooth negative controls "
            f"{_passing(smooth)}")
    if passed:
        return (text + f". It is passed by {', '.join(passed)}: at this threshold C1's test does "
                       f"not tell a trained network's phases from what an untrained ViT shows, "
                       f"so a teacher that passes it is no evidence of trained phases")
    return text + ": none of them passes it"


def _covered(result: Result) -> str:
    """How many of the models and controls with images have C1's interval about its estimate."""
    tests = [t for t in (*result.tests.values(), *result.control_tests.values())
             if t.n_images > 1]
    inside = sum(lo <= t.excess <= hi for t in tests for lo, hi in [t.interval()])
    return f"{inside} of {len(tests)}"


def _passing(tests: dict[str, PhaseTest]) -> str:
    """The share of ``tests`` that C1's threshold passes (holds), and the share whose excess alone
    lies above it."""
    holds = sum(t.verdict() == HOLDS for t in tests.values())
    above = sum(t.excess > EXCESS_MIN.value for t in tests.values())
    return (f"{holds} of {len(tests)} ({holds / len(tests):.0%}) hold, {above} of {len(tests)} "
            f"lie above it")


def c1_row(t: PhaseTest, level: float = 0.95) -> dict[str, object]:
    """One model's C1 test as a table row: per k the excess of the partition chosen on the
    residual (interval at the corrected level) and the cut; the paper's partitions' excess; the
    best k; d*; the largest visible step (one minus adjacent similarity); the verdict."""
    row: dict[str, object] = {}
    for k, e in t.per_k.items():
        lo, hi = e.interval(t.level_k(level))
        row[f"k = {k}"] = f"{Interval(e.excess, lo, hi, t.level_k(level)):+.3f}"
        row[f"cut at k = {k}"] = _cut(e)
    for k, r in t.reference.items():
        row[f"paper's partition at k = {k}"] = f"{phases.format_partition(r.cut)}: {r.excess:+.3f}"
    row |= {"best k": t.best().k, f"d* ({POWER:.0%} power)": _step(t.d_star),
            "largest adjacent step": round(float(np.max(t.steps)), 2),
            "C1": t.verdict(level) if t.n_images > 1 else "— (no images)"}
    return row


def c1_table(result: Result) -> pd.DataFrame:
    """C1's test for every model and the paper's DINOv2-B matrix (not cross-fitted, no
    interval): the chosen partitions at each k, the paper's partitions beside them, d*."""
    rows = {name: c1_row(t) for name, t in result.tests.items()}
    rows["DINOv2-B (the paper's matrix)"] = c1_row(result.paper_test)
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")


def power_table(result: Result) -> pd.DataFrame:
    """The test's power on the controls' shapes: d*, the smallest drop of similarity across each
    boundary detected with 80% probability at ``control_images`` images, by phases and decay."""
    rows = [{"phases": name.split(" on ")[0], "decay": name.split(" on ")[1].removesuffix(
        " decay"), "d*": _step(d)}
            for name, d in result.power.items()]
    return pd.DataFrame(rows).pivot(index="phases", columns="decay", values="d*")


def c1_block_excess(tests: dict[str, PhaseTest], calibrated: str = "") -> Claim:
    """C1: every model has phases at some k of :data:`~raptor.phase_test.K_TRIED` — the partition
    chosen on the residual over the warped decay, cross-fitted, has excess above ``EXCESS_MIN``:
    one part a model (the paper's "every model"), each on its own bootstrap interval over images
    at any level (:meth:`~raptor.phase_test.PhaseTest.interval`, the k's corrected inside it). It
    holds on every positive control of :mod:`raptor.controls` and fails on every negative one; a
    miss reads "no block step of d* or more". ``calibrated``: the threshold against models
    without trained phases (:func:`calibration`), in the claim's detail."""
    first = next(iter(tests.values()))
    parts = [Part(name, of_model(Interval(t.excess, *t.interval(), LEVEL), t.n_images,
                                 at=t.interval),
                  EXCESS_MIN, fmt="+.3f", what=f"the block excess of {name}")
             for name, t in tests.items()]
    return judge(Declaration(
        "C1", "contiguous blocks visible in every model (Fig. 1)", parts,
        note=f"the partition chosen on the residual over the {JUDGED_NULL} null (a monotone "
             f"decay along a Box-Cox-warped depth axis) at each k of {list(first.per_k)}, "
             f"the warp and the partition chosen on one half of the images and measured on "
             f"the other, averaged over {SPLITS} random splits, BCa bootstrap intervals at "
             f"the level Bonferroni-corrected for the {len(first.per_k)} k's, that of the "
             f"largest excess; per model its best k, cut (the one its halves chose most "
             f"often) and d* (the step, a drop of "
             f"similarity across a boundary, planted at {phases.format_partition(first.planted)}"
             f" into the model's own null and noise, detected with {POWER:.0%} probability): "
             + "; ".join(f"{name} k = {t.best().k} ({_cut(t.best())}), d* {_step(t.d_star)}"
                         for name, t in tests.items())
             + (f"; {calibrated}" if calibrated else "")))


def claims(result: Result) -> list[Claim]:
    """C1 on the trained models (the untrained ones and the controls are shown beside them, not
    judged: the paper finds untrained ViTs easier to reconstruct, C9)."""
    values = {name: [t.excess, *t.interval()] for name, t in result.trained_tests().items()}
    values["DINOv2-B"] = [result.paper_test.excess, None, None]
    return [replace(c1_block_excess(result.trained_tests(), calibration(result)), values=values)]
