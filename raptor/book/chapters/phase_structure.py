"""Chapter *Emergent phase structure*: layer–layer similarity and its blocks (§2, Fig. 1; C1)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from raptor import phases
from raptor.book import plotting
from raptor.book.claims import Claim, Threshold, claim
from raptor.book.profiles import PAPER_TEACHER, SMOKE_TEACHER
from raptor.book.spec import TeacherSpec, nested, require
from raptor.experiment import trajectories_of, weights_path
from raptor.similarity import layer_similarity, phase_matrix
from raptor.structure import Contrast, contrast_vs_random
from raptor.teachers import DINOV2_B, load_pretrained

NAME = "phase-structure"
NOTEBOOK = "chapters/phase_structure.ipynb"


@dataclass(frozen=True)
class Spec:
    """Teachers trained with each stochastic-depth rate in ``p_values``, and an untrained one.

    ``dinov2_weights`` (a local file of ``vit_base_patch14_reg4_dinov2.lvd142m``) with
    ``imagenet_root`` (ImageFolder layout) adds DINOv2-B on ImageNet images (Fig. 1).
    """

    teacher: TeacherSpec = nested(TeacherSpec)
    p_values: tuple[float, ...] = (0.0, 0.3)
    seed: int = 0
    n_images: int = 1000
    k: int = 3
    n_random: int = 20
    dinov2_weights: str | None = None
    imagenet_root: str | None = None

    def __post_init__(self) -> None:
        require(all(0 <= p < 1 for p in self.p_values), "p_values", "rates in [0, 1)",
                self.p_values)
        require(self.n_images >= 1, "n_images", "≥ 1", self.n_images)
        require(1 <= self.k <= self.teacher.depth, "k", f"in [1, L = {self.teacher.depth}]",
                self.k)
        require(self.n_random >= 2, "n_random", "≥ 2 (for a standard deviation)", self.n_random)
        require(self.dinov2_weights is None or self.imagenet_root is not None, "imagenet_root",
                "an ImageFolder root when dinov2_weights is given", self.imagenet_root)


SMOKE = dataclasses.replace(Spec(), teacher=SMOKE_TEACHER, n_images=64, n_random=5)
PAPER = dataclasses.replace(Spec(), teacher=PAPER_TEACHER, p_values=(0.0, 0.2, 0.4, 0.6),
                            n_images=10_000)


@dataclass
class Result:
    spec: Spec
    accuracy: dict[str, float]
    trajectory_shape: dict[str, list[int]]
    similarity: dict[str, dict[str, np.ndarray]]
    cuts: dict[str, tuple[tuple[int, int], ...]]
    contrast: dict[str, Contrast]


def compute(spec: Spec) -> Result:
    """Similarity matrices per teacher and token group, their max-cuts, and C1's statistics."""
    dinov2 = weights_path(spec.dinov2_weights)
    t = spec.teacher
    images, labels = t.eval_images(spec.n_images, seed=spec.seed)
    models = {}
    for p in spec.p_values:
        model, record = t.get_teacher(p, seed=spec.seed)
        models[f"trained, p={p}"] = (model, record["val"][-1]["acc"], images, labels)
    models["untrained"] = (t.get_teacher(seed=spec.seed, trained=False)[0], math.nan, images,
                           labels)
    if dinov2 is not None:
        imagenet = dataclasses.replace(t, dataset="imagenet", data_root=spec.imagenet_root,
                                       img_size=224)
        d_images, d_labels = imagenet.eval_images(min(spec.n_images, 1000), seed=spec.seed)
        models["DINOv2-B"] = (load_pretrained(DINOV2_B, dinov2, img_size=224, num_classes=0),
                              math.nan, d_images, d_labels)
    accuracy, shapes, mats = {}, {}, {}
    for name, (model, acc, x, y) in models.items():
        traj, groups = trajectories_of(model, x, y, batch_size=50 if name == "DINOv2-B" else 250)
        accuracy[name], shapes[name] = acc, list(traj.shape)
        mats[name] = layer_similarity(traj, groups)
    cuts = {name: phases.maxcut(phase_matrix(m), spec.k) for name, m in mats.items()}
    contrast = {name: contrast_vs_random(phase_matrix(m), cuts[name], spec.n_random, spec.seed)
                for name, m in mats.items()}
    return Result(spec, accuracy, shapes, mats, cuts, contrast)


def similarity_figure(result: Result) -> plt.Figure:
    """Rows are teachers, columns token groups; the max-cut's blocks outlined (Fig. 1)."""
    mats = result.similarity
    groups = [g for g in ("cls", "registers", "patches") if any(g in m for m in mats.values())]
    return plotting.similarity_grid(
        mats, groups, partitions=result.cuts, first_layer=1,
        vmin=min(float(m["all"][1:, 1:].min()) for m in mats.values()))


Z_MIN = Threshold(1.0, "[ours] the paper shows the blocks (Fig. 1) without a test; one standard "
                       "deviation above random contiguous partitions of the same k")


def c1_block_structure(contrast: dict[str, Contrast], *, k: int, n_random: int, n_images: int
                       ) -> Claim:
    """C1: every trained model's max-cut has positive contrast, ``Z_MIN`` above random cuts."""
    return claim(
        "C1", paper="contiguous blocks visible in every model (Fig. 1)",
        ours="; ".join(f"{name}: contrast {c.contrast:.2f}, z={c.z:.1f}"
                       for name, c in contrast.items()),
        holds=all(c.contrast > 0 and c.z > Z_MIN.value for c in contrast.values()),
        detail=f"max-cut k={k} vs {n_random} random contiguous partitions, {n_images} images")


def claims(result: Result) -> list[Claim]:
    trained = {name: c for name, c in result.contrast.items() if name != "untrained"}
    s = result.spec
    return [c1_block_structure(trained, k=s.k, n_random=s.n_random, n_images=s.n_images)]
