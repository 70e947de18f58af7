"""Dense-prediction datasets of the paper's §5 probes, read in their standard on-disk layouts.

Two readers, each a map-style :class:`~torch.utils.data.Dataset` yielding
``(image float (3, H, W), target)``; images are normalised with ImageNet's mean and std, as
DINOv2's are. A dataset is looked up in ``root`` if given, else in the folders under
``$RAPTOR_DATA`` named by :data:`ADE20K_DIRS` / :data:`NYUV2_DIRS`; the first folder with the
full layout wins. A missing dataset or a folder with the wrong layout raises
:class:`~raptor.catalog.DatasetNotFoundError` naming every folder tried and what each lacks.

**ADE20k** (SceneParsing / ADEChallengeData2016, 150 classes)::

    ADEChallengeData2016/
      images/{training,validation}/<stem>.jpg
      annotations/{training,validation}/<stem>.png     (8-bit, 0 = "other", 1..150 = classes)

Labels are remapped as everyone does ("reduce_zero_label", mmsegmentation's ADE20k setting):
0 → 255 (ignored by the loss and by mIoU), ``c`` → ``c − 1``, so classes are 0..149.
Transform (App. A.4, Table 4: the probe works at 518×518, a 37×37 grid of 14-px patches): resize the
shorter side to ``img_size`` (bilinear for the image, nearest for the labels), then centre-crop
``img_size × img_size``. No augmentation.

**NYUv2** (Eigen split, in the BTS / AdaBins "sync" layout)::

    nyu_depth_v2/
      nyudepthv2_train_files_with_gt.txt     (or train_test_inputs/<same name>)
      nyudepthv2_test_files_with_gt.txt
      sync/<scene>/rgb_<k>.jpg, sync/<scene>/sync_depth_<k>.png          (train)
      official_splits/test/<scene>/rgb_<k>.jpg, .../sync_depth_<k>.png    (test, 654 images)

Each non-empty line of a split file reads ``rgb_path depth_path [focal]``, paths relative to
the split's image folder (a leading ``/``, as in BTS's train list, is ignored; ``focal`` is not
used). Depth PNGs are 16-bit, in millimetres: depth = value / 1000 metres, 0 = no measurement.
Images are returned at full size (480×640) and unpadded: the depth probe
(:func:`raptor.dinov2.dense_probes.train_depth_probe`) centre-pads them to a multiple of its
backbone's patch size (pad value 0, padded pixels invalid), since only it knows the patch size.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.utils.data import Dataset
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as TF

from raptor.catalog import DatasetNotFoundError, dataset_info
from raptor.paper import ADE20K_SIZE

ADE20K_NUM_CLASSES = 150
IGNORE_INDEX = 255
ADE20K_SPLITS = ("training", "validation")
NYUV2_SPLITS = ("train", "test")
ADE20K_DIRS = ("ADEChallengeData2016", "ade20k")
NYUV2_DIRS = ("nyu_depth_v2", "nyuv2")
NYUV2_SPLIT_FILES = {"train": "nyudepthv2_train_files_with_gt.txt",
                     "test": "nyudepthv2_test_files_with_gt.txt"}
NYUV2_IMAGE_DIRS = {"train": "sync", "test": "official_splits/test"}
NYUV2_DEPTH_SCALE = 1000.0  # PNG units per metre (millimetres)


def _normalise(image: Image.Image) -> Tensor:
    info = dataset_info("imagenet")
    return TF.normalize(TF.to_tensor(image.convert("RGB")), info.mean, info.std)


def _candidates(root: str | os.PathLike[str] | None, names: Sequence[str]) -> list[Path]:
    if root is not None:
        return [Path(root).expanduser()]
    env = os.environ.get("RAPTOR_DATA")
    return [Path(env).expanduser() / name for name in names] if env else []


def _not_found(dataset: str, tried: list[str], expected: str) -> DatasetNotFoundError:
    if not tried:
        tried = ["  - (no root given and $RAPTOR_DATA is not set)"]
    return DatasetNotFoundError(f"{dataset} not found. Looked in:\n" + "\n".join(tried)
                                + f"\nExpected layout: {expected}.")


def _check_choice(value: str, param: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{param} must be one of {', '.join(allowed)}; got {value!r}")


def reduce_zero_label(label: np.ndarray) -> np.ndarray:
    """ADE20k's raw labels (0 = other, 1..150) → int64 labels: 0 → 255, c → c − 1."""
    out = label.astype(np.int64) - 1
    out[label == 0] = IGNORE_INDEX
    return out


class ADE20k(Dataset[tuple[Tensor, Tensor]]):
    """ADE20k scene parsing (ADEChallengeData2016): ``(image (3, S, S), labels int64 (S, S))``.

    Args:
        root: the ``ADEChallengeData2016`` folder; default ``$RAPTOR_DATA/ADEChallengeData2016``
            or ``$RAPTOR_DATA/ade20k``.
        split: ``"training"`` (20,210 images) or ``"validation"`` (2,000).
        img_size: side ``S`` of the square crop (518 in the paper's probe).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, split: str = "validation",
                 img_size: int = ADE20K_SIZE) -> None:
        _check_choice(split, "split", ADE20K_SPLITS)
        if isinstance(img_size, bool) or not isinstance(img_size, int) or img_size < 1:
            raise ValueError(f"img_size must be an int >= 1; got {img_size!r}")
        self.split, self.img_size = split, img_size
        tried = []
        for folder in _candidates(root, ADE20K_DIRS):
            problem = self._layout_problem(folder)
            if not problem:
                self.root = folder
                break
            tried.append(f"  - {folder}: {problem}")
        else:
            raise _not_found("ADE20k", tried, "<root>/images/{training,validation}/*.jpg and "
                             "<root>/annotations/{training,validation}/*.png (same stems)")
        images = {p.stem: p for p in (self.root / "images" / split).glob("*.jpg")}
        labels = {p.stem: p for p in (self.root / "annotations" / split).glob("*.png")}
        unmatched = sorted(set(images) ^ set(labels))
        if unmatched:
            raise ValueError(f"{self.root}: {len(unmatched)} {split} images and annotations do "
                             f"not pair up by stem, e.g. {unmatched[:3]} (each images/{split}/"
                             f"<stem>.jpg needs annotations/{split}/<stem>.png)")
        self.files = [(images[s], labels[s]) for s in sorted(images)]

    def _layout_problem(self, folder: Path) -> str:
        if not folder.is_dir():
            return "does not exist"
        missing = [f"{kind}/{self.split}/*.{ext}" for kind, ext in (("images", "jpg"),
                                                                      ("annotations", "png"))
                   if not any((folder / kind / self.split).glob(f"*.{ext}"))]
        return "missing " + ", ".join(missing) if missing else ""

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        image_path, label_path = self.files[index]
        image, label = Image.open(image_path), Image.open(label_path)
        if image.size != label.size:
            raise ValueError(f"{label_path}: size {label.size} differs from its image's "
                             f"{image.size}")
        if label.mode not in ("L", "P"):
            raise ValueError(f"{label_path}: expected an 8-bit label PNG, got mode {label.mode}")
        size = self.img_size
        image = TF.center_crop(TF.resize(image.convert("RGB"), size,
                                         interpolation=InterpolationMode.BILINEAR), size)
        label = TF.center_crop(TF.resize(label, size, interpolation=InterpolationMode.NEAREST),
                               size)
        raw = np.asarray(label)
        if raw.max() > ADE20K_NUM_CLASSES:
            raise ValueError(f"{label_path}: label {raw.max()} > {ADE20K_NUM_CLASSES}; ADE20k "
                             f"labels are 0 (other) and 1..{ADE20K_NUM_CLASSES}")
        return _normalise(image), torch.from_numpy(reduce_zero_label(raw))


class NYUv2Depth(Dataset[tuple[Tensor, Tensor]]):
    """NYU Depth v2, Eigen split, BTS layout: ``(image (3, 480, 640), depth float32 (480, 640))``.

    Depth is in metres; 0 marks pixels without a measurement (the probe treats every depth
    outside [min_depth, max_depth] as invalid).

    Args:
        root: the ``nyu_depth_v2`` folder; default ``$RAPTOR_DATA/nyu_depth_v2`` or
            ``$RAPTOR_DATA/nyuv2``.
        split: ``"train"`` (BTS's 24,231 synced frames) or ``"test"`` (the 654 official ones).
        split_file: the list to read instead of the standard one (paths still relative to the
            split's image folder).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None, split: str = "test",
                 split_file: str | os.PathLike[str] | None = None) -> None:
        _check_choice(split, "split", NYUV2_SPLITS)
        self.split = split
        tried = []
        for folder in _candidates(root, NYUV2_DIRS):
            listing, problem = self._find_listing(folder, split_file)
            if listing is not None:
                self.root, self.split_file = folder, listing
                break
            tried.append(f"  - {folder}: {problem}")
        else:
            raise _not_found("NYUv2", tried,
                             f"<root>/{NYUV2_SPLIT_FILES[split]} (or <root>/train_test_inputs/"
                             f"...) listing 'rgb_path depth_path focal' lines relative to "
                             f"<root>/{NYUV2_IMAGE_DIRS[split]}/")
        self.files = self._read_listing()

    def _find_listing(self, folder: Path, split_file: str | os.PathLike[str] | None
                      ) -> tuple[Path | None, str]:
        if not folder.is_dir():
            return None, "does not exist"
        if not (folder / NYUV2_IMAGE_DIRS[self.split]).is_dir():
            return None, f"missing {NYUV2_IMAGE_DIRS[self.split]}/"
        if split_file is not None:
            path = Path(split_file).expanduser()
            return (path, "") if path.is_file() else (None, f"split file {path} does not exist")
        name = NYUV2_SPLIT_FILES[self.split]
        for path in (folder / name, folder / "train_test_inputs" / name):
            if path.is_file():
                return path, ""
        return None, f"missing {name} (also looked in train_test_inputs/)"

    def _read_listing(self) -> list[tuple[Path, Path]]:
        base = self.root / NYUV2_IMAGE_DIRS[self.split]
        files = []
        for number, line in enumerate(self.split_file.read_text().splitlines(), 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) not in (2, 3):
                raise ValueError(f"{self.split_file}:{number}: expected 'rgb_path depth_path "
                                 f"[focal]', got {line!r}")
            files.append((base / fields[0].lstrip("/"), base / fields[1].lstrip("/")))
        if not files:
            raise ValueError(f"{self.split_file}: lists no images")
        missing = [str(p) for pair in files for p in pair if not p.is_file()]
        if missing:
            raise DatasetNotFoundError(f"{self.split_file} lists {len(missing)} files that do "
                                       f"not exist, e.g. {missing[:3]}")
        return files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        image_path, depth_path = self.files[index]
        image, depth = Image.open(image_path), Image.open(depth_path)
        if depth.mode not in ("I;16", "I;16B", "I"):
            raise ValueError(f"{depth_path}: expected a 16-bit depth PNG (millimetres), got "
                             f"mode {depth.mode}")
        if image.size != depth.size:
            raise ValueError(f"{depth_path}: size {depth.size} differs from its image's "
                             f"{image.size}")
        metres = np.asarray(depth, dtype=np.float32) / NYUV2_DEPTH_SCALE
        return _normalise(image), torch.from_numpy(metres)
