"""Tests for raptor.probes and raptor.dinov2.dense_probes: metrics and losses against hand computations
and brute force, the ignore masks, and each probe end to end on a tiny fixture in its dataset's
on-disk layout."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from scipy.optimize import minimize
from scipy.special import logsumexp
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from raptor import probes
from raptor.storage.checkpoint import CheckpointError
from raptor.data import get_datasets
from raptor.dinov2 import dense_probes
from raptor.dinov2.dense_data import ADE20k, NYUv2Depth
from raptor.dinov2.dense_probes import (DepthHead, center_crop, center_pad, confusion_matrix,
                                        depth_bins, depth_loss, miou, nearest_bin, padded_size,
                                        rmse, segmentation_loss, silog_loss)
from raptor.model import Raptor
from raptor.probes import ProbeConfig, classification_features, linear_probe, probe_features
from raptor.trajectories import embed, run_layers

FAST = ProbeConfig(lr=3e-2, weight_decay=0.0, epochs=6, batch_size=8, warmup_steps=2,
                   cache_features=True)


ViT = Callable[..., VisionTransformer]


@pytest.fixture(scope="session")
def vit(tiny_vit: ViT) -> ViT:
    """conftest's tiny ViT as the probes' backbone: 2 blocks on 28 px RGB, patch 7."""
    return functools.partial(tiny_vit, img_size=28, patch_size=7, in_chans=3, depth=2)


class Untouchable:
    """A loader that fails if iterated: proves an error was raised before any work."""

    batch_size = 8

    def __iter__(self) -> None:
        raise AssertionError("the probe started reading data before rejecting its input")

    def __len__(self) -> int:
        return 1


def frozen_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def assert_backbone_untouched(model: nn.Module, before: dict[str, torch.Tensor]) -> None:
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)
    assert all(p.grad is None for p in model.parameters())


def colour_image(rng: np.random.Generator, colour: tuple[int, int, int], shape: tuple[int, int]
                 ) -> np.ndarray:
    noise = rng.integers(-20, 21, (*shape, 3))
    return np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)


# --- features --------------------------------------------------------------------------------

@pytest.mark.parametrize("reg_tokens", [0, 2])
def test_classification_features_match_timm_forward_features(reg_tokens: int, vit: ViT) -> None:
    model = vit(reg_tokens=reg_tokens)
    x = torch.randn(3, 3, 28, 28)
    normed = model.forward_features(x)  # timm applies the final norm
    expected = torch.cat([normed[:, 0], normed[:, 1 + reg_tokens:].mean(1)], dim=1)
    torch.testing.assert_close(classification_features(model, x), expected)


def test_features_of_a_raptor_come_from_its_own_last_layer(vit: ViT) -> None:
    teacher = vit(reg_tokens=2, dynamic_img_size=True)
    raptor = Raptor(teacher, (1, 1))
    with torch.no_grad():  # perturb the student so it differs from its teacher
        for p in raptor.blocks.parameters():
            p.add_(0.05 * torch.randn_like(p))
    x = torch.randn(2, 3, 28, 28)
    tokens = teacher.norm(raptor.forward_from(raptor.embed(x))[:, -1])
    expected = torch.cat([tokens[:, 0], tokens[:, 3:].mean(1)], dim=1)
    torch.testing.assert_close(classification_features(raptor, x), expected)
    assert not torch.allclose(classification_features(teacher, x), expected)
    cls, grid = dense_probes.depth_features(raptor, torch.randn(2, 3, 20, 30))  # padded to 21×35
    assert cls.shape == (2, 32) and grid.shape == (2, 32, 3, 5)


def test_center_pad_and_crop() -> None:
    assert padded_size((480, 640), (14, 14)) == (490, 644)
    x = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3) + 1
    padded = center_pad(x, (8, 6))
    assert padded.shape == (2, 8, 6)
    torch.testing.assert_close(padded[:, 1:6, 1:4], x)  # 3 rows: 1 top, 2 bottom
    assert float(padded.abs().sum()) == float(x.abs().sum())  # the rest is 0
    torch.testing.assert_close(center_crop(padded, (5, 3)), x)
    with pytest.raises(ValueError, match="smaller than the input"):
        center_pad(x, (4, 6))
    with pytest.raises(ValueError, match="larger than the input"):
        center_crop(x, (6, 3))


def test_depth_head_conv_before_upsampling_equals_the_papers_order() -> None:
    torch.manual_seed(1)
    head = DepthHead(dim=6, n_bins=16, min_depth=0.5, max_depth=4.0)
    cls, grid = torch.randn(2, 6), torch.randn(2, 6, 3, 4)
    with torch.no_grad():
        depth, logits = head(cls, grid, (21, 28))
        x = torch.cat([grid, cls[:, :, None, None].expand_as(grid)], 1)
        x = F.interpolate(x, scale_factor=4, mode="bilinear", align_corners=False)
        ref_logits = head.conv(x)  # the paper's order: upsample the 2D channels, then conv
    ref = (ref_logits.softmax(1) * torch.linspace(0.5, 4.0, 16)[:, None, None]).sum(1, keepdim=True)
    ref = F.interpolate(ref, size=(21, 28), mode="bilinear", align_corners=False)[:, 0]
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(depth, ref, rtol=1e-5, atol=1e-5)
    assert float(depth.min()) >= 0.5 and float(depth.max()) <= 4.0


# --- segmentation metric and loss ------------------------------------------------------------

def test_miou_by_hand() -> None:
    # target: 0 0 1 1 [ignored] 0 ; pred: 0 1 1 1 2 2 ; 4 classes
    target = torch.tensor([0, 0, 1, 1, 255, 0])
    pred = torch.tensor([0, 1, 1, 1, 2, 2])
    conf = confusion_matrix(pred, target, 4)
    assert conf.tolist() == [[1, 1, 1, 0], [0, 2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    value, per_class = miou(conf)
    # IoU0 = 1/(1+0+2), IoU1 = 2/(2+1+0), IoU2 = 0/(0+1+0), class 3 absent from both: excluded
    assert per_class[:3].tolist() == pytest.approx([1 / 3, 2 / 3, 0.0])
    assert math.isnan(per_class[3])
    assert value == pytest.approx(1 / 3)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), min_size=1,
                                   max_size=60))
def test_confusion_matrix_matches_brute_force(num_classes: int,
                                              pairs: list[tuple[int, int]]) -> None:
    pred = torch.tensor([p % num_classes for p, _ in pairs])
    target = torch.tensor([255 if t == 5 else t % num_classes for _, t in pairs])
    expected = np.zeros((num_classes, num_classes), dtype=np.int64)
    for p, t in zip(pred.tolist(), target.tolist()):
        if t != 255:
            expected[t, p] += 1
    np.testing.assert_array_equal(confusion_matrix(pred, target, num_classes).numpy(), expected)


def test_ignored_pixels_change_neither_loss_nor_miou() -> None:
    torch.manual_seed(2)
    logits, labels = torch.randn(2, 3, 5, 5), torch.randint(0, 3, (2, 5, 5))
    labels[:, :2] = 255
    other = logits.clone()
    other[:, :, :2] = torch.randn(2, 3, 2, 5) * 10
    assert segmentation_loss(other, labels) == segmentation_loss(logits, labels)
    conf = confusion_matrix(logits.argmax(1), labels, 3)
    torch.testing.assert_close(confusion_matrix(other.argmax(1), labels, 3), conf)
    # and the loss is the mean cross-entropy over the kept pixels only
    kept = labels != 255
    manual = -logits.log_softmax(1).gather(1, labels.clamp_max(2)[:, None])[:, 0][kept].mean()
    torch.testing.assert_close(segmentation_loss(logits, labels), manual)


def test_confusion_and_miou_bad_input() -> None:
    with pytest.raises(ValueError, match="differ"):
        confusion_matrix(torch.zeros(3), torch.zeros(4), 2)
    with pytest.raises(ValueError, match="target values must lie in"):
        confusion_matrix(torch.zeros(3), torch.tensor([0, 2, 1]), 2)
    with pytest.raises(ValueError, match="pred values must lie in"):
        confusion_matrix(torch.tensor([0, 5, 1]), torch.zeros(3), 2)
    with pytest.raises(ValueError, match="empty"):
        miou(torch.zeros(3, 3))


# --- depth: bins, SILog, RMSE ---------------------------------------------------------------

def test_depth_bins() -> None:
    bins = depth_bins()
    assert bins.shape == (256,) and float(bins[0]) == pytest.approx(0.001)
    assert float(bins[-1]) == pytest.approx(10.0)
    torch.testing.assert_close(bins.diff(), torch.full((255,), (10 - 0.001) / 255))
    with pytest.raises(ValueError, match="n_bins"):
        depth_bins(1)
    with pytest.raises(ValueError, match="min_depth"):
        depth_bins(8, 2.0, 1.0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 12.0), min_size=1, max_size=50), st.integers(2, 40))
def test_nearest_bin_is_the_argmin(depths: list[float], n_bins: int) -> None:
    centres = depth_bins(n_bins, 0.001, 10.0).double()
    d = torch.tensor(depths, dtype=torch.float64)
    dist = (d[:, None] - centres[None]).abs()
    got = nearest_bin(d, centres)
    torch.testing.assert_close(dist.gather(1, got[:, None])[:, 0], dist.min(1).values)


def test_silog_by_hand() -> None:
    e = math.e
    pred = torch.tensor([[1.0, e, e * e, 5.0]])
    target = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # last pixel invalid
    valid = target > 0
    # g = 0, 1, 2: mean g² = 5/3, mean g = 1
    assert float(silog_loss(pred, target, valid)) == pytest.approx(math.sqrt(5 / 3 - 0.85))
    assert float(silog_loss(pred, target, valid, lam=0.5)) == pytest.approx(math.sqrt(5 / 3 - 0.5))
    # scale invariance at λ = 1: a global scale of the prediction costs nothing
    assert float(silog_loss(pred * 3, pred, valid, lam=1.0)) == pytest.approx(0.0, abs=1e-5)
    none = silog_loss(pred.requires_grad_(), target, torch.zeros_like(valid))
    assert float(none.detach()) == 0.0
    none.backward()  # a batch without valid pixels still trains


def test_rmse_by_hand_with_invalid_pixels() -> None:
    target = torch.tensor([[[1.0, 2.0, 0.0]], [[0.0, 11.0, 0.0005]]])
    pred = torch.tensor([[[2.0, 4.0, 9.0]], [[1.0, 1.0, 1.0]]])
    got = rmse(pred, target)
    assert float(got[0]) == pytest.approx(math.sqrt((1 + 4) / 2))
    assert math.isnan(got[1])  # no depth in [0.001, 10]


def test_rmse_uses_the_eigen_crop_on_480x640() -> None:
    target = torch.full((1, 480, 640), 3.0)
    pred = target.clone()
    pred[:, :45] += 5.0  # outside the crop: rows 0..44
    pred[:, :, 601:] += 5.0  # columns 601..639
    assert float(rmse(pred, target)[0]) == 0.0
    pred[:, 45, 41] += 2.0  # inside: one pixel of 426 × 560
    assert float(rmse(pred, target)[0]) == pytest.approx(math.sqrt(4 / (426 * 560)), rel=1e-5)
    with pytest.raises(ValueError, match=r"\(N, H, W\)"):
        rmse(pred[0], target[0])


def test_invalid_depth_pixels_change_neither_loss_nor_rmse() -> None:
    torch.manual_seed(3)
    bins = depth_bins(16, 0.001, 10.0)
    target = torch.rand(2, 8, 8) * 9 + 0.5
    target[:, :, :4] = 0.0  # left half invalid: on the 4×4 logit grid, columns 0 and 1
    pred = torch.rand(2, 8, 8) * 9 + 0.5
    logits = torch.randn(2, 16, 4, 4)
    loss = depth_loss(pred, logits, target, bins)
    err = rmse(pred, target)
    target2, pred2, logits2 = target.clone(), pred.clone(), logits.clone()
    target2[:, :, :4] = torch.tensor([0.0, 20.0, -1.0, 0.0005])  # other invalid values
    pred2[:, :, :4] = 7.0
    logits2[..., :2] = torch.randn(2, 16, 4, 2) * 5
    torch.testing.assert_close(depth_loss(pred2, logits2, target2, bins), loss)
    torch.testing.assert_close(rmse(pred2, target2), err)
    # and the loss is 10·SILog + CE on the valid logit cells, target bin = nearest centre
    small = target[:, 1::2, 1::2]
    ce = F.cross_entropy(logits, nearest_bin(small, bins), reduction="none")[:, :, 2:].mean()
    manual = 10 * silog_loss(pred, target, target > 0) + ce
    torch.testing.assert_close(loss, manual)


# --- ImageNet probe, end to end ---------------------------------------------------------------

@pytest.mark.parametrize("cache", [True, False])
def test_linear_probe_end_to_end(tmp_path: Path, cache: bool,
                                 fake_imagenet: Callable[..., Path], vit: ViT) -> None:
    colours = {"n01440764": (200, 40, 40), "n01443537": (40, 40, 200)}  # red, blue
    fake_imagenet(tmp_path, {"train": 8, "val": 4}, tuple(colours), (32, 32), seed=4,
                  image=lambda rng, wnid, shape: colour_image(rng, colours[wnid], shape))
    cfg = ProbeConfig(**{**FAST.__dict__, "cache_features": cache})
    train_set, val_set = get_datasets("imagenet", root=tmp_path, img_size=28)
    train = DataLoader(train_set, batch_size=8, shuffle=True)
    val = DataLoader(val_set, batch_size=8)
    model = vit(reg_tokens=2)
    before = frozen_state(model)
    result = probes.train_linear_probe(model, train, val, cfg, num_classes=2)
    assert_backbone_untouched(model, before)
    assert result.metric == "top1" and result.higher_is_better
    assert len(result.history) == cfg.epochs
    values = [h["top1"] for h in result.history]
    assert result.best == max(values) and result.last == values[-1]
    assert values[result.best_epoch] == result.best
    assert result.best == 1.0  # red vs blue is linearly separable
    with torch.no_grad():  # the reported last value is the head's accuracy on val
        hits = [(result.head(classification_features(model, x)).argmax(1) == y).float()
                for x, y in val]
    assert float(torch.cat(hits).mean()) == result.last


def test_init_linear_head_from_dinov2_style_file(tmp_path: Path, vit: ViT) -> None:
    torch.manual_seed(5)
    released = nn.Linear(64, 3)
    torch.save(released.state_dict(), tmp_path / "dinov2_vitb14_reg4_linear_head.pth")
    probe = nn.Linear(64, 3)
    probes.init_linear_head(probe, tmp_path / "dinov2_vitb14_reg4_linear_head.pth")
    torch.testing.assert_close(probe.weight, released.weight)
    torch.testing.assert_close(probe.bias, released.bias)
    # train_linear_probe starts from it: with lr ≈ 0 the head stays the released one
    x, y = torch.randn(8, 3, 28, 28), torch.arange(8) % 3
    cfg = ProbeConfig(lr=1e-12, min_lr=0.0, epochs=1, batch_size=8, cache_features=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    result = probes.train_linear_probe(vit(), loader, loader, cfg, num_classes=3,
                                       init_head=tmp_path / "dinov2_vitb14_reg4_linear_head.pth")
    torch.testing.assert_close(result.head.weight, released.weight)
    torch.save({"weight": torch.zeros(3, 32), "bias": torch.zeros(3)}, tmp_path / "bad.pth")
    with pytest.raises(CheckpointError, match="expected a linear head"):
        probes.init_linear_head(probe, tmp_path / "bad.pth")
    torch.save({**released.state_dict(), "extra": torch.zeros(1)}, tmp_path / "extra.pth")
    with pytest.raises(CheckpointError, match="extra"):
        probes.init_linear_head(probe, tmp_path / "extra.pth")


# --- ADE20k probe, end to end -----------------------------------------------------------------

def halves(k: int) -> np.ndarray:
    """Raw ADE labels of image ``k``: a half of class 1, a half of class 2 (swapped every other
    image), the top row "other" (raw 0, ignored)."""
    left = k % 2
    raw = np.where(np.arange(28)[None, :] < 14, 1 + left, 2 - left).repeat(28, 0)
    raw[0] = 0
    return raw


def red_blue(rng: np.random.Generator, raw: np.ndarray) -> np.ndarray:
    """Red where the raw class is 1, blue elsewhere."""
    return np.where((raw == 1)[..., None], colour_image(rng, (200, 40, 40), raw.shape),
                    colour_image(rng, (40, 40, 200), raw.shape))


def test_segmentation_probe_end_to_end(tmp_path: Path, fake_ade: Callable[..., Path],
                                       vit: ViT) -> None:
    labels = {split: {f"ADE_{k:08d}": halves(k) for k in range(n)}
              for split, n in (("training", 8), ("validation", 4))}
    base = fake_ade(tmp_path, labels, seed=6, image=red_blue)
    train = DataLoader(ADE20k(base, "training", img_size=28), batch_size=8, shuffle=True)
    val = DataLoader(ADE20k(base, "validation", img_size=28), batch_size=8)
    model = vit()
    before = frozen_state(model)
    cfg = ProbeConfig(**{**FAST.__dict__, "lr": 1e-1, "epochs": 10})
    result = dense_probes.train_segmentation_probe(model, train, val, cfg, num_classes=3)
    assert_backbone_untouched(model, before)
    assert result.metric == "miou" and len(result.history) == 10
    values = [h["miou"] for h in result.history]
    assert result.best == max(values) and result.last == values[-1]
    # classes 0 (red) and 1 (blue) are learnable from colour; class 2 never occurs (excluded)
    assert result.best > 0.95


# --- NYUv2 probe, end to end ------------------------------------------------------------------

def near_and_far(k: int) -> np.ndarray:
    """Depth (mm) of image ``k``, 24×30 (padded to 28×35): the upper half 2 m away, the lower
    6 m (flipped every other image), with a column of missing depth (0)."""
    top = np.arange(24)[:, None] < 12
    depth = np.where(top if k % 2 else ~top, 2000, 6000).repeat(30, 1)
    depth[:, 0] = 0
    return depth


def brightness(rng: np.random.Generator, depth: np.ndarray) -> np.ndarray:
    """Bright rows 2 m away, dark rows 6 m away."""
    near = (depth.max(axis=1) == 2000)[:, None, None]
    return np.where(near, colour_image(rng, (220, 220, 220), depth.shape),
                    colour_image(rng, (30, 30, 30), depth.shape))


def test_depth_probe_end_to_end(tmp_path: Path, fake_nyu: Callable[..., Path], vit: ViT) -> None:
    depths = {"train": [near_and_far(k) for k in range(8)],
              "test": [near_and_far(k) for k in range(4)]}
    base = fake_nyu(tmp_path, depths, seed=7, image=brightness)
    cfg = ProbeConfig(**{**FAST.__dict__, "lr": 5e-2, "epochs": 8, "cache_features": False})
    train = DataLoader(NYUv2Depth(base, "train"), batch_size=8, shuffle=True)
    val = DataLoader(NYUv2Depth(base, "test"), batch_size=8)
    model = vit(dynamic_img_size=True)
    before = frozen_state(model)
    result = dense_probes.train_depth_probe(model, train, val, cfg, n_bins=32)
    assert_backbone_untouched(model, before)
    assert result.metric == "rmse" and not result.higher_is_better
    values = [h["rmse"] for h in result.history]
    assert result.best == min(values) and result.last == values[-1]
    # predicting the mean depth everywhere scores an RMSE of 2 m; the probe reads brightness
    assert result.best < 0.5
    with torch.no_grad():  # the reported last value, recomputed from the head
        errors = []
        for x, d in val:
            cls, grid = dense_probes.depth_features(model, x)
            pred, _ = dense_probes.predict_depth(result.head, cls, grid, (7, 7), (24, 30))
            errors.append(rmse(center_crop(pred, (24, 30)), d))
    assert float(torch.cat(errors).nanmean()) == pytest.approx(result.last, rel=1e-5)


def test_amp_matches_float32_closely(vit: ViT) -> None:
    torch.manual_seed(8)
    x, depth = torch.randn(8, 3, 20, 30), torch.rand(8, 20, 30) * 5 + 0.5
    loader = DataLoader(TensorDataset(x, depth), batch_size=4)
    model = vit(dynamic_img_size=True)
    runs = [dense_probes.train_depth_probe(model, loader, loader, ProbeConfig(
        lr=1e-2, epochs=2, batch_size=4, cache_features=True, amp=amp), n_bins=16)
        for amp in (False, True)]
    assert runs[1].last == pytest.approx(runs[0].last, rel=0.05)


# --- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"lr": 0.0}, "lr"), ({"weight_decay": -1.0}, "weight_decay"), ({"epochs": 0}, "epochs"),
    ({"batch_size": 1.5}, "batch_size"), ({"warmup_steps": -1}, "warmup_steps"),
    ({"min_lr": 1.0}, "min_lr"), ({"grad_clip": 0.0}, "grad_clip"), ({"seed": True}, "seed")])
def test_probe_config_rejects_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ProbeConfig(**kwargs)


def test_probes_needing_cls_reject_a_model_without_one_before_work(vit: ViT) -> None:
    model = vit(class_token=False, global_pool="avg")
    for train in (probes.train_linear_probe, dense_probes.train_depth_probe):
        with pytest.raises(ValueError, match="needs a cls token"):
            train(model, Untouchable(), Untouchable(), FAST)
    # the segmentation probe only needs patches: it runs on that model
    x, y = torch.randn(8, 3, 28, 28), torch.randint(0, 2, (8, 28, 28))
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    result = dense_probes.train_segmentation_probe(model, loader, loader,
                                             ProbeConfig(epochs=1, batch_size=8), num_classes=2)
    assert 0.0 <= result.best <= 1.0


def test_probes_reject_bad_arguments_before_work(vit: ViT) -> None:
    model = vit()
    for train in (probes.train_linear_probe, dense_probes.train_segmentation_probe):
        with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
            train(model, Untouchable(), Untouchable(), FAST, num_classes=1)
    with pytest.raises(TypeError, match="timm VisionTransformer or a Raptor"):
        dense_probes.train_segmentation_probe(nn.Linear(2, 2), Untouchable(), Untouchable(), FAST)
    uncached = ProbeConfig(batch_size=16)
    with pytest.raises(ValueError, match="train_loader.batch_size=8 differs"):
        probes.train_linear_probe(model, Untouchable(), Untouchable(), uncached)


def _loader(x: torch.Tensor, y: torch.Tensor) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=4)


@pytest.mark.parametrize("train, x, y, match", [
    (probes.train_linear_probe, torch.randn(4, 3, 28, 28), torch.zeros(4, 1, dtype=torch.long),
     r"labels must have shape \(N,\)"),
    (probes.train_linear_probe, torch.randn(4, 3, 28, 28), torch.full((4,), 2), r"\[0, 2\)"),
    (dense_probes.train_segmentation_probe, torch.randn(4, 3, 28, 28),
     torch.zeros(4, 784, dtype=torch.long), r"labels must have shape \(N, H, W\)"),
    (dense_probes.train_segmentation_probe, torch.randn(4, 3, 28, 28),
     torch.full((4, 28, 28), 7), r"\[0, 2\) or 255"),
    (dense_probes.train_segmentation_probe, torch.randn(4, 3, 30, 28),
     torch.zeros(4, 30, 28, dtype=torch.long), "multiple of the patch size"),
    (dense_probes.train_segmentation_probe, torch.randn(4, 3, 35, 35),
     torch.zeros(4, 35, 35, dtype=torch.long), "dynamic_img_size=True"),
    (dense_probes.train_depth_probe, torch.randn(4, 3, 28, 28), torch.ones(4, 27, 28),
     "matching the images"),
])
def test_probes_reject_bad_batches(train: object, x: torch.Tensor, y: torch.Tensor,
                                   match: str, vit: ViT) -> None:
    kwargs = {} if train is dense_probes.train_depth_probe else {"num_classes": 2}
    cfg = ProbeConfig(epochs=1, batch_size=4)
    with pytest.raises(ValueError, match=match):
        train(vit(), _loader(x, y), _loader(x, y), cfg, **kwargs)


def test_probe_train_transform() -> None:
    image = Image.fromarray(np.zeros((40, 50, 3), np.uint8))
    assert probes.probe_train_transform(28)(image).shape == (3, 28, 28)


def test_probe_features_are_the_book_features_bit_for_bit(vit: ViT) -> None:
    """The book's probe inputs do not change: equal to the formula of the former
    ``raptor.metrics.probe_features`` (final norm of the last layer, cls ‖ mean of patches)."""
    model = vit(reg_tokens=2)
    g = torch.Generator().manual_seed(2)
    data = TensorDataset(torch.randn(10, 3, 28, 28, generator=g),
                         torch.randint(0, 3, (10,), generator=g))
    feats, labels = probe_features(model, DataLoader(data, batch_size=4))
    old = []
    for x, _ in DataLoader(data, batch_size=4):
        tokens = model.norm(run_layers(model, embed(model, x))[:, -1])
        old.append(torch.cat([tokens[:, 0:1].flatten(1), tokens[:, 3:].mean(1)], dim=1))
    assert torch.equal(feats, torch.cat(old))
    assert feats.shape == (10, 64) and torch.equal(labels, data.tensors[1])


def test_linear_probe_reaches_the_scipy_optimum() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    y = (x @ rng.normal(size=(4, 3))).argmax(1)
    y[:5] = (y[:5] + 1) % 3  # not separable: a finite optimum
    l2 = 0.05
    out = linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x[:20]),
                       torch.tensor(y[:20]), l2=l2)
    z = (x - x.mean(0)) / x.std(0)

    def objective(theta: np.ndarray) -> float:
        w, b = theta[:12].reshape(3, 4), theta[12:]
        logits = z @ w.T + b
        return float((logsumexp(logits, axis=1) - logits[np.arange(60), y]).mean()
                     + 0.5 * l2 * (w ** 2).sum())

    best = minimize(objective, np.zeros(15), method="BFGS", options={"gtol": 1e-10})
    assert out["objective"] == pytest.approx(best.fun, rel=1e-7)
    assert out["train_acc"] >= 0.8 and 0 <= out["val_acc"] <= 1
    again = linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x[:20]),
                         torch.tensor(y[:20]), l2=l2)
    assert again == out
    with pytest.raises(ValueError, match="same F"):
        linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x[:, :2]), torch.tensor(y))
    with pytest.raises(ValueError, match="l2 >= 0"):
        linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x), torch.tensor(y), l2=-1)
