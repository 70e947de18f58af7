"""The atlas: where block structure appears in small ViTs, C1's test over a designed grid of
teachers trained to a convergence criterion.

Neither the paper nor the authors' code maps where block-recurrent phases appear at small scale;
block structure in representation similarity is reported in wider or deeper networks and on smaller
training sets (Nguyen, Raghu & Kornblith, *Do wide and deep networks learn the same things?*, ICLR
2021). A :class:`~raptor.atlas_design.Cell` (the design, :mod:`raptor.atlas_design`) is one
Fashion-MNIST teacher: depth, width, training-set size, stochastic-depth rate, patch size and seed.
Each trains through the cache (:func:`~raptor.teachers.get_teacher`) until its validation loss
stops falling (:attr:`~raptor.config.TrainConfig.patience`), within a budget of epochs that shrinks
with the training set (:func:`~raptor.atlas_design.budget_epochs`). :func:`measure` then walks it
on :data:`N_IMAGES` validation images and keeps what C1's :func:`~raptor.structure.phase_excess`
reads — the per-image phase matrices and random-walk nulls, averaged within :data:`N_GROUPS` fixed
groups of images (the test's half means and resamples are means of whole groups) — with the
training summary, its cost and the machine. :func:`save` stores a cell's :class:`CellResult` in the
repository (``results/atlas``, a compressed ``.npz``, its sha256 in ``SHA256SUMS``), so the atlas
chapter re-renders without training; :func:`load` verifies it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import platform
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raptor.atlas_design import BATCH, DATASET, MANIFEST, RESULTS, Cell
from raptor.data import eval_images
from raptor.storage.cache import entry_lock
from raptor.storage.checkpoint import atomic_write
from raptor.structure import image_growth_nulls, image_phase_matrices
from raptor.teachers import get_teacher
from raptor.trajectories import TokenGroups, collect_trajectories, head_logits

N_IMAGES = 1000
N_GROUPS = 100
FORMAT = 1


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

