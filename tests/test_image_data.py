"""An images folder holding other files (``raptor.analysis.image_data``): files that are not
images, and image files PIL cannot read, are left out with a warning naming each, never a PIL
traceback in the middle of the pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from raptor import analysis


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, num_classes=0)


def _folder(root: Path) -> tuple[Path, Path, Path]:
    """Two class folders of two PNGs each, a text file, a PNG of random bytes and a truncated
    PNG (a valid header, half its data)."""
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir()
        for i in range(2):
            Image.fromarray(rng.integers(0, 256, (40, 36, 3), dtype=np.uint8)).save(
                root / c / f"{i}.png")
    notes, garbage = root / "notes.txt", root / "a" / "garbage.png"
    truncated = root / "b" / "half.png"
    notes.write_text("not an image")
    garbage.write_bytes(rng.integers(0, 256, 500, dtype=np.uint8).tobytes())
    whole = (root / "b" / "0.png").read_bytes()
    truncated.write_bytes(whole[:len(whole) // 2])
    return notes, garbage, truncated


def test_other_files_and_unreadable_images_are_left_out_naming_each(tmp_path: Path,
                                                                     model) -> None:
    notes, garbage, truncated = _folder(tmp_path)
    with pytest.warns(UserWarning) as caught:
        data = analysis.image_data(str(tmp_path), model)
    text = "\n".join(str(w.message) for w in caught)
    assert f"leaving out 1 files that are not images: {notes}" in text
    assert "leaving out 2 image files that cannot be read" in text
    assert str(garbage) in text and str(truncated) in text
    assert len(data) == 4 and sorted(data.labels) == [0, 0, 1, 1]
    images, labels = next(iter(torch.utils.data.DataLoader(data, batch_size=10)))
    assert images.shape == (4, 3, 32, 32) and labels.tolist() == [0, 0, 1, 1]


def test_a_folder_without_a_readable_image_is_a_clear_error(tmp_path: Path, model) -> None:
    (tmp_path / "bad.png").write_bytes(b"\x89PNG not really")
    with pytest.warns(UserWarning, match="bad.png"), \
            pytest.raises(ValueError, match=f"images folder {tmp_path} holds no readable image"):
        analysis.image_data(str(tmp_path), model)
