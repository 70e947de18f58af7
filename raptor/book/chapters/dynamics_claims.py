"""The claims of chapter *Depth as a dynamical system* (§4, Figs. 8–12; C16–C24): one function
a claim, each with its named thresholds, applied by :func:`raptor.book.chapters.dynamics.claims`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from raptor import dynamics
from raptor.book.claims import (FAILS, HOLDS, INCONCLUSIVE, Claim, Part, Threshold, claim,
                                conjoined, conjunction, part)
from raptor.book import engine
from raptor.book.engine import Declaration, judge, over_seeds
from raptor.paper import FINAL_UPDATE_RANK
from raptor.stats import (aligned, bootstrap, bootstrap_mean, change_points, log_slope,
                          rank_correlation, sigmoid_vs_linear)

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
ALIGNED_MIN = Threshold(0.5, "[ours] the paper shows the jumps (§4, Fig. 11) without a count: "
                             "at least half the max-cut boundaries have one")
RANK_P_MAX = Threshold(0.05, "[ours] 'both the stable rank and effective rank decrease steadily "
                             "with depth' (§4, Fig. 12 left): Spearman's ρ with depth, its 95% "
                             "(two-sided 5%) Fisher-z interval below 0; at or above 0 it does "
                             "not hold, spanning 0 is inconclusive")
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
ZERO_AICC = Threshold(0.0, "ΔAICc = 0: the S of §4 (Fig. 8 right) and a line fit equally well")
NO_GAP = Threshold(0.0, "two groups reaching γ = 0.9 at the same layer: no order (§4)")
ORDER_BAND = Threshold(0.5, "[ours] 'registers approach their terminal directions earliest, "
                            "patches follow' (§4) without a margin: an order within half a layer "
                            "is a tie")
SPEED_ORDER = ("registers", "patches", "cls")  # "stable small speeds for registers,
# intermediate speeds for patches, and sharp late reorientations for cls" (§4, Fig. 11)


def _claim(claim_id: str, parts: dict[str, str | Part], *, paper: str, ours: str,
           detail: str) -> Claim:
    """Claim ``claim_id`` as the conjunction of named ``parts``
    (:func:`~raptor.book.claims.conjoined`), its detail naming the parts that do not hold or are
    inconclusive."""
    judged = dict(zip(parts, conjunction(list(parts.values()))))
    why = "".join(f"; {name}: " + ", ".join(p for p, v in judged.items() if v == which)
                  for name, which in (("does not hold", FAILS), ("inconclusive", INCONCLUSIVE))
                  if which in judged.values())
    return conjoined(claim_id, parts, paper=paper, ours=ours, detail=detail + why)


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


def _interval(draws: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return float(lo), float(hi)


def c16_directions_converge(gamma: Sequence[dict[str, np.ndarray]]) -> Claim:
    """C16 (§4, Fig. 8 right) over seeds: ``gamma[i][g]`` is seed i's γ_l per image ``(N, L+1)``.
    Judged on each seed's mean curve, the seeds the unit: per group γ at layer L−1 above
    ``GAMMA_LATE_MIN`` (saturating near 1), a logistic beating a line by more than ``AICC_MIN``
    (the band ±``AICC_MIN`` a tie), its midpoint inside (0, L) (a midpoint at the fit's bound on
    any seed: not estimated, so inconclusive). The order in which the groups reach ``GAMMA_NEAR``
    is reported beside it with a band of half a layer (``ORDER_BAND``), not judged in it: the
    claim is the convergence. Not testable on fewer than 6 layers."""
    means = [{g: v.mean(axis=0) for g, v in seed.items()} for seed in gamma]
    depth = len(next(iter(means[0].values()))) - 1
    if depth + 1 < 6:
        return claim("C16", paper="γ_l S-shaped, saturating near 1 (§4, Fig. 8 right)",
                     ours=f"{depth + 1} layers", holds=None,
                     detail="a 4-parameter logistic against a line needs ≥ 6 layers (AICc)")
    groups = list(means[0])
    fits = [{g: sigmoid_vs_linear(m[g]) for g in groups} for m in means]
    parts = []
    for g in groups:
        pinned = any(fit[g].mid_at_bound for fit in fits)
        parts += [
            engine.Part(f"{g} near 1", over_seeds([m[g][-2] for m in means]), GAMMA_LATE_MIN,
                        fmt=".2f", what=f"{g} γ at layer L−1"),
            engine.Part(f"{g} S-shape (ΔAICc)", over_seeds([fit[g].delta_aicc for fit in fits]),
                        ZERO_AICC, band=AICC_MIN.value, fmt=".1f",
                        what=f"how much better a logistic fits {g} γ than a line (ΔAICc)"),
            engine.Part(f"{g} midpoint in (0, L)",
                        over_seeds([fit[g].mid for fit in fits], pinned=pinned),
                        Threshold(depth / 2, "the middle layer: within L/2 of it is inside (0, L)"),
                        side="inside", band=depth / 2, fmt=".1f",
                        what=f"the layer of {g} γ's steepest rise")]
    order = [g for g in GAMMA_ORDER if g in groups]
    reach = [{g: min(crossing(m[g], GAMMA_NEAR.value), depth + 1.0) for g in order}
             for m in means]
    also = [engine.Part(f"{a} before {b}", over_seeds([r[b] - r[a] for r in reach]), NO_GAP,
                        band=ORDER_BAND.value, fmt=".1f",
                        what=f"how many layers after {a} {b} reaches γ = {GAMMA_NEAR.value:g}")
            for a, b in zip(order, order[1:])]
    return judge(Declaration(
        "C16", "γ_l S-shaped, saturating near 1; registers earliest, then patches, cls last "
               "(§4, Fig. 8 right)", parts, also=also,
        note=f"on each seed's mean γ curve: logistic vs line by AICc, the logistic's midpoint "
             f"(one at the fit's bound, ±L beyond the layers, is not estimated), γ at layer "
             f"L−1; the layer where γ first reaches {GAMMA_NEAR.value:g} (never: L+1)"))


def c17_norms_grow(norms: dict[str, np.ndarray]) -> Claim:
    """C17: every group's mean norm ``(L+1,)`` rises with depth: Spearman ρ with depth above
    ``NORM_RHO_MIN``, judged on its Fisher-z interval, both ways."""
    rho = {g: rank_correlation(v) for g, v in norms.items()}
    return _claim(
        "C17", {g: _ranked(v, NORM_RHO_MIN.value, above=True) for g, v in norms.items()},
        paper="feature norms grow with depth (Fig. 9)",
        ours=", ".join(f"{g}: ρ={c.r:.2f} [{c.low:.2f}, {c.high:.2f}]" for g, c in rho.items()),
        detail=f"Spearman ρ of mean norm with depth above {NORM_RHO_MIN.value:g}, 95% Fisher-z "
               f"interval (a perfect ordering has a zero-width interval)")


def c18_class_basins(first: np.ndarray, last: np.ndarray, labels: np.ndarray) -> Claim:
    """C18: the cls within/between-class angle ratio (:func:`raptor.dynamics.basin_compactness`
    of the directions ``first``, ``last`` ``(N, D)`` at layers 1 and L) falls from layer 1 to L
    and ends below ``BASIN_RATIO_MAX``, both judged on bootstrap intervals over images."""
    seen: dict[bytes, float] = {}  # both intervals draw the same resamples (same seed)

    def at_last(i: np.ndarray) -> float:
        if i.tobytes() not in seen:
            seen[i.tobytes()] = dynamics.basin_compactness(last[i], labels[i]).ratio
        return seen[i.tobytes()]

    end = bootstrap(at_last, len(labels), n_boot=300)
    fall = bootstrap(lambda i: at_last(i) - dynamics.basin_compactness(first[i], labels[i]).ratio,
                     len(labels), n_boot=300)
    return _claim(
        "C18", {"ratio falls": part(fall, 0.0, above=False),
                "ratio at L below 1": part(end, BASIN_RATIO_MAX.value, above=False)},
        paper="trajectories enter class-dependent basins (§4, Fig. 8 left)",
        ours=f"within/between: layer 1 {end.estimate - fall.estimate:.2f} → layer L "
             f"{end.estimate:.2f} [{end.low:.2f}, {end.high:.2f}]; change {fall.estimate:+.2f} "
             f"[{fall.low:+.2f}, {fall.high:+.2f}]",
        detail="mean within-class angle over mean between-class-mean angle, cls tokens; 95% "
               "bootstrap over images")


def c19_self_correction(relative: dict[str, np.ndarray], eps_over_norm: dict[str, float], *,
                        layer: int, distance: dict[str, np.ndarray] | None = None) -> Claim:
    """C19: each group's deviation from the clean path in units of its norm at the injection
    ``layer`` (``relative[g]`` ``(N, L−layer+1)``, :func:`raptor.dynamics.image_deviation`)
    ends below its peak: the peak located on the even images, the change measured on the odd
    ones, so that a noisy curve's maximum cannot make a fall. ``distance[g]``: Fig. 10A's
    cosine distance; where it falls but C19 does not hold, the detail says so (norm growth)."""
    change, text = {}, []
    for g, dev in relative.items():
        peak, held_out = int(np.argmax(dev[::2].mean(axis=0))), dev[1::2]
        change[g] = bootstrap_mean(held_out[:, -1] - held_out[:, peak])
        m = held_out.mean(axis=0)
        text.append(f"{g}: ε = {eps_over_norm[g]:.1%} of ‖x‖, deviation {m[0]:.3f} → peak "
                    f"{m[peak]:.3f} at layer {layer + peak} → {m[-1]:.3f} at L (change "
                    f"[{change[g].low:+.4f}, {change[g].high:+.4f}])")
    parts = {g: part(iv, 0.0, above=False) for g, iv in change.items()}
    judged = _claim(
        "C19", parts, paper="perturbed trajectories bend back (§4, Fig. 10A)",
        ours="; ".join(text),
        detail=f"injection at layer {layer}; deviation = angle to the clean path × ‖x_j‖ / "
               f"‖x_{layer}‖ (so norm growth alone does not shrink it), its change from the "
               "peak (located on half the images) to layer L (on the other half); 95% "
               "bootstrap over images")
    norm_only = [g for g, p in parts.items() if p.verdict() != HOLDS and distance is not None
                 and distance[g][-1] < distance[g].max()]
    if not norm_only:
        return judged
    return replace(judged, detail=f"{judged.detail}; the cosine distance does fall for "
                                  f"{', '.join(norm_only)}, but no more than norm growth explains")


def c20_sensitivity_by_depth(sensitivity: dict[str, np.ndarray]) -> Claim:
    """C20 on ``sensitivity[g]`` ``(N, L)`` (per image, injection at layer ``l = 0..L−1``): the
    slope of log mean patch sensitivity over layers 0..L−2 below 0, cls sensitivity at layer L−1
    over at L/2 above 1; both on bootstrap intervals over images."""
    patches, cls = sensitivity["patches"], sensitivity["cls"]
    depth = patches.shape[1]
    mid, fit = depth // 2, slice(0, max(2, depth - 1))
    slope = bootstrap(lambda i: log_slope(patches[i].mean(axis=0)[fit]), len(patches))
    rise = bootstrap(lambda i: float(cls[i, -1].mean() / cls[i, mid].mean()), len(cls))
    return _claim(
        "C20", {"patch decay": part(slope, 0.0, above=False), "late cls rise": part(rise, 1.0)},
        paper="patch sensitivity decays with injection depth; cls rises when injected late "
              "(§4, Fig. 10B)",
        ours=f"patch log-slope {slope.estimate:.3f} [{slope.low:.3f}, {slope.high:.3f}]/layer; "
             f"cls at layer {depth - 1} / at layer {mid} = {rise.estimate:.2f} "
             f"[{rise.low:.2f}, {rise.high:.2f}]",
        detail=f"slope of log mean sensitivity vs injection layer 0..{depth - 2} (patches) below "
               "0; cls sensitivity injected at L−1 over at L/2 above 1; 95% bootstrap over "
               "images")


def c21_angular_speed(speed: dict[str, np.ndarray], bounds: list[int]) -> Claim:
    """C21: in the last phase, speed ``speed[g]`` ``(L,)`` orders registers < patches < cls;
    patch speed jumps at the max-cut's inner boundaries ``bounds``."""
    last = _last_phase(bounds, len(next(iter(speed.values()))))
    late = {g: float(np.mean(s[last])) for g, s in speed.items()}
    ranked = sorted(late, key=late.get)
    cps = change_points(speed["patches"], len(bounds)) if bounds else []
    tol = int(ALIGN_TOL.value)
    return claim(
        "C21", paper="late angular speed: registers < patches < cls; jumps at phase boundaries "
                     "(Fig. 11)",
        ours=" < ".join(f"{g} {late[g]:.3f}" for g in ranked)
             + f"; patch change points {cps} vs boundaries {bounds}",
        holds=ranked == [g for g in SPEED_ORDER if g in late]
              and (not bounds or aligned(cps, bounds, tol=tol) >= ALIGNED_MIN.value),
        tests=max(1, len(late) - 1 + bool(bounds)),  # adjacent pairs of the order, the jumps
        detail=f"mean speed in the last phase; largest speed changes within ±{tol} layer of a "
               "boundary; not earned both ways: an order of mean speeds without an interval, "
               "which equal speeds would give in the claimed order 1 time in 6")


def _ranked(curve: np.ndarray, threshold: float, *, above: bool) -> Part:
    """"Spearman ρ of ``curve`` with depth lies above (below) ``threshold``" as a :class:`Part`,
    its Fisher-z interval recomputed at any level."""
    def interval(level: float) -> tuple[float, float]:
        c = rank_correlation(curve, level=level)
        return c.low, c.high

    return Part(interval, threshold, above=above)


def c22_update_rank_falls(stable: dict[str, np.ndarray], effective: dict[str, np.ndarray],
                          bounds: list[int], *, width: int) -> Claim:
    """C22: the stable and effective rank of the updates ``(L,)`` fall with depth in every group
    (Spearman ρ's ``1 − RANK_P_MAX`` interval below 0); only at ``PAPER_WIDTH`` (the paper gives
    no law for other widths) their last-phase mean is within ``FINAL_RANK_TOL`` of ``FINAL_RANK``.
    Not testable on fewer than 5 layers."""
    depth = len(next(iter(stable.values())))
    paper = (f"stable and effective rank of updates fall with depth (≈ {FINAL_RANK.value:g} at "
             "the end, DINOv2-B) (§4, Fig. 12 left)")
    if depth < 5:
        return claim("C22", paper=paper, ours=f"{depth} layers", holds=None,
                     detail="a rank correlation's interval needs ≥ 5 layers")
    last = _last_phase(bounds, depth)
    ranks = {(kind, g): v for kind, by_group in (("stable", stable), ("effective", effective))
             for g, v in by_group.items()}
    end = {key: float(np.mean(v[last])) for key, v in ranks.items()}
    parts = {f"{g} {kind} falls": _ranked(v, 0.0, above=False) for (kind, g), v in ranks.items()}
    near = width == PAPER_WIDTH
    if near:
        parts |= {f"{g} {kind} ≈ {FINAL_RANK.value:g}":
                  HOLDS if abs(e - FINAL_RANK.value) <= FINAL_RANK_TOL.value else FAILS
                  for (kind, g), e in end.items()}

    def rho(kind: str, g: str) -> str:
        c = rank_correlation(ranks[kind, g], level=1 - RANK_P_MAX.value)
        return f"{c.r:.2f} [{c.low:.2f}, {c.high:.2f}]"

    return _claim(
        "C22", parts, paper=paper,
        ours=", ".join(f"{g}: ρ stable {rho('stable', g)} / effective {rho('effective', g)}, "
                       f"last phase {end['stable', g]:.1f}/{end['effective', g]:.1f}"
                       for g in stable),
        detail=f"Spearman ρ of each rank with depth, its {1 - RANK_P_MAX.value:.0%} Fisher-z "
               "interval below 0 (Bonett–Wright standard error); "
               + (f"last-phase mean within ±{FINAL_RANK_TOL.value:g} of "
                  f"{FINAL_RANK.value:g}" if near else
                  f"'≈ {FINAL_RANK.value:g}' not tested: it is DINOv2-B's number at D = "
                  f"{PAPER_WIDTH}, here D = {width} bounds the ranks differently"))


def sharpness(kappa: np.ndarray) -> tuple[float, int]:
    """The largest one-layer rise of ``kappa`` as a share of its rise from layer 1 to its peak
    (0 when it never rises), and the index of the value that rise reaches."""
    steps = np.diff(kappa)
    total = float(kappa.max() - kappa[0])
    i = int(np.argmax(steps))
    return (float(steps[i]) / total if total > 0 else 0.0), i + 1


def c23_coherence_rises(kappa: np.ndarray, bounds: list[int]) -> Claim:
    """C23: the patch coherence κ_l rises sharply late: its largest one-layer rise carries at
    least ``SHARP_SHARE`` of the rise to the peak and lands in the last max-cut phase, both on
    bootstrap intervals over images of ``kappa`` ``(N, L)`` (the same resamples)."""
    mean = kappa.mean(axis=0)
    share = bootstrap(lambda i: sharpness(kappa[i].mean(axis=0))[0], len(kappa))
    where = bootstrap(lambda i: float(sharpness(kappa[i].mean(axis=0))[1]), len(kappa))
    start = _last_phase(bounds, len(mean)).start
    at = int(where.estimate)
    # landing indices are whole layers: half a layer before the phase separates in from out
    return _claim(
        "C23", {"sharp": part(share, SHARP_SHARE.value), "late": part(where, start - 0.5)},
        paper="patch-token coherence rises sharply late (§4, Fig. 12 middle)",
        ours=f"κ {mean[0]:.3f} → peak {mean.max():.3f}; largest one-layer rise "
             f"{share.estimate:.0%} [{share.low:.0%}, {share.high:.0%}] of it, at layer l+1 = "
             f"{at + 1} [{where.low + 1:.0f}, {where.high + 1:.0f}]"
             + (" (last phase)" if at >= start else " (before the last phase)"),
        detail=f"sharp: the largest one-layer rise ≥ {SHARP_SHARE.value:.0%} of the rise to the "
               f"peak [ours]; late: it lands in the last max-cut phase (layer l+1 ≥ "
               f"{start + 1}); 95% bootstrap over images")


def c24_dmd_near_one(eigenvalues: dict[str, np.ndarray], radius_boot: dict[str, np.ndarray],
                     nearest_boot: dict[str, np.ndarray], *, rank: int) -> Claim:
    """C24: every group's DMD spectral radius ≤ 1 up to ``RADIUS_TOL`` (on its bootstrap over
    images, ``radius_boot[g]``), and cls's nearest eigenvalue closer to +1 than each other
    group's (paired: ``nearest_boot[g]`` on the same resamples). ``rank``: the rank asked for."""
    closest = {g: float(np.min(np.abs(lam - 1))) for g, lam in eigenvalues.items()}
    radius = {g: (float(np.abs(lam).max()), *_interval(radius_boot[g]))
              for g, lam in eigenvalues.items()}
    farther = {g: (closest[g] - closest["cls"], *_interval(nearest_boot[g] - nearest_boot["cls"]))
               for g in eigenvalues if g != "cls" and "cls" in eigenvalues}
    used = max(len(lam) for lam in eigenvalues.values())
    return _claim(
        "C24", {**{f"{g} |λ| ≤ 1": part(r, 1 + RADIUS_TOL.value, above=False)
                   for g, r in radius.items()},
                **{f"cls closer to +1 than {g}": part(iv, 0.0) for g, iv in farther.items()}},
        paper="DMD eigenvalues inside the unit circle near +1; cls closest to +1 (§4, Fig. 12 "
              "right)",
        ours="ρ(A) " + ", ".join(f"{g} {r:.4f} [{lo:.4f}, {hi:.4f}]"
                                 for g, (r, lo, hi) in radius.items())
        + "; nearest λ to +1: " + ", ".join(f"{g} {d:.3f}" for g, d in closest.items())
        + "".join(f"; {g} − cls {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                  for g, (d, lo, hi) in farther.items()),
        detail=f"exact DMD of rank {used} on group-averaged directions"
               + ("" if used == rank else f" (the paper's r = {rank} needs ≥ {rank} layer "
                                          f"transitions; this teacher has {used})")
               + f"; |λ| ≤ 1 + {RADIUS_TOL.value:g} judged on a 95% bootstrap over images of "
                 "ρ(A), cls closest to +1 on a paired 95% bootstrap of each other group's "
                 "distance minus cls's")


