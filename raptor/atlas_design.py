"""The atlas's design: its grid of small Fashion-MNIST ViTs (:class:`Cell`: depth, width,
training-set size, stochastic-depth rate, patch size, seed), each cell's teacher and training,
stage 1's screening design, and where the measured cells are stored. No torch: a cell is named
and checked before any work (:mod:`raptor.atlas` trains and measures it).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from raptor.catalog import dataset_info
from raptor.config import TeacherConfig, TrainConfig

DATASET = "fashion-mnist"
DEPTHS = (8, 12, 16)
WIDTHS = (64, 128, 192)
TRAIN_SIZES: tuple[int | None, ...] = (1000, 5000, None)  # None: the whole training set
RATES = (0.0, 0.1, 0.2, 0.3, 0.5)
PATCHES = (7, 4)
HEAD_DIM = 16  # heads = width / 16: the book's D = 64 teachers have 4
REGISTERS = 2  # as the book's teachers (DINOv2-B has registers, §3)
BATCH = 128
PATIENCE = 4  # evaluations without a lower validation loss before training stops
RESULTS = Path(__file__).resolve().parents[1] / "results" / "atlas"  # the measured cells
MANIFEST = "SHA256SUMS"


_NAME = re.compile(r"L(\d+)-D(\d+)-n(\d+|full)-p([\d.]+)-P(\d+)-s(\d+)")


def budget_epochs(train_size: int) -> int:
    """The most epochs a cell may train (the cosine's length): 500,000 images seen, within
    [30, 400] epochs — 400 at 1,000 images, 100 at 5,000, 30 on the whole set."""
    return min(400, max(30, 500_000 // train_size))


@dataclass(frozen=True, order=True)
class Cell:
    """One teacher of the atlas (``train_size`` ``None``: the whole training set)."""

    depth: int
    width: int
    train_size: int | None
    p: float = 0.0
    patch: int = 7
    seed: int = 0

    def __post_init__(self) -> None:
        self.teacher()  # its checks, before any work
        if self.train_size is not None and not 2 * BATCH <= self.train_size <= self.images:
            raise ValueError(f"train_size must be None or in [{2 * BATCH}, {self.images}], "
                             f"got {self.train_size}")
        if self.width % HEAD_DIM:
            raise ValueError(f"width must be a multiple of {HEAD_DIM}, got {self.width}")

    @property
    def images(self) -> int:
        """Training images seen per epoch."""
        return self.train_size or dataset_info(DATASET).train_size

    @property
    def name(self) -> str:
        return (f"L{self.depth}-D{self.width}-n{self.train_size or 'full'}-p{self.p:g}"
                f"-P{self.patch}-s{self.seed}")

    @classmethod
    def from_name(cls, name: str) -> Cell:
        """The cell called ``name`` (:attr:`name`'s form, e.g. ``L12-D64-n1000-p0-P7-s0``)."""
        match = _NAME.fullmatch(name)
        if match is None:
            raise ValueError(f"cell {name!r} is not of the form L12-D64-n1000-p0-P7-s0 "
                             f"(n: images or 'full')")
        L, D, n, p, patch, seed = match.groups()
        return cls(int(L), int(D), None if n == "full" else int(n), float(p), int(patch),
                   int(seed))

    def teacher(self) -> TeacherConfig:
        info = dataset_info(DATASET)
        return TeacherConfig(depth=self.depth, embed_dim=self.width,
                             num_heads=max(1, self.width // HEAD_DIM), patch_size=self.patch,
                             img_size=info.image_size, in_chans=info.in_chans,
                             num_classes=info.num_classes, reg_tokens=REGISTERS, p=self.p)

    def training(self) -> TrainConfig:
        """The book's recipe (AdamW, warmup, cosine) over :func:`budget_epochs`, evaluated every
        epoch (at least every 50 steps) and stopped by :data:`PATIENCE`."""
        per_epoch = self.images // BATCH
        return TrainConfig(dataset=DATASET, steps=budget_epochs(self.images) * per_epoch,
                           batch_size=BATCH, eval_every=max(50, per_epoch), patience=PATIENCE,
                           train_limit=self.train_size, seed=self.seed)

    def step_cost(self) -> float:
        """Relative cost of a training step (∝ tokens × parameters), for ordering work."""
        tokens = (dataset_info(DATASET).image_size // self.patch) ** 2 + 1 + REGISTERS
        return tokens * self.depth * self.width ** 2


def stage1() -> list[Cell]:
    """Stage 1's screening design, one seed a cell (48 cells), cheapest first:

    - depth × width × training-set size in full (27 cells, p = 0, patch 7): each factor's effect
      and the capacity × data interaction;
    - the other rates of ``RATES`` × training-set size at L = 12, D = 64 (12 cells);
    - patch 4 × depth × training-set size at D = 64, p = 0 (9 cells).

    The full grid (270 cells a seed) is not run: rate × capacity and patch × width are not
    measured.
    """
    cells = {Cell(L, D, n) for L, D, n in itertools.product(DEPTHS, WIDTHS, TRAIN_SIZES)}
    cells |= {Cell(12, 64, n, p) for p, n in itertools.product(RATES[1:], TRAIN_SIZES)}
    cells |= {Cell(L, 64, n, patch=4) for L, n in itertools.product(DEPTHS, TRAIN_SIZES)}
    return sorted(cells, key=lambda c: (c.step_cost() * budget_epochs(c.images) * c.images, c))


LEVELS = {"depth": DEPTHS, "width": WIDTHS, "train_size": TRAIN_SIZES, "p": RATES,
          "patch": PATCHES}
STAGE2_SEEDS = (1, 2)  # with stage 1's seed 0, three seeds a cell


def neighbours(cell: Cell, design: Iterable[Cell]) -> list[Cell]:
    """The cells of ``design`` one level away from ``cell`` in one factor of :data:`LEVELS`
    (the same seed), in ``design``'s order."""
    def step(a: Cell, b: Cell) -> int:
        return sum(abs(levels.index(getattr(a, f)) - levels.index(getattr(b, f)))
                   for f, levels in LEVELS.items())
    return [c for c in design if c.seed == cell.seed and step(c, cell) == 1]


def stage2(excess: dict[Cell, float], passing: Iterable[Cell]) -> list[Cell]:
    """Stage 2: seeds :data:`STAGE2_SEEDS` of the stage-1 cells that pass C1's test and of their
    neighbours in stage 1's design (:func:`neighbours`); where none passes, of the cell of the
    largest ``excess`` (C1's statistic, by cell) and its neighbours. Cheapest first."""
    design = stage1()
    centres = list(passing) or [max(excess, key=excess.__getitem__)]
    chosen = {c for centre in centres for c in [centre, *neighbours(centre, design)]}
    return [dataclasses.replace(c, seed=s) for c in design if c in chosen for s in STAGE2_SEEDS]
