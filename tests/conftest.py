"""Fixtures shared by the tests: tiny ViTs, fake dataset trees, planted data, kill helpers.

Factories are session-scoped fixtures returning functions (so hypothesis tests can use them);
each factory seeds what it draws, so a test gets the same data on every call.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Dataset

# The machine has 2 cores; tests use tiny tensors, where extra threads only add contention. The
# processes tests start (sweep jobs, torchrun ranks, notebook kernels) often run side by side:
# one thread each, as here.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Tests build their own models: the repository's artifact tier must never stand in for them.
os.environ["RAPTOR_ARTIFACTS"] = ""


# --- environment ----------------------------------------------------------------------------

@pytest.fixture
def isolated_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No dataset is found by accident: ``$RAPTOR_DATA`` unset, Debian's Fashion-MNIST hidden."""
    from raptor import catalog

    monkeypatch.delenv("RAPTOR_DATA", raising=False)
    monkeypatch.setattr(catalog, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian")


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty ``$RAPTOR_CACHE`` (``tmp_path/cache``) for the test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("RAPTOR_CACHE", str(root))
    return root


@pytest.fixture
def short_atlas(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The atlas (:mod:`raptor.atlas`) at a two-step budget, 40 evaluation images in 10 groups,
    with a fresh cache; returns a results folder."""
    from raptor import atlas, atlas_design

    monkeypatch.setattr(atlas_design, "budget_epochs", lambda n: 1)
    monkeypatch.setattr(atlas, "N_IMAGES", 40)
    monkeypatch.setattr(atlas, "N_GROUPS", 10)
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "results"


# --- tiny models ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_vit() -> Callable[..., torch.nn.Module]:
    """``tiny_vit(seed=0, **kwargs)``: a stock timm ViT (16 px, patch 4, 1 channel, 3 blocks of
    width 32, 2 heads, no head) in eval mode, drawn after ``torch.manual_seed(seed)``."""
    from timm.models.vision_transformer import VisionTransformer

    def make(seed: int = 0, **kwargs: Any) -> torch.nn.Module:
        args = dict(img_size=16, patch_size=4, in_chans=1, num_classes=0, embed_dim=32, depth=3,
                    num_heads=2)
        torch.manual_seed(seed)
        return VisionTransformer(**{**args, **kwargs}).eval()

    return make


@pytest.fixture(scope="session")
def tiny_teacher() -> Callable[..., torch.nn.Module]:
    """``tiny_teacher(seed=0, **changes)``: the companion's teacher (``raptor.teachers``) with 4
    blocks of width 32 on 16 px one-channel images, 10 classes, 1 register; eval mode."""
    from raptor.teachers import TeacherConfig, build_teacher

    def make(seed: int = 0, **changes: Any) -> torch.nn.Module:
        cfg = TeacherConfig(**{**dict(depth=4, embed_dim=32, num_heads=4, patch_size=4,
                                      img_size=16, in_chans=1, num_classes=10, reg_tokens=1),
                               **changes})
        return build_teacher(cfg, seed=seed).eval()

    return make


# --- fake dataset trees ---------------------------------------------------------------------

def _noise(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.integers(0, 256, (*shape, 3), dtype=np.uint8)


@pytest.fixture(scope="session")
def fake_imagenet() -> Callable[..., Path]:
    """``fake_imagenet(root, per_class={"train": 2, "val": 2}, classes=("n01", "n02", "n03"),
    size=(30, 40), seed=0, image=None, suffix=".JPEG")``: an ImageFolder tree
    ``root/<split>/<wnid>/<wnid>_<i><suffix>`` (``classes``: one tuple, or one per split);
    ``image(rng, wnid, shape)`` draws the pixels (default: uniform noise). Returns ``root``."""

    def make(root: Path, per_class: dict[str, int] | None = None,
             classes: tuple[str, ...] | dict[str, tuple[str, ...]] = ("n01", "n02", "n03"),
             size: tuple[int, int] = (30, 40), seed: int = 0,
             image: Callable[..., np.ndarray] | None = None, suffix: str = ".JPEG") -> Path:
        rng = np.random.default_rng(seed)
        for split, n in (per_class or {"train": 2, "val": 2}).items():
            for wnid in classes[split] if isinstance(classes, dict) else classes:
                (root / split / wnid).mkdir(parents=True, exist_ok=True)
                for i in range(n):
                    pixels = image(rng, wnid, size) if image else _noise(rng, size)
                    Image.fromarray(pixels).save(root / split / wnid / f"{wnid}_{i}{suffix}")
        return root

    return make


@pytest.fixture(scope="session")
def fake_cifar100() -> Callable[..., Path]:
    """``fake_cifar100(root, n_train=8, n_test=4, seed=0)``: CIFAR-100 in torchvision's python
    layout, ``root/cifar-100-python/{train,test,meta}`` (pickled dicts of uint8 rows of 3072
    pixels, fine and coarse labels; 100 fine class names). Returns ``root``."""
    import pickle

    def make(root: Path, n_train: int = 8, n_test: int = 4, seed: int = 0) -> Path:
        rng = np.random.default_rng(seed)
        folder = root / "cifar-100-python"
        folder.mkdir(parents=True, exist_ok=True)
        for split, n in (("train", n_train), ("test", n_test)):
            fine = (np.arange(n) * 37 % 100).tolist()
            entry = {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                     "fine_labels": fine, "coarse_labels": [f // 5 for f in fine],
                     "filenames": [f"img_{i}.png" for i in range(n)], "batch_label": split}
            (folder / split).write_bytes(pickle.dumps(entry, protocol=2))
        meta = {"fine_label_names": [f"class_{i}" for i in range(100)],
                "coarse_label_names": [f"super_{i}" for i in range(20)]}
        (folder / "meta").write_bytes(pickle.dumps(meta, protocol=2))
        return root

    return make


@pytest.fixture(scope="session")
def fake_ade() -> Callable[..., Path]:
    """``fake_ade(root, labels, seed=0, image=None)``: ``root/ADEChallengeData2016`` with, for
    each ``labels[split][stem]`` (a label map: 0 = other, 1..150), a JPEG and the uint8 PNG;
    ``image(rng, label)`` draws the JPEG's pixels (default: uniform noise). Returns the
    ``ADEChallengeData2016`` folder."""

    def make(root: Path, labels: dict[str, dict[str, np.ndarray]], seed: int = 0,
             image: Callable[..., np.ndarray] | None = None) -> Path:
        base = root / "ADEChallengeData2016"
        rng = np.random.default_rng(seed)
        for split, maps in labels.items():
            for kind in ("images", "annotations"):
                (base / kind / split).mkdir(parents=True, exist_ok=True)
            for stem, label in maps.items():
                pixels = image(rng, label) if image else _noise(rng, label.shape)
                Image.fromarray(pixels).save(base / "images" / split / f"{stem}.jpg")
                Image.fromarray(label.astype(np.uint8)).save(base / "annotations" / split /
                                                             f"{stem}.png")
        return base

    return make


@pytest.fixture(scope="session")
def fake_nyu() -> Callable[..., Path]:
    """``fake_nyu(root, depths_mm, leading_slash=True, seed=1, image=None)``:
    ``root/nyu_depth_v2`` in BTS's layout: split files, ``sync/`` (train) and
    ``official_splits/test/`` with ``rgb_<k>.jpg`` and 16-bit ``sync_depth_<k>.png`` (mm) for
    each ``depths_mm[split][k]``; ``image(rng, depth)`` draws the JPEG's pixels (default:
    uniform noise). Train lines start with '/', as in BTS. Returns the ``nyu_depth_v2`` folder."""

    def make(root: Path, depths_mm: dict[str, list[np.ndarray]], leading_slash: bool = True,
             seed: int = 1, image: Callable[..., np.ndarray] | None = None) -> Path:
        base = root / "nyu_depth_v2"
        rng = np.random.default_rng(seed)
        for split, folder in (("train", "sync"), ("test", "official_splits/test")):
            lines = []
            for k, depth in enumerate(depths_mm.get(split, [])):
                scene = base / folder / f"scene_{k % 2}"
                scene.mkdir(parents=True, exist_ok=True)
                pixels = image(rng, depth) if image else _noise(rng, depth.shape)
                Image.fromarray(pixels).save(scene / f"rgb_{k:05d}.jpg")
                Image.fromarray(depth.astype(np.uint16)).save(scene / f"sync_depth_{k:05d}.png")
                slash = "/" if leading_slash and split == "train" else ""
                lines.append(f"{slash}{scene.name}/rgb_{k:05d}.jpg "
                             f"{slash}{scene.name}/sync_depth_{k:05d}.png 518.8579")
            (base / folder).mkdir(parents=True, exist_ok=True)
            (base / f"nyudepthv2_{split}_files_with_gt.txt").write_text("\n".join(lines) + "\n")
        return base

    return make


# --- planted data -----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def planted_blocks() -> Callable[..., np.ndarray]:
    """``planted_blocks(sizes, within=0.9, between=0.2, rng=None, noise=0.01)``: a layer–layer
    similarity with contiguous blocks of ``sizes`` (``within`` inside a block, ``between``
    across), plus uniform noise in ``±noise`` drawn from ``rng`` if given; diagonal 1."""

    def make(sizes: list[int], within: float = 0.9, between: float = 0.2,
             rng: np.random.Generator | None = None, noise: float = 0.01) -> np.ndarray:
        labels = np.repeat(np.arange(len(sizes)), sizes)
        S = np.where(labels[:, None] == labels[None, :], within, between)
        if rng is not None:
            S = S + rng.uniform(-noise, noise, S.shape)
        np.fill_diagonal(S, 1.0)
        return S

    return make


@pytest.fixture(scope="session")
def phase_test_on() -> Callable[..., Any]:
    """``phase_test_on(weight, noise=0.3, seed=0)``: C1's test (no d*) of 300 noisy per-image
    matrices of 12 layers, a depth decay with phases 1–4 | 5–8 | 9–12 of ``weight`` (0: none);
    0.1 holds, 0 with noise 0.05 does not."""
    from raptor.phase_test import phase_test

    def make(weight: float, noise: float = 0.3, seed: int = 0) -> Any:
        idx = np.arange(12)
        S = (1 - weight) * np.exp(-np.abs(idx[:, None] - idx[None, :]) / 4) \
            + weight * (idx[:, None] // 4 == idx[None, :] // 4)
        x = S + np.random.default_rng(seed).normal(0, noise, (300, 12, 12))
        return phase_test((x + x.transpose(0, 2, 1)) / 2, n_boot=50, power_reps=0, seed=seed)

    return make


@pytest.fixture(scope="session")
def random_trajectory() -> Callable[..., torch.Tensor]:
    """``random_trajectory(n, layers, tokens, dim, seed=0)``: standard normal float32 tokens of
    shape ``(n, layers, tokens, dim)`` from a seeded generator."""

    def make(n: int, layers: int, tokens: int, dim: int, seed: int = 0) -> torch.Tensor:
        return torch.randn(n, layers, tokens, dim, generator=torch.Generator().manual_seed(seed))

    return make


# --- kill helpers ---------------------------------------------------------------------------

class Killed(Exception):
    """A run killed mid-way (see :func:`kill_after`)."""


class _DiesAfter(Dataset):
    def __init__(self, inner: Dataset, after: int, error: type[BaseException] | None) -> None:
        self.inner, self.after, self.error, self.reads = inner, after, error, 0

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, i: int) -> Any:
        self.reads += 1
        image, *rest = self.inner[i]
        if self.reads > self.after:
            if self.error is not None:
                raise self.error("killed")
            image = torch.full_like(image, float("nan"))
        return (image, *rest)


@pytest.fixture(scope="session")
def kill_after() -> Callable[..., Dataset]:
    """``kill_after(dataset, after, error=kill_after.Killed)``: ``dataset`` whose item reads
    after the first ``after`` raise ``error`` (a run killed mid-way), or, with ``error=None``,
    return NaN images (a run that diverges). ``.reads`` counts the reads."""

    def make(dataset: Dataset, after: int, error: type[BaseException] | None = Killed
             ) -> Dataset:
        return _DiesAfter(dataset, after, error)

    make.Killed = Killed  # type: ignore[attr-defined]
    return make


# --- chapters at the smoke profile -----------------------------------------------------------

def _run_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """``name`` in this run's temporary folder, one for all of pytest-xdist's workers (each has
    its own folder inside the run's)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def smoke_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``$RAPTOR_CACHE`` for every chapter's smoke models, so each is trained once a run (the
    cache's locks keep parallel workers from training one twice)."""
    return _run_folder(tmp_path_factory, "smoke-cache")


@pytest.fixture(scope="session")
def smoke_result(smoke_cache: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Callable[[str], Any]:
    """``smoke_result(name)``: chapter ``name``'s ``compute(SMOKE)``, computed once a run and
    kept pickled for the other workers."""
    from raptor.book.chapters import science
    from raptor.storage.cache import entry_lock
    from raptor.storage.checkpoint import atomic_write

    folder, results = _run_folder(tmp_path_factory, "smoke-results"), {}

    def get(name: str) -> Any:
        if name not in results:
            path = folder / f"{name}.pickle"
            with entry_lock(path):
                if not path.exists():
                    mod = science(name)
                    with pytest.MonkeyPatch.context() as mp:
                        mp.setenv("RAPTOR_CACHE", str(smoke_cache))
                        data = pickle.dumps(mod.compute.compute(mod.SMOKE))
                    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))
            results[name] = pickle.loads(path.read_bytes())
        return results[name]

    return get
