"""The claims of chapter *Are the phases functional?* (§2, Figs. 3, 13, 15; C3, C4, C9–C11): one
function a claim, each with its named thresholds, applied by
:func:`raptor.book.chapters.functional_phases.claims`."""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from raptor.book.claims import (Claim, Threshold, all_of, claim, conjoined, correction, part,
                                versus)
from raptor.book.engine import Declaration, Part, judge, over_seeds
from raptor.stats import Interval, bootstrap, bootstrap_mean

GROUPS = ("cls", "patches")
#: Images per bootstrap unit of the controls' and snapshots' intervals (evaluation noise) [ours].
UNIT_IMAGES = 50

SIGMA_MIN = Threshold(1.0, "the paper: max-cut partitions reach 'accuracy often greater than one "
                           "standard deviation above randomly chosen partitions' (§2, Fig. 3)")
INTRA_KEEP_MIN = Threshold(0.9, "[ours] the paper: intra-block swaps 'preserve accuracy' (§2, "
                                "Fig. 15) without a number; ≥ 90% of the teacher's accuracy")
INTER_KEEP_MAX = Threshold(0.6, "[ours] the paper: inter-block swaps lead to 'model collapse' "
                                "(§2, Fig. 15) without a number; ≤ 60% of the teacher's "
                                "accuracy")
SKIP_DROP_MAX = Threshold(0.1, "[ours] the paper: removing the skip branch 'only slightly "
                               "reduces reconstruction accuracy' (§2) without a number; a drop of "
                               "patch R² below 0.1")
R2_HIGH = Threshold(0.9, "[ours] the paper: R² 'remains high until the ViT network begins to "
                        "overfit' (§2, Fig. 13) without a number; 'high' = above 0.9, the bar "
                        "this book also sets for a close match (C15)")


def margin(maxcut_acc: float, random_acc: Sequence[float]) -> float:
    """How many standard deviations of the random partitions' accuracy max-cut's lies above;
    NaN when they do not vary (no σ to count in)."""
    rand = np.asarray(random_acc, dtype=float)
    sd = rand.std(ddof=1)
    return float((maxcut_acc - rand.mean()) / sd) if sd > 0 else math.nan


def _finite(intervals: Iterable[Interval]) -> bool:
    return all(np.isfinite([iv.estimate, iv.low, iv.high]).all() for iv in intervals)


def maxcut_margin(units: np.ndarray, sizes: np.ndarray) -> float:
    """:func:`margin` of the first Raptor (the max-cut's) over the others, on their accuracies
    over all images (``units``: one row per Raptor, per unit of ``sizes`` images)."""
    acc = np.average(units, axis=1, weights=sizes)
    return margin(acc[0], acc[1:])


def c3_maxcut_beats_random(margins: Mapping[int, Sequence[float]], *,
                           counts: Mapping[int, int], rests_on: str = "") -> Claim:
    """C3 (Fig. 3): for every k, max-cut's Raptor accuracy is ``SIGMA_MIN`` σ above that of the
    ``counts[k]`` random partitions, judged on the engine's t interval over the seeds' margins
    (``margins[k]``, one per seed, :func:`maxcut_margin`); not testable where some seed's random
    partitions do not vary (no σ)."""
    paper_ = "max-cut beats random partitions by > 1σ of Raptor accuracy (Fig. 3)"
    note = ("random contiguous partitions other than the max-cut, each once: "
            + ", ".join(f"k={k}: {n}" for k, n in counts.items())
            + "; the margin in σ of the random partitions' accuracies, one per seed")
    if not all(np.isfinite(m).all() for m in margins.values()):
        return replace(claim("C3", paper=paper_, ours="no σ on some seed", holds=None,
                             detail=note + "; not testable: the random partitions' accuracies "
                                           "do not vary on some seed (no σ)"), rests_on=rests_on)
    return judge(Declaration("C3", paper_, [
        Part(f"k={k}", over_seeds(m), SIGMA_MIN, fmt="+.1f",
             what=f"the k={k} max-cut Raptor's margin over random partitions (σ)")
        for k, m in margins.items()], rests_on=rests_on, note=note))


def retained_interval(swap_units: np.ndarray, teacher_units: np.ndarray,
                      sizes: np.ndarray) -> Interval:
    """The share of the teacher's accuracy that swapped copies keep (their mean over swap sets,
    ``swap_units`` ``(sets, units)``), with its 95% paired bootstrap interval over units."""
    def statistic(i: np.ndarray) -> float:
        teacher = np.average(teacher_units[i], weights=sizes[i])
        kept = np.average(swap_units[:, i], axis=1, weights=sizes[i]).mean()
        return float(kept / teacher) if teacher > 0 else math.nan

    return bootstrap(statistic, len(sizes))


def c4_swaps(intra: Mapping[int, Interval], inter: Mapping[int, Interval]) -> Claim:
    """C4: for every number ``n`` of layers swapped, intra-phase swaps keep more than
    ``INTRA_KEEP_MIN`` of the teacher's accuracy and inter-phase ones less than ``INTER_KEEP_MAX``
    (``intra[n]``, ``inter[n]``: :func:`retained_interval`)."""
    testable = bool(intra) and bool(inter) and _finite([*intra.values(), *inter.values()])
    parts = {**{f"intra {n}": part(iv, INTRA_KEEP_MIN.value) for n, iv in intra.items()},
             **{f"inter {n}": part(iv, INTER_KEEP_MAX.value, above=False)
                for n, iv in inter.items()}} if testable else {}

    def shown(ivs: Mapping[int, Interval]) -> str:
        return ", ".join(f"{n} layer{'s' * (n > 1)} {iv.estimate:.0%} [{iv.low:.0%}, "
                         f"{iv.high:.0%}]" for n, iv in ivs.items())

    return claim(
        "C4", paper="intra-block swaps keep accuracy; inter-block swaps collapse it (Fig. 15)",
        ours=f"share of teacher accuracy kept: intra {shown(intra)}; inter {shown(inter)}"
        if testable
        else "no swap sets of both kinds for this partition, or a teacher with no image right",
        holds=all_of(parts.values()) if testable else None,
        tests=len(parts) if testable else 1,
        detail=f"holds if, for every number of layers swapped, intra swaps keep > "
               f"{INTRA_KEEP_MIN.value:.0%} and inter swaps < {INTER_KEEP_MAX.value:.0%} of the "
               f"teacher's accuracy [ours] (mean over swap sets); 95% paired bootstrap intervals "
               f"over units of ≤ {UNIT_IMAGES} validation images (the same images through the "
               f"teacher and every swapped copy)" + correction(parts))


def _fmt(iv: Interval) -> str:
    return f"{iv.estimate:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]"


def _noise(n_units: int) -> str:
    return (f"95% bootstrap intervals over {n_units} units of ≤ {UNIT_IMAGES} validation images "
            "(evaluation noise only: one teacher and one Raptor seed)")


def c9_untrained_easier(untrained: Mapping[str, np.ndarray], trained: Mapping[str, np.ndarray],
                        sizes: np.ndarray) -> Claim:
    """C9: the untrained teacher's Raptor has higher R² than the trained one's, cls and patches
    (``untrained[g]``, ``trained[g]``: R² per unit of ``sizes`` images), judged on the paired
    difference's interval."""
    diff = {g: bootstrap_mean(np.asarray(untrained[g]) - np.asarray(trained[g]), sizes)
            for g in GROUPS}
    parts = {g: part(iv, 0.0) for g, iv in diff.items()}

    def mean(r2: Mapping[str, np.ndarray]) -> str:
        return "/".join(f"{np.average(r2[g], weights=sizes):.3f}" for g in GROUPS)

    return conjoined(
        "C9", parts, paper="an untrained ViT is reconstructed better than a trained one (§2)",
        ours=f"R² cls/patches: untrained {mean(untrained)}, trained {mean(trained)}; "
             "untrained − trained: " + ", ".join(f"{g} {_fmt(iv)}" for g, iv in diff.items()),
        detail=f"holds if the R² difference's interval lies above 0 for cls and patches; "
               f"{_noise(len(sizes))}")


def c10_skip_removal(with_skip: np.ndarray, without_skip: np.ndarray,
                     sizes: np.ndarray) -> Claim:
    """C10: removing an untrained ViT's skip branches lowers patch R² (per unit of images) by
    less than ``SKIP_DROP_MAX``, judged on the paired drop's bootstrap interval."""
    drop = bootstrap_mean(np.asarray(with_skip) - np.asarray(without_skip), sizes)
    return claim(
        "C10", paper="removing the skip branch of an untrained ViT only slightly lowers R² (§2)",
        ours=f"patch R² {np.average(with_skip, weights=sizes):.3f} → "
             f"{np.average(without_skip, weights=sizes):.3f}; drop {_fmt(drop)}",
        holds=versus(drop.low, drop.high, SKIP_DROP_MAX.value, above=False),
        detail=f"drop of patch R² below {SKIP_DROP_MAX.value} [ours]; {_noise(len(sizes))}")


def c11_overfitting(best: int, steps: Sequence[int], r2: Mapping[str, np.ndarray],
                    acc: np.ndarray, sizes: np.ndarray) -> Claim:
    """C11: R² (``r2[g]``, ``(snapshots, units)``) stays above ``R2_HIGH`` up to the first
    snapshot at or after the val-loss minimum (step ``best``), from which to the last snapshot
    cls R² and the teacher's accuracy ``acc`` fall, each judged on its bootstrap interval."""
    paper = "R² stays high until overfitting starts, then cls R² and accuracy drop (§2, Fig. 13)"
    ref = next((i for i, s in enumerate(steps) if s >= best), None)
    if ref is None or ref == len(steps) - 1:
        return claim(
            "C11", paper=paper, ours=f"val-loss minimum at step {best}; no snapshot "
                 + ("at or after it" if ref is None else "after the one at it"),
            holds=None, detail="needs a snapshot at or after the val-loss minimum and a later one")
    level = {(i, g): bootstrap_mean(r2[g][i], sizes) for i in range(ref + 1) for g in GROUPS}
    fall = {"cls R²": bootstrap_mean(r2["cls"][-1] - r2["cls"][ref], sizes),
            "acc": bootstrap_mean(acc[-1] - acc[ref], sizes)}
    low = min(level.values(), key=lambda iv: iv.low)
    parts = {**{f"{g} R² at step {steps[i]}": part(iv, R2_HIGH.value)
                for (i, g), iv in level.items()},
             **{f"{k} falls": part(iv, 0.0, above=False) for k, iv in fall.items()}}
    return conjoined(
        "C11", parts, paper=paper,
        ours=f"val-loss minimum at step {best}, reference snapshot {steps[ref]}; lowest R² up "
             f"to it {low.estimate:.3f} [{low.low:.3f}, {low.high:.3f}]; step {steps[ref]} → "
             f"{steps[-1]}: " + ", ".join(f"{k} {_fmt(iv)}" for k, iv in fall.items()),
        detail=f"holds if cls and patch R² > {R2_HIGH.value:g} at every snapshot up to the "
               f"reference and cls R² and teacher accuracy fall from it to the last snapshot; "
               f"{_noise(len(sizes))}")
