"""Train/val datasets and loaders by name, with the paper's transforms.

Three datasets: ``"fashion-mnist"`` (offline, small experiments), ``"cifar100"`` (the paper's
small-scale experiments, §4) and ``"imagenet"`` (DINOv2 distillation and probes, §5), found
as :mod:`raptor.catalog` says; a missing dataset raises
:class:`~raptor.catalog.DatasetNotFoundError`, a corrupt file ``ValueError`` naming it. There is
no fallback to another dataset.

Fashion-MNIST and CIFAR-100 are held in memory as uint8 tensors and converted a whole batch at a
time (DataLoader's ``__getitems__``): no PIL per image, which dominates small-batch CPU training.
"""

from __future__ import annotations

import gzip
import os
import pickle
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import datasets, transforms

from raptor.catalog import EXPECTED, DatasetInfo, dataset_info, find
from raptor.paper import IMG_SIZE, RESIZE


def _download(name: str, root: str | os.PathLike[str] | None) -> Path:
    """Download ``name`` through torchvision into ``root`` or ``$RAPTOR_DATA/<name>``."""
    env = os.environ.get("RAPTOR_DATA")
    if root is None and not env:
        raise ValueError("download=True needs root= or $RAPTOR_DATA to say where to store data")
    target = Path(root).expanduser() if root is not None else Path(env).expanduser() / name
    if name == "fashion-mnist":
        datasets.FashionMNIST(str(target), download=True)
    else:
        datasets.CIFAR100(str(target), download=True)
    return target


def read_idx(path: Path) -> np.ndarray:
    """An unsigned-byte idx array (the MNIST file format), gzip-compressed or not."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: unreadable ({err})") from err
    ndim = raw[3] if len(raw) >= 4 else 0
    if raw[:3] != b"\0\0\x08" or not 1 <= ndim <= 3 or len(raw) < 4 + 4 * ndim:
        raise ValueError(f"{path}: not an unsigned-byte idx file (bad magic number or header)")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    size = 4 + 4 * ndim + int(np.prod(shape))
    if len(raw) != size:
        raise ValueError(f"{path}: {len(raw)} bytes, expected {size} for shape {shape}")
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


class InMemoryImages(Dataset[tuple[Tensor, int]]):
    """uint8 images (N, C, H, W) held in memory; samples come out as float (C, S, S): scaled to
    [0, 1], resized to ``img_size`` (antialiased, clamped to [0, 1]), then normalised."""

    def __init__(self, images: Tensor, targets: Tensor, info: DatasetInfo, img_size: int,
                 interpolation: str) -> None:
        if images.dtype != torch.uint8 or images.ndim != 4 or len(images) != len(targets):
            raise ValueError(f"images must be uint8 (N, C, H, W) with one target each; got "
                             f"{images.dtype} {tuple(images.shape)}, {len(targets)} targets")
        self.images, self.targets = images, targets.long()
        self.img_size, self.interpolation = img_size, interpolation
        self._mean = torch.tensor(info.mean).view(1, -1, 1, 1)
        self._std = torch.tensor(info.std).view(1, -1, 1, 1)

    def __len__(self) -> int:
        return len(self.images)

    def _convert(self, batch: Tensor) -> Tensor:
        x = batch.float().div_(255)
        if x.shape[-2:] != (self.img_size, self.img_size):
            x = F.interpolate(x, size=(self.img_size, self.img_size), mode=self.interpolation,
                              antialias=True, align_corners=False).clamp_(0, 1)
        return x.sub_(self._mean).div_(self._std)

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        return self._convert(self.images[index][None])[0], int(self.targets[index])

    def __getitems__(self, indices: list[int]) -> list[tuple[Tensor, int]]:
        idx = torch.as_tensor(indices, dtype=torch.long)
        return list(zip(self._convert(self.images[idx]).unbind(0), self.targets[idx].tolist()))


def _load_fashion(folder: Path, train: bool, img_size: int) -> InMemoryImages:
    split = "train" if train else "t10k"
    arrays = []
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        path = folder / f"{split}-{kind}"
        arrays.append(read_idx(path if path.is_file() else path.with_name(path.name + ".gz")))
    images, labels = arrays
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels) or labels.max() > 9:
        raise ValueError(f"{folder}: {split} images {images.shape} and labels {labels.shape} "
                         "do not form a Fashion-MNIST split (N×28×28 images, N labels in 0..9)")
    return InMemoryImages(torch.from_numpy(images.copy())[:, None], torch.from_numpy(labels.copy()),
                          dataset_info("fashion-mnist"), img_size, "bilinear")


class _CIFAR100Files(datasets.CIFAR100):
    """torchvision's CIFAR-100 reader checking that the files exist, not their md5 (the shapes
    are checked instead). It unpickles them: trusted-format data, as torchvision itself does."""

    train_list = [["train", None]]
    test_list = [["test", None]]
    meta = {"filename": "meta", "key": "fine_label_names", "md5": None}


def _load_cifar(folder: Path, train: bool, img_size: int) -> InMemoryImages:
    try:
        ds = _CIFAR100Files(str(folder), train=train)
    except (ValueError, KeyError, EOFError, OSError, pickle.UnpicklingError) as err:
        raise ValueError(f"{folder / 'cifar-100-python'}: not CIFAR-100 ({err})") from err
    targets = torch.tensor(ds.targets)
    if len(ds.classes) != 100 or targets.min() < 0 or targets.max() > 99:
        raise ValueError(f"{folder / 'cifar-100-python'}: not CIFAR-100 (expected 100 classes)")
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
    return InMemoryImages(images, targets, dataset_info("cifar100"), img_size, "bicubic")


def imagenet_transform(img_size: int = IMG_SIZE) -> transforms.Compose:
    """§5 (and the authors' code): Resize 256 bicubic + CenterCrop 224 + normalise, for train (no
    augmentation in distillation) and val; both sizes scale with ``img_size``."""
    info = dataset_info("imagenet")
    return transforms.Compose([
        transforms.Resize(round(img_size * RESIZE / IMG_SIZE),
                          interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.CenterCrop(img_size), transforms.ToTensor(),
        transforms.Normalize(info.mean, info.std)])


def _load_imagenet(folder: Path, train: bool, img_size: int) -> datasets.ImageFolder:
    split = folder / ("train" if train else "val")
    try:
        return datasets.ImageFolder(str(split), transform=imagenet_transform(img_size))
    except FileNotFoundError as err:
        raise ValueError(f"{split}: {err}. Expected {EXPECTED['imagenet']}") from err


def class_balanced_indices(targets: np.ndarray | list[int], limit: int, seed: int) -> np.ndarray:
    """``limit`` sorted indices drawn round-robin over classes in a seeded random order: class
    counts differ by at most one, except for classes that run out of images."""
    t = np.asarray(targets, dtype=np.int64)
    perm = np.random.default_rng(seed).permutation(len(t))
    lab = t[perm]
    order = np.argsort(lab, kind="stable")
    counts = np.bincount(lab)
    rank = np.empty(len(t), dtype=np.int64)  # position of each draw within its own class
    rank[order] = np.arange(len(t)) - (np.cumsum(counts) - counts)[lab[order]]
    return np.sort(perm[np.lexsort((np.arange(len(t)), rank))[:limit]])


def subset(dataset: Dataset, limit: int | None, seed: int, *, name: str = "limit",
           targets: Sequence[int] | None = None) -> Dataset:
    """A seeded subset of ``limit`` items in dataset order (``None``: ``dataset`` itself),
    class-balanced (:func:`class_balanced_indices`) when ``targets`` are given, else uniform.
    ``name`` names the limit in the error."""
    if limit is None:
        return dataset
    if limit > len(dataset):
        raise ValueError(f"{name}={limit} exceeds the {len(dataset)} images")
    if targets is not None:
        return Subset(dataset, class_balanced_indices(targets, limit, seed).tolist())
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed))
    return Subset(dataset, sorted(order[:limit].tolist()))


def held_out(train: Dataset, limit: int, seed: int) -> Subset:
    """``limit`` images of the dataset ``train`` is a :class:`Subset` of, none of them in
    ``train``: a seeded uniform draw, in dataset order (a Raptor's validation images, which the
    chapters' evaluation images, from the other split, never are)."""
    if not isinstance(train, Subset):
        raise ValueError("held-out images need a training subset (a train_limit): the whole "
                         "training set leaves none")
    taken = torch.zeros(len(train.dataset), dtype=torch.bool)
    taken[list(train.indices)] = True
    rest = torch.nonzero(~taken).flatten()
    if limit > len(rest):
        raise ValueError(f"val_limit={limit} exceeds the {len(rest)} training images outside the "
                         f"{len(train)} trained on")
    order = torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed))
    return Subset(train.dataset, sorted(rest[order[:limit]].tolist()))


class ThreadedImages(Dataset):
    """``dataset`` whose batches (DataLoader's ``__getitems__``) are read by ``threads`` threads.

    [ours] :func:`raptor.loop.batches_from` loads in the main process; decoding a batch of
    ImageNet JPEGs there one by one would cap the distillation's throughput (PIL releases the GIL
    while decoding). Samples come out in the order asked for, identical to ``dataset``'s.
    """

    def __init__(self, dataset: Dataset, threads: int) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
        self.dataset, self.threads = dataset, threads
        self._pool: ThreadPoolExecutor | None = None

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> list[Any]:
        if self.threads == 1:
            return [self.dataset[i] for i in indices]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="decode")
        return list(self._pool.map(self.dataset.__getitem__, indices))


def _check_int(value: object, param: str, low: int, optional: bool = True) -> None:
    if value is None and optional:
        return
    if isinstance(value, int) and not isinstance(value, bool) and value >= low:
        return
    raise ValueError(f"{param} must be an int >= {low}{' or None' if optional else ''}; "
                     f"got {value!r}")


def get_datasets(name: str, *, root: str | os.PathLike[str] | None = None,
                 img_size: int | None = None, download: bool = False,
                 train_limit: int | None = None, val_limit: int | None = None,
                 seed: int = 0) -> tuple[Dataset, Dataset]:
    """(train, val) datasets of ``name`` yielding (float image (C, S, S), int label).

    ``img_size`` defaults to ``dataset_info(name).image_size``; the paper's CIFAR-100 and
    ImageNet profiles use 224. A limit keeps a seeded class-balanced subset
    (:func:`class_balanced_indices`) as a ``Subset``. CIFAR-100 is resized bicubic [ours: the
    paper does not state its transform]; Fashion-MNIST bilinear.
    """
    info = dataset_info(name)
    for value, param in ((img_size, "img_size"), (train_limit, "train_limit"),
                         (val_limit, "val_limit")):
        _check_int(value, param, 1)
    _check_int(seed, "seed", 0, optional=False)
    folder = find(name, root, _download if download else None)
    load = {"fashion-mnist": _load_fashion, "cifar100": _load_cifar,
            "imagenet": _load_imagenet}[name]
    splits = [load(folder, train, img_size or info.image_size) for train in (True, False)]
    if name == "imagenet" and splits[0].classes != splits[1].classes:
        raise ValueError(f"{folder}: train and val class folders differ; labels would not match")
    train, val = (subset(ds, limit, seed, name=f"{split}_limit", targets=ds.targets)
                  for ds, limit, split in zip(splits, (train_limit, val_limit), ("train", "val")))
    return train, val


def eval_images(name: str, n: int, *, seed: int = 0, split: str = "val",
                root: str | os.PathLike[str] | None = None, img_size: int | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` images and labels of ``split`` of ``name`` in one tensor each: a random subset
    seeded by ``seed`` (the evaluation images of every chapter and of the atlas)."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    train, val = get_datasets(name, root=root, img_size=img_size)
    data = val if split == "val" else train
    if not isinstance(n, int) or not 1 <= n <= len(data):
        raise ValueError(f"n_images must be in [1, {len(data)}], got {n!r}")
    idx = torch.randperm(len(data), generator=torch.Generator().manual_seed(seed))[:n]
    return next(iter(DataLoader(Subset(data, idx.tolist()), batch_size=n)))
