"""The paper's analysis of any timm ViT: its layers' similarity, phases and C1's statistics from
one streaming pass over images (§2, App. A.1).

:func:`load_vit` builds a timm ViT by name with local weights; :func:`image_data` gives its
images — one of the datasets :mod:`raptor.data` knows, or any folder of image files (class folders
or not), preprocessed as timm's ``resolve_data_config`` says for the model; :func:`analyse` runs
the trajectory pass in batches and keeps only what the statistics need (the similarity sums, the
per-image phase matrices and their random-walk nulls, and the flow metrics of §4 as
:class:`~raptor.dynamics.DynamicsAccumulator` streams them), so memory does not grow with the
trajectories of N images.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import timm
import torch
from PIL import Image
from timm.data import create_transform, resolve_data_config
from timm.models.vision_transformer import VisionTransformer, checkpoint_filter_fn
from torch.utils.data import Dataset, Subset, TensorDataset

from raptor import data
from raptor.catalog import DATASETS, IMAGE_SUFFIXES
from raptor.dynamics import DynamicsAccumulator, DynamicsSummary
from raptor.paper import DMD_RANK
from raptor.similarity import SimilarityAccumulator
from raptor.planning import Plan
from raptor.storage.checkpoint import mismatch, read_state_dict
from raptor.structure import image_growth_nulls, image_phase_matrices
from raptor.teachers import check_timm_name, head_classes, load_pretrained
from raptor.trajectories import TokenGroups, iter_trajectories


def vit_shape(name: str, img_size: int | None = None) -> VisionTransformer:
    """The timm ViT ``name`` built without weights on the meta device (no memory, no time), to
    check a request before any work; an unknown name or a model that is no ViT is an error."""
    check_timm_name(name)
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False)
        if not isinstance(model, VisionTransformer):
            raise ValueError(f"model {name!r} is a timm {type(model).__name__}, not a "
                             f"VisionTransformer: the analysis reads a ViT's residual stream")
        if img_size:  # a ViT: its initialisation skipped (slow on meta, and of no use there)
            model = timm.create_model(name, pretrained=False, img_size=img_size,
                                      weight_init="skip")
    return model


def check_weights(name: str, weights: str | Path, img_size: int | None = None) -> None:
    """Raise :class:`~raptor.storage.checkpoint.CheckpointError` naming the keys unless the file's
    tensors fit the timm ViT ``name`` after timm's checkpoint filter (position embeddings
    resampled); only names and shapes are read, on the meta device, in a fraction of a second."""
    state = read_state_dict(weights, shapes_only=True)
    with torch.device("meta"):
        model = timm.create_model(name, pretrained=False, num_classes=head_classes(state),
                                  weight_init="skip",
                                  **({"img_size": img_size} if img_size else {}))
        filtered = checkpoint_filter_fn(state, model)
    mismatch(model, filtered, source=str(weights))


def load_vit(name: str, weights: str | Path, img_size: int | None = None) -> VisionTransformer:
    """The timm ViT ``name`` with the weights of a local file (safetensors, or a torch file read
    with ``weights_only=True``), in eval mode; a file that does not fit names its keys."""
    return load_pretrained(name, weights, **({"img_size": img_size} if img_size else {}))


class FolderImages(Dataset):
    """Every image file under ``root`` (sorted paths), labelled by its parent folder (one class
    for a flat folder), read as RGB through ``transform``."""

    def __init__(self, root: str | Path, transform) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValueError(f"images {str(root)!r} is neither a dataset "
                             f"({', '.join(DATASETS)}) nor a folder")
        self.paths = sorted(p for p in self.root.rglob("*")
                            if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        if not self.paths:
            raise ValueError(f"images folder {self.root} holds no image files "
                             f"({', '.join(IMAGE_SUFFIXES)})")
        classes = sorted({p.parent for p in self.paths})
        self.labels = [classes.index(p.parent) for p in self.paths]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        try:
            with Image.open(self.paths[i]) as image:
                rgb = image.convert("RGB")
        except OSError as err:
            raise ValueError(f"image {self.paths[i]} cannot be read: {err}") from None
        return self.transform(rgb), self.labels[i]


class _Channels(Dataset):
    """``dataset``'s images with their one channel repeated to ``channels``."""

    def __init__(self, dataset: Dataset, channels: int) -> None:
        self.dataset, self.channels = dataset, channels

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image, label = self.dataset[i]
        return image.expand(self.channels, *image.shape[1:]), label


def image_data(source: str, model: VisionTransformer, *, root: str | None = None,
               plan: Plan | None = None) -> Dataset:
    """The images ``source`` names, at the model's input size: the validation split of a dataset
    of :mod:`raptor.data` (its own normalisation; one channel repeated for an RGB model), or a
    folder of image files preprocessed by timm's evaluation transform for ``model``. A folder's
    other files, and image files PIL cannot identify, are left out with a warning naming them; a
    dry run's ``plan`` (:meth:`~raptor.planning.Plan.images_of`) stands in for a dataset's."""
    size = model.patch_embed.img_size[0]
    channels = model.patch_embed.proj.in_channels
    if source in DATASETS:
        info = data.dataset_info(source)
        planned = plan.images_of(source, size, min(info.val_size, 1_000), 0) if plan else None
        if planned is not None:  # a dry run's
            return TensorDataset(planned[0].expand(-1, channels, -1, -1), planned[1])
        _, val = data.get_datasets(source, root=root, img_size=size)
        return val if info.in_chans == channels else _Channels(val, channels)
    # the model's own size: a model built at another size than its timm default keeps that default
    # in its pretrained config
    config = resolve_data_config({"input_size": (channels, size, size)}, model=model)
    dataset = FolderImages(source, create_transform(**config))
    others = sorted(str(p) for p in dataset.root.rglob("*") if p.is_file()
                    and p.suffix.lower() not in IMAGE_SUFFIXES and not p.name.startswith("."))
    unreadable = [str(p) for p in unreadable_images(dataset.paths)]
    dropped = set(unreadable)
    for what, files in (("files that are not images", others),
                        ("image files that cannot be read", unreadable)):
        if files:
            warnings.warn(f"images folder {dataset.root}: leaving out {len(files)} {what}: "
                          f"{', '.join(files[:10])}{' …' if len(files) > 10 else ''}",
                          stacklevel=2)
    kept = [(p, y) for p, y in zip(dataset.paths, dataset.labels) if str(p) not in dropped]
    if not kept:
        raise ValueError(f"images folder {dataset.root} holds no readable image files")
    dataset.paths, dataset.labels = (list(c) for c in zip(*kept))
    return dataset


def unreadable_images(paths: Sequence[Path], threads: int = 16) -> list[Path]:
    """The files of ``paths`` that PIL cannot identify as images or finds damaged (``verify``:
    no decoding), in order; read by ``threads`` threads (a large folder on a network disk)."""
    def bad(path: Path) -> bool:
        try:
            with Image.open(path) as image:
                image.verify()
        except Exception:  # PIL raises many kinds (OSError, SyntaxError, struct.error)
            return True
        return False

    with ThreadPoolExecutor(threads) as pool:
        return [p for p, b in zip(paths, pool.map(bad, paths)) if b]


def split(dataset: Dataset, n: int, seed: int = 0) -> tuple[Dataset, Dataset]:
    """``n`` images of ``dataset`` drawn at random (seeded; all of them if it has fewer) and the
    others, in the same random order."""
    if len(dataset) <= n:
        return dataset, Subset(dataset, [])
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return Subset(dataset, order[:n]), Subset(dataset, order[n:])


@dataclass(frozen=True)
class Analysis:
    """What one pass over N images keeps: the layer similarity per token group (layers 0..L,
    Fig. 1), the per-image phase matrices and random-walk nulls ``(N, L, L)`` (C1's test), the
    flow metrics of §4 (norms, directional convergence, angular speed, coherence, update ranks,
    DMD; Figs. 8–12) and the token groups."""

    similarity: dict[str, np.ndarray]
    per_image: np.ndarray
    growth: np.ndarray
    dynamics: DynamicsSummary
    groups: TokenGroups
    n_images: int


def analyse(model: VisionTransformer, batches: Iterable, *, device: str = "auto",
            bf16: bool = False, dmd_rank: int = DMD_RANK, progress: bool = True) -> Analysis:
    """:class:`Analysis` of ``model`` over ``batches`` of ``(images, labels)``, in one streaming
    pass on ``device`` (bfloat16 autocast with ``bf16``; memory: one batch of trajectories at a
    time); the DMD of rank ``dmd_rank`` (the paper's 10)."""
    groups = TokenGroups.from_model(model)
    similarity, flow = SimilarityAccumulator(groups), DynamicsAccumulator(groups)
    mats, nulls = [], []
    for traj, _ in iter_trajectories(model, batches, device=device, bf16=bf16,
                                     progress=progress):
        similarity.update(traj)
        flow.update(traj)
        mats.append(image_phase_matrices(traj, groups))
        nulls.append(image_growth_nulls(traj, groups))
    if not mats:
        raise ValueError("no images to analyse")
    dynamics = flow.result(dmd_rank=dmd_rank)
    return Analysis(similarity.result(), np.concatenate(mats), np.concatenate(nulls), dynamics,
                    groups, dynamics.n_images)
