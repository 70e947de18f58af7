"""Chapter *Raptor*: two-stage distillation of a teacher into k weight-tied blocks (§3, Figs. 5, 6,
14; App. E; C15, C25)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from raptor.book import plotting
from raptor.book.claims import BY_CONSTRUCTION, Claim, Threshold, claim, listed, stated
from raptor.book.engine import Declaration, Part, judge, over_seeds
from raptor.book.experiment import batched, images_of, probe_accuracy, student_of, teacher_of, walk
from raptor.book.specs.raptor import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student
from raptor.model import count_parameters, flops_per_image
from raptor.phases import Partition

GROUPS = ("cls", "patches")
BITS_PER_PARAMETER = 32  # description length at float32 (App. E)
UNIT_IMAGES = 50  # images per unit of the per-unit cosine [ours]


@dataclass
class Model:
    """Accuracy and cost of the teacher or one Raptor."""

    name: str
    head_acc: float
    probe_acc: float
    block_params: int
    flops: int


@dataclass
class SeedRun:
    """One seed's teacher and Raptors."""

    seed: int
    partitions: dict[int, Partition]
    records: dict[int, dict[str, Any]]  # distillation records (losses, λ per step)
    evals: dict[int, dict[str, Any]]  # evaluate_student: per-layer r2 and cosine per group
    models: list[Model]  # the teacher first, then one Raptor per k
    unit_sizes: np.ndarray  # images per unit of ≤ UNIT_IMAGES
    unit_cosine: dict[int, dict[str, np.ndarray]]  # k -> group -> (units, L+1) cosine


@dataclass
class Result:
    spec: Spec
    runs: list[SeedRun]  # one per seed, in the order of ``spec.seeds``


def compute(spec: Spec) -> Result:
    """For each seed: max-cut partitions, the distilled Raptors, their match, accuracy and cost."""
    device = resolve_device(spec.machine.device)
    return Result(spec, [_seed_run(spec, seed, device) for seed in spec.seeds])


def _seed_run(spec: Spec, seed: int, device: str) -> SeedRun:
    w = walk(teacher_of(spec, spec.p, seed=seed), images_of(spec, spec.n_images, seed=seed),
             cuts=spec.k_values, device=device)
    val, units = w.batches(), w.batches(UNIT_IMAGES)
    train = batched(*images_of(spec, spec.probe_images, seed=seed, split="train"))

    def model(name: str, net: torch.nn.Module, head_acc: float) -> Model:
        return Model(name, head_acc, probe_accuracy(net, train, val, device),
                     count_parameters(net)["blocks"], flops_per_image(net))

    records, evals, raptors, unit_cosine = {}, {}, [], {}
    for k in spec.k_values:
        student, records[k] = student_of(spec, spec.p, w.cuts[k], seed=seed)
        evals[k] = w.evaluate(student, device)
        raptors.append(model(f"Raptor k={k}", student, evals[k]["student_acc"]))
        per = [evaluate_student(student, w.model, [u], device=device)["cosine"] for u in units]
        unit_cosine[k] = {g: np.array([c[g] for c in per]) for g in GROUPS}
    teacher = model(f"teacher (L={spec.teacher.depth})", w.model,
                    evals[spec.k_values[0]]["teacher_acc"])
    return SeedRun(seed, w.cuts, records, evals, [teacher, *raptors],
                   np.array([len(y) for _, y in units], dtype=float), unit_cosine)


def training_figure(result: Result) -> plt.Figure:
    """Two-stage distillation (App. A) of the first seed's Raptors: stage-1 loss with the
    teacher-forcing weight λ, then stage 2."""
    return plotting.training_curves({f"k={k}": rec for k, rec in result.runs[0].records.items()})


def layerwise_figure(result: Result) -> plt.Figure:
    """R² (as in Fig. 4B) and cosine similarity (Fig. 14) to the teacher through depth: the mean
    over seeds, shaded from the lowest seed to the highest."""
    fig, axes = plotting.figure(1, 2, width=plotting.BOX_WIDTH, height=3.4)
    for ax, metric, name in zip(axes[0], ("r2", "cosine"), ("(A) R²", "(B) cosine similarity")):
        per_seed = {f"k={k} {g}": np.array([run.evals[k][metric][g] for run in result.runs])
                    for k in result.spec.k_values for g in GROUPS}
        plotting.layer_curves({n: c.mean(axis=0) for n, c in per_seed.items()},
                              ylabel=f"{name[4:]} to the teacher", ax=ax,
                              title=f"{name}\nthrough depth")
        for line, (n, c) in zip(ax.lines, per_seed.items()):
            ax.fill_between(np.arange(c.shape[1]), c.min(axis=0), c.max(axis=0),
                            color=line.get_color(), alpha=0.15, lw=0, label=f"_{n} seed range")
    axes[0][1].axhline(MIN_COSINE.value, color="0.4", ls=":", lw=1,
                       label=f"C15 threshold {MIN_COSINE.value:g} [ours]")
    plotting.legend_below(fig, axes, ncols=2)
    return fig


def cost_table(result: Result) -> pd.DataFrame:
    """Head and probe accuracy (mean and standard deviation over seeds), block parameters and
    FLOPs per image; mean head accuracy as % of the teacher's."""
    def sd(a: np.ndarray) -> float:
        return float(a.std(ddof=1)) if len(a) > 1 else np.nan

    rows = []
    for i, model in enumerate(result.runs[0].models):
        head = np.array([run.models[i].head_acc for run in result.runs])
        probe = np.array([run.models[i].probe_acc for run in result.runs])
        rows.append({"model": model.name, "head acc": head.mean(), "head sd": sd(head),
                     "probe acc": probe.mean(), "probe sd": sd(probe),
                     "block params": model.block_params, "FLOPs/image": model.flops})
    table = pd.DataFrame(rows).set_index("model")
    table["% of teacher (head)"] = 100 * table["head acc"] / table["head acc"].iloc[0]
    return table


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
