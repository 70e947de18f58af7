"""Chapter *Your own ViT*: the paper's phase analysis of any timm ViT (§2, Fig. 1, App. A.1).

``python -m raptor analyze --model NAME --weights FILE --images DIR`` executes this chapter with
those parameters into a folder of its own; the book executes it on one of the companion's own
teachers as an example. One streaming pass over the images (:func:`raptor.analysis.analyse`)
gives the layer-similarity matrices, their max-cut for each k, and C1's test with its ladder of
nulls (:func:`~raptor.structure.phase_excess`), set beside the paper's DINOv2-B matrix.
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
from torch.utils.data import DataLoader

from raptor import analysis, data, paper, phases
from raptor.book import plotting
from raptor.book.chapters.phase_structure import excess_row
from raptor.book.claims import EXCESS_MIN, Claim, versus
from raptor.book.experiment import teacher_of
from raptor.book.profiles import (PAPER_TEACHER, PAPER_TRAIN, SMOKE_TEACHER, SMOKE_TRAIN, TEACHER,
                                  TRAIN)
from raptor.book.spec import Machine, SpecError, nested, require, require_data
from raptor.phases import Partition, maxcut
from raptor.similarity import phase_matrix
from raptor.storage.checkpoint import CheckpointError
from raptor.structure import PhaseExcess, matrix_excess, phase_excess
from raptor.teachers import TeacherConfig, TrainConfig

NAME = "analyze"
NOTEBOOK = "chapters/analyze.ipynb"
COMPANION = "companion"  # the model name of the book's own teacher (the cpu profile's)


@dataclass(frozen=True)
class Spec:
    """``model``: a timm ViT name with its local ``weights`` file (safetensors or a torch state
    dict), or ``"companion"``: the companion's teacher that ``teacher`` describes (trained through
    the cache; the book's default one is in the artifact tier). ``images``: a dataset of
    :mod:`raptor.data` (its validation split) or a folder of image files; ``n_images`` of them at
    random. The max-cut and C1's test (``n_boot`` resamples) at each k of ``k_values`` in
    [2, L − 1]; the pass in batches of ``batch`` images. ``input_size``: a timm model's input size
    (default its own). ``machine``'s ``data_root`` and ``device`` serve every model."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    model: str = COMPANION
    weights: str | None = None
    images: str = "fashion-mnist"
    input_size: int | None = None
    n_images: int = 1000
    k_values: tuple[int, ...] = (2, 3, 4)
    n_boot: int = 200
    batch: int = 64
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train)
        require(self.n_images >= 8, "n_images", "≥ 8 (C1's test splits them in halves)",
                self.n_images)
        require(self.n_boot >= 10, "n_boot", "≥ 10", self.n_boot)
        require(self.batch >= 1, "batch", "≥ 1", self.batch)
        require(self.input_size is None or self.input_size >= 1, "input_size", "None or ≥ 1",
                self.input_size)
        if self.model == COMPANION:
            require(self.weights is None, "weights", f"None for model {COMPANION!r} (its "
                    f"weights come from the artifact tier)", self.weights)
            depth = self.teacher.depth
        else:
            try:
                depth = len(analysis.vit_shape(self.model, self.input_size).blocks)
            except ValueError as err:
                raise SpecError(f"parameter 'model': {err}") from None
            require(self.weights is not None, "weights", f"a local weights file of {self.model}",
                    self.weights)
            try:
                analysis.check_weights(self.model, Path(self.weights).expanduser(),
                                       self.input_size)
            except CheckpointError as err:
                raise SpecError(f"parameter 'weights': {err}") from None
        require(len(self.k_values) >= 1 and all(2 <= k <= depth - 1 for k in self.k_values),
                "k_values", f"a non-empty list of k in [2, L − 1 = {depth - 1}]", self.k_values)
        require(self.images in data.DATASETS or Path(self.images).expanduser().is_dir(),
                "images", f"one of {', '.join(data.DATASETS)} or a folder of images",
                self.images)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, train=SMOKE_TRAIN, n_images=64,
                            k_values=(2, 3), n_boot=20)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, train=PAPER_TRAIN,
                            images=PAPER_TRAIN.dataset, n_images=2000)


@dataclass
class Result:
    spec: Spec
    depth: int
    similarity: dict[str, np.ndarray]
    S: np.ndarray
    cuts: dict[int, Partition]
    excess: dict[int, PhaseExcess]
    dinov2b: dict[int, PhaseExcess]
    norms: dict[str, np.ndarray]
    n_images: int

    def verdict(self, k: int) -> str:
        """C1's test at ``k``: the interval over the warped decay against ``EXCESS_MIN``."""
        e = self.excess[k]
        return versus(e.low, e.high, EXCESS_MIN.value)


def model_of(spec: Spec):
    """The model ``spec`` names, in eval mode on the CPU."""
    if spec.model == COMPANION:
        return teacher_of(spec)[0]
    return analysis.load_vit(spec.model, Path(spec.weights).expanduser(), spec.input_size)


def compute(spec: Spec) -> Result:
    """The model's streaming pass over ``n_images`` images, the phase matrix's max-cut and C1's
    test at each k, and the paper's DINOv2-B matrix's."""
    model = model_of(spec)
    images = analysis.sample(analysis.image_data(spec.images, model, root=spec.machine.data_root),
                             spec.n_images)
    a = analysis.analyse(model, DataLoader(images, batch_size=spec.batch),
                         device=spec.machine.device, progress=False)
    S = phase_matrix(a.similarity)
    dinov2b = paper.dinov2b_block_similarity()
    return Result(spec, len(S), a.similarity, S, {k: maxcut(S, k) for k in spec.k_values},
                  {k: phase_excess(a.per_image, k, growth=a.growth, n_boot=spec.n_boot)
                   for k in spec.k_values},
                  {k: matrix_excess(dinov2b, k) for k in spec.k_values}, a.norms, a.n_images)


def table(result: Result) -> pd.DataFrame:
    """C1's statistics at each k beside the paper's DINOv2-B matrix's, and the verdict."""
    rows = []
    for k, e in result.excess.items():
        rows.append({"k": k, "model": "yours", **excess_row(e), "C1": result.verdict(k)})
        rows.append({"k": k, "model": "DINOv2-B (the paper's matrix)",
                     **excess_row(result.dinov2b[k]), "C1": "—"})
    return pd.DataFrame(rows).set_index(["k", "model"])


def similarity_figure(result: Result) -> plt.Figure:
    """The phase matrix (blocks 1..L; cls and mean patch) with its max-cut outlined, one panel
    per k, beside the paper's DINOv2-B matrix."""
    panels = {f"k = {k}: {phases.format_partition(c)}": result.S for k, c in result.cuts.items()}
    panels["DINOv2-B (the paper's)"] = paper.dinov2b_block_similarity()
    return plotting.similarity_panels(panels, ncols=len(panels), partitions=dict(
        zip(panels, result.cuts.values())))


def norms_figure(result: Result) -> plt.Figure:
    """Mean token norm per layer and token group (layer 0 the embedding)."""
    fig, axes = plotting.figure(1, 1, height=2.6)
    ax = axes[0, 0]
    for name, values in result.norms.items():
        ax.plot(range(len(values)), values, marker="o", ms=3, label=name)
    ax.set_xlabel("layer")
    ax.set_ylabel(r"mean $\Vert x_l \Vert$")
    ax.legend(frameon=False)
    return fig


def findings(result: Result) -> dict[str, str]:
    """What the analysis finds, as text for the chapter's prose."""
    return {
        "model": result.spec.model, "images": f"{result.n_images} images of {result.spec.images}",
        "depth": str(result.depth),
        "cuts": "; ".join(f"k = {k}: {phases.format_partition(c)}" for k, c in result.cuts.items()),
        "excess": "; ".join(f"k = {k}: {e.excess:+.3f} [{e.low:+.3f}, {e.high:+.3f}] "
                            f"({result.verdict(k)})" for k, e in result.excess.items()),
        "dinov2b": "; ".join(f"k = {k}: {e.excess:+.3f}" for k, e in result.dinov2b.items()),
    }


def numbers(result: Result) -> dict[str, Any]:
    """Every number of the analysis, for ``analysis.json`` (NaN, where there is no interval, as
    null)."""
    def clean(value: Any) -> Any:  # JSON has no NaN
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    return clean({
        "spec": dataclasses.asdict(result.spec), "depth": result.depth,
        "n_images": result.n_images, "phase_matrix": result.S.tolist(),
        "similarity": {g: m.tolist() for g, m in result.similarity.items()},
        "norms": {g: v.tolist() for g, v in result.norms.items()},
        "cuts": {str(k): c for k, c in result.cuts.items()},
        "excess": {str(k): dataclasses.asdict(e) for k, e in result.excess.items()},
        "dinov2b": {str(k): dataclasses.asdict(e) for k, e in result.dinov2b.items()},
        "c1": {str(k): result.verdict(k) for k in result.excess},
    })


def write_json(result: Result, path: str | Path = "analysis.json") -> Path:
    """:func:`numbers` written to ``path``."""
    path = Path(path)
    path.write_text(json.dumps(numbers(result), indent=1) + "\n")
    return path


def claims(result: Result) -> list[Claim]:
    """The analysis of one model tests no claim of the paper: its C1 verdict is in :func:`table`."""
    return []
