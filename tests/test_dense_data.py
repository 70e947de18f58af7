"""Tests for raptor.dinov2.dense_data on tiny fixtures written in ADE20k's and NYUv2's on-disk
layouts."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from raptor.catalog import DatasetNotFoundError, dataset_info
from raptor.dinov2.dense_data import ADE20k, NYUv2Depth, reduce_zero_label

MEAN = torch.tensor(dataset_info("imagenet").mean)[:, None, None]
STD = torch.tensor(dataset_info("imagenet").std)[:, None, None]


Tree = Callable[..., Path]  # the fake_ade / fake_nyu fixtures
pytestmark = pytest.mark.usefixtures("isolated_data")


# --- ADE20k ---------------------------------------------------------------------------------

def test_reduce_zero_label_maps_other_to_ignore_and_shifts_classes() -> None:
    raw = np.array([[0, 1, 2], [150, 0, 75]], dtype=np.uint8)
    assert reduce_zero_label(raw).tolist() == [[255, 0, 1], [149, 255, 74]]


def test_ade_labels_exact_when_no_resize(tmp_path: Path, fake_ade: Tree) -> None:
    label = np.arange(28 * 28).reshape(28, 28) % 151
    base = fake_ade(tmp_path, {"validation": {"a": label}})
    image, target = ADE20k(base, "validation", img_size=28)[0]
    assert image.shape == (3, 28, 28) and image.dtype == torch.float32
    assert target.dtype == torch.int64
    np.testing.assert_array_equal(target.numpy(), reduce_zero_label(label))


def test_ade_resize_shorter_side_then_centre_crop(tmp_path: Path, fake_ade: Tree) -> None:
    # 2×2 blocks downscaled by 2 with nearest: each block becomes one pixel, whichever pixel of
    # the block is sampled. Landscape 14×28 blocks → 28×56 px → resized to 14×28 → crop 14:
    # columns 7..21 of the block grid.
    small = np.random.default_rng(2).integers(0, 151, (14, 28))
    base = fake_ade(tmp_path, {"training": {"b": np.kron(small, np.ones((2, 2), int))}})
    image, target = ADE20k(base, "training", img_size=14)[0]
    assert image.shape == (3, 14, 14)
    np.testing.assert_array_equal(target.numpy(), reduce_zero_label(small[:, 7:21]))


def test_ade_image_is_normalised_with_imagenet_statistics(tmp_path: Path, fake_ade: Tree) -> None:
    base = fake_ade(tmp_path, {"validation": {"a": np.zeros((8, 8), int)}})
    ds = ADE20k(base, "validation", img_size=8)
    raw = torch.from_numpy(np.array(Image.open(ds.files[0][0]).convert("RGB"))).permute(2, 0, 1)
    torch.testing.assert_close(ds[0][0], (raw / 255 - MEAN) / STD)


def test_ade_found_through_raptor_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       fake_ade: Tree) -> None:
    fake_ade(tmp_path, {"validation": {"a": np.ones((8, 8), int), "b": np.ones((8, 8), int)}})
    monkeypatch.setenv("RAPTOR_DATA", str(tmp_path))
    ds = ADE20k(split="validation", img_size=8)
    assert len(ds) == 2 and [p.stem for p, _ in ds.files] == ["a", "b"]


def test_ade_missing_dataset_and_wrong_layout(tmp_path: Path, fake_ade: Tree) -> None:
    with pytest.raises(DatasetNotFoundError, match="RAPTOR_DATA is not set"):
        ADE20k(split="validation")
    with pytest.raises(DatasetNotFoundError, match="does not exist"):
        ADE20k(tmp_path / "nowhere")
    base = fake_ade(tmp_path, {"training": {"a": np.ones((8, 8), int)}})
    with pytest.raises(DatasetNotFoundError, match=r"images/validation/\*\.jpg, "
                                                   r"annotations/validation/\*\.png"):
        ADE20k(base, "validation")


def test_ade_unpaired_files_size_mismatch_and_bad_labels(tmp_path: Path, fake_ade: Tree) -> None:
    base = fake_ade(tmp_path, {"validation": {"a": np.ones((8, 8), int)}})
    Image.new("RGB", (8, 8)).save(base / "images" / "validation" / "lonely.jpg")
    with pytest.raises(ValueError, match="lonely"):
        ADE20k(base, "validation")
    (base / "images" / "validation" / "lonely.jpg").unlink()
    Image.fromarray(np.full((8, 8), 151, np.uint8)).save(base / "annotations/validation/a.png")
    with pytest.raises(ValueError, match="label 151 > 150"):
        ADE20k(base, "validation", img_size=8)[0]
    Image.fromarray(np.ones((9, 8), np.uint8)).save(base / "annotations/validation/a.png")
    with pytest.raises(ValueError, match="differs from its image"):
        ADE20k(base, "validation", img_size=8)[0]


@pytest.mark.parametrize("kwargs, match", [({"split": "val"}, "split must be one of"),
                                           ({"img_size": 0}, "img_size must be")])
def test_ade_bad_arguments(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ADE20k(tmp_path, **kwargs)


# --- NYUv2 ----------------------------------------------------------------------------------

def test_nyu_reads_bts_layout_with_depth_in_metres(tmp_path: Path, fake_nyu: Tree) -> None:
    rng = np.random.default_rng(3)
    depths = {s: [rng.integers(0, 12_000, (12, 16)) for _ in range(3)] for s in ("train", "test")}
    base = fake_nyu(tmp_path, depths)
    for split in ("train", "test"):
        ds = NYUv2Depth(base, split)
        assert len(ds) == 3
        for k in range(3):
            image, depth = ds[k]
            assert image.shape == (3, 12, 16) and depth.dtype == torch.float32
            np.testing.assert_allclose(depth.numpy(), depths[split][k] / 1000.0, rtol=1e-6)


def test_nyu_split_file_in_train_test_inputs_and_explicit(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          fake_nyu: Tree) -> None:
    base = fake_nyu(tmp_path, {"test": [np.full((4, 4), 1000)] * 2})
    (base / "train_test_inputs").mkdir()
    listing = base / "nyudepthv2_test_files_with_gt.txt"
    listing.rename(base / "train_test_inputs" / listing.name)
    monkeypatch.setenv("RAPTOR_DATA", str(tmp_path))
    assert len(NYUv2Depth(split="test")) == 2
    one = tmp_path / "one.txt"
    one.write_text("scene_0/rgb_00000.jpg scene_0/sync_depth_00000.png\n\n")
    ds = NYUv2Depth(base, "test", split_file=one)
    assert len(ds) == 1 and float(ds[0][1].mean()) == 1.0


def test_nyu_missing_dataset_and_wrong_layout(tmp_path: Path, fake_nyu: Tree) -> None:
    with pytest.raises(DatasetNotFoundError, match="RAPTOR_DATA is not set"):
        NYUv2Depth(split="test")
    base = fake_nyu(tmp_path, {"test": [np.ones((4, 4))]})
    shutil.rmtree(base / "sync")
    with pytest.raises(DatasetNotFoundError, match="missing sync/"):
        NYUv2Depth(base, "train")
    (base / "nyudepthv2_test_files_with_gt.txt").unlink()
    with pytest.raises(DatasetNotFoundError, match="missing nyudepthv2_test_files_with_gt.txt"):
        NYUv2Depth(base, "test")


def test_nyu_bad_listing_and_files(tmp_path: Path, fake_nyu: Tree) -> None:
    base = fake_nyu(tmp_path, {"test": [np.ones((4, 4))]})
    listing = base / "nyudepthv2_test_files_with_gt.txt"
    listing.write_text("scene_0/rgb_00000.jpg\n")
    with pytest.raises(ValueError, match=r"nyudepthv2_test_files_with_gt.txt:1"):
        NYUv2Depth(base, "test")
    listing.write_text("scene_0/rgb_00000.jpg scene_0/sync_depth_00099.png 518.8\n")
    with pytest.raises(DatasetNotFoundError, match="sync_depth_00099.png"):
        NYUv2Depth(base, "test")
    listing.write_text("\n")
    with pytest.raises(ValueError, match="lists no images"):
        NYUv2Depth(base, "test")
    listing.write_text("scene_0/rgb_00000.jpg scene_0/sync_depth_00000.png 518.8\n")
    depth_png = base / "official_splits/test/scene_0/sync_depth_00000.png"
    Image.fromarray(np.ones((4, 4), np.uint8)).save(depth_png)
    with pytest.raises(ValueError, match="16-bit depth PNG"):
        NYUv2Depth(base, "test")[0]
    Image.fromarray(np.ones((5, 4), np.uint16)).save(depth_png)
    with pytest.raises(ValueError, match="differs from its image"):
        NYUv2Depth(base, "test")[0]
    with pytest.raises(ValueError, match="split must be one of"):
        NYUv2Depth(base, "val")
