"""The atlas: where block structure appears in small ViTs, C1's test over a designed grid of
teachers trained to a convergence criterion.

Neither the paper nor the authors' code maps where block-recurrent phases appear at small scale;
block structure in representation similarity is reported in wider or deeper networks and on
smaller training sets (Nguyen, Raghu & Kornblith, *Do wide and deep networks learn the same
things?*, ICLR 2021). A :class:`Cell` is one Fashion-MNIST teacher: depth, width, training-set
size, stochastic-depth rate, patch size and seed. Each trains through the cache
(:func:`~raptor.teachers.get_teacher`) until its validation loss stops falling
(:attr:`~raptor.teachers.TrainConfig.patience`), within a budget of epochs that shrinks with the
training set (:func:`budget_epochs`). :func:`measure` then walks it on :data:`N_IMAGES` validation
images and keeps what C1's :func:`~raptor.structure.phase_excess` reads — the per-image phase
matrices and random-walk nulls, averaged within :data:`N_GROUPS` fixed groups of images (the test's
half means and resamples are means of whole groups) — with the training summary, its cost and the
machine. :func:`save` stores a cell's :class:`CellResult` in the repository (``results/atlas``, a
compressed ``.npz``, its sha256 in ``SHA256SUMS``), so the atlas chapter re-renders without
training; :func:`load` verifies it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import os
import platform
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raptor.data import dataset_info, eval_images
from raptor.storage.cache import entry_lock
from raptor.storage.checkpoint import atomic_write
from raptor.structure import image_growth_nulls, image_phase_matrices
from raptor.teachers import TeacherConfig, TrainConfig, get_teacher
from raptor.trajectories import TokenGroups, collect_trajectories, head_logits

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
N_IMAGES = 1000
N_GROUPS = 100
FORMAT = 1
RESULTS = Path(__file__).resolve().parents[1] / "results" / "atlas"
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


@dataclass(frozen=True)
class CellResult:
    """A measured cell: ``phase`` and ``growth`` ``(N_GROUPS, L, L)`` are the group means of
    :func:`~raptor.structure.image_phase_matrices` and :func:`~raptor.structure.image_growth_nulls`
    (what :func:`~raptor.structure.phase_excess` takes); ``summary`` the training (criterion met,
    steps, epochs, losses, accuracy), its cost and the machine."""

    cell: Cell
    phase: np.ndarray
    growth: np.ndarray
    summary: dict[str, Any]


def group_means(per_image: np.ndarray, n_groups: int) -> np.ndarray:
    """``per_image`` ``(N, ...)`` averaged within ``n_groups`` consecutive groups of equal size
    (the images are a random draw, so consecutive groups are random groups)."""
    if len(per_image) % n_groups:
        raise ValueError(f"{len(per_image)} images do not split into {n_groups} equal groups")
    return per_image.reshape(n_groups, -1, *per_image.shape[1:]).mean(1)


def machine() -> dict[str, Any]:
    """Where a cell was measured: enough to say what its wall time means."""
    return {"platform": platform.platform(), "processor": platform.processor(),
            "python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
            "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None}


def measure(cell: Cell, *, data_root: str | None = None, device: str = "auto",
            progress: bool = False) -> CellResult:
    """Train ``cell``'s teacher through the cache to its criterion, then walk it on the
    :data:`N_IMAGES` evaluation images of every chapter (:func:`raptor.data.eval_images`)."""
    train = cell.training()
    model, record = get_teacher(cell.teacher(), train, seed=cell.seed, data_root=data_root,
                                progress=progress, device=device)
    t1 = time.perf_counter()
    images, labels = eval_images(DATASET, N_IMAGES, root=data_root)
    batches = [(images[i:i + 250], labels[i:i + 250]) for i in range(0, N_IMAGES, 250)]
    traj, _ = collect_trajectories(model, batches, device=device, progress=False)
    groups = TokenGroups.from_model(model)
    with torch.no_grad():
        correct = (head_logits(model, traj[:, -1]).argmax(-1) == labels).float().mean().item()
    phase = group_means(image_phase_matrices(traj, groups), N_GROUPS)
    growth = group_means(image_growth_nulls(traj, groups), N_GROUPS)
    stopped = record["stopped"]
    summary = {
        "converged": record["converged"], "best_step": record["best"]["step"],
        "stopped": stopped, "budget_steps": train.steps,
        "epochs": round(stopped * BATCH / cell.images, 2),
        "best_epoch": round(record["best"]["step"] * BATCH / cell.images, 2),
        "val_loss": record["best"]["loss"],
        "val_acc": next(v["acc"] for v in record["val"] if v["step"] == record["best"]["step"]),
        "train_loss_at_best": float(np.mean(record["loss"][max(0, record["best"]["step"] - 50):
                                                   record["best"]["step"]])),
        "eval_acc": round(correct, 5), "val_curve": record["val"],
        "train_seconds": record["seconds"], "measure_seconds": round(time.perf_counter() - t1, 2),
        "machine": machine(),
    }
    return CellResult(cell, phase, growth, summary)


def _path(cell: Cell, folder: Path) -> Path:
    return folder / f"{cell.name}.npz"


def save(result: CellResult, folder: Path = RESULTS) -> Path:
    """Store ``result`` atomically as ``<cell name>.npz`` in ``folder`` (float16 matrices) and
    its sha256 in the folder's manifest."""
    buffer = io.BytesIO()
    meta = {"format": FORMAT, "cell": dataclasses.asdict(result.cell), "summary": result.summary}
    np.savez_compressed(buffer, phase=result.phase.astype(np.float16),
                        growth=result.growth.astype(np.float16), meta=np.array(json.dumps(meta)))
    path = _path(result.cell, folder)
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(buffer.getvalue()))
    with entry_lock(folder / MANIFEST):  # jobs of one sweep finish side by side
        sums = _manifest(folder)
        sums[path.name] = hashlib.sha256(buffer.getvalue()).hexdigest()
        text = "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items()))
        atomic_write(folder / MANIFEST, lambda tmp: Path(tmp).write_text(text))
    return path


def _manifest(folder: Path) -> dict[str, str]:
    path = folder / MANIFEST
    if not path.exists():
        return {}
    return {name: digest for digest, name in (line.split("  ") for line in
                                              path.read_text().splitlines() if line)}


def load(folder: Path = RESULTS, cells: Iterable[Cell] | None = None) -> list[CellResult]:
    """Every stored result of ``folder`` (or those of ``cells``), each checked against the
    manifest's sha256 and :data:`FORMAT`; a missing, altered or foreign file is an error."""
    sums = _manifest(folder)
    names = sorted(sums) if cells is None else [_path(c, folder).name for c in cells]
    out = []
    for name in names:
        path = folder / name
        if name not in sums or not path.exists():
            raise FileNotFoundError(f"{path}: no stored atlas result (measure it with "
                                    f"`python -m raptor atlas`)")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != sums[name]:
            raise ValueError(f"{path}: its sha256 differs from {folder / MANIFEST}'s")
        with np.load(io.BytesIO(data)) as z:
            meta = json.loads(str(z["meta"]))
            if meta["format"] != FORMAT:
                raise ValueError(f"{path}: format {meta['format']}, this code reads {FORMAT}")
            out.append(CellResult(Cell(**meta["cell"]), z["phase"].astype(float),
                                  z["growth"].astype(float), meta["summary"]))
    return out


def missing(cells: Iterable[Cell], folder: Path = RESULTS) -> list[Cell]:
    """The cells of ``cells`` without a stored result in ``folder``."""
    sums = _manifest(folder)
    return [c for c in cells if _path(c, folder).name not in sums]

