"""The paper's numbers, each once, with the section, equation, table or figure it comes from.

Jacobs, Fel, Hakim, Brondetta, Ba, Keller, *Block-Recurrent Dynamics in Vision Transformers*
(arXiv 2512.19941, ICLR 2026). Values the paper's text leaves to its implementation (§3: "an
implementation framework at kempnerinstitute.github.io/raptor") are marked *authors' code*.
Choices of this companion are not here: they are marked ``[ours]`` where they are made, and listed
on the book's page *The paper at a glance*.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

Partition = tuple[tuple[int, int], ...]
Weights = tuple[float, float, float]
Score = tuple[float, float | None]  # (mean, standard deviation over seeds; None: a single run)

# --------------------------------------------------------------------- setup (§2, §3, App. A.3)
K_VALUES = (2, 3, 4)  # k ∈ {2, 3, 4} recurrent blocks (§3)
DINOV2_B = "vit_base_patch14_reg4_dinov2.lvd142m"  # DINOv2 ViT-B/14 with registers (§3)
DINOV2_B_DEPTH = 12  # DINOv2 ViT-B/14: 12 blocks (§3, Fig. 3)
DINOV2_B_WIDTH = 768  # D of ViT-B (App. A.3 prints "D = 784", a typo)
DINOV2_B_REGISTERS = 4  # the teacher is DINOv2 ViT-B/14 *with registers* (§3; Darcet et al.)
#: Distillation input (authors' code): Resize 256 bicubic + CenterCrop 224, no augmentation;
#: at 224 px DINOv2-B has 1 cls + 4 register + 16×16 patch tokens.
IMG_SIZE, RESIZE = 224, 256
CIFAR100_TEACHER_ACC = 90.7  # ViT-B/14 trained from scratch on CIFAR-100, val top-1 % (§2)
SIMILARITY_IMAGES = 10_000  # images the similarity matrix S averages over (authors' code)

#: DINOv2-B's partitions of its 12 block outputs (0-based, half-open; blocks 1–7 | 8–12,
#: 1–7 | 8–10 | 11–12, 1–4 | 5–7 | 8–10 | 11–12): the Raptors of Table 1. The authors'
#: code found them by hierarchical max-cut bisection, not by the exact DP of App. A.1.
DINOV2_B_PARTITIONS: dict[int, Partition] = {
    2: ((0, 7), (7, 12)),
    3: ((0, 7), (7, 10), (10, 12)),
    4: ((0, 4), (4, 7), (7, 10), (10, 12)),
}
#: Stopping threshold of the hierarchical max-cut (× total edge weight) that gave each k, and
#: its minimum cluster size (App. A.1; authors' code).
HIERARCHICAL_EPS: dict[int, float] = {2: 0.20, 3: 0.10, 4: 0.09}
HIERARCHICAL_MIN_SIZE = 2

DEPTH_HIDDEN = 16  # hidden width h of the depth-scaling MLP (App. A.3)
DEPTH_INIT_STD = 1e-4  # N(0, σ) init of its last layer W2, b2 (App. A.3)
LAYERSCALE_INIT = 1e-5  # LayerScale init of the authors' Raptor blocks (authors' code)


@dataclass(frozen=True)
class Recipe:
    """Two-stage distillation of DINOv2-B on ImageNet-1k (§3, Fig. 6, Eq. 2–3; authors' code).

    Field names are those of :class:`raptor.config.DistillConfig`. ``anneal_frac``: the
    teacher-forcing weight falls linearly from 1 to 0 over that fraction of stage 1; stage 2 is
    autoregressive only (λ = 0, §3). Weights are (cls, registers, patches) per Eq. 3: stage 1's
    apply to the block that ends at the last layer ("up-weighting the cls token loss in the final
    block", §3), stage 2's to the chained model.
    """

    stage1_steps: int = 312_500
    stage2_steps: int = 312_500
    batch_size: int = 64
    lr: float = 3e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 10_000
    min_lr: float = 1e-6
    grad_clip: float = 1.0
    anneal_frac: float = 0.25
    stage1_weights: Weights = (0.34, 0.33, 0.33)
    stage2_weights: Weights = (0.45, 0.10, 0.45)


RECIPE = Recipe()


@dataclass(frozen=True)
class ProbeRecipe:
    """A frozen-backbone probe's AdamW, linear warmup, cosine (App. A.4, Table 4; authors' code)."""

    lr: float
    weight_decay: float
    epochs: int
    batch_size: int


IMAGENET_PROBE = ProbeRecipe(lr=1e-4, weight_decay=1e-2, epochs=15, batch_size=512)
ADE20K_PROBE = ProbeRecipe(lr=1e-3, weight_decay=1e-2, epochs=10, batch_size=32)
NYUV2_PROBE = ProbeRecipe(lr=1e-3, weight_decay=1e-3, epochs=25, batch_size=128)  # with AMP
PROBE_WARMUP_STEPS = 100  # the ImageNet probe's warmup, final lr and clipping (authors' code)
PROBE_MIN_LR = 1e-6
PROBE_GRAD_CLIP = 1.0
ADE20K_SIZE = 518  # ADE20k probe input, a 37×37 grid of 14-px patches (authors' code)
NYUV2_SIZE = (480, 640)  # NYUv2 images, centre-padded to multiples of 14 (App. A.4)
NYUV2_BINS = 256  # depth bins, evenly spaced centres over NYUV2_DEPTH_RANGE (App. A.4)
NYUV2_DEPTH_RANGE = (0.001, 10.0)  # metres (authors' code)
SILOG_LAMBDA = 0.85  # the depth loss is 10·SILog(λ) + bin cross-entropy (Bhat et al. 2021,
SILOG_WEIGHT = 10.0  # App. A.4; weights from the authors' code)
EIGEN_CROP = ((45, 471), (41, 601))  # rows, columns of a 480×640 image scored by RMSE

# ----------------------------------------------------------------------- results (Tables 1–2)
TABLE1_SEEDS = 3  # Raptor rows: mean ± σ over three seeds (Table 1)
#: Table 1: frozen-backbone linear probes, IN-1k top-1 % ↑, ADE20k mIoU % ↑, NYUv2 RMSE (m) ↓.
TABLE1: dict[str, dict[str, Score]] = {
    "Raptor k=2": {"IN-1k": (81.2, 0.2), "ADE20k": (39.6, 0.6), "NYUv2": (0.648, 0.003)},
    "Raptor k=3": {"IN-1k": (83.0, 0.1), "ADE20k": (43.0, 0.3), "NYUv2": (0.618, 0.006)},
    "Raptor k=4": {"IN-1k": (83.2, 0.1), "ADE20k": (43.6, 0.1), "NYUv2": (0.607, 0.006)},
    "DINOv2 ViT-S": {"IN-1k": (80.9, None), "ADE20k": (44.6, None), "NYUv2": (0.600, None)},
    "DINOv2 ViT-B": {"IN-1k": (84.5, None), "ADE20k": (47.5, None), "NYUv2": (0.578, None)},
}
#: Table 2: the ablation ladder, Raptor k=3, IN-1k top-1 % with DINOv2's linear head; each rung
#: adds one part of the recipe (the last fine-tunes the probe: Table 1's k=3 mean).
TABLE2: dict[str, float] = {
    "TF only": 3.9,
    "+ AR with annealed TF": 72.7,
    "+ depth scaling": 75.2,
    "+ cls weighting": 76.7,
    "+ second stage": 82.4,
    "+ fine-tuned probe": 83.0,
}

# -------------------------------------------------------------- values the text quotes (§1–§4)
SHARE_OF_DINOV2_B = {2: 0.96, 3: 0.98}  # of DINOv2-B's IN-1k top-1 at k = 2, 3 (§1, §3, Fig. 7)
AR_GAIN_MIN = 68.0  # AR with annealed TF "raises accuracy by more than 68%" over TF only (§3)
#: The uniform stochastic-depth rates p of the sweep (Fig. 4).
SD_RATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
SD_RISE_UP_TO = 0.6  # teacher and student accuracy rise with p up to ~0.6 (Fig. 4C)
RANDOM_PARTITIONS = 10  # random contiguous partitions max-cut is compared with (Fig. 3)
SWAP_COUNTS = (1, 2, 3)  # layers swapped within or across blocks (Fig. 15)
BASIN_IMAGES, BASIN_CLASSES = 1_000, 5  # PCA trajectories: 1,000 images of 5 classes (Fig. 8)
FINAL_UPDATE_RANK = 6  # stable and effective update rank "near six" in the last phase (Fig. 12)
DMD_RANK = 10  # exact DMD rank r on group-averaged directions (§4, App. D)


# ------------------------------------------------------------ where the paper shows its figures
ARXIV_HTML = "https://arxiv.org/html/2512.19941"
#: The section whose text cites each figure and table (a float's own HTML anchor is not known
#: here, so links go to that section, ``ARXIV_HTML#S<n>``; Figs. 13–15 may sit in the appendix).
#: The text does not cite Fig. 2, numbered between Figs. 1 and 3, both cited in §2.
FIGURE_SECTION = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 3, 7: 3, 8: 4, 9: 4, 10: 4, 11: 4, 12: 4,
                  13: 2, 14: 3, 15: 2}
TABLE_SECTION = {1: 3, 2: 3}


# ------------------------------------------------------------------ the authors' notebook (Fig. 1)
DINOV2_B_DISTANCE = Path(__file__).with_name("dinov2b_block_distance.csv")


def dinov2b_block_similarity() -> np.ndarray:
    """DINOv2-B's 12 × 12 similarity of its block outputs, tokens {cls, mean patch}, ImageNet-1k:
    ``1 −`` the cosine distance the authors' max-cut notebook shows (KempnerInstitute/raptor,
    ``src/000_max_cut_dinov2_base.ipynb``), read off its annotated heatmap to 2 decimals (source
    in the file's header). No per-image matrices are published, so no interval comes with it."""
    return 1.0 - np.loadtxt(DINOV2_B_DISTANCE, delimiter=",", comments="#")


def paper_partition(L: int, k: int = 3) -> Partition:
    """DINOv2-B's partition of Table 1 at ``k`` (7 | 3 | 2 at k = 3) scaled to ``L`` blocks:
    each boundary at the same fraction of depth, rounded, every phase at least one block."""
    if L < k:
        raise ValueError(f"need L ≥ k = {k}, got {L}")
    bounds = [start * L / DINOV2_B_DEPTH for start, _ in DINOV2_B_PARTITIONS[k][1:]]
    cuts: list[int] = []
    for i, b in enumerate(bounds):
        cuts.append(min(max(round(b), (cuts[-1] if cuts else 0) + 1), L - (k - 1 - i)))
    return tuple(pairwise((0, *cuts, L)))
