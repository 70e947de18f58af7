"""The claims of chapter *Raptor* (C15, C25), their thresholds, and the prose findings that quote
them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from raptor.book.chapters.distillation.compute import GROUPS, Result, cost_table
from raptor.book.claims import BY_CONSTRUCTION, Claim, Threshold, claim, listed, stated
from raptor.book.engine import Declaration, Part, judge, over_seeds

BITS_PER_PARAMETER = 32  # description length at float32 (App. E)

MIN_COSINE = Threshold(0.9, "[ours] Fig. 14 shows the cosine to DINOv2-B staying high through "
                            "depth, with no number we can read off it: 0.9, drawn on the figure")
FLOPS_TOLERANCE = Threshold(0.01, "[ours] 'the same runtime' (App. E): FLOPs per image within 1%"
                                  " (the depth-scaling MLPs add a little)")


def min_cosine(cosine: dict[str, np.ndarray], sizes: np.ndarray) -> float:
    """The smallest cls or patch cosine to the teacher over layers 1..L, on the image-weighted
    mean curves (``cosine[g]``: per unit of ``sizes`` images, ``(units, L+1)``)."""
    curves = np.stack([cosine[g][:, 1:] for g in GROUPS], axis=1)  # (units, groups, L)
    return float(np.average(curves, axis=0, weights=sizes).min())


def c15_cosine_high(min_cos: dict[int, list[float]]) -> Claim:
    """C15 (§3, Fig. 14): every Raptor's cosine to the teacher stays above ``MIN_COSINE`` at every
    layer, judged per k on the minimum over layers of each seed's Raptor (``min_cos[k]``, one
    per seed; the engine's t interval over seeds)."""
    return judge(Declaration(
        "C15", paper="cosine to DINOv2-B stays high through depth (§3, Fig. 14)",
        parts=[Part(f"k={k}", over_seeds(v), MIN_COSINE,
                    what=f"the k={k} Raptor's lowest cosine to its teacher") for k, v in
               min_cos.items()],
        note="minimum over layers 1..L of the cls and patch cosine to the teacher, one per seed"))


def c25_shorter_description(teacher_params: int, teacher_flops: int,
                            params: dict[int, int], flops: dict[int, int]) -> Claim:
    """C25, arithmetic (App. E): each Raptor's blocks (``params``, ``flops`` per k) take fewer bits
    than the teacher's at FLOPs within ``FLOPS_TOLERANCE``: *by construction* where that holds
    (k tied blocks hold about k/L of the parameters), else *does not hold* (e.g. k = L)."""
    bits = {k: BITS_PER_PARAMETER * n for k, n in params.items()}
    teacher_bits = BITS_PER_PARAMETER * teacher_params
    ratio = {k: f / teacher_flops for k, f in flops.items()}
    return claim(
        "C25", paper="a BRH model has a shorter description at the same runtime (App. E)",
        ours=", ".join(f"k={k}: {bits[k] / teacher_bits:.2f}× the bits, "
                       f"{ratio[k]:.3f}× the FLOPs" for k in params),
        holds=BY_CONSTRUCTION if all(bits[k] < teacher_bits
                                     and abs(ratio[k] - 1) < FLOPS_TOLERANCE.value
                                     for k in params) else False,
        detail=f"arithmetic, not a measurement: blocks' parameters at {BITS_PER_PARAMETER} bits "
               "(depth-scaling MLPs included); FLOPs per image")


def claims(result: Result) -> list[Claim]:
    """C15 over every seed's Raptors; C25 from the first seed's models (their cost is the same on
    every seed)."""
    (teacher, *raptors), ks = result.runs[0].models, result.spec.k_values
    c15 = {k: [min_cosine(run.unit_cosine[k], run.unit_sizes) for run in result.runs] for k in ks}
    return [c15_cosine_high(c15),
            c25_shorter_description(teacher.block_params, teacher.flops,
                                    {k: m.block_params for k, m in zip(ks, raptors)},
                                    {k: m.flops for k, m in zip(ks, raptors)})]


def findings(result: Result, checks: Sequence[Claim]) -> dict[str, str]:
    """The *Found* sentence's parts, as glued text, per k over the seeds: the Raptors' mean cls
    and patch R² over layers 1..L, their head accuracy as a share of the teacher's (as
    :func:`cost_table`), their lowest cosine to the teacher (C15's number) and C15's verdict (of
    ``checks``)."""
    ks = result.spec.k_values
    r2 = [np.mean([run.evals[k]["r2"][g][1:] for run in result.runs for g in GROUPS]) for k in ks]
    cosine = [np.mean([min_cosine(run.unit_cosine[k], run.unit_sizes) for run in result.runs])
              for k in ks]
    share = cost_table(result)["% of teacher (head)"].iloc[1:]
    verdict = {c.id: c.verdict for c in checks}
    return {
        "ks": "k = " + listed([str(k) for k in ks]),
        "r2": listed([f"{v:.2f}" for v in r2]),
        "accuracy": listed([f"{v:.1f}%" for v in share]),
        "c15": f"Their lowest cosine to the teacher at any layer is "
               f"{listed([f'{v:.3f}' for v in cosine])}: C15, that it stays above "
               f"{MIN_COSINE.value:g}, {stated(verdict['C15'])}",
    }
