"""The claim of chapter *Emergent phase structure* (C1), judged by C1's test, and the prose
findings that quote it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from raptor import controls, phases
from raptor.book.chapters.phase_structure.compute import PHASED, Result
from raptor.book.claims import FAILS, HOLDS, LEVEL, Claim, excess_text, stated
from raptor.book.engine import Declaration, Part, judge, of_model
from raptor.phase_test import EXCESS_MIN, POWER, SPLITS, KExcess, PhaseTest
from raptor.stats import Interval
from raptor.structure import JUDGED_NULL


def _span(values: list[float], fmt: str = "+.3f") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}} … {hi:{fmt}}"


def _ks(ks: list[int]) -> str:
    return "no k" if not ks else "k = " + " and ".join(map(str, ks))


def cut_text(e: KExcess) -> str:
    """The partition judged at one k and the share of the halves that chose it."""
    return phases.format_partition(e.cut) + (f" ({e.share:.0%} of halves)" if e.share < 1 else "")


def step_text(d: float) -> str:
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
        "dinov2b-d-star": step_text(paper_test.d_star),
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
             + "; ".join(f"{name} k = {t.best().k} ({cut_text(t.best())}), "
                         f"d* {step_text(t.d_star)}" for name, t in tests.items())
             + (f"; {calibrated}" if calibrated else "")))


def claims(result: Result) -> list[Claim]:
    """C1 on the trained models (the untrained ones and the controls are shown beside them, not
    judged: the paper finds untrained ViTs easier to reconstruct, C9)."""
    values = {name: [t.excess, *t.interval()] for name, t in result.trained_tests().items()}
    values["DINOv2-B"] = [result.paper_test.excess, None, None]
    return [replace(c1_block_excess(result.trained_tests(), calibration(result)), values=values)]
