"""The computation of chapter *Your own ViT*: the model's streaming pass, its max-cuts and C1's
test, the flow of §4, the Raptors fitted on its partitions, and every number as JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import DataLoader, Dataset, Subset

from raptor import analysis, data, paper
from raptor.book.chapters.analyze.spec import COMPANION, Spec
from raptor.book.chapters.phase_structure.compute import power_reps
from raptor.book.experiment import student_of, teacher_of
from raptor.book.scope import DATASET_NAMES
from raptor.dynamics import DynamicsSummary
from raptor.loop import resolve_device
from raptor.metrics import evaluate_student
from raptor.model import repeats_from_partition
from raptor.phases import Partition, maxcut, random_partitions
from raptor.similarity import phase_matrix
from raptor.phase_test import PhaseTest, phase_test
from raptor.planning import Plan
from raptor.structure import PhaseExcess, matrix_excess, phase_excesses
from raptor.train import CACHE_LIMIT_BYTES, distill, steps_trained
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


def model_of(spec: Spec, plan: Plan | None = None):
    """The model ``spec`` names, in eval mode on the CPU (the book's own teacher under ``plan``,
    planned)."""
    if spec.model == COMPANION:
        return teacher_of(spec, plan=plan)[0]
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


def compute(spec: Spec, plan: Plan | None = None) -> Result:
    """The model's streaming pass over ``n_images`` images, the phase matrix's max-cut and C1's
    test at each k, the paper's DINOv2-B matrix's, the flow metrics and, with ``fit_raptor``,
    the Raptors."""
    spec.require_model()
    model = model_of(spec, plan)
    analysed, others = analysis.split(
        analysis.image_data(spec.images, model, root=spec.machine.data_root, plan=plan),
        spec.n_images)
    a = analysis.analyse(model, DataLoader(analysed, batch_size=spec.batch),
                         device=spec.machine.device, bf16=spec.bf16, progress=False)
    S = phase_matrix(a.similarity)
    cuts = {k: maxcut(S, k) for k in spec.k_values}
    dinov2b = paper.dinov2b_block_similarity()
    fits = {}
    if spec.fit_raptor:
        left = len(others) - (spec.distill.val_limit or 0)  # a criterion's images come first
        held_out = Subset(others, range(min(left, spec.distill.train_limit or left)))
        fits = {k: [fit(spec, model, part, kind, held_out, analysed, plan) for part, kind in
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
        analysed: Dataset, plan: Plan | None = None) -> Fit:
    """A Raptor of ``model`` on ``partition`` distilled by ``spec.distill``, compared on
    ``analysed``. The book's own teacher's is the cached student the other chapters share
    (:func:`~raptor.book.experiment.student_of`: distilled on the teacher's training images,
    carried by the artifact tier); any other model's is distilled here on ``train_set`` (its
    trajectories kept in memory when they fit)."""
    device = resolve_device(spec.machine.device)
    if spec.model == COMPANION:
        student, record = student_of(spec, spec.teacher.p, partition, plan=plan)
    else:
        tokens = TokenGroups.from_model(model).num_tokens
        cached = len(train_set) * (len(model.blocks) + 1) * tokens * model.embed_dim * 4
        cfg = dataclasses.replace(
            spec.distill, repeats=repeats_from_partition(partition, len(model.blocks)),
            device=device, bf16=spec.bf16 and device.startswith("cuda"),
            cache_teacher=spec.distill.cache_teacher and cached <= CACHE_LIMIT_BYTES)
        val_set = (data.held_out(train_set, cfg.val_limit, cfg.seed)  # a criterion's images
                   if cfg.val_limit is not None else None)
        student, record = distill(model, train_set, cfg, val_set=val_set, progress=False)
    match = evaluate_student(student, model, DataLoader(analysed, batch_size=spec.batch),
                             device=device)
    return Fit(tuple(partition), kind, match["cosine"], match["r2"], match["global_r2"],
               match["agreement"] if model.num_classes else None,
               steps_trained(record, spec.distill))


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
