"""The claims of chapter *Are the phases functional?* (§2, Figs. 3, 13, 15; C3, C4, C9–C11): one
function a claim, each with its named thresholds, declared on the claims engine over the seeds
(:mod:`raptor.book.engine`: one estimate per seed, a t interval over them) and applied to the
chapter's result by :func:`claims`; the positive control's verdicts and the prose findings that
quote them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from raptor import controls
from raptor.book.chapters.finding_phases.claims import c2_boundaries
from raptor.book.chapters.functional_phases.compute import (GROUPS, KINDS, Result, SeedRun,
                                                            best_step, teacher_name)
from raptor.book.chapters.phase_structure.claims import c1_block_excess
from raptor.book.claims import Claim, Threshold, claim, on_phases, stated
from raptor.book.engine import Declaration, Part, judge, over_seeds
from raptor.stats import HOLDS

TOKEN = {"cls": "cls", "patches": "patch"}  # a group's name before "R²"

SIGMA_MIN = Threshold(1.0, "the paper: max-cut partitions reach 'accuracy often greater than one "
                           "standard deviation above randomly chosen partitions' (§2, Fig. 3)")
R2_MARGIN_MIN = Threshold(0.0, "[ours] the paper judges partitions by accuracy, which sits at the "
                               "teacher's ceiling here, its gaps the size of the evaluation noise; "
                               "R², what a Raptor is fitted to (the teacher's trajectory), "
                               "separates partitions of converged students: any margin above none")
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
BETTER = Threshold(0.0, "the paper: untrained ViTs 'can be reconstructed by Raptor better than "
                        "trained ViTs' (§2): any R² difference above none")
FALLS = Threshold(0.0, "the paper: once the ViT overfits, 'cls token reconstruction and "
                       "classification accuracy drops' (§2, Fig. 13): any change below none")


def margin(maxcut_acc: float, random_acc: Sequence[float]) -> float:
    """How many standard deviations of the random partitions' accuracy max-cut's lies above;
    NaN when they do not vary (no σ to count in)."""
    rand = np.asarray(random_acc, dtype=float)
    sd = rand.std(ddof=1)
    return float((maxcut_acc - rand.mean()) / sd) if sd > 0 else math.nan


def paired_margin(values: Sequence[float]) -> float:
    """How far the first Raptor's value (the max-cut's) lies above the mean of the others (the
    random partitions' of the same teacher and seed)."""
    values = np.asarray(values, dtype=float)
    return float(values[0] - values[1:].mean())


def replicate_gap(first: float, replicates: Sequence[float], scale: float = 1.0) -> float:
    """The training-noise floor of one seed: how far the max-cut's replicate Raptors (the same
    partition, other initialisations) lie from its first, mean absolute difference over
    ``scale`` (e.g. the random partitions' σ, to read beside :func:`margin`)."""
    gap = float(np.mean(np.abs(np.asarray(replicates, dtype=float) - first)))
    return gap / scale if scale > 0 else math.nan


def c3_maxcut_beats_random(margins: Mapping[int, Sequence[float]], *,
                           counts: Mapping[int, int],
                           r2_margins: Mapping[str, Sequence[float]] | None = None,
                           floors: Mapping[str, Sequence[float]] | None = None,
                           test_images: int | None = None) -> Claim:
    """C3 (Fig. 3): for every k, max-cut's Raptor accuracy is ``SIGMA_MIN`` σ above that of the
    ``counts[k]`` random partitions, judged on the engine's t interval over the seeds' margins
    (``margins[k]``, one per seed, :func:`margin` of the accuracies on ``test_images`` test
    images); not testable where some seed's random partitions do not vary (no σ). Beside it,
    not entering the verdict, ``r2_margins`` (per ``"k=… group"``, one per seed,
    :func:`paired_margin` of the Raptors' R²) against :data:`R2_MARGIN_MIN`, and in the note the
    training-noise floor each margin is read against (``floors``, per ``"k=… measure"`` in the
    margin's units, one :func:`replicate_gap` per seed, their mean)."""
    paper_ = "max-cut beats random partitions by > 1σ of Raptor accuracy (Fig. 3)"
    note = ("random contiguous partitions other than the max-cut, each once: "
            + ", ".join(f"k={k}: {n}" for k, n in counts.items())
            + "; the margin in σ of the random partitions' accuracies"
            + (f" on all {test_images:,} test images" if test_images else "") + ", one per seed"
            + ("; beside it [ours], max-cut's R² minus the random partitions' mean, one per seed"
               if r2_margins else "")
            + ("; the training-noise floor, how far a max-cut Raptor distilled again from another "
               "initialisation lies from the first (mean over the seeds): "
               + ", ".join(f"{name} {np.mean(gaps):.{1 if 'σ' in name else 4}f}"
                           for name, gaps in floors.items()) if floors else ""))
    if not all(np.isfinite(m).all() for m in margins.values()):
        return claim("C3", paper=paper_, ours="no σ on some seed", holds=None,
                     detail=note + "; not testable: the random partitions' accuracies do not "
                                   "vary on some seed (no σ)")
    return judge(Declaration("C3", paper_, [
        Part(f"k={k}", over_seeds(m), SIGMA_MIN, fmt="+.1f",
             what=f"the k={k} max-cut Raptor's margin over random partitions (σ)")
        for k, m in margins.items()], also=[
        Part(name, over_seeds(m), R2_MARGIN_MIN, fmt="+.4f",
             what=f"the {name.split()[0]} max-cut Raptor's {name.split(maxsplit=1)[1]} R² over "
                  f"the random partitions' mean")
        for name, m in (r2_margins or {}).items()], note=note))


def retained(swap_units: np.ndarray, teacher_units: np.ndarray, sizes: np.ndarray) -> float:
    """The share of the teacher's accuracy that swapped copies keep: their mean accuracy over swap
    sets (``swap_units`` ``(sets, units)``) over the teacher's, on all the images (units of
    ``sizes`` images); NaN for a teacher with no image right."""
    teacher = np.average(teacher_units, weights=sizes)
    kept = np.average(swap_units, axis=1, weights=sizes).mean()
    return float(kept / teacher) if teacher > 0 else math.nan


def c4_swaps(intra: Mapping[int, Sequence[float]], inter: Mapping[int, Sequence[float]], *,
             ceiling: float) -> Claim:
    """C4 (§2, Fig. 15): for every number ``n`` of layers swapped, intra-phase swaps keep more
    than ``INTRA_KEEP_MIN`` of the teacher's accuracy and inter-phase ones less than
    ``INTER_KEEP_MAX``, each on the engine's t interval over the seeds' shares (``intra[n]``,
    ``inter[n]``: :func:`retained`, one per seed that has such swap sets), built on the range of
    a share, 0 to ``ceiling`` (a swapped copy may beat its teacher: at most 1 / the lowest
    teacher accuracy)."""
    paper_ = "intra-block swaps keep accuracy; inter-block swaps collapse it (Fig. 15)"
    if not intra or not inter or not all(np.isfinite(v).all()
                                         for v in (*intra.values(), *inter.values())):
        return claim("C4", paper=paper_, ours="no swap sets of both kinds for this partition, or "
                     "a teacher with no image right", holds=None,
                     detail="needs intra- and inter-phase swap sets and a teacher that gets some "
                            "image right on every seed")

    def parts(kind: str, shares: Mapping[int, Sequence[float]], threshold: Threshold,
              side: str) -> list[Part]:
        return [Part(f"{kind} {n}", over_seeds(v, bounds=(0.0, ceiling), step=1e-3), threshold,
                     side=side, fmt=".1%",
                     what=f"the share of the teacher's accuracy kept by {kind}-phase swaps of "
                          f"{n} layer{'s' * (n > 1)}") for n, v in shares.items()]

    return judge(Declaration(
        "C4", paper_, [*parts("intra", intra, INTRA_KEEP_MIN, "above"),
                       *parts("inter", inter, INTER_KEEP_MAX, "below")],
        note="the share of the teacher's accuracy that swapped copies keep (their mean accuracy "
             "over swap sets over the teacher's, on the same validation images), one per seed"))


def _means(r2: Mapping[str, Sequence[float]]) -> str:
    return "/".join(f"{np.mean(r2[g]):.3f}" for g in GROUPS)


def c9_untrained_easier(untrained: Mapping[str, Sequence[float]],
                        trained: Mapping[str, Sequence[float]]) -> Claim:
    """C9 (§2): the untrained teacher's Raptor has higher R² than the trained one's, cls and
    patches (``untrained[g]``, ``trained[g]``: mean R² over layers 1..L, one per seed), judged on
    the engine's t interval over the seeds' differences."""
    return judge(Declaration(
        "C9", "an untrained ViT is reconstructed better than a trained one (§2)", [
            Part(g, over_seeds(np.subtract(untrained[g], trained[g])), BETTER, fmt="+.3f",
                 what=f"the untrained teacher's Raptor's {TOKEN[g]} R² minus the trained one's")
            for g in GROUPS],
        note=f"the Raptor's mean R² over layers 1..L on the validation images, cls/patches, mean "
             f"over seeds: untrained {_means(untrained)}, trained {_means(trained)}; untrained − "
             f"trained, one per seed"))


def c10_skip_removal(with_skip: Sequence[float], without_skip: Sequence[float]) -> Claim:
    """C10 (§2): removing an untrained ViT's skip branches lowers its Raptor's patch R² (mean
    over layers 1..L, one per seed) by less than ``SKIP_DROP_MAX``, judged on the engine's t
    interval over the seeds' drops."""
    return judge(Declaration(
        "C10", "removing the skip branch of an untrained ViT only slightly lowers R² (§2)", [
            Part("drop", over_seeds(np.subtract(with_skip, without_skip)), SKIP_DROP_MAX,
                 side="below", fmt="+.3f",
                 what="the drop of patch R² without skip branches")],
        note=f"the untrained teacher's Raptor's patch R² (mean over layers 1..L on the validation "
             f"images), mean over seeds {np.mean(with_skip):.3f} with skip branches → "
             f"{np.mean(without_skip):.3f} without; the drop, one per seed"))


def reference(best: int, steps: Sequence[int]) -> int | None:
    """The index in ``steps`` of the first snapshot at or after the val-loss minimum (step
    ``best``); ``None`` where no later snapshot follows it to see a fall."""
    ref = next((i for i, s in enumerate(steps) if s >= best), None)
    return None if ref is None or ref == len(steps) - 1 else ref


def c11_overfitting(best: Mapping[int, int], steps: Sequence[int],
                    snapshots: Mapping[int, Mapping[str, np.ndarray]]) -> Claim:
    """C11 (§2, Fig. 13), per seed on its own overfitting run (``best[seed]``: its val-loss
    minimum; ``snapshots[seed][key]``: per snapshot of ``steps``, the Raptor's mean R² per group
    and the teacher's accuracy ``"acc"``): the lowest cls and patch R² up to the seed's
    :func:`reference` snapshot above ``R2_HIGH``, and the change of cls R² and of accuracy from
    it to the last snapshot below none, each on the engine's t interval over the seeds; not
    testable where some seed has no snapshot after its minimum."""
    paper_ = ("R² stays high until overfitting starts, then cls R² and accuracy drop (§2, "
              "Fig. 13)")
    refs = {seed: reference(b, steps) for seed, b in best.items()}
    if None in refs.values():
        return claim("C11", paper=paper_, ours="no snapshot after the val-loss minimum on seed "
                     + ", ".join(f"{s} (minimum at step {best[s]})"
                                 for s, r in refs.items() if r is None),
                     holds=None, detail=f"needs, on every seed, a snapshot at or after its "
                                        f"val-loss minimum and a later one (snapshots at steps "
                                        f"{', '.join(map(str, steps))})")
    low = {g: [float(np.min(snapshots[s][g][:r + 1])) for s, r in refs.items()] for g in GROUPS}
    change = {k: [float(snapshots[s][k][-1] - snapshots[s][k][r]) for s, r in refs.items()]
              for k in ("cls", "acc")}
    parts = [*(Part(f"{TOKEN[g]} R² up to the reference", over_seeds(v), R2_HIGH,
                    what=f"the lowest {TOKEN[g]} R² up to the reference snapshot")
               for g, v in low.items()),
             *(Part(f"{name} falls", over_seeds(change[k]), FALLS, side="below", fmt="+.3f",
                    what=f"the change of {name} from the reference to the last snapshot")
               for name, k in (("cls R²", "cls"), ("accuracy", "acc")))]
    at = {s: f"step {steps[r]} (minimum at {best[s]})" for s, r in refs.items()}
    return judge(Declaration(
        "C11", paper_, parts,
        note="the reference is each seed's first snapshot at or after its val-loss minimum: "
             + (f"on every seed {next(iter(at.values()))}" if len(set(at.values())) == 1
                else ", ".join(f"seed {s} {where}" for s, where in at.items()))
             + f", the last step {steps[-1]}; the Raptor's mean R² over layers 1..L and the "
               "teacher's accuracy on the validation images, one per seed"))


def _c3(result: Result, runs: list[SeedRun]) -> Claim:
    """C3 on ``runs``: max-cut's accuracy margin in σ per k, its R² margin beside ([ours])."""
    test_acc = runs[0].test_acc
    floors = {}
    if result.spec.replicates > 1:
        for k in test_acc:
            floors[f"k={k} accuracy (σ)"] = [
                replicate_gap(run.test_acc[k][0], run.replicate_acc[k],
                              np.std(run.test_acc[k][1:], ddof=1)) for run in runs]
            floors.update({f"k={k} {TOKEN[g]} R²": [
                replicate_gap(run.student_r2[k][g][0], run.replicate_r2[k][g]) for run in runs]
                for g in GROUPS})
    return c3_maxcut_beats_random(
        {k: [margin(run.test_acc[k][0], run.test_acc[k][1:]) for run in runs]
         for k in test_acc},
        counts={k: len(a) - 1 for k, a in test_acc.items()},
        r2_margins={f"k={k} {TOKEN[g]}": [paired_margin(run.student_r2[k][g])
                                          for run in runs]
                    for k in test_acc for g in GROUPS},
        floors=floors, test_images=result.spec.test_images)


def _c4(result: Result, runs: list[SeedRun]) -> Claim:
    """C4 on ``runs``: the share of accuracy that intra- and inter-phase swaps keep."""
    spec, sizes = result.spec, result.unit_sizes
    kept = {kind: {n: [retained(run.swap_units[kind][n],
                                run.control_units["trained"]["acc"], sizes)
                       for run in runs if n in run.swap_units[kind]]
                   for n in spec.swap_counts if any(n in run.swap_units[kind] for run in runs)}
            for kind in KINDS}
    ceiling = 1 / min(float(result.pooled(run.control_units["trained"]["acc"])) for run in runs)
    return c4_swaps(kept["intra"], kept["inter"], ceiling=ceiling)


def _c2(result: Result, runs: list[SeedRun]) -> Claim:
    """C2 on ``runs``, as chapter 3 judges it: alignment with novelty boundaries, shift across
    seeds, stability on held-out subsets of the first run's teacher."""
    spec = result.spec
    return c2_boundaries([run.boundaries for run in runs], runs[0].reproduced,
                         images=spec.subset_images, n_resamples=spec.n_subsets,
                         stable=runs[0].boundaries.label)


def _on_phases(result: Result, runs: list[SeedRun], made, kind: str = "book") -> Claim:
    """``made`` judged on the runs whose teacher has phases by C1's test (:func:`on_phases`)."""
    by_seed = {run.seed: run for run in runs}
    return on_phases(lambda seeds: made(result, [by_seed[s] for s in seeds]),
                     {run.seed: run.phases for run in runs},
                     names={run.seed: teacher_name(kind, run.seed) for run in runs})


def claims(result: Result) -> list[Claim]:
    """C3 and C4 on the teachers in which C1 finds phases (*not testable here* where fewer than
    two have them, their numbers beside), C9, C10 and C11 on every teacher: each declared over the
    seeds on the claims engine (one estimate per seed, each a trained teacher with its own
    Raptors; a t interval over them) by the functions above."""
    runs, spec, pooled = result.seeds, result.spec, result.pooled

    def control(name: str, group: str) -> list[float]:
        return [float(pooled(run.control_units[name][group])) for run in runs]

    return [
        _on_phases(result, runs, _c3), _on_phases(result, runs, _c4),
        c9_untrained_easier({g: control("untrained", g) for g in GROUPS},
                            {g: control("trained", g) for g in GROUPS}),
        c10_skip_removal(control("untrained", "patches"),
                         control("untrained, no skip", "patches")),
        c11_overfitting({run.seed: best_step(run) for run in runs}, spec.overfit_snapshots,
                        {run.seed: {key: pooled(u) for key, u in run.snapshot_units.items()}
                         for run in runs}),
    ]


def positive_control(result: Result) -> dict[str, dict[str, Claim]]:
    """C1–C4 on the book's teachers and on the positive control's, the same tests side by side
    (by claim, then ``"book"`` / ``"planted"``): C1 over the seeds' teachers as chapter 1 judges
    it, C2 as chapter 3 does, C3 and C4 as this chapter does, each of C2–C4 on the teachers with
    phases. Not the claims' verdicts: what the tests say on models known to have phases."""
    out: dict[str, dict[str, Claim]] = {}
    for kind, runs in (("book", result.seeds), ("planted", result.planted)):
        if not runs:
            continue
        tests = {teacher_name(kind, run.seed): run.phases for run in runs}
        for cid, made in (("C1", None), ("C2", _c2), ("C3", _c3), ("C4", _c4)):
            out.setdefault(cid, {})[kind] = c1_block_excess(tests) if made is None else \
                _on_phases(result, runs, made, kind)
    return out


def findings(result: Result) -> dict[str, str]:
    """The chapter's sentences that quote its numbers, as glued text: how many of the book's
    teachers C1 finds phases in, and what the positive control shows."""
    book = [run for run in result.seeds if run.phases.verdict() == HOLDS]
    if not result.planted:
        return {"phased": f"{len(book)} of {len(result.seeds)}",
                "planted": "none (`planted` is None)", "planted-sizes": "none"}
    return {"phased": f"{len(book)} of {len(result.seeds)}",
            "planted": "; ".join(f"{cid} {stated(by_kind['planted'].verdict)}"
                                 for cid, by_kind in positive_control(result).items()),
            "planted-sizes": controls.partition_name(result.spec.planted)}
