"""Dense frozen-backbone probes of §5 (Table 1): ADE20k segmentation (mIoU), NYUv2 depth (RMSE).

Heads on the final patch grid, trained by :func:`raptor.probes.fit_probe` with the recipes of
App. A.4 (:data:`~raptor.probes.ADE20K_PROBE`, :data:`~raptor.probes.NYUV2_PROBE`):

* **ADE20k**: a 1×1 conv ``D → 150`` on the patch grid, bilinear upsampling to the label size,
  cross-entropy ignoring label 255, mIoU.
* **NYUv2**: input centre-padded to a multiple of the patch size; cls concatenated to every patch
  token (2D channels); ×4 bilinear upsampling; 1×1 conv to 256 depth bins with centres
  ``linspace(0.001, 10)``; depth = softmax-weighted bin centres, upsampled to the input size;
  loss 10·SILog(λ = 0.85) + cross-entropy over bins; RMSE on the Eigen crop.

[ours] where the paper is silent: both reuse the ImageNet probe's warmup, final learning rate and
clipping; ``amp`` means bfloat16 autocast (losses in float32).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader

from raptor import paper
from raptor.dinov2.dense_data import IGNORE_INDEX
from raptor.probes import (ADE20K_PROBE, NYUV2_PROBE, Features, ProbeConfig, ProbeResult,
                           ProbeTask, check_batch, check_num_classes, final_tokens, fit_probe,
                           patch_size, require_cls)
from raptor.trajectories import TokenGroups, trajectory_model

EIGEN_CROP = tuple(slice(*r) for r in paper.EIGEN_CROP)  # rows, columns of a 480×640 image
NYU_SIZE = paper.NYUV2_SIZE
SILOG_LAMBDA = paper.SILOG_LAMBDA
SILOG_WEIGHT = paper.SILOG_WEIGHT
MIN_DEPTH, MAX_DEPTH = paper.NYUV2_DEPTH_RANGE


def _hw(x: Tensor) -> tuple[int, int]:
    """The spatial size (last two dims) of an image batch or map."""
    return int(x.shape[-2]), int(x.shape[-1])


def center_pad(x: Tensor, size: tuple[int, int], value: float = 0.0) -> Tensor:
    """Pad the last two dims of ``x`` to ``size``, centred (the extra pixel goes bottom/right)."""
    dh, dw = size[0] - x.shape[-2], size[1] - x.shape[-1]
    if dh < 0 or dw < 0:
        raise ValueError(f"size {size} is smaller than the input {_hw(x)}")
    return F.pad(x, (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2), value=value)


def center_crop(x: Tensor, size: tuple[int, int]) -> Tensor:
    """The inverse of :func:`center_pad`: the centred ``size`` window of the last two dims."""
    top, left = (x.shape[-2] - size[0]) // 2, (x.shape[-1] - size[1]) // 2
    if top < 0 or left < 0:
        raise ValueError(f"size {size} is larger than the input {_hw(x)}")
    return x[..., top: top + size[0], left: left + size[1]]


def padded_size(hw: tuple[int, int], multiple: tuple[int, int]) -> tuple[int, int]:
    """``hw`` rounded up to multiples of ``multiple`` (480×640 → 490×644 for 14-px patches)."""
    return (math.ceil(hw[0] / multiple[0]) * multiple[0],
            math.ceil(hw[1] / multiple[1]) * multiple[1])


def _patch_grid(tokens: Tensor, groups: TokenGroups, hw: tuple[int, int],
                p: tuple[int, int]) -> Tensor:
    """Patch tokens as a ``(N, D, H/p, W/p)`` map."""
    h, w = hw[0] // p[0], hw[1] // p[1]
    patches = tokens[:, groups.patches]
    if patches.shape[1] != h * w:
        raise ValueError(f"{patches.shape[1]} patch tokens do not form the {h}×{w} grid of a "
                         f"{hw} image")
    return patches.transpose(1, 2).reshape(tokens.shape[0], -1, h, w)


class SegmentationHead(nn.Module):
    """ADE20k probe: a 1×1 conv ``D → C`` on the patch grid, bilinearly upsampled."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(dim, num_classes, kernel_size=1)

    def forward(self, grid: Tensor, size: tuple[int, int]) -> Tensor:
        """Logits ``(N, C, *size)`` from a ``(N, D, h, w)`` patch grid."""
        return F.interpolate(self.conv(grid), size=size, mode="bilinear", align_corners=False)


def depth_bins(n_bins: int = paper.NYUV2_BINS, min_depth: float = MIN_DEPTH,
               max_depth: float = MAX_DEPTH) -> Tensor:
    """Bin centres ``linspace(min_depth, max_depth, n_bins)`` of the depth probe."""
    if n_bins < 2 or not 0 < min_depth < max_depth:
        raise ValueError(f"need n_bins >= 2 and 0 < min_depth < max_depth; got n_bins={n_bins}, "
                         f"min_depth={min_depth}, max_depth={max_depth}")
    return torch.linspace(min_depth, max_depth, n_bins)


def nearest_bin(depth: Tensor, centres: Tensor) -> Tensor:
    """Index of the bin centre nearest to each depth (ties go to the upper bin)."""
    return torch.bucketize(depth.contiguous(), (centres[1:] + centres[:-1]) / 2, right=True)


class DepthHead(nn.Module):
    """NYUv2 probe: ``[patch ‖ cls]`` (2D channels) → ×4 bilinear → 1×1 conv to bins →
    softmax-weighted bin centres → bilinear to the (padded) input size.

    The conv runs *before* the ×4 upsampling: a 1×1 conv acts per pixel and bilinear
    upsampling per channel with weights summing to 1, so the two commute exactly, and the
    upsampled map has ``n_bins`` channels instead of 2D.
    """

    def __init__(self, dim: int, n_bins: int = paper.NYUV2_BINS, min_depth: float = MIN_DEPTH,
                 max_depth: float = MAX_DEPTH, upsample: int = 4) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2 * dim, n_bins, kernel_size=1)
        self.register_buffer("bins", depth_bins(n_bins, min_depth, max_depth))
        self.upsample = upsample

    def forward(self, cls: Tensor, grid: Tensor, size: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """Depth ``(N, *size)`` and bin logits ``(N, n_bins, 4h, 4w)``."""
        x = torch.cat([grid, cls[:, :, None, None].expand_as(grid)], dim=1)
        logits = F.interpolate(self.conv(x), scale_factor=self.upsample, mode="bilinear",
                               align_corners=False)
        depth = (logits.float().softmax(1) * self.bins[:, None, None]).sum(1, keepdim=True)
        return F.interpolate(depth, size=size, mode="bilinear", align_corners=False)[:, 0], logits


def confusion_matrix(pred: Tensor, target: Tensor, num_classes: int,
                     ignore_index: int = IGNORE_INDEX) -> Tensor:
    """``(C, C)`` int64 counts, rows = target class, columns = predicted class; pixels whose
    target is ``ignore_index`` are left out."""
    if pred.shape != target.shape:
        raise ValueError(f"pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    keep = target != ignore_index
    t, p = target[keep].long(), pred[keep].long()
    for name, v in (("target", t), ("pred", p)):
        if v.numel() and (v.min() < 0 or v.max() >= num_classes):
            raise ValueError(f"{name} values must lie in [0, {num_classes}) (or be "
                             f"ignore_index={ignore_index} in target); got {v.min()}..{v.max()}")
    return torch.bincount(t * num_classes + p, minlength=num_classes ** 2).reshape(
        num_classes, num_classes)


def miou(conf: Tensor) -> tuple[float, Tensor]:
    """Mean IoU and per-class IoU ``TP / (TP + FP + FN)`` from a confusion matrix.

    Convention (mmsegmentation's): a class absent from both target and prediction (union 0)
    has IoU NaN and is excluded from the mean; a class predicted but never present scores 0.
    """
    conf = conf.double()
    tp = conf.diagonal()
    union = conf.sum(0) + conf.sum(1) - tp
    iou = torch.where(union > 0, tp / union.clamp_min(1), torch.full_like(tp, math.nan))
    if not (union > 0).any():
        raise ValueError("the confusion matrix is empty: no pixel was counted")
    return float(iou.nanmean()), iou


def segmentation_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Pixel cross-entropy, labels 255 ignored (mean over the other pixels)."""
    return F.cross_entropy(logits.float(), labels.long(), ignore_index=IGNORE_INDEX)


def valid_depth(target: Tensor, min_depth: float = MIN_DEPTH,
                max_depth: float = MAX_DEPTH) -> Tensor:
    """Pixels with a usable ground truth: depth in ``[min_depth, max_depth]``."""
    return (target >= min_depth) & (target <= max_depth)


def silog_loss(pred: Tensor, target: Tensor, valid: Tensor, lam: float = SILOG_LAMBDA) -> Tensor:
    """Scale-invariant log loss ``sqrt(mean(g²) − λ·mean(g)²)``, ``g = log(pred/target)``,
    over the valid pixels of the whole batch (Eigen et al. 2014; AdaBins, Bhat et al. 2021,
    with λ = 0.85). Without the factor 10 of the probe's loss.

    AdaBins writes it ``sqrt(var(g) + (1 − λ)·mean(g)²)`` with torch's unbiased ``var``; that
    differs from this form by a factor ``n / (n − 1)`` on the variance term (negligible over an
    image's pixels). Zero (still differentiable) when no pixel is valid.
    """
    if not valid.any():
        return pred.sum() * 0.0
    g = torch.log(pred[valid].float()) - torch.log(target[valid].float())
    return torch.sqrt((g.square().mean() - lam * g.mean().square()).clamp_min(1e-12))


def depth_loss(pred: Tensor, logits: Tensor, target: Tensor, bins: Tensor, *,
               min_depth: float = MIN_DEPTH, max_depth: float = MAX_DEPTH) -> Tensor:
    """The NYUv2 probe's loss: ``10·SILog(pred, target) + CE(logits, nearest bin of target)``.

    ``pred`` and ``target`` are ``(N, H, W)`` (the padded frame); the cross-entropy runs on the
    logits' grid against the target resampled to it ("nearest-exact") [ours: the paper does not
    say at which resolution; full resolution would need a 256-channel full-size map]. Invalid
    pixels (depth outside [min_depth, max_depth], padding included) are masked out of both
    terms. The authors' code instead trains them as bin 255; we do not.
    """
    valid = valid_depth(target, min_depth, max_depth)
    small = F.interpolate(target[:, None].float(), size=logits.shape[-2:],
                          mode="nearest-exact")[:, 0]
    small_valid = valid_depth(small, min_depth, max_depth)
    ce = F.cross_entropy(logits.float(), nearest_bin(small, bins), reduction="none")
    ce = ce[small_valid].mean() if small_valid.any() else logits.sum() * 0.0
    return SILOG_WEIGHT * silog_loss(pred, target, valid) + ce


def rmse(pred: Tensor, target: Tensor, min_depth: float = MIN_DEPTH,
         max_depth: float = MAX_DEPTH) -> Tensor:
    """Per-image RMSE (metres) over valid pixels, ``(N,)``; NaN for an image with none.

    On 480×640 images only the Eigen crop ``[45:471, 41:601]`` counts; other sizes (e.g. test
    fixtures) are scored on the whole image. Average over images for the dataset score.
    """
    if pred.shape != target.shape or pred.ndim != 3:
        raise ValueError(f"pred and target must both be (N, H, W); got {tuple(pred.shape)} and "
                         f"{tuple(target.shape)}")
    valid = valid_depth(target, min_depth, max_depth)
    if _hw(target) == NYU_SIZE:
        crop = torch.zeros_like(valid)
        crop[:, EIGEN_CROP[0], EIGEN_CROP[1]] = True
        valid &= crop
    err = torch.where(valid, pred.float() - target.float(), 0.0).square().sum((1, 2))
    return (err / valid.sum((1, 2))).sqrt()  # 0/0 → NaN for images without valid pixels


def train_segmentation_probe(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader,
                             cfg: ProbeConfig = ADE20K_PROBE, *, num_classes: int = 150,
                             device: str | torch.device = "cpu") -> ProbeResult:
    """ADE20k probe (§5, Table 1): :class:`SegmentationHead` on the final patch grid; metric
    ``miou`` in [0, 1] over the whole validation set (:func:`miou`). Loaders yield
    ``(images (N, 3, H, W), labels int (N, h, w))`` with labels in [0, C) or 255 (ignored),
    e.g. :class:`raptor.dinov2.dense_data.ADE20k`; ``H, W`` must be multiples of the patch size."""
    check_num_classes(num_classes)
    p = patch_size(model)

    def extract(images: Tensor) -> Features:
        tokens, groups = final_tokens(model, images)
        return (_patch_grid(tokens, groups, _hw(images), p),)

    def check(images: Tensor, labels: Tensor) -> None:
        check_batch(images, labels, 3, "labels")
        kept = labels[labels != IGNORE_INDEX]
        if labels.is_floating_point() or (kept.numel() and (kept.min() < 0
                                                            or kept.max() >= num_classes)):
            raise ValueError(f"labels must be integers in [0, {num_classes}) or "
                             f"{IGNORE_INDEX} (ignored); got {labels.dtype} "
                             f"{labels.min()}..{labels.max()}")

    def evaluate(h: nn.Module, batches: Iterable[tuple[Features, Tensor]]) -> float:
        conf = torch.zeros(num_classes, num_classes, dtype=torch.long)
        for (grid,), labels in batches:
            pred = h(grid, _hw(labels)).argmax(1)
            conf += confusion_matrix(pred, labels, num_classes).cpu()
        return miou(conf)[0]

    task = ProbeTask(extract=extract, check=check,
                     loss=lambda h, f, y: segmentation_loss(h(f[0], _hw(y)), y),
                     evaluate=evaluate, metric="miou", higher_is_better=True)
    dim = int(trajectory_model(model).teacher.embed_dim)
    return fit_probe(model, lambda: SegmentationHead(dim, num_classes), task, train_loader,
                     val_loader, cfg, device)


def depth_features(model: nn.Module, images: Tensor) -> tuple[Tensor, Tensor]:
    """The depth probe's inputs: ``images`` centre-padded (value 0) to multiples of the patch
    size, then the final-norm cls ``(N, D)`` and patch grid ``(N, D, H'/p, W'/p)``."""
    require_cls(model, "depth")
    p = patch_size(model)
    padded = center_pad(images, padded_size(_hw(images), p))
    tokens, groups = final_tokens(model, padded)
    return (tokens[:, groups.cls.start],
            _patch_grid(tokens, groups, _hw(padded), p))


def predict_depth(head: DepthHead, cls: Tensor, grid: Tensor, patch: tuple[int, int],
                  size: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Depth in the padded frame ``(N, h·p, w·p)`` and bin logits, from :func:`depth_features`
    (crop the depth back to the image with ``center_crop(depth, size)``)."""
    frame = (grid.shape[-2] * patch[0], grid.shape[-1] * patch[1])
    if frame[0] < size[0] or frame[1] < size[1]:
        raise ValueError(f"grid {_hw(grid)} with patch {patch} cannot cover {size}")
    return head(cls, grid, frame)


def train_depth_probe(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader,
                      cfg: ProbeConfig = NYUV2_PROBE, *, n_bins: int = paper.NYUV2_BINS,
                      min_depth: float = MIN_DEPTH, max_depth: float = MAX_DEPTH,
                      device: str | torch.device = "cpu") -> ProbeResult:
    """NYUv2 probe (§5, Table 1): :class:`DepthHead` on :func:`depth_features`, loss
    :func:`depth_loss` in the padded frame (padding is invalid ground truth); metric ``rmse``
    (metres, lower is better): per-image :func:`rmse` on the unpadded prediction, averaged over
    the images that have valid pixels. Loaders yield ``(images (N, 3, H, W), depth (N, H, W))``
    in metres, e.g. :class:`raptor.dinov2.dense_data.NYUv2Depth`."""
    require_cls(model, "depth")
    p = patch_size(model)
    bins = depth_bins(n_bins, min_depth, max_depth)

    def check(images: Tensor, depth: Tensor) -> None:
        check_batch(images, depth, 3, "depth")
        if depth.shape[-2:] != images.shape[-2:] or not depth.is_floating_point():
            raise ValueError(f"depth must be float (N, H, W) matching the images' "
                             f"{_hw(images)}; got {depth.dtype} {tuple(depth.shape)}")

    def loss(h: nn.Module, feats: Features, depth: Tensor) -> Tensor:
        pred, logits = predict_depth(h, feats[0], feats[1], p, _hw(depth))
        target = center_pad(depth, _hw(pred))
        return depth_loss(pred, logits, target, bins.to(depth.device), min_depth=min_depth,
                          max_depth=max_depth)

    def evaluate(h: nn.Module, batches: Iterable[tuple[Features, Tensor]]) -> float:
        errors = []
        for (cls, grid), depth in batches:
            size = _hw(depth)
            pred, _ = predict_depth(h, cls, grid, p, size)
            errors.append(rmse(center_crop(pred, size), depth, min_depth, max_depth).cpu())
        return float(torch.cat(errors).nanmean())

    task = ProbeTask(extract=lambda images: depth_features(model, images), check=check, loss=loss,
                     evaluate=evaluate, metric="rmse", higher_is_better=False)
    dim = int(trajectory_model(model).teacher.embed_dim)
    return fit_probe(model, lambda: DepthHead(dim, n_bins, min_depth, max_depth), task,
                     train_loader, val_loader, cfg, device)
