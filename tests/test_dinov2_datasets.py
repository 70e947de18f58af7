"""Tests of raptor.dinov2.datasets: ImageNet's files checked before any training."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from raptor.data import get_datasets
from raptor.dinov2.datasets import readable

IMG = 28


def test_imagenet_files_that_are_not_readable_images_are_left_out_before_any_training(
        tmp_path: Path, fake_imagenet: Callable[..., Path]) -> None:
    """A text file and a corrupt PNG among ImageNet's: each named in a warning before the run,
    the rest kept with their labels; no PIL traceback hours in."""
    root = fake_imagenet(tmp_path / "imagenet", {"train": 2, "val": 1}, ("n01", "n02"), (32, 32),
                         suffix=".png")
    notes, corrupt = root / "train" / "n01" / "README.txt", root / "train" / "n02" / "bad.png"
    notes.write_text("not an image")
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    train, _ = get_datasets("imagenet", root=root, img_size=IMG)
    with pytest.warns(UserWarning) as caught:
        kept = readable(train)
    text = "\n".join(str(w.message) for w in caught)
    assert f"leaving out 1 files that are not images: {notes}" in text
    assert f"leaving out 1 image files that cannot be read: {corrupt}" in text
    assert [Path(p).name for p, _ in kept.samples] == ["n01_0.png", "n01_1.png", "n02_0.png",
                                                       "n02_1.png"]
    assert kept.targets == [0, 0, 1, 1] and kept.imgs == kept.samples
    assert [y for _, y in (kept[i] for i in range(len(kept)))] == [0, 0, 1, 1]
    for path, _ in list(kept.samples):
        Path(path).write_bytes(b"garbage")
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="holds no readable image"):
        readable(get_datasets("imagenet", root=root, img_size=IMG)[0])
