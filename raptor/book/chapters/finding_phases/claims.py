"""The claim of chapter *Finding the phases* (C2), its thresholds, and the prose findings that
quote it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from raptor import phases
from raptor.book.chapters.finding_phases.compute import Result, TeacherPhases
from raptor.book.claims import MIN_PHASED, Claim, Threshold, counted, listed, on_phases, stated
from raptor.book.engine import Declaration, Part, exact, judge, of_model, over_seeds
from raptor.novelty import HALF_WIDTH, PROMINENCE, coverage
from raptor.stats import HOLDS, aligned, wilson
from raptor.structure import boundaries, boundary_shift

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
