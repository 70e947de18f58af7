"""Chapter *Stochastic depth and recurrent compressibility*: a sweep of uniform rates p (§2,
Fig. 4; C5–C8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.claims import Claim, Part, Threshold, all_of, claim, correction, part, versus
from raptor.book.experiment import images_of, student_of, teacher_of, walk
from raptor.book.specs.stochastic_depth import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.phases import Partition
from raptor.similarity import mean_offdiagonal
from raptor.stats import correlation, partial_correlation, rank_correlation


@dataclass
class Run:
    """One teacher (rate ``p``, ``seed``) and its Raptor."""

    p: float
    seed: int
    similarity: np.ndarray  # S over blocks 1..L (phase_matrix)
    partition: Partition
    r2: dict[str, np.ndarray]  # layerwise R², student vs teacher, per token group (layers 0..L)
    teacher_acc: float
    student_acc: float


@dataclass
class Result:
    spec: Spec
    runs: list[Run]


def compute(spec: Spec) -> Result:
    """For every rate and seed: the teacher, its similarity and max-cut, and its Raptor's fit."""
    device = resolve_device(spec.machine.device)
    images = images_of(spec, spec.n_images)
    runs = []
    for p in spec.p_values:
        for seed in spec.seeds:
            w = walk(teacher_of(spec, p, seed=seed), images, cuts=(spec.k,), device=device)
            student, _ = student_of(spec, p, w.cuts[spec.k], seed=seed)
            ev = w.evaluate(student, device)
            runs.append(Run(p, seed, w.S, w.cuts[spec.k],
                            {g: np.asarray(v) for g, v in ev["r2"].items()},
                            ev["teacher_acc"], ev["student_acc"]))
    return Result(spec, runs)


def sweep_table(result: Result) -> pd.DataFrame:
    """One row per teacher: partition, mean similarity, accuracies and R² over layers 1..L (cls,
    patches, and "R²": their mean, Fig. 4D)."""
    rows = []
    for r in result.runs:
        cls, patches = (float(np.mean(r.r2[g][1:])) for g in ("cls", "patches"))
        rows.append({"p": r.p, "seed": r.seed, "partition": phases.format_partition(r.partition),
                     "mean similarity": mean_offdiagonal(r.similarity),
                     "teacher acc": r.teacher_acc, "student acc": r.student_acc,
                     "R² cls": cls, "R² patches": patches, "R²": (cls + patches) / 2})
    return pd.DataFrame(rows)


def similarity_figure(result: Result) -> plt.Figure:
    """(A) each rate's similarity matrix (first seed, layers 1..L) with its max-cut (Fig. 4A)."""
    first = [r for r in result.runs if r.seed == result.spec.seeds[0]]
    return plotting.similarity_panels(
        {f"p={r.p}": r.similarity for r in first}, ncols=2,
        partitions={f"p={r.p}": r.partition for r in first})


def layerwise_figure(result: Result) -> plt.Figure:
    """(B) each rate's Raptor R² to its teacher through depth, mean over seeds (Fig. 4B)."""
    fig, ((ax,),) = plotting.figure(height=3.2)
    cmap = plt.get_cmap("viridis")
    p_values, styles = result.spec.p_values, {"cls": "-", "patches": "--"}
    for i, p in enumerate(p_values):
        runs = [r for r in result.runs if r.p == p]
        color = cmap(i / max(1, len(p_values) - 1))
        for g, ls in styles.items():
            ax.plot(np.mean([r.r2[g] for r in runs], axis=0), ls=ls, color=color,
                    label=f"_p={p} {g}")
        ax.plot([], [], color=color, label=f"p={p}")
    for g, ls in styles.items():
        ax.plot([], [], color="grey", ls=ls, label=g)
    ax.set(xlabel="layer", ylabel="R² to the teacher", title="(B) R² through depth")
    plotting.legend_below(fig, [ax], ncols=4)
    return fig


def sweep_figure(result: Result) -> plt.Figure:
    """(C) accuracy and (D) R² against p, mean ± sd over seeds; (E) similarity vs R², one point a
    teacher (Fig. 4C–E): what C6–C8 judge."""
    spec, sweep = result.spec, sweep_table(result)
    by_p = sweep.drop(columns="partition").groupby("p").agg(["mean", "std"])
    fig, axes = plotting.grid(3, width=plotting.BOX_WIDTH, row_height=2.5, extra=0.6)
    ax_c, ax_d, ax_e = axes
    for col, label in (("teacher acc", "teacher"), ("student acc", "Raptor")):
        ax_c.errorbar(spec.p_values, by_p[(col, "mean")], yerr=by_p[(col, "std")].fillna(0),
                      marker="o", label=label, capsize=3)
    ax_c.set(xlabel="stochastic-depth rate p", ylabel="accuracy", title="(C) accuracy")
    ax_d.errorbar(spec.p_values, by_p[("R²", "mean")], yerr=by_p[("R²", "std")].fillna(0),
                  marker="o", capsize=3, color="black", label="_mean R²")
    ax_d.set(xlabel="stochastic-depth rate p", ylabel="mean R² (layers 1..L)",
             title="(D) reconstruction")
    sc = ax_e.scatter(sweep["mean similarity"], sweep["R²"], c=sweep["p"], cmap="viridis",
                      label="_teachers (value: p)")
    fig.colorbar(sc, ax=ax_e, label="p")
    assoc = correlation(sweep["mean similarity"], sweep["R²"])
    ax_e.set(xlabel="mean layer–layer similarity", ylabel="mean R²",
             title=f"(E) r = {assoc.interval:.2f}")
    plotting.legend_below(fig, axes, ncols=2)
    return fig


ALPHA = Threshold(0.05, "[ours] the paper reports the rises (Fig. 4) without a test; Spearman's "
                        "ρ with p, its 95% (two-sided 5%) Fisher-z interval above 0 (Bonett & "
                        "Wright 2000 standard error); at or below 0 it does not hold")
RISE_UP_TO = Threshold(paper.SD_RISE_UP_TO, "\"increasing SD improves CIFAR-100 classification "
                                            "accuracy\" (§2, Fig. 4C), up to p ≈ 0.6")
CI_LEVEL = Threshold(0.95, "[ours] \"a strong positive association\" (§2, Fig. 4E) without a "
                           "test; a Pearson r within rates p (teachers' deviations from their "
                           "rate's mean) whose 95% Fisher-z interval excludes 0")
ALPHAS = (ALPHA,)  # the significance levels of its tests (the claims page)
MIN_TEACHERS = 5  # a rank correlation's interval needs n >= 5 (raptor.stats.rank_correlation)


def _rises(y: Sequence[float], p: Sequence[float]) -> tuple[Part | None, str]:
    """"``y`` rises with ``p``" as a :class:`~raptor.book.claims.Part` on ρ's interval, and ρ
    with it; ``None`` (not testable) on fewer than ``MIN_TEACHERS`` teachers."""
    if len(y) < MIN_TEACHERS:
        return None, f"n={len(y)} < {MIN_TEACHERS} teachers"
    c = rank_correlation(y, p, level=1 - ALPHA.value)
    return (part((c.r, c.low, c.high), 0.0),
            f"ρ={c.interval:.2f} ({100 * c.level:.0f}% CI, n={c.n})")


def c5_similarity_rises(p: Sequence[float], similarity: Sequence[float]) -> Claim:
    """C5: the teachers' mean off-diagonal similarity rises with p."""
    rise, ours = _rises(similarity, p)
    return claim("C5", paper="similarity rises with p (Fig. 4A, E)", ours=ours,
                 holds=rise and rise.verdict(),
                 detail="Spearman ρ of mean off-diagonal similarity with p, Fisher-z interval")


def c6_r2_rises(p: Sequence[float], r2: Sequence[float]) -> Claim:
    """C6: the Raptors' mean (cls, patch) R² rises with p."""
    rise, ours = _rises(r2, p)
    return claim("C6", paper="R² rises with p (Fig. 4B, D)", ours=ours,
                 holds=rise and rise.verdict(),
                 detail="Spearman ρ of mean (cls, patch) R² with p, Fisher-z interval")


def c7_accuracy_rises(p: Sequence[float], teacher_acc: Sequence[float],
                      student_acc: Sequence[float]) -> Claim:
    """C7: teacher and student accuracy both rise with p, over p ≤ ``RISE_UP_TO``."""
    low = [i for i, v in enumerate(p) if v <= RISE_UP_TO.value]
    (v_teacher, teacher), (v_student, student) = (
        _rises([acc[i] for i in low], [p[i] for i in low]) for acc in (teacher_acc, student_acc))
    return claim("C7", paper=f"teacher and student accuracy rise with p up to "
                             f"~{RISE_UP_TO.value} (Fig. 4C)",
                 ours=f"teacher {teacher}; student {student}",
                 holds=None if v_teacher is None else all_of((v_teacher, v_student)),
                 tests=1 if v_teacher is None else 2,
                 detail=f"Spearman ρ of accuracy with p over p ≤ {RISE_UP_TO.value}, Fisher-z "
                        "interval; holds only if both rise"
                        + ("" if v_teacher is None else correction(
                            {"teacher": v_teacher, "student": v_student})))


def c8_similarity_predicts_r2(p: Sequence[float], similarity: Sequence[float],
                              r2: Sequence[float]) -> Claim:
    """C8: similarity and R² correlate positively beyond what the rate p drives in both: the
    partial correlation given p (as a factor), its interval excluding 0."""
    pooled = correlation(similarity, r2, level=CI_LEVEL.value)
    ref = f"pooled r={pooled.interval:.2f} (for reference, confounded by p)"
    levels = len(set(p))
    paper_says = "similarity strongly associated with R² (Fig. 4E)"
    if len(p) < levels + 3:
        return claim("C8", paper=paper_says,
                     ours=f"{ref}; n={len(p)} teachers over {levels} rates", holds=None,
                     detail=f"the correlation within rates needs n ≥ rates + 3 = {levels + 3}")
    a = partial_correlation(similarity, r2, p, level=CI_LEVEL.value)
    return claim("C8", paper=paper_says,
                 ours=f"within p: r={a.interval:.2f} ({100 * a.level:.0f}% CI, n={a.n}, "
                      f"{levels} rates); {ref}",
                 holds=versus(a.low, a.high, 0.0),
                 detail="Pearson r of the teachers' similarity and R² after removing each rate "
                        "p's mean (partial correlation given p as a factor: p drives both, so "
                        f"the pooled r counts its effect); Fisher-z interval on n − {levels} − 1 "
                        "residual degrees of freedom")


def claims(result: Result) -> list[Claim]:
    s = sweep_table(result)
    p, sim, r2 = list(s["p"]), list(s["mean similarity"]), list(s["R²"])
    return [c5_similarity_rises(p, sim), c6_r2_rises(p, r2),
            c7_accuracy_rises(p, list(s["teacher acc"]), list(s["student acc"])),
            c8_similarity_predicts_r2(p, sim, r2)]
