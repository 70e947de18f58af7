"""The datasets by name: their facts (classes, channels, image size, split sizes) and where
they are on disk, found without loading them (so that a chapter's inputs are checked before any
work, with no torch). :mod:`raptor.data` loads them.

Each is looked up in ``root`` if given, else in ``$RAPTOR_DATA/<name>`` and ``$RAPTOR_DATA``
(and, for Fashion-MNIST, Debian's ``/usr/share/datasets/fashion-mnist``); the first folder
holding the full expected layout wins. A missing dataset raises one
:class:`DatasetNotFoundError` listing every folder tried and how to get the data.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raptor.paper import IMG_SIZE

DATASETS: tuple[str, ...] = ("fashion-mnist", "cifar100", "imagenet")
DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
_FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_CIFAR_FILES = ("train", "test", "meta")
# the files a folder of images (raptor.analysis) reads
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class DatasetInfo:
    """Static facts about a dataset; ``image_size`` is the default ``img_size`` (for ImageNet,
    the 224 px crop of §5, since its images vary in size); ``train_size`` and ``val_size`` the
    images of the training and validation splits."""

    name: str
    num_classes: int
    in_chans: int
    image_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    train_size: int
    val_size: int


_INFO = {
    "fashion-mnist": DatasetInfo("fashion-mnist", 10, 1, 28, (0.2860,), (0.3530,), 60_000,
                                 10_000),
    "cifar100": DatasetInfo("cifar100", 100, 3, 32, (0.5071, 0.4865, 0.4409),
                            (0.2673, 0.2564, 0.2762), 50_000, 10_000),
    "imagenet": DatasetInfo("imagenet", 1000, 3, IMG_SIZE, (0.485, 0.456, 0.406),
                            (0.229, 0.224, 0.225), 1_281_167, 50_000),
}

EXPECTED = {
    "fashion-mnist": "the files " + ", ".join(f + "[.gz]" for f in _FASHION_FILES)
                     + " directly in the folder or in <folder>/FashionMNIST/raw/",
    "cifar100": "<folder>/cifar-100-python/{train,test,meta} (torchvision's CIFAR100 format)",
    "imagenet": "<folder>/train/<wnid>/*.JPEG and <folder>/val/<wnid>/*.JPEG (ImageFolder; "
                "val sorted into one folder per class)",
}

_HOW_TO_GET = {
    "fashion-mnist": "`apt install dataset-fashion-mnist`, or pass download=True (downloads "
                     "through torchvision into root or $RAPTOR_DATA/fashion-mnist)",
    "cifar100": "pass download=True (downloads through torchvision into root or "
                "$RAPTOR_DATA/cifar100)",
    "imagenet": "download ILSVRC-2012 from image-net.org (no automatic download: licence) and "
                "arrange it as shown",
}


class DatasetNotFoundError(FileNotFoundError):
    """No searched folder holds the dataset in its expected layout."""


def dataset_info(name: str) -> DatasetInfo:
    """Facts about dataset ``name`` (one of :data:`DATASETS`)."""
    if name not in _INFO:
        raise ValueError(f"name must be one of {', '.join(DATASETS)}; got {name!r}")
    return _INFO[name]


def data_root_candidates(name: str, root: str | os.PathLike[str] | None = None) -> list[Path]:
    """The folders searched for ``name``, in order: ``root`` alone if given, else
    ``$RAPTOR_DATA/<name>``, ``$RAPTOR_DATA`` and (Fashion-MNIST) Debian's folder."""
    dataset_info(name)
    if root is not None:
        return [Path(root).expanduser()]
    env = os.environ.get("RAPTOR_DATA")
    found = [Path(env).expanduser() / name, Path(env).expanduser()] if env else []
    return found + ([DEBIAN_FASHION_MNIST] if name == "fashion-mnist" else [])


def layout(name: str, folder: Path) -> tuple[Path | None, str]:
    """(folder to load from, "") if ``folder`` holds ``name``, else (None, what is wrong)."""
    if not folder.is_dir():
        return None, "does not exist"
    if name == "fashion-mnist":
        for sub in (folder, folder / "FashionMNIST" / "raw"):
            if all((sub / f).is_file() or (sub / f"{f}.gz").is_file() for f in _FASHION_FILES):
                return sub, ""
        missing = [f for f in _FASHION_FILES
                   if not ((folder / f).is_file() or (folder / f"{f}.gz").is_file())]
    elif name == "cifar100":
        missing = [f"cifar-100-python/{f}" for f in _CIFAR_FILES
                   if not (folder / "cifar-100-python" / f).is_file()]
    else:
        missing = [f"{s}/<wnid>/" for s in ("train", "val")
                   if not any(p.is_dir() for p in (folder / s).glob("*"))]
    return (None, "missing " + ", ".join(missing)) if missing else (folder, "")


def find(name: str, root: str | os.PathLike[str] | None = None,
         download: Callable[[str, str | os.PathLike[str] | None], Path] | None = None
         ) -> Path:
    """The folder to load ``name`` from; where it is not found, ``download(name, root)``
    (if given) fetches it and returns where it put it."""
    tried = []
    for folder in data_root_candidates(name, root):
        found, problem = layout(name, folder)
        if found is not None:
            return found
        tried.append(f"  - {folder}: {problem}")
    if download and name != "imagenet":
        target = download(name, root)
        found, problem = layout(name, target)
        if found is not None:
            return found
        tried.append(f"  - {target} (after download): {problem}")
    if root is None and not os.environ.get("RAPTOR_DATA"):
        tried.append("  - ($RAPTOR_DATA is not set)")
    raise DatasetNotFoundError(
        f"dataset {name!r} not found. Looked in:\n" + "\n".join(tried)
        + f"\nExpected layout: {EXPECTED[name]}.\nTo get it: {_HOW_TO_GET[name]}.")
