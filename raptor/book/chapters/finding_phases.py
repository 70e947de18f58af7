"""Chapter *Finding the phases*: exact max-cut vs hierarchical bisection, and stability (App. A.1,
Figs. 2–3; C2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.transforms import ScaledTranslation

from raptor import paper, phases
from raptor.book import plotting
from raptor.book.claims import MIN_PHASED, Claim, Threshold, counted, listed, on_phases, stated
from raptor.book.engine import Declaration, Part, exact, judge, of_model, over_seeds
from raptor.book.experiment import (images_of, phase_matrices_of, phases_of, pretrained_walk,
                                    teacher_of, walk)
from raptor.book.specs.finding_phases import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.novelty import HALF_WIDTH, PROMINENCE, coverage, novelty_peaks
from raptor.phase_test import PhaseTest
from raptor.phases import Partition
from raptor.stats import HOLDS, aligned, wilson
from raptor.structure import boundaries, boundary_shift, subset_stability


@dataclass
class TeacherPhases:
    """One teacher's phase matrix (blocks' outputs, tokens {cls, mean patch}), its max-cuts, the
    boundaries Foote's novelty finds in it and C1's test of it (None for a pretrained ViT: C1
    judges it in the chapter *Emergent phase structure*)."""

    label: str
    p: float | None  # None: DINOv2-B
    seed: int
    accuracy: float
    S: np.ndarray
    cuts: dict[int, Partition]
    novelty: list[int]
    phases: PhaseTest | None


@dataclass
class Result:
    """``stability``: per k and subset size, the share of held-out subsets reproducing the cut
    of ``stable_teacher`` (the first rate's first teacher with phases, else its first)."""

    spec: Spec
    teachers: list[TeacherPhases]
    comparison: list[dict[str, object]]
    stable_teacher: str
    stability: dict[int, dict[int, float]]

    def first(self) -> list[TeacherPhases]:
        """The first rate's teachers, one per seed: C2's models."""
        return [te for te in self.teachers if te.p == self.spec.p_values[0]]


def hierarchical_vs_dp(label: str, S: np.ndarray, eps_values: Sequence[float]
                       ) -> list[dict[str, object]]:
    """One row per ``eps``: the hierarchical bisection and the exact DP with as many segments."""
    rows = []
    for eps in eps_values:
        h = phases.hierarchical_maxcut(S, eps)
        dp = phases.maxcut(S, len(h.clusters))
        rows.append({
            "teacher": label, "eps": eps, "k": len(h.clusters),
            "hierarchical": phases.format_partition(h.partition) if h.contiguous
            else " | ".join(",".join(str(i + 1) for i in c) for c in h.clusters),
            "contiguous": h.contiguous,
            "objective (hier.)": round(phases.in_segment_weight(S, h.partition), 4)
            if h.contiguous else None,
            "DP": phases.format_partition(dp),
            "objective (DP)": round(phases.in_segment_weight(S, dp), 4)})
    return rows


def compute(spec: Spec) -> Result:
    """Phase matrices, max-cuts and novelty boundaries per teacher, DP vs hierarchical, C1's test
    of each teacher, and the cuts' stability on held-out image subsets (C2)."""
    spec.require_model()
    p0, seed0 = spec.p_values[0], spec.teacher_seeds[0]
    images = images_of(spec, spec.n_images + spec.held_out)
    mine = tuple(x[:spec.n_images] for x in images)
    device = resolve_device(spec.machine.device)
    measure = dict(cuts=spec.k_values, device=device)
    teachers = []
    runs = sorted({(p, seed0) for p in spec.p_values} | {(p0, s) for s in spec.teacher_seeds})
    for p, s in runs:
        w = walk(teacher_of(spec, p, seed=s), mine, **measure)
        teachers.append(TeacherPhases(f"p={p}, seed {s}", p, s, w.accuracy, w.S, w.cuts,
                                      novelty_peaks(w.S),
                                      phases_of(spec, p, seed=s, device=device)))
    if spec.pretrained.weights is not None:
        w = pretrained_walk(spec.pretrained, spec.n_images, spec.machine.data_root, **measure)
        teachers.append(TeacherPhases(spec.pretrained.label, None, 0, w.accuracy, w.S, w.cuts,
                                      novelty_peaks(w.S), None))
    comparison = [row for te in teachers
                  for row in hierarchical_vs_dp(te.label, te.S, spec.eps_values)]
    first = [te for te in teachers if te.p == p0]
    stable = next((te for te in first if te.phases.verdict() == HOLDS), first[0])
    held = tuple(x[spec.n_images:] for x in images)  # none in a dry run's stand-in images
    stability = subset_stability(stable.cuts, phase_matrices_of(
        teacher_of(spec, p0, seed=stable.seed)[0], *held, device=device), spec.image_counts,
        spec.n_resamples) if len(held[1]) else {}
    return Result(spec, teachers, comparison, stable.label, stability)


def maxcut_figure(result: Result) -> plt.Figure:
    """Max-cut boundaries for each k, first seed's teachers and a pretrained model, DINOv2-B in
    the paper (Figs. 2–3, left)."""
    s = result.spec
    shown = [te for te in result.teachers if te.seed == s.teacher_seeds[0] or te.p is None]
    panels, cuts = {}, {}
    for te in shown:
        for k in s.k_values:
            title = (f"{te.label if te.p is None else f'p={te.p}'}, k={k}\n"
                     f"{phases.format_partition(te.cuts[k])}")
            panels[title], cuts[title] = te.S, te.cuts[k]
    return plotting.similarity_panels(panels, ncols=len(s.k_values), partitions=cuts,
                                      width=plotting.BOX_WIDTH, max_height=plotting.BOX_TALLEST)


def stability_figure(result: Result) -> plt.Figure:
    """Per k, the share of image subsets reproducing the max-cut against their size (C2); each k
    has its own marker and is shifted slightly sideways, so equal values stay visible."""
    s = result.spec
    fig, ((ax,),) = plotting.figure(height=3.6)
    markers = "osD^v<>p"
    for i, (k, row) in enumerate(result.stability.items()):
        # shifted on screen only (3 pt a k), so that the data, and its CSV, keep the true sizes
        shift = ScaledTranslation(3 / 72 * (i - (len(result.stability) - 1) / 2), 0,
                                  fig.dpi_scale_trans)
        ax.plot(list(row), list(row.values()), ls="-", ms=6, marker=markers[i % len(markers)],
                label=f"k={k}", alpha=0.85, transform=ax.transData + shift)
    counts = sorted({n for row in result.stability.values() for n in row})
    ax.set_xscale("log")
    ax.set_xticks(counts, counts)
    ax.minorticks_off()
    ax.set(ylim=(-0.05, 1.08), xlabel="images per subset",
           ylabel="share of subsets giving\nthe chapter's cut",
           title=f"teacher {result.stable_teacher};\n"
                 f"{s.n_resamples} held-out subsets per size")
    plotting.legend_below(fig, [ax], ncols=4)
    return fig


def paper_partitions() -> pd.DataFrame:
    """DINOv2-B's published partitions (§3, Table 1; the authors' hierarchical bisection)."""
    parts = paper.DINOV2_B_PARTITIONS.values()
    return pd.DataFrame({"k": list(paper.DINOV2_B_PARTITIONS),
                         "paper (hierarchical)": [phases.format_partition(p) for p in parts],
                         "repeats n_j": [phases.partition_to_repeats(p) for p in parts]})


MAX_SHIFT = Threshold(1.5, "[ours] the paper shows boundaries on the visible blocks (Figs. 2–3) "
                           "without a tolerance; at most one layer (below 1.5, shifts being whole "
                           "layers) allows a tie between neighbours")
STABLE_SHARE = Threshold(0.9, "[ours] a partition is stable when ≥ 90% of image subsets "
                              "reproduce it")
ALIGN_TOL = 1  # layers: a max-cut boundary this close to a novelty boundary is on it [ours], as
# MAX_SHIFT's tie between neighbours
CHANCE_SOURCE = ("[ours] aligned beyond chance: more boundaries near a novelty boundary than "
                 "boundaries placed at random reach (exact: the share of places near one)")


def images_needed(stability: dict[int, dict[int, float]]) -> dict[int, int | None]:
    """Per k, the fewest images from which every larger count is stable (``STABLE_SHARE``)."""
    return {k: next((n for n in row if all(g >= STABLE_SHARE.value
                                            for m, g in row.items() if m >= n)), None)
            for k, row in stability.items()}


def alignment(te: TeacherPhases) -> tuple[float, float]:
    """The share of ``te``'s max-cut boundaries, over every k, within :data:`ALIGN_TOL` layers of
    a boundary Foote's novelty finds in the same matrix, and the share that boundaries placed at
    random reach (:func:`raptor.novelty.coverage`)."""
    found = [aligned(te.novelty, list(boundaries(cut)), tol=ALIGN_TOL) * (len(cut) - 1)
             for cut in te.cuts.values()]
    count = sum(len(cut) - 1 for cut in te.cuts.values())
    return sum(found) / count, coverage(te.novelty, len(te.S), ALIGN_TOL)


def c2_boundaries(models: Sequence[TeacherPhases], reproduced: Mapping[int, float], *,
                  images: int, n_resamples: int, stable: str) -> Claim:
    """C2 (App. A.1, Figs. 2–3) on ``models`` (one per seed): (1) the max-cut boundaries align
    with boundaries found without it — per model :func:`alignment`'s share against the random
    placements' (a t interval over the models) — (2) per k they move less than ``MAX_SHIFT``
    layers across the models, and (3) ``images``-image subsets held out from the cut's images
    reproduce the cut of the model ``stable`` in more than ``STABLE_SHARE`` of ``n_resamples``
    disjoint draws (``reproduced``, per k: independent draws, a Wilson interval)."""
    shares, chances = zip(*(alignment(te) for te in models))
    ks = list(models[0].cuts)
    count = sum(k - 1 for k in ks)
    share = {k: wilson(f, n_resamples) for k, f in reproduced.items()}
    return judge(Declaration(
        "C2", paper="max-cut boundaries align with the visible blocks (Figs. 2–3)",
        parts=[Part("aligned", over_seeds(shares, bounds=(0.0, 1.0), step=1 / count),
                    Threshold(float(np.mean(chances)), CHANCE_SOURCE), fmt=".2f",
                    what=f"the share of the max-cut boundaries within {ALIGN_TOL} layer of a "
                         "novelty boundary"),
               *(Part(f"shift k={k}", exact(max(boundary_shift(models[0].cuts[k], te.cuts[k])
                                                for te in models)), MAX_SHIFT, side="below",
                      fmt="g", what=f"the k={k} boundaries' largest move across seeds (layers)")
                 for k in ks),
               *(Part(f"share k={k}", of_model(iv, n_resamples, "image subset"), STABLE_SHARE,
                      paper=1.0, fmt=".0%",
                      what=f"the share of held-out {images}-image subsets reproducing the k={k} "
                           "cut")
                 for k, iv in share.items())],
        note=f"{len(models)} teachers; novelty: Foote's checkerboard kernel of half-width "
             f"{HALF_WIDTH} layers on the phase matrix, its peaks of prominence ≥ {PROMINENCE} "
             f"(per teacher: " + "; ".join(f"{te.label} {te.novelty}" for te in models)
             + f"); {n_resamples} disjoint subsets of {images} held-out images per k, on "
               f"{stable}, Wilson intervals"))


def claims(result: Result) -> list[Claim]:
    """C2 on the first rate's teachers in which C1 finds phases (*not testable here* where fewer
    than two have them), beside C1's test of each."""
    s, first = result.spec, result.first()
    last = max(s.image_counts)
    by_seed = {te.seed: te for te in first}
    return [on_phases(lambda seeds: c2_boundaries(
        [by_seed[x] for x in seeds], {k: result.stability[k][last] for k in s.k_values},
        images=last, n_resamples=s.n_resamples, stable=result.stable_teacher),
        {te.seed: te.phases for te in first},
        names={te.seed: te.label for te in first})]


def findings(result: Result, checks: Sequence[Claim]) -> dict[str, str]:
    """The *Found* sentence's parts, as glued text: the first rate's teachers, how far their
    max-cut boundaries move between any two seeds (and the cuts at the first k), how often held-out
    subsets reproduce the cut at each k, and C2's verdict (of ``checks``) on the teachers with
    phases, or why it is not testable."""
    s, first = result.spec, result.first()
    n, phased = len(first), sum(te.phases.verdict() == HOLDS for te in first)
    move = max(boundary_shift(a.cuts[k], b.cuts[k])
               for k in s.k_values for a in first for b in first)
    k0, last = s.k_values[0], max(s.image_counts)
    cuts = list(dict.fromkeys(phases.format_partition(te.cuts[k0]) for te in first))
    shares = [f"{result.stability[k][last]:.0%}" for k in s.k_values]
    seed = next(te.seed for te in first if te.label == result.stable_teacher)
    (c2,) = checks
    on = (f", since C1 finds phases in {phased or 'none'} of the {n} teachers and a test over "
          f"models needs {MIN_PHASED}" if phased < MIN_PHASED
          else f" on the teachers in which C1 finds phases ({phased} of {n})")
    return {
        "teachers": f"{counted(n, 'teacher')} at p = {s.p_values[0]}",
        "moves": (f"move by at most {counted(move, 'layer')} from seed to seed" if move
                  else "stay in place from seed to seed")
                 + f" (at k = {k0}: {listed(cuts, 'or')})",
        "stable": f"held-out subsets of {last} images reproduce seed {seed}'s cut in "
                  + (f"{shares[0]} of {s.n_resamples} draws at every k" if len(set(shares)) == 1
                     else f"{listed(shares)} of {s.n_resamples} draws at k = "
                          + listed([str(k) for k in s.k_values])),
        "c2": f"C2, that the boundaries align with the visible blocks, {stated(c2.verdict)}{on}",
    }
