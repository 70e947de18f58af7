"""The claims of chapter *Depth as a dynamical system* (§4, Figs. 8–12; C16–C24): one function
a claim, each with its named thresholds, declared over the seeds' teachers (one estimate a seed,
the trained model the unit) and judged by :mod:`raptor.book.engine`; applied to the chapter's
result by :func:`claims`; the prose findings that quote them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from raptor import dynamics
from raptor.book.chapters.dynamics.compute import Result
from raptor.book.claims import (MIN_PHASED, VERDICTS, Claim, Threshold, claim, counted, listed,
                                rests_on_phases, stated)
from raptor.book.engine import Declaration, Part, judge, over_seeds
from raptor.paper import FINAL_UPDATE_RANK
from raptor.stats import (HOLDS, MID_TOL, aligned, chance_aligned, change_points, log_slope,
                          rank_correlation, sigmoid_vs_linear)
from raptor.structure import boundaries

AICC_MIN = Threshold(2.0, "[ours] γ_l follows 'smooth S-shaped curves' (§4, Fig. 8 right): a "
                          "logistic beats a line by ΔAICc > 2, the usual bar for substantial "
                          "support (Burnham & Anderson 2002); < −2 favours the line")
GAMMA_NEAR = Threshold(0.9, "[ours] 'registers approach their terminal directions earliest, "
                            "patches follow ..., and cls saturates only in the final phase' (§4): "
                            "the order of the layers where γ first reaches 0.9")
GAMMA_ORDER = ("registers", "patches", "cls")
GAMMA_LATE_MIN = Threshold(0.8, "[ours] γ_l 'saturate[s] in late layers' (§4, Fig. 8 right): "
                                "γ at layer L−1 already close to γ_L = 1")
NORM_RHO_MIN = Threshold(0.7, "[ours] 'feature norms increase steadily with depth' (§4, Fig. 9): "
                              "a strong rank correlation with depth")
BASIN_RATIO_MAX = Threshold(1.0, "[ours] 'compact terminal regions' (§4, Fig. 8 left): classes "
                                 "spread less around their mean than class means lie apart")
ALIGN_TOL = Threshold(1, "[ours] 'abrupt changes aligned with previously discovered block "
                         "boundaries' (§4, Fig. 11): a change point within a layer of one")
CHANCE_SOURCE = ("[ours] the paper shows the jumps (§4, Fig. 11) without a count: more "
                 "boundaries with a jump than chance, the share that as many change points "
                 "placed at random give (exact over every placement, mean over the seeds)")
FINAL_RANK = Threshold(float(FINAL_UPDATE_RANK),
                       "the ranks reach 'values near six in the final phase' (§4, Fig. 12 left), "
                       "for DINOv2-B (D = 768)")
FINAL_RANK_TOL = Threshold(3.0, "[ours] 'near six' (§4) without a tolerance: within ±3 of 6")
PAPER_WIDTH = 768  # DINOv2-B's width, the only one at which "≈ 6" is a statement
SHARP_SHARE = Threshold(0.5, "[ours] κ_l 'rises sharply and peaks late' (§4, Fig. 12 middle) "
                             "without a number: sharp = one layer carries at least half the rise "
                             "to the peak (a steady rise gives 1/(L−1) per layer)")
RADIUS_TOL = Threshold(1e-3, "[ours] eigenvalues 'just inside the unit circle' (§4, Fig. 12 "
                             "right): |λ| ≤ 1 up to round-off; float32 states carry ~1e-7 relative "
                             "error, so 1e-3 is far above round-off and far below a real excess")
ZERO_AICC = Threshold(0.0, "ΔAICc = 0: the S of §4 (Fig. 8 right) and a line fit equally well "
                          "(AICc counting σ² in both)")
NO_GAP = Threshold(0.0, "two groups reaching γ = 0.9 at the same layer: no order (§4)")
ORDER_BAND = Threshold(0.5, "[ours] 'registers approach their terminal directions earliest, "
                            "patches follow' (§4) without a margin: an order within half a layer "
                            "is a tie")
NO_CHANGE = Threshold(0.0, "no change with depth (§4): a change, a slope or a rank correlation "
                           "of 0")
EQUAL = Threshold(1.0, "a ratio of 1: the two sensitivities (§4, Fig. 10B) or speeds (Fig. 11) "
                      "compared are equal")
SPEED_BAND = Threshold(0.1, "[ours] 'stable small speeds for registers, intermediate speeds for "
                            "patches, and sharp late reorientations for cls' (§4, Fig. 11) name "
                            "distinct levels without a margin: speeds within 10% of each other (a "
                            "ratio within 1 ± 0.1) are a tie, not an order")
LATE_EDGE = Threshold(-0.5, "[ours] κ_l 'peaks late' (§4, Fig. 12 middle): the largest rise lands "
                            "in the last max-cut phase; layers are whole, so half a layer before "
                            "the phase's first layer separates in from out")
SAME_DISTANCE = Threshold(0.0, "cls's and another group's nearest eigenvalues equally far from +1 "
                               "(§4)")
CLOSER_BAND = Threshold(0.01, "[ours] 'cls modes lie closest to +1 (longest memory), registers "
                              "are intermediate' (§4, Fig. 12 right) without a margin: nearest "
                              "eigenvalues whose distances to +1 differ by less than 0.01 (a "
                              "hundredth of the unit circle's radius, closer than Fig. 12's "
                              "markers separate) are a tie")
SPEED_ORDER = ("registers", "patches", "cls")  # "stable small speeds for registers,
# intermediate speeds for patches, and sharp late reorientations for cls" (§4, Fig. 11)
COSINE = (-1.0, 1.0)  # the range of a cosine and of a correlation


def rho_step(n: int) -> float:
    """The resolution of Spearman's ρ on ``n`` points without ties: ``1 − 6Σd²/(n(n²−1))`` with
    ``Σd²`` even."""
    return 12 / (n * (n**2 - 1))


def bend(curves: np.ndarray) -> tuple[float, float, int]:
    """C19's rule on per-image curves ``(N, K)`` after an injection (column 0 the injection
    layer, column K−1 layer L): the change from the curve's peak before layer L to layer L, the
    peak located on the even images and the change measured on the odd ones (so that a noisy
    maximum cannot make a fall); < 0 bends back, > 0 still drifts away at the last block. Returns
    the change, its standard error over the odd images, and the peak's column."""
    peak = int(np.argmax(curves[::2, :-1].mean(axis=0)))
    change = curves[1::2, -1] - curves[1::2, peak]
    return float(change.mean()), float(change.std(ddof=1) / np.sqrt(len(change))), peak


def _last_phase(bounds: list[int], depth: int) -> slice:
    return slice(bounds[-1], depth) if bounds else slice(0, depth)


def crossing(curve: np.ndarray, level: float) -> float:
    """The first (linearly interpolated) layer where ``curve`` reaches ``level``; ``inf`` if
    never."""
    above = np.flatnonzero(curve >= level)
    if not above.size:
        return float("inf")
    i = int(above[0])
    return 0.0 if i == 0 else float(i - 1 + (level - curve[i - 1]) / (curve[i] - curve[i - 1]))


def c16_directions_converge(gamma: Sequence[dict[str, np.ndarray]]) -> Claim:
    """C16 (§4, Fig. 8 right) over seeds: ``gamma[i][g]`` is seed i's γ_l per image ``(N, L+1)``.
    Judged on each seed's mean curve, the seeds the unit: per group γ at layer L−1 above
    ``GAMMA_LATE_MIN`` (saturating near 1), a logistic beating a line by more than ``AICC_MIN``
    (AICc counting σ²; the band ±``AICC_MIN`` a tie), its midpoint inside (0, L). A midpoint at
    the fit's bound, a span beyond the layers, is read as what it is: no inflection within reach,
    γ one arm of an S, evidence against the S. The order in which the groups reach
    ``GAMMA_NEAR``, quoted with the claim, is reported beside it with a band of half a layer
    (``ORDER_BAND``), not judged: the claim is the convergence. Not testable on fewer than 7
    layers."""
    means = [{g: v.mean(axis=0) for g, v in seed.items()} for seed in gamma]
    depth = len(next(iter(means[0].values()))) - 1
    if depth + 1 < 7:
        return claim("C16", paper="γ_l S-shaped, saturating near 1 (§4, Fig. 8 right)",
                     ours=f"{depth + 1} layers", holds=None,
                     detail="a 4-parameter logistic against a line, σ² counted, needs ≥ 7 layers "
                            "(AICc)")
    groups = list(means[0])
    fits = [{g: sigmoid_vs_linear(m[g]) for g in groups} for m in means]
    reach = (-float(depth), 2.0 * depth)  # the midpoint's bounds: a span beyond the layers
    parts = []
    for g in groups:
        parts += [
            Part(f"{g} near 1", over_seeds([m[g][-2] for m in means]),
                 GAMMA_LATE_MIN, fmt=".2f", what=f"{g} γ at layer L−1"),
            Part(f"{g} S-shape (ΔAICc)", over_seeds([fit[g].delta_aicc for fit in fits]),
                 ZERO_AICC, band=AICC_MIN.value, fmt=".1f",
                 what=f"how much better a logistic fits {g} γ than a line (ΔAICc)"),
            Part(f"{g} midpoint in (0, L)",
                 over_seeds([fit[g].mid for fit in fits], bounds=reach,
                            step=2 * MID_TOL * depth),
                 Threshold(depth / 2, "the middle layer: within L/2 of it is inside (0, L)"),
                 side="inside", band=depth / 2, fmt=".1f",
                 what=f"the layer of {g} γ's steepest rise")]
    order = [g for g in GAMMA_ORDER if g in groups]
    first = [{g: min(crossing(m[g], GAMMA_NEAR.value), depth + 1.0) for g in order}
             for m in means]
    also = [Part(f"{a} before {b}", over_seeds([r[b] - r[a] for r in first]), NO_GAP,
                 band=ORDER_BAND.value, fmt=".1f",
                 what=f"how many layers after {a} {b} reaches γ = {GAMMA_NEAR.value:g}")
            for a, b in zip(order, order[1:])]
    at_bound = {g: sum(fit[g].mid_at_bound for fit in fits) for g in groups}
    return judge(Declaration(
        "C16", "γ_l S-shaped, saturating near 1 (§4, Fig. 8 right); the order it also states "
               "(registers earliest, then patches, cls last) is reported beside, not judged",
        parts, also=also,
        note=f"on each seed's mean γ curve: logistic vs line by AICc (σ² counted: 5 and 3 "
             f"parameters), the logistic's midpoint (bounded from {reach[0]:g} to {reach[1]:g}, "
             f"a span beyond the layers; at that bound on "
             + ", ".join(f"{n} seed{'s' * (n != 1)} for {g}" for g, n in at_bound.items())
             + ": no inflection within reach, γ one arm of an S), γ at layer L−1; the layer "
               f"where γ first reaches {GAMMA_NEAR.value:g} (never: L+1), the order not judged"))


def c17_norms_grow(norms: Sequence[dict[str, np.ndarray]]) -> Claim:
    """C17 (§4, Fig. 9) over seeds: ``norms[i][g]`` is seed i's mean norm ``(L+1,)``; per group,
    the seeds' Spearman ρ of the norm with depth above ``NORM_RHO_MIN``."""
    step = rho_step(len(next(iter(norms[0].values()))))
    parts = [Part(f"{g} norm grows",
                  over_seeds([rank_correlation(seed[g]).r for seed in norms], bounds=COSINE,
                             step=step),
                  NORM_RHO_MIN, fmt=".2f", what=f"Spearman's ρ of the {g} norm with depth")
             for g in norms[0]]
    return judge(Declaration("C17", "feature norms grow with depth (Fig. 9)", parts,
                             note="Spearman's ρ of each seed's mean norm with depth"))


def c18_class_basins(first: Sequence[np.ndarray], last: Sequence[np.ndarray],
                     labels: Sequence[np.ndarray]) -> Claim:
    """C18 (§4, Fig. 8 left) over seeds: seed i's cls within/between-class angle ratio
    (:func:`raptor.dynamics.basin_compactness` of its directions ``first[i]``, ``last[i]``
    ``(N, D)`` at layers 1 and L) falls from layer 1 to L and ends below ``BASIN_RATIO_MAX``."""
    start = [dynamics.basin_compactness(x, y).ratio for x, y in zip(first, labels)]
    end = [dynamics.basin_compactness(x, y).ratio for x, y in zip(last, labels)]
    parts = [Part("ratio falls", over_seeds(np.subtract(end, start)), NO_CHANGE, side="below",
                  fmt="+.3f", what="the ratio's change from layer 1 to layer L"),
             Part("ratio at L below 1", over_seeds(end), BASIN_RATIO_MAX, side="below",
                  what="the ratio at layer L")]
    return judge(Declaration(
        "C18", "trajectories enter class-dependent basins (§4, Fig. 8 left)", parts,
        note="the ratio is the mean within-class angle of the cls directions over the mean "
             "angle between class means, one per seed"))


def c19_self_correction(distance: Sequence[dict[str, np.ndarray]],
                        relative: Sequence[dict[str, np.ndarray]],
                        eps_over_norm: Sequence[dict[str, float]], *, layer: int) -> Claim:
    """C19 (§4, Fig. 10A) over seeds, on the paper's measure: per group, the cosine distance of
    the perturbed trajectory from the clean one (``distance[i][g]`` ``(N, L−layer+1)`` per image,
    :func:`raptor.dynamics.image_deviation`) falls from its peak before layer L to layer L
    (:func:`bend`: below 0 bends back, above 0 drifts away), one change per seed, the odd images'
    standard error its evaluation noise. Beside it, not judged, the same rule on the deviation
    in units of the norm at the injection ``layer`` (``relative``), which norm growth alone does
    not shrink."""
    groups = list(distance[0])

    def part(curves: Sequence[dict[str, np.ndarray]], g: str, name: str, what: str) -> Part:
        changes = [bend(seed[g]) for seed in curves]
        return Part(name, over_seeds([c for c, _, _ in changes], noise=[e for _, e, _ in changes]),
                    NO_CHANGE, side="below", fmt="+.5f", what=what)

    parts = [part(distance, g, f"{g} bends back",
                  f"the change in {g} cosine distance to the clean path from its peak to layer L")
             for g in groups]
    also = [part(relative, g, f"{g} rescaled",
                 f"the change in {g} deviation in units of ‖x_{layer}‖ from its peak to layer L")
            for g in groups]
    share = ", ".join(f"{g} {np.mean([e[g] for e in eps_over_norm]):.1%}" for g in groups)
    path = ", ".join(f"{g} {np.mean([d[g][:, 0].mean() for d in distance]):.4f} → "
                     f"{np.mean([d[g][:, -1].mean() for d in distance]):.4f}" for g in groups)
    return judge(Declaration(
        "C19", "perturbed trajectories bend back (§4, Fig. 10A)", parts, also=also,
        note=f"injection at layer {layer}, ε of ‖x‖ there: {share} (mean over seeds); the cosine "
             f"distance to the clean path (Fig. 10A), from layer {layer} to layer L: {path} "
             f"(mean over seeds); its change from its peak before layer L (located on the even "
             f"images) to layer L (on the odd ones), one per seed; beside it the same change of "
             f"the angle × ‖x_j‖ / ‖x_{layer}‖, which norm growth alone does not shrink"))


def c20_sensitivity_by_depth(sensitivity: Sequence[dict[str, np.ndarray]]) -> Claim:
    """C20 (§4, Fig. 10B) over seeds, ``sensitivity[i][g]`` ``(N, L)`` per image, injection at
    layer ``l = 0..L−1``: the slope of log mean patch sensitivity over layers 0..L−2 below 0, and
    cls sensitivity at layer L−1 over at L/2 above 1, one of each per seed."""
    depth = sensitivity[0]["patches"].shape[1]
    mid, fit = depth // 2, slice(0, max(2, depth - 1))
    slope = [log_slope(s["patches"].mean(axis=0)[fit]) for s in sensitivity]
    rise = [float(s["cls"][:, -1].mean() / s["cls"][:, mid].mean()) for s in sensitivity]
    parts = [Part("patch decay", over_seeds(slope), NO_CHANGE, side="below", fmt="+.3f",
                  what="the slope of log patch sensitivity per injection layer"),
             Part("late cls rise", over_seeds(rise), EQUAL, fmt=".2f",
                  what=f"cls sensitivity injected at layer {depth - 1} over at layer {mid}")]
    return judge(Declaration(
        "C20", "patch sensitivity decays with injection depth; cls rises when injected late "
               "(§4, Fig. 10B)", parts,
        note=f"the slope of log mean sensitivity against injection layer 0..{depth - 2}, one per "
             f"seed"))


def c21_angular_speed(speed: Sequence[dict[str, np.ndarray]], bounds: Sequence[list[int]], *,
                      phased: Sequence[bool] | None = None, rests_on: str = "") -> Claim:
    """C21 (§4, Fig. 11) over seeds: in seed i's last max-cut phase (inner boundaries
    ``bounds[i]``), the mean speed ``speed[i][g]`` ``(L,)`` orders registers < patches < cls,
    each step a ratio of speeds above 1 beyond ``SPEED_BAND`` (within it a tie); the patch
    speed's largest changes lie within ``ALIGN_TOL`` of more of the boundaries than chance
    (:func:`raptor.stats.chance_aligned`: as many change points placed at random), judged on the
    seeds whose teacher has phases (``phased``, C1; default all) and *not testable here* where
    fewer than :data:`~raptor.book.claims.MIN_PHASED` have them, its numbers in the detail."""
    depth = len(next(iter(speed[0].values())))
    late = [{g: float(np.mean(s[_last_phase(b, depth)])) for g, s in seed.items()}
            for seed, b in zip(speed, bounds)]
    order = [g for g in SPEED_ORDER if g in late[0]]
    parts = [Part(f"{a} < {b}", over_seeds([v[b] / v[a] for v in late]), EQUAL,
                  band=SPEED_BAND.value, fmt=".2f",
                  what=f"the ratio of {b} to {a} speed in the last phase")
             for a, b in zip(order, order[1:])]
    tol = int(ALIGN_TOL.value)
    phased = [True] * len(speed) if phased is None else list(phased)
    jumps = [aligned(change_points(seed["patches"], len(b)), b, tol=tol) if b else math.nan
             for seed, b in zip(speed, bounds)]
    chances = [chance_aligned(depth, b, tol) if b else math.nan for b in bounds]
    use = [i for i, ok in enumerate(phased) if ok and bounds[i]]
    untested = ""
    if len(use) >= MIN_PHASED:
        parts.append(Part(
            "jumps at boundaries",
            over_seeds([jumps[i] for i in use], bounds=(0.0, 1.0),
                       step=1 / max(len(bounds[i]) for i in use)),
            Threshold(float(np.mean([chances[i] for i in use])), CHANCE_SOURCE), fmt=".2f",
            what=f"the share of boundaries with a patch speed jump within {tol} layer"))
    elif all(bounds):
        untested = (f"; jumps at boundaries not testable here: C1 finds phases in {sum(phased)} of "
                    f"{len(phased)} teachers; measured on all, not counted: the share of "
                    f"boundaries with a patch speed jump within {tol} layer "
                    f"{np.mean(jumps):.2f} against chance {np.mean(chances):.2f}")
    return judge(Declaration(
        "C21", "late angular speed: registers < patches < cls; jumps at phase boundaries "
               "(Fig. 11)", parts, rests_on=rests_on,
        note=f"mean speed in each seed's last max-cut phase; the patch speed's largest changes, "
             f"as many as the seed's boundaries, within ±{tol} layer of one, against the share "
             f"that change points at random reach{untested}"))


def c22_update_rank_falls(stable: Sequence[dict[str, np.ndarray]],
                          effective: Sequence[dict[str, np.ndarray]],
                          bounds: Sequence[list[int]], *, width: int) -> Claim:
    """C22 (§4, Fig. 12 left) over seeds: the stable and effective rank of the updates ``(L,)``
    fall with depth in every group (each seed's Spearman ρ with depth, below 0); only at
    ``PAPER_WIDTH`` (the paper gives no law for other widths) their last-phase mean lies within
    ``FINAL_RANK_TOL`` of ``FINAL_RANK``. Not testable on fewer than 5 layers."""
    depth = len(next(iter(stable[0].values())))
    paper = (f"stable and effective rank of updates fall with depth (≈ {FINAL_RANK.value:g} at "
             "the end, DINOv2-B) (§4, Fig. 12 left)")
    if depth < 5:
        return claim("C22", paper=paper, ours=f"{depth} layers", holds=None,
                     detail="a rank correlation needs ≥ 5 layers")
    kinds = {"stable": stable, "effective": effective}
    keys = [(g, kind) for g in stable[0] for kind in kinds]
    parts = [Part(f"{g} {kind} falls",
                  over_seeds([rank_correlation(seed[g]).r for seed in kinds[kind]],
                             bounds=COSINE, step=rho_step(depth)),
                  NO_CHANGE, side="below", fmt="+.2f",
                  what=f"Spearman's ρ of the {g} {kind} rank with depth") for g, kind in keys]
    near = width == PAPER_WIDTH
    if near:
        parts += [Part(f"{g} {kind} ≈ {FINAL_RANK.value:g}",
                       over_seeds([float(np.mean(seed[g][_last_phase(b, depth)]))
                                   for seed, b in zip(kinds[kind], bounds)]),
                       FINAL_RANK, side="inside", band=FINAL_RANK_TOL.value,
                       paper=FINAL_RANK.value, fmt=".1f",
                       what=f"the {g} {kind} rank in the last phase") for g, kind in keys]
    return judge(Declaration(
        "C22", paper, parts,
        note="Spearman's ρ of each seed's ranks with depth; "
             + (f"the last-phase mean within ±{FINAL_RANK_TOL.value:g} of {FINAL_RANK.value:g}"
                if near else
                f"'≈ {FINAL_RANK.value:g}' not tested: it is DINOv2-B's number at D = "
                f"{PAPER_WIDTH}, here D = {width} bounds the ranks differently")))


def sharpness(kappa: np.ndarray) -> tuple[float, int]:
    """The largest one-layer rise of ``kappa`` as a share of its rise from layer 1 to its peak
    (0 when it never rises), and the index of the value that rise reaches."""
    steps = np.diff(kappa)
    total = float(kappa.max() - kappa[0])
    i = int(np.argmax(steps))
    return (float(steps[i]) / total if total > 0 else 0.0), i + 1


def c23_coherence_rises(kappa: Sequence[np.ndarray], bounds: Sequence[list[int]]) -> Claim:
    """C23 (§4, Fig. 12 middle) over seeds, on each seed's mean patch coherence κ_l (``kappa[i]``
    ``(N, L)``): its largest one-layer rise carries at least ``SHARP_SHARE`` of the rise to the
    peak, and lands in the seed's last max-cut phase (inner boundaries ``bounds[i]``)."""
    means = [k.mean(axis=0) for k in kappa]
    depth = len(means[0])  # its largest rise reaches layer 1..L−1, the last phase starts at 0..L−1
    rises = [sharpness(m) for m in means]
    into = [at - _last_phase(b, len(m)).start for (_, at), b, m in zip(rises, bounds, means)]
    parts = [Part("sharp", over_seeds([share for share, _ in rises]), SHARP_SHARE, fmt=".0%",
                  what="the largest one-layer rise's share of the rise to the peak"),
             Part("late", over_seeds(into, bounds=(2.0 - depth, depth - 1.0), step=1.0),
                  LATE_EDGE, fmt="+.1f",
                  what="the largest rise's layer less the last phase's first layer")]
    return judge(Declaration(
        "C23", "patch-token coherence rises sharply late (§4, Fig. 12 middle)", parts,
        note="on each seed's mean κ curve; the layer the largest rise reaches, minus the first "
             "layer of that seed's last max-cut phase (0: the phase's first layer)"))


def c24_dmd_near_one(eigenvalues: Sequence[dict[str, np.ndarray]], *, rank: int) -> Claim:
    """C24 (§4, Fig. 12 right) over seeds, on seed i's exact DMD eigenvalues
    ``eigenvalues[i][g]``: every group's spectral radius ≤ 1 up to ``RADIUS_TOL``, and cls's
    nearest eigenvalue closer to +1 than each other group's by more than ``CLOSER_BAND`` (within
    it a tie). ``rank``: the rank asked for."""
    groups = list(eigenvalues[0])
    unit = Threshold(1 + RADIUS_TOL.value, RADIUS_TOL.source)
    parts = [Part(f"{g} |λ| ≤ 1", over_seeds([float(np.abs(e[g]).max()) for e in eigenvalues]),
                  unit, side="below", fmt=".4f", what=f"the {g} spectral radius ρ(A)")
             for g in groups]
    nearest = [{g: float(np.min(np.abs(lam - 1))) for g, lam in e.items()} for e in eigenvalues]
    if "cls" in groups:
        parts += [Part(f"cls closer to +1 than {g}",
                       over_seeds([n[g] - n["cls"] for n in nearest]), SAME_DISTANCE,
                       band=CLOSER_BAND.value, fmt=".3f",
                       what=f"how much farther from +1 the nearest {g} eigenvalue lies than "
                            f"the nearest cls one")
                  for g in groups if g != "cls"]
    used = max(len(lam) for e in eigenvalues for lam in e.values())
    return judge(Declaration(
        "C24", "DMD eigenvalues inside the unit circle near +1; cls closest to +1 (§4, Fig. 12 "
               "right)", parts,
        note=f"exact DMD of rank {used} on group-averaged directions"
             + ("" if used == rank else f" (the paper's r = {rank} needs ≥ {rank} layer "
                                        f"transitions; this teacher has {used})")
             + ", one fit per seed"))


def claims(result: Result) -> list[Claim]:
    """C16–C24 declared over the seeds' teachers and judged by the claims engine (each seed's
    estimate one unit, by the functions above); "late" is each seed's last max-cut phase, and
    C21's jumps at its boundaries are judged on the seeds whose teacher has phases by C1's test."""
    runs = result.runs
    teachers = [run.flow["teacher"] for run in runs]
    bounds = [list(boundaries(run.partition)) for run in runs]
    return [
        c16_directions_converge([run.convergence_images for run in runs]),
        c17_norms_grow([t.norms for t in teachers]),
        c18_class_basins([run.basin_dirs[:, 0] for run in runs],
                         [run.basin_dirs[:, 1] for run in runs],
                         [run.labels for run in runs]),
        c19_self_correction([run.distance for run in runs],
                            [run.relative_deviation for run in runs],
                            [run.eps_over_norm for run in runs],
                            layer=runs[0].perturb_layer),
        c20_sensitivity_by_depth([run.sensitivity_images for run in runs]),
        c21_angular_speed([t.speed for t in teachers], bounds,
                          phased=[run.phases.verdict() == HOLDS for run in runs],
                          rests_on=rests_on_phases({f"seed {run.seed}": run.phases
                                                    for run in runs})),
        c22_update_rank_falls([run.stable_rank for run in runs],
                              [run.effective_rank for run in runs], bounds,
                              width=result.spec.teacher.embed_dim),
        c23_coherence_rises([run.coherence_images for run in runs], bounds),
        c24_dmd_near_one([run.dmd for run in runs], rank=result.spec.dmd_rank),
    ]


# Each claim's phenomenon (§4), a clause that agrees with a singular verb: the subject of its
# verdict in the chapter's Found sentence.
PHENOMENA = {
    "C16": "directions converging along an S-shaped curve",
    "C17": "feature norms growing with depth",
    "C18": "trajectories entering class-dependent basins",
    "C19": "perturbed trajectories bending back",
    "C20": "sensitivity falling with injection depth for patches and rising late for cls",
    "C21": "angular speeds ordering by token group and jumping at phase boundaries",
    "C22": "update ranks falling with depth",
    "C23": "patch coherence rising sharply late",
    "C24": "DMD eigenvalues lying just inside the unit circle, nearest +1 for cls",
}


def findings(result: Result, checks: Sequence[Claim]) -> dict[str, str]:
    """The *Found* sentence's parts, as glued text: the teachers, and the phenomena of §4 grouped
    by their verdict (of ``checks``), in the order of :data:`raptor.book.claims.VERDICTS`."""
    groups = [[f"{PHENOMENA[c.id]} ({c.id})" for c in checks if c.verdict == v] for v in VERDICTS]
    return {
        "teachers": counted(len(result.runs), "teacher"),
        "phenomena": "; ".join(f"{listed(names)} {stated(v, plural=len(names) > 1)}"
                               for v, names in zip(VERDICTS, groups) if names),
    }
