"""Tests for raptor.data on tiny fixtures written in each dataset's real on-disk format."""

from __future__ import annotations

import gzip
import pickle
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from torch.utils.data import DataLoader, Subset

from raptor import catalog, data
from raptor.catalog import DatasetNotFoundError
from raptor.data import ThreadedImages, dataset_info, get_datasets, subset

pytestmark = pytest.mark.usefixtures("isolated_data")
FASHION = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def write_idx(path: Path, array: np.ndarray) -> None:
    """An unsigned-byte idx file (magic 0x0000 08 ndim, big-endian sizes), gzipped if .gz."""
    blob = bytes([0, 0, 8, array.ndim]) + np.array(array.shape, ">u4").tobytes() + array.tobytes()
    path.write_bytes(gzip.compress(blob) if path.suffix == ".gz" else blob)


def make_fashion(folder: Path, n_train: int = 60, n_val: int = 20, gz: bool = True,
                 seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_val)):
        arrays[f"{split}-images-idx3-ubyte"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[f"{split}-labels-idx1-ubyte"] = (np.arange(n) % 10).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        write_idx(folder / (name + (".gz" if gz else "")), array)
    return arrays


def make_cifar(root: Path, n_train: int = 40, n_val: int = 20) -> dict[str, np.ndarray]:
    """torchvision's CIFAR-100 files. The real files are Python 2 pickles whose str keys
    torchvision reads back (encoding="latin1") as str, so the fixture uses str keys. Images are
    smooth (8×8 noise upsampled): on pure noise, PIL's rounding between its two resize passes
    moves bicubic overshoots by up to ~17/255, which is not what the resize test is about."""
    rng = np.random.default_rng(1)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    out = {}
    for split, n in (("train", n_train), ("test", n_val)):
        pixels = np.stack([np.array(Image.fromarray(small).resize((32, 32), Image.BILINEAR))
                           .transpose(2, 0, 1).reshape(3072)
                           for small in rng.integers(0, 256, (n, 8, 8, 3), dtype=np.uint8)])
        fine = [int(v) for v in rng.integers(0, 100, n)]
        entry = {"data": pixels, "fine_labels": fine, "coarse_labels": [f // 5 for f in fine],
                 "filenames": [f"img{i}.png" for i in range(n)], "batch_label": split}
        (folder / split).write_bytes(pickle.dumps(entry, protocol=2))
        out[split] = pixels.reshape(n, 3, 32, 32)
        out[split + "_labels"] = np.array(fine)
    meta = {"fine_label_names": [f"c{i}" for i in range(100)],
            "coarse_label_names": [f"s{i}" for i in range(20)]}
    (folder / "meta").write_bytes(pickle.dumps(meta, protocol=2))
    return out


def denormalise(x: torch.Tensor, name: str) -> torch.Tensor:
    info = dataset_info(name)
    return x * torch.tensor(info.std).view(-1, 1, 1) + torch.tensor(info.mean).view(-1, 1, 1)


# ---------------------------------------------------------------- names and parameters

def test_dataset_info() -> None:
    assert catalog.DATASETS == ("fashion-mnist", "cifar100", "imagenet")
    assert dataset_info("fashion-mnist") == data.DatasetInfo("fashion-mnist", 10, 1, 28,
                                                             (0.2860,), (0.3530,), 60_000,
                                                             10_000)
    assert dataset_info("cifar100").num_classes == 100
    info = dataset_info("imagenet")
    assert (info.num_classes, info.in_chans, info.image_size) == (1000, 3, 224)
    with pytest.raises(AttributeError):
        info.num_classes = 5  # type: ignore[misc]


@pytest.mark.parametrize("call", [
    lambda: dataset_info("mnist"),
    lambda: get_datasets("cifar10"),
    lambda: catalog.data_root_candidates("svhn"),
])
def test_unknown_name_lists_valid_names(call) -> None:
    with pytest.raises(ValueError, match="fashion-mnist, cifar100, imagenet"):
        call()


@pytest.mark.parametrize("kwargs, param", [
    ({"img_size": 0}, "img_size"), ({"img_size": True}, "img_size"),
    ({"img_size": 2.0}, "img_size"), ({"train_limit": 0}, "train_limit"),
    ({"val_limit": -3}, "val_limit"), ({"seed": -1}, "seed"), ({"seed": None}, "seed"),
])
def test_bad_parameters(kwargs: dict, param: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=param):  # raised before any lookup (root is absent)
        get_datasets("fashion-mnist", root=tmp_path / "absent", **kwargs)


# ---------------------------------------------------------------- Fashion-MNIST

@pytest.mark.parametrize("gz, sub", [(True, ""), (False, ""), (True, "FashionMNIST/raw"),
                                     (False, "FashionMNIST/raw")])
def test_fashion_layouts_and_values(gz: bool, sub: str, tmp_path: Path) -> None:
    arrays = make_fashion(tmp_path / sub if sub else tmp_path, gz=gz)
    train, val = get_datasets("fashion-mnist", root=tmp_path)
    assert (len(train), len(val)) == (60, 20)
    x, y = train[7]
    assert x.shape == (1, 28, 28) and x.dtype == torch.float32 and isinstance(y, int)
    raw = torch.from_numpy(arrays["train-images-idx3-ubyte"]).float() / 255
    torch.testing.assert_close(denormalise(x, "fashion-mnist")[0], raw[7], atol=1e-6, rtol=0)
    assert y == 7 % 10
    xv, yv = val[-1]
    torch.testing.assert_close(denormalise(xv, "fashion-mnist")[0],
                               torch.from_numpy(arrays["t10k-images-idx3-ubyte"][-1]).float() / 255,
                               atol=1e-6, rtol=0)
    assert yv == 19 % 10


def test_fashion_normalisation_statistics(tmp_path: Path) -> None:
    """Pixels drawn with the Fashion-MNIST mean/std come out with mean 0 and std 1."""
    rng = np.random.default_rng(3)
    imgs = np.clip(rng.normal(0.2860, 0.3530, (400, 28, 28)) * 255, 0, 255).round().astype(np.uint8)
    make_fashion(tmp_path)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", imgs)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", (np.arange(400) % 10).astype(np.uint8))
    train, _ = get_datasets("fashion-mnist", root=tmp_path)
    raw = torch.from_numpy(imgs).float() / 255
    x = torch.stack([train[i][0] for i in range(len(train))])
    torch.testing.assert_close(x.mean(), (raw.mean() - 0.2860) / 0.3530)
    torch.testing.assert_close(x.std(), raw.std() / 0.3530)


def test_fashion_resize_matches_pil_bilinear(tmp_path: Path) -> None:
    arrays = make_fashion(tmp_path)
    train, _ = get_datasets("fashion-mnist", root=tmp_path, img_size=56)
    x, _ = train[3]
    assert x.shape == (1, 56, 56)
    pil = Image.fromarray(arrays["train-images-idx3-ubyte"][3]).resize((56, 56), Image.BILINEAR)
    expected = torch.from_numpy(np.array(pil)).float() / 255
    torch.testing.assert_close(denormalise(x, "fashion-mnist")[0], expected,
                               atol=1.01 / 255, rtol=0)


@pytest.mark.parametrize("damage, message", [
    (lambda b: b"\x00\x00\x09\x03" + b[4:], "bad magic"),
    (lambda b: b[:-5], "expected"),
    (lambda b: b[:2], "bad magic"),
    (lambda b: b[:9], "bad magic"),
    (lambda b: b"\x00\x00\x08\x00" + b[4:], "bad magic"),
])
def test_fashion_corrupt_idx_names_the_file(damage, message: str, tmp_path: Path) -> None:
    make_fashion(tmp_path, gz=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=message) as err:
        get_datasets("fashion-mnist", root=tmp_path)
    assert str(path) in str(err.value)


def test_fashion_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    make_fashion(tmp_path)
    path = tmp_path / "t10k-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ValueError, match="unreadable") as err:
        get_datasets("fashion-mnist", root=tmp_path)
    assert str(path) in str(err.value)


def test_fashion_mismatched_counts(tmp_path: Path) -> None:
    make_fashion(tmp_path)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros(59, np.uint8))
    with pytest.raises(ValueError, match="do not form a Fashion-MNIST split"):
        get_datasets("fashion-mnist", root=tmp_path)


def test_missing_dataset_lists_everywhere_it_looked(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "fashion-mnist").mkdir(parents=True)
    write_idx(env / "fashion-mnist" / "train-images-idx3-ubyte.gz", np.zeros((1, 28, 28), np.uint8))
    monkeypatch.setenv("RAPTOR_DATA", str(env))
    with pytest.raises(DatasetNotFoundError) as err:
        get_datasets("fashion-mnist")
    msg = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    for where in (env / "fashion-mnist", env, tmp_path / "no-debian"):
        assert f"{where}:" in msg
    assert "missing train-labels-idx1-ubyte, t10k-images" in msg  # partial layout is named
    assert "does not exist" in msg  # the (patched) Debian folder
    assert "apt install dataset-fashion-mnist" in msg and "download=True" in msg
    assert "FashionMNIST/raw/" in msg and "t10k-labels-idx1-ubyte[.gz]" in msg


def test_missing_root_is_the_only_place_looked(tmp_path: Path) -> None:
    make_fashion(tmp_path / "elsewhere")
    with pytest.raises(DatasetNotFoundError) as err:
        get_datasets("fashion-mnist", root=tmp_path / "absent")
    assert f"{tmp_path / 'absent'}: does not exist" in str(err.value)
    assert "$RAPTOR_DATA is not set" not in str(err.value)
    with pytest.raises(DatasetNotFoundError, match=r"\$RAPTOR_DATA is not set"):
        get_datasets("fashion-mnist")


def test_search_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    make_fashion(tmp_path / "debian", n_train=30)
    monkeypatch.setattr(catalog, "DEBIAN_FASHION_MNIST", tmp_path / "debian")
    assert len(get_datasets("fashion-mnist")[0]) == 30
    monkeypatch.setenv("RAPTOR_DATA", str(tmp_path / "env"))
    make_fashion(tmp_path / "env", n_train=40)
    assert len(get_datasets("fashion-mnist")[0]) == 40
    make_fashion(tmp_path / "env" / "fashion-mnist", n_train=50)
    assert len(get_datasets("fashion-mnist")[0]) == 50
    assert catalog.data_root_candidates("fashion-mnist") == [
        tmp_path / "env" / "fashion-mnist", tmp_path / "env", tmp_path / "debian"]
    assert catalog.data_root_candidates("cifar100", "x") == [Path("x")]


def test_download_goes_through_torchvision(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    calls = []

    def fake_fashion(root: str, download: bool = False) -> None:
        calls.append((root, download))
        make_fashion(Path(root) / "FashionMNIST" / "raw", n_train=70, gz=False)

    monkeypatch.setattr(data.datasets, "FashionMNIST", fake_fashion)
    with pytest.raises(ValueError, match="root= or \\$RAPTOR_DATA"):
        get_datasets("fashion-mnist", download=True)
    monkeypatch.setenv("RAPTOR_DATA", str(tmp_path))
    train, _ = get_datasets("fashion-mnist", download=True)
    assert calls == [(str(tmp_path / "fashion-mnist"), True)] and len(train) == 70
    get_datasets("fashion-mnist", download=True)  # found now: no second download
    assert len(calls) == 1


# ---------------------------------------------------------------- limits and loaders

@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=80), st.data(), st.integers(0, 99))
def test_class_balanced_indices(targets: list[int], draw, seed: int) -> None:
    limit = draw.draw(st.integers(1, len(targets)))
    idx = data.class_balanced_indices(targets, limit, seed)
    assert len(idx) == limit and len(set(idx.tolist())) == limit
    assert np.all(np.diff(idx) > 0) and idx.min() >= 0 and idx.max() < len(targets)
    np.testing.assert_array_equal(idx, data.class_balanced_indices(targets, limit, seed))
    available, taken = Counter(targets), Counter(np.asarray(targets)[idx].tolist())
    open_counts = [taken[c] for c in available if taken[c] < available[c]]
    if open_counts:  # every class not exhausted got r or r+1 images; exhausted ones <= r+1
        r = min(open_counts)
        assert max(open_counts) <= r + 1
        assert all(taken[c] <= r + 1 for c in available)


def test_limits_are_balanced_deterministic_and_checked(tmp_path: Path) -> None:
    make_fashion(tmp_path)
    train, val = get_datasets("fashion-mnist", root=tmp_path, train_limit=20, val_limit=10)
    assert isinstance(train, Subset) and (len(train), len(val)) == (20, 10)
    assert Counter(train[i][1] for i in range(20)) == {c: 2 for c in range(10)}
    assert Counter(val[i][1] for i in range(10)) == {c: 1 for c in range(10)}
    again, _ = get_datasets("fashion-mnist", root=tmp_path, train_limit=20, val_limit=10)
    other, _ = get_datasets("fashion-mnist", root=tmp_path, train_limit=20, seed=1)
    assert again.indices == train.indices and other.indices != train.indices
    with pytest.raises(ValueError, match="train_limit=61 exceeds the 60 images"):
        get_datasets("fashion-mnist", root=tmp_path, train_limit=61)


def test_batches_are_the_items_in_order(tmp_path: Path) -> None:
    make_fashion(tmp_path)
    _, val = get_datasets("fashion-mnist", root=tmp_path)
    x, y = next(iter(DataLoader(val, batch_size=16)))  # the batched path (__getitems__)
    assert x.shape == (16, 1, 28, 28) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert torch.equal(y, torch.arange(16) % 10)
    torch.testing.assert_close(x, torch.stack([val[i][0] for i in range(16)]))


def test_subset_is_seeded_balanced_or_uniform_and_checked() -> None:
    items = list(range(40))
    targets = [i % 4 for i in items]
    assert subset(items, None, seed=0) is items  # type: ignore[arg-type]
    balanced = subset(items, 8, 3, targets=targets)  # type: ignore[arg-type]
    assert Counter(targets[i] for i in balanced.indices) == {c: 2 for c in range(4)}
    uniform = subset(items, 8, 3)  # type: ignore[arg-type]
    assert uniform.indices == sorted(uniform.indices) and len(set(uniform.indices)) == 8
    assert uniform.indices == subset(items, 8, 3).indices != subset(items, 8, 4).indices
    with pytest.raises(ValueError, match="--probe-train-limit=41 exceeds the 40 images"):
        subset(items, 41, 0, name="--probe-train-limit")  # type: ignore[arg-type]


def test_threaded_images_return_the_same_samples_in_order() -> None:
    base = [(torch.full((2,), float(i)), i) for i in range(10)]
    threaded = ThreadedImages(base, 3)  # type: ignore[arg-type]
    order = [7, 1, 1, 9, 0]
    got = threaded.__getitems__(order)
    assert [label for _, label in got] == order
    assert all(torch.equal(x, base[i][0]) for (x, _), i in zip(got, order))
    assert len(threaded) == 10 and threaded[4][1] == 4
    with pytest.raises(ValueError, match="threads"):
        ThreadedImages(base, 0)  # type: ignore[arg-type]


def test_a_limited_training_set_is_balanced(tmp_path: Path) -> None:
    make_fashion(tmp_path)
    train, _ = get_datasets("fashion-mnist", root=tmp_path, train_limit=10)
    assert sorted(label for _, label in train) == list(range(10))


# ---------------------------------------------------------------- CIFAR-100

def test_cifar_values_labels_and_pil_bicubic(tmp_path: Path) -> None:
    arrays = make_cifar(tmp_path)
    train, val = get_datasets("cifar100", root=tmp_path)
    assert (len(train), len(val)) == (40, 20)
    x, y = train[5]
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32
    assert y == arrays["train_labels"][5] and val[2][1] == arrays["test_labels"][2]
    torch.testing.assert_close(denormalise(x, "cifar100"),
                               torch.from_numpy(arrays["train"][5]).float() / 255,
                               atol=1e-6, rtol=0)
    big, _ = get_datasets("cifar100", root=tmp_path, img_size=64)
    xb, _ = big[5]
    pil = Image.fromarray(arrays["train"][5].transpose(1, 2, 0)).resize((64, 64), Image.BICUBIC)
    expected = torch.from_numpy(np.array(pil)).permute(2, 0, 1).float() / 255
    torch.testing.assert_close(denormalise(xb, "cifar100"), expected, atol=1.5 / 255, rtol=0)


def test_cifar_missing_file_and_bad_content(tmp_path: Path) -> None:
    make_cifar(tmp_path)
    (tmp_path / "cifar-100-python" / "meta").unlink()
    with pytest.raises(DatasetNotFoundError) as err:
        get_datasets("cifar100", root=tmp_path)
    assert "missing cifar-100-python/meta" in str(err.value)
    assert "download=True" in str(err.value)
    assert "cifar-100-python/{train,test,meta}" in str(err.value)
    (tmp_path / "cifar-100-python" / "meta").write_bytes(pickle.dumps({"labels": []}))
    with pytest.raises(ValueError, match="not CIFAR-100"):
        get_datasets("cifar100", root=tmp_path)


# ---------------------------------------------------------------- ImageNet

def pil_oracle(path: Path, img_size: int) -> torch.Tensor:
    """Resize shorter side to round(img_size·256/224) bicubic, centre crop, normalise."""
    img = Image.open(path).convert("RGB")
    short = round(img_size * 256 / 224)
    w, h = img.size
    size = (int(short * w / h), short) if h <= w else (short, int(short * h / w))
    img = img.resize(size, Image.BICUBIC)
    left, top = int(round((size[0] - img_size) / 2)), int(round((size[1] - img_size) / 2))
    x = np.asarray(img.crop((left, top, left + img_size, top + img_size)), np.float32) / 255
    info = dataset_info("imagenet")
    return (torch.from_numpy(x).permute(2, 0, 1) - torch.tensor(info.mean).view(3, 1, 1)) \
        / torch.tensor(info.std).view(3, 1, 1)


@pytest.mark.parametrize("img_size", [224, 32])
def test_imagenet_transform_and_labels(img_size: int, tmp_path: Path,
                                       fake_imagenet: Callable[..., Path]) -> None:
    fake_imagenet(tmp_path, seed=2)
    train, val = get_datasets("imagenet", root=tmp_path,
                              img_size=None if img_size == 224 else img_size)
    assert (len(train), len(val)) == (6, 6) and train.classes == ["n01", "n02", "n03"]
    x, y = train[3]
    assert x.shape == (3, img_size, img_size) and x.dtype == torch.float32 and y == 1
    torch.testing.assert_close(x, pil_oracle(tmp_path / "train" / "n02" / "n02_1.JPEG", img_size),
                               atol=1e-5, rtol=0)
    assert [val[i][1] for i in range(6)] == [0, 0, 1, 1, 2, 2]


def test_imagenet_layout_errors(tmp_path: Path, fake_imagenet: Callable[..., Path]) -> None:
    fake_imagenet(tmp_path, seed=2)
    for p in (tmp_path / "val").glob("*/*.JPEG"):  # a flat val folder, as ILSVRC ships it
        p.rename(tmp_path / "val" / p.name)
    for d in [d for d in (tmp_path / "val").iterdir() if d.is_dir()]:
        d.rmdir()
    with pytest.raises(DatasetNotFoundError) as err:
        get_datasets("imagenet", root=tmp_path, download=True)
    msg = str(err.value)
    assert "missing val/<wnid>/" in msg and "train/<wnid>/*.JPEG" in msg
    assert "no automatic download" in msg


def test_imagenet_empty_class_and_mismatched_classes(tmp_path: Path,
                                                     fake_imagenet: Callable[..., Path]) -> None:
    fake_imagenet(tmp_path / "a", classes={"train": ("n01", "n02", "n03"),
                                           "val": ("n01", "n02")}, seed=2)
    with pytest.raises(ValueError, match="train and val class folders differ"):
        get_datasets("imagenet", root=tmp_path / "a")
    fake_imagenet(tmp_path / "b", seed=2)
    (tmp_path / "b" / "train" / "n04").mkdir()
    with pytest.raises(ValueError, match="train") as err:
        get_datasets("imagenet", root=tmp_path / "b")
    assert "n04" in str(err.value)


# ---------------------------------------------------------------- the real Debian dataset

@pytest.mark.skipif(not (Path("/usr/share/datasets/fashion-mnist")
                         / "train-images-idx3-ubyte.gz").is_file(),
                    reason="Debian package dataset-fashion-mnist not installed")
def test_real_debian_fashion_mnist() -> None:
    train, val = get_datasets("fashion-mnist", root="/usr/share/datasets/fashion-mnist")
    info = dataset_info("fashion-mnist")
    assert (len(train), len(val)) == (info.train_size, info.val_size) == (60000, 10000)
    assert torch.equal(torch.bincount(train.targets), torch.full((10,), 6000))
    raw = train.images.float() / 255
    assert abs(raw.mean().item() - 0.2860) < 5e-4 and abs(raw.std().item() - 0.3530) < 5e-4
    x = train.__getitems__(list(range(0, 60000, 7)))
    batch = torch.stack([xi for xi, _ in x])
    assert abs(batch.mean().item()) < 0.01 and abs(batch.std().item() - 1) < 0.01
