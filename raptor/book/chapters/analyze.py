"""Chapter *Your own ViT*: the paper's analysis of any timm ViT (§2–§4, Figs. 1, 8–12).

``python -m raptor analyze --model NAME --weights FILE --images DIR`` executes this chapter with
those parameters into a folder of its own; the book executes it on one of the companion's own
teachers as an example. One streaming pass over the images (:func:`raptor.analysis.analyse`)
gives the layer-similarity matrices, their max-cut for each k, C1's test with its ladder of
nulls (:func:`~raptor.structure.phase_excess`) set beside the paper's DINOv2-B matrix, and the
flow of §4 (norms, directional convergence, angular speed, coherence, update ranks, DMD). With
``fit_raptor``, a Raptor of k tied blocks is distilled on each max-cut (§3), and on random
partitions when asked, and compared with the model layer by layer.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from torch.utils.data import DataLoader, Dataset, Subset

from raptor import analysis, paper, phases
from raptor.book import plotting
from raptor.book.chapters.phase_structure import c1_summary, excess_row, power_reps
from raptor.book.claims import LEVEL, Claim
from raptor.book.experiment import student_of, teacher_of
from raptor.book.scope import DATASET_NAMES
from raptor.book.specs.analyze import COMPANION, NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401
from raptor.dynamics import DynamicsSummary
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student
from raptor.model import repeats_from_partition
from raptor.phases import Partition, maxcut, random_partitions
from raptor.similarity import phase_matrix
from raptor.stats import Interval
from raptor.phase_test import PhaseTest, phase_test
from raptor.structure import PhaseExcess, matrix_excess, phase_excesses
from raptor.train import CACHE_LIMIT_BYTES, distill
from raptor.trajectories import TokenGroups


@dataclass(frozen=True)
class Fit:
    """A Raptor distilled on ``partition`` (``kind``: ``"max-cut"`` or ``"random"``) against the
    model on the analysed images: per group and layer 0..L the mean cosine and R² (§3, Fig. 14),
    the authors' global R² at the last layer, and the top-1 agreement of the two through the
    model's head (``None`` for a model without one)."""

    partition: Partition
    kind: str
    cosine: dict[str, list[float]]
    r2: dict[str, list[float]]
    global_r2: float
    agreement: float | None
    steps: int


@dataclass
class Result:
    spec: Spec
    depth: int
    similarity: dict[str, np.ndarray]
    S: np.ndarray
    cuts: dict[int, Partition]
    excess: dict[int, PhaseExcess]
    dinov2b: dict[int, PhaseExcess]
    dynamics: DynamicsSummary
    fits: dict[int, list[Fit]]
    n_images: int
    test: PhaseTest  # C1's test: phases at some k of ``spec.k_values``, with d*
    dinov2b_test: PhaseTest


def model_of(spec: Spec):
    """The model ``spec`` names, in eval mode on the CPU."""
    if spec.model == COMPANION:
        return teacher_of(spec)[0]
    return analysis.load_vit(spec.model, Path(spec.weights).expanduser(), spec.input_size)


def model_name(spec: Spec) -> str:
    """The analysed model as the page names it: the book's own teacher described, any other by
    its timm name."""
    if spec.model != COMPANION:
        return spec.model
    t = spec.teacher
    return (f"the book's own teacher (a ViT of {t.depth} blocks of width {t.embed_dim}, "
            f"stochastic depth {t.p:g}, trained on "
            f"{DATASET_NAMES.get(spec.train.dataset, spec.train.dataset)})")


def compute(spec: Spec) -> Result:
    """The model's streaming pass over ``n_images`` images, the phase matrix's max-cut and C1's
    test at each k, the paper's DINOv2-B matrix's, the flow metrics and, with ``fit_raptor``,
    the Raptors."""
    spec.require_model()
    model = model_of(spec)
    analysed, others = analysis.split(analysis.image_data(spec.images, model,
                                                          root=spec.machine.data_root),
                                      spec.n_images)
    a = analysis.analyse(model, DataLoader(analysed, batch_size=spec.batch),
                         device=spec.machine.device, bf16=spec.bf16, progress=False)
    S = phase_matrix(a.similarity)
    cuts = {k: maxcut(S, k) for k in spec.k_values}
    dinov2b = paper.dinov2b_block_similarity()
    fits = {}
    if spec.fit_raptor:
        held_out = Subset(others, range(min(len(others), spec.distill.train_limit or
                                            len(others))))
        fits = {k: [fit(spec, model, part, kind, held_out, analysed) for part, kind in
                    [(cut, "max-cut"), *((p, "random") for p in random_partitions(
                        len(S), k, spec.random_partitions, seed=k, exclude=[cut]))]]
                for k, cut in cuts.items()}
    return Result(spec, len(S), a.similarity, S, cuts,
                  phase_excesses(a.per_image, spec.k_values, growth=a.growth, n_boot=spec.n_boot),
                  {k: matrix_excess(dinov2b, k) for k in spec.k_values}, a.dynamics, fits,
                  a.n_images,
                  phase_test(a.per_image, ks=spec.k_values, n_boot=spec.n_boot,
                             power_reps=power_reps(spec.n_boot)),
                  phase_test(dinov2b, ks=spec.k_values))


def fit(spec: Spec, model, partition: Partition, kind: str, train_set: Dataset,
        analysed: Dataset) -> Fit:
    """A Raptor of ``model`` on ``partition`` distilled by ``spec.distill``, compared on
    ``analysed``. The book's own teacher's is the cached student the other chapters share
    (:func:`~raptor.book.experiment.student_of`: distilled on the teacher's training images,
    carried by the artifact tier); any other model's is distilled here on ``train_set`` (its
    trajectories kept in memory when they fit)."""
    device = resolve_device(spec.machine.device)
    if spec.model == COMPANION:
        student, _ = student_of(spec, spec.teacher.p, partition)
    else:
        tokens = TokenGroups.from_model(model).num_tokens
        cached = len(train_set) * (len(model.blocks) + 1) * tokens * model.embed_dim * 4
        cfg = dataclasses.replace(
            spec.distill, repeats=repeats_from_partition(partition, len(model.blocks)),
            device=device, bf16=spec.bf16 and device.startswith("cuda"),
            cache_teacher=spec.distill.cache_teacher and cached <= CACHE_LIMIT_BYTES)
        student, _ = distill(model, train_set, cfg, progress=False)
    match = evaluate_student(student, model, DataLoader(analysed, batch_size=spec.batch),
                             device=device)
    return Fit(tuple(partition), kind, match["cosine"], match["r2"], match["global_r2"],
               match["agreement"] if model.num_classes else None,
               spec.distill.stage1_steps + spec.distill.stage2_steps)


def table(result: Result) -> pd.DataFrame:
    """The max-cut's excess over each null of the ladder at each k (a description, not C1's
    test) beside the paper's DINOv2-B matrix's, then C1's test
    (:func:`~raptor.phase_test.phase_test`: phases at some k, d*) for both, which alone judges
    phases."""
    rows = []
    for k, e in result.excess.items():
        rows.append({"k": k, "model": "yours", **excess_row(e)})
        rows.append({"k": k, "model": "DINOv2-B (the paper's matrix)",
                     **excess_row(result.dinov2b[k])})
    for model, t in (("yours", result.test), ("DINOv2-B (the paper's matrix)",
                                              result.dinov2b_test)):
        rows.append({"k": "some k", "model": model, **c1_summary(t)})
    return pd.DataFrame(rows).set_index(["k", "model"])


def similarity_figure(result: Result) -> plt.Figure:
    """The phase matrix (blocks 1..L; cls and mean patch) with its max-cut outlined, one panel
    per k, beside the paper's DINOv2-B matrix: two panels a row, so that no title overlaps its
    neighbour's and the figure stays legible on a phone."""
    panels = {f"k = {k}: {phases.format_partition(c)}": result.S for k, c in result.cuts.items()}
    panels["DINOv2-B (the paper's)"] = paper.dinov2b_block_similarity()
    return plotting.similarity_panels(panels, ncols=2, partitions=dict(
        zip(panels, result.cuts.values())))


def flow_figure(result: Result) -> plt.Figure:
    """The flow of §4 per token group: feature norms (Fig. 9), directional convergence γ_l
    (Fig. 8, right), angular speed (Fig. 11), patch coherence κ_l and the update ranks (Fig. 12),
    and the DMD eigenvalues of the mean directions (Fig. 12, App. D)."""
    d = result.dynamics
    fig, axes = plotting.grid(6, row_height=2.6, extra=0.7)
    ax_n, ax_c, ax_s, ax_k, ax_r, ax_d = axes
    for ax, stats, ylabel, title, first in (
            (ax_n, d.norms, r"$\Vert x_l \Vert$", "(A) feature norms", 0),
            (ax_c, d.convergence, r"$\gamma_l = \langle \hat x_l, \hat x_L \rangle$",
             "(B) directional convergence", 0),
            (ax_s, d.speed, r"angle $\hat x_{l-1} \to \hat x_l$ (rad)", "(C) angular speed",
             1)):
        plotting.layer_curves({g: m.mean for g, m in stats.items()}, ylabel=ylabel, title=title,
                              ax=ax, first_layer=first)
    plotting.layer_curves({"patches": d.coherence["patches"].mean}, ylabel=r"$\kappa_l$",
                          title="(D) patch coherence", ax=ax_k, first_layer=1)
    plotting.layer_curves({f"{g} {kind}": getattr(r, kind) for g, r in d.ranks.items()
                           for kind in ("effective", "stable")},
                          ylabel="rank of the update", title="(E) update rank", ax=ax_r,
                          first_layer=1, logy=True)
    circle = np.exp(1j * np.linspace(0, 2 * np.pi, 200))
    ax_d.plot(circle.real, circle.imag, color="grey", lw=0.8, label="_unit circle")
    for color, (g, m) in zip(sns.color_palette("colorblind"), d.dmd.items()):
        ax_d.scatter(m.eigenvalues.real, m.eigenvalues.imag, s=12, color=color,
                     label=f"_{g}, DMD λ")
    used = max(m.rank for m in d.dmd.values())
    ax_d.set(aspect="equal", xlabel=r"Re $\lambda$", ylabel=r"Im $\lambda$",
             title=f"(F) DMD, rank {used}")
    plotting.legend_below(fig, [ax_n, ax_r], ncols=3)
    return fig


def flow_table(result: Result) -> pd.DataFrame:
    """The flow's summary numbers per token group: γ at the middle layer, the mean angular speed
    over the first and last thirds of depth, the last update's ranks, the DMD's largest |λ| and
    its distance to +1 (C16, C21, C22, C24's quantities)."""
    d, L = result.dynamics, result.depth
    third = max(1, L // 3)
    return pd.DataFrame({g: {
        "γ at layer L/2": d.convergence[g].mean[L // 2],
        "speed, first third": d.speed[g].mean[:third].mean(),
        "speed, last third": d.speed[g].mean[-third:].mean(),
        "stable rank, last block": d.ranks[g].stable[-1],
        "effective rank, last block": d.ranks[g].effective[-1],
        "DMD max |λ|": np.abs(d.dmd[g].eigenvalues).max(),
        "DMD min |λ − 1|": np.abs(d.dmd[g].eigenvalues - 1).min(),
    } for g in d.norms}).T.round(3)


def fit_figure(result: Result) -> plt.Figure:
    """Each k's Raptor against the model, layer by layer: the mean cosine of the cls token (or
    the mean patch without one) for the max-cut and each random partition (Fig. 14); a note in
    place of the panels where no Raptor was fitted."""
    if not result.fits:
        fig, axes = plotting.figure(1, 1, height=1.0)
        axes[0, 0].set_axis_off()
        axes[0, 0].text(0.5, 0.5, "no Raptor fitted: set fit_raptor (--fit-raptor STEPS)",
                        ha="center", va="center")
        return fig
    fig, axes = plotting.grid(len(result.fits), row_height=3.0, extra=0.0, sharey=True)
    group = "cls" if "cls" in next(iter(result.fits.values()))[0].cosine else "patches"
    for ax, (k, fits) in zip(axes, result.fits.items()):
        for i, f in enumerate(fits):  # the max-cut's first, then the random partitions'
            style = dict(color="black", lw=1.6, marker="o", ms=3) if f.kind == "max-cut" else \
                dict(color="grey", lw=0.8, alpha=0.7)
            ax.plot(f.cosine[group], label=f.kind if i < 2 else "_random", **style)
        ax.set(title=f"k = {k}: max-cut\n{phases.format_partition(fits[0].partition)}",
               xlabel="layer", ylabel=f"cosine to the model ({group})")
        if len(fits) > 1:
            ax.legend(frameon=False)
    return fig


def fit_table(result: Result) -> pd.DataFrame:
    """Each Raptor's match with the model on the analysed images: last-layer cosine and R² per
    group, the authors' global R² and the top-1 agreement through the model's head."""
    rows = []
    for k, fits in result.fits.items():
        for f in fits:
            rows.append({"k": k, "partition": f"{f.kind} {phases.format_partition(f.partition)}",
                         **{f"cosine {g}": v[-1] for g, v in f.cosine.items()},
                         **{f"R² {g}": v[-1] for g, v in f.r2.items()},
                         "global R²": f.global_r2, "agreement": f.agreement,
                         "steps": f.steps})
    frame = pd.DataFrame(rows)
    return frame.set_index(["k", "partition"]).round(3) if rows else frame


def findings(result: Result) -> dict[str, str]:
    """What the analysis finds, as text for the chapter's prose."""
    out = {
        "model": model_name(result.spec),
        "images": f"{result.n_images:,} images of "
                  f"{DATASET_NAMES.get(result.spec.images, result.spec.images)}",
        "depth": str(result.depth),
        "cuts": "; ".join(f"k = {k}: {phases.format_partition(c)}" for k, c in result.cuts.items()),
        "excess": "; ".join(f"k = {k}: {Interval(e.excess, e.low, e.high, e.level):+.3f}"
                            for k, e in result.excess.items()),
        "c1": f"{result.test.verdict()}: "
              f"{Interval(result.test.excess, *result.test.interval(), LEVEL):+.3f} at k = "
              f"{result.test.best().k} ({phases.format_partition(result.test.best().cut)}); "
              f"d* (the smallest step it detects with 80% probability) "
              f"{result.test.d_star:.2f}",
        "dinov2b": f"{result.dinov2b_test.excess:+.3f} at k = {result.dinov2b_test.best().k}",
    }
    if result.fits:
        out["raptor"] = "; ".join(
            f"k = {k}: global R² {fits[0].global_r2:.3f}" + (
                f" (random partitions: {min(f.global_r2 for f in fits[1:]):.3f} to "
                f"{max(f.global_r2 for f in fits[1:]):.3f})" if len(fits) > 1 else "")
            for k, fits in result.fits.items())
    else:
        out["raptor"] = "not fitted (set fit_raptor, or --fit-raptor STEPS on the command line)"
    return out


def numbers(result: Result) -> dict[str, Any]:
    """Every number of the analysis, for ``analysis.json`` (NaN, where there is no interval, as
    null; complex DMD eigenvalues as [re, im] pairs)."""
    def clean(value: Any) -> Any:  # JSON has no NaN and no complex numbers
        if isinstance(value, np.ndarray):
            return clean(value.tolist())
        if isinstance(value, complex):
            return [value.real, value.imag]
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    d = result.dynamics
    return clean({
        "spec": dataclasses.asdict(result.spec), "depth": result.depth,
        "n_images": result.n_images, "phase_matrix": result.S,
        "similarity": result.similarity,
        "cuts": {str(k): c for k, c in result.cuts.items()},
        "excess": {str(k): dataclasses.asdict(e) for k, e in result.excess.items()},
        "dinov2b": {str(k): dataclasses.asdict(e) for k, e in result.dinov2b.items()},
        "c1_test": {"verdict": result.test.verdict(), "excess": result.test.excess,
                    "interval": list(result.test.interval()), "best_k": result.test.best().k,
                    "d_star": result.test.d_star if math.isfinite(result.test.d_star) else None,
                    "per_k": {str(k): {"cut": e.cut, "excess": e.excess}
                              for k, e in result.test.per_k.items()}},
        "flow": {name: {g: {"mean": m.mean, "std": m.std} for g, m in getattr(d, name).items()}
                 for name in ("norms", "convergence", "speed", "coherence")},
        "update_ranks": {g: {"stable": r.stable, "effective": r.effective}
                         for g, r in d.ranks.items()},
        "dmd": {g: {"rank": m.rank, "eigenvalues": m.eigenvalues} for g, m in d.dmd.items()},
        "raptor": {str(k): [dataclasses.asdict(f) for f in fits]
                   for k, fits in result.fits.items()},
    })


def write_json(result: Result, path: str | Path = "analysis.json") -> Path:
    """:func:`numbers` written to ``path``."""
    path = Path(path)
    path.write_text(json.dumps(numbers(result), indent=1) + "\n")
    return path


def claims(result: Result) -> list[Claim]:
    """The analysis of one model tests no claim of the paper: its C1 verdict is in :func:`table`."""
    return []
