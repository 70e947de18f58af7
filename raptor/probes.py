"""Frozen-backbone probes of §5 (Table 1): ImageNet top-1, ADE20k mIoU, NYUv2 depth RMSE.

The backbone is any model for which :func:`raptor.trajectories.trajectory` works (a timm ViT or
a Raptor). Its features are the last layer of the trajectory after the (teacher's) final norm;
the backbone is put in eval mode, runs under ``no_grad`` and never receives gradients: only the
probe head is trained. FACTS §5 gives the recipes ([code]: the authors' repository):

* **ImageNet** — ``Linear(2D → C)`` on ``[cls ‖ mean(patches)]`` (registers excluded, as in
  DINOv2's linear head, which :func:`init_linear_head` can load); AdamW 1e-4, wd 1e-2,
  15 epochs, batch 512, 100-step warmup, cosine to 1e-6, clip 1.0.
* **ADE20k** — ``Linear(D → 150)`` (a 1×1 conv) on the patch grid, bilinear upsampling to the
  label size, cross-entropy ignoring label 255, mIoU; AdamW 1e-3, wd 1e-2, 10 epochs, batch 32.
* **NYUv2** — input centre-padded to a multiple of the patch size; cls concatenated to every
  patch token (2D channels); ×4 bilinear upsampling; 1×1 conv to 256 depth bins with centres
  ``linspace(0.001, 10)``; depth = softmax-weighted bin centres, upsampled to the input size;
  loss 10·SILog(λ = 0.85) + cross-entropy over bins; RMSE on the Eigen crop; AdamW 1e-3,
  wd 1e-3, 25 epochs, batch 128, AMP.

[ours] where FACTS is silent: the dense probes reuse the ImageNet warmup (100 steps), final
learning rate (1e-6) and clipping (1.0); ``amp`` means bfloat16 autocast (losses in float32).

Each training function reports the validation metric after every epoch, the best over epochs
(what the paper reports) and the last. With ``cache_features=True`` the frozen features are
computed once and reused every epoch: exact when the loader has no random augmentation, fast on
a CPU, but it freezes whatever augmentation the loader applied on that one pass. The paper's
ImageNet recipe augments (:func:`probe_train_transform`: RandomResizedCrop + flip), which needs
``cache_features=False`` (features recomputed each epoch).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader
from torchvision import transforms

from raptor.checkpoint import CheckpointError, read_state_dict, save_tensors
from raptor.data import dataset_info
from raptor.dense_data import IGNORE_INDEX
from raptor.schedule import set_lr, warmup_cosine
from raptor.trajectories import TokenGroups, trajectory

EIGEN_CROP = (slice(45, 471), slice(41, 601))  # rows, columns of a 480×640 NYUv2 image
NYU_SIZE = (480, 640)
SILOG_LAMBDA = 0.85
SILOG_WEIGHT = 10.0
Features = tuple[Tensor, ...]


@dataclass(frozen=True)
class ProbeConfig:
    """Optimisation of a probe head (defaults: the paper's ImageNet probe, FACTS §5).

    ``batch_size`` is the training batch: with ``cache_features`` the cached features are
    re-batched to it (the loaders' own batch size then only sets the extraction batch);
    without, the train loader must yield batches of that size.
    """

    lr: float = 1e-4
    weight_decay: float = 1e-2
    epochs: int = 15
    batch_size: int = 512
    warmup_steps: int = 100
    min_lr: float = 1e-6
    clip_grad: float | None = 1.0
    amp: bool = False
    cache_features: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        checks = [("lr", self.lr > 0, "> 0"), ("weight_decay", self.weight_decay >= 0, ">= 0"),
                  ("min_lr", 0 <= self.min_lr <= self.lr, "in [0, lr]"),
                  ("clip_grad", self.clip_grad is None or self.clip_grad > 0, "> 0 or None")]
        for name, low in (("epochs", 1), ("batch_size", 1), ("warmup_steps", 0), ("seed", 0)):
            value = getattr(self, name)
            checks.append((name, isinstance(value, int) and not isinstance(value, bool)
                           and value >= low, f"an int >= {low}"))
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(f"ProbeConfig.{name} must be {allowed}; got "
                                 f"{getattr(self, name)!r}")


IMAGENET_PROBE = ProbeConfig()
ADE20K_PROBE = ProbeConfig(lr=1e-3, weight_decay=1e-2, epochs=10, batch_size=32)
NYUV2_PROBE = ProbeConfig(lr=1e-3, weight_decay=1e-3, epochs=25, batch_size=128, amp=True)


@dataclass(frozen=True)
class ProbeResult:
    """Outcome of a probe: ``history[e]`` holds epoch ``e``'s ``train_loss`` and validation
    ``metric``; ``best`` (at ``best_epoch``, 0-based) is what the paper reports, ``last`` the
    final epoch's value; ``head`` is the trained head (after the last epoch)."""

    metric: str
    higher_is_better: bool
    history: tuple[dict[str, float], ...]
    best: float
    best_epoch: int
    last: float
    head: nn.Module


# ---------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------

def _backbone(model: nn.Module) -> nn.Module:
    backbone = getattr(model, "teacher_stem", model)
    if not all(hasattr(backbone, a) for a in ("patch_embed", "norm", "embed_dim")):
        raise TypeError(f"model must be a timm VisionTransformer or a Raptor (with patch_embed, "
                        f"norm and embed_dim); got {type(model).__name__}")
    return backbone


def _require_cls(model: nn.Module, probe: str) -> None:
    if not getattr(_backbone(model), "has_class_token", False):
        raise ValueError(f"the {probe} probe needs a cls token, but the model has none "
                         f"(has_class_token is False)")


def _hw(x: Tensor) -> tuple[int, int]:
    """The spatial size (last two dims) of an image batch or map."""
    return int(x.shape[-2]), int(x.shape[-1])


def patch_size(model: nn.Module) -> tuple[int, int]:
    """The backbone's patch size ``(p_h, p_w)``."""
    p = _backbone(model).patch_embed.patch_size
    return int(p[0]), int(p[1])


def _check_input_size(model: nn.Module, hw: tuple[int, int]) -> None:
    backbone = _backbone(model)
    p = patch_size(model)
    if hw[0] % p[0] or hw[1] % p[1]:
        raise ValueError(f"image size {hw} must be a multiple of the patch size {p}")
    fixed = tuple(backbone.patch_embed.img_size)
    if not getattr(backbone, "dynamic_img_size", False) and fixed != hw:
        raise ValueError(f"the backbone takes {fixed} images only, the probe feeds {hw}: build "
                         f"it with dynamic_img_size=True (timm.create_model(..., "
                         f"dynamic_img_size=True)) to probe at another resolution")


def final_tokens(model: nn.Module, images: Tensor) -> tuple[Tensor, TokenGroups]:
    """Last-layer tokens after the final norm, ``(N, T, D)``, and their groups.

    The groups are counted from the actual token count, so they hold at any input size.
    """
    backbone = _backbone(model)
    _check_input_size(model, _hw(images))
    tokens = backbone.norm(trajectory(model, images)[:, -1])
    n_cls = 1 if getattr(backbone, "has_class_token", False) else 0
    n_reg = int(getattr(backbone, "num_reg_tokens", 0))
    return tokens, TokenGroups.from_counts(n_cls, n_reg, tokens.shape[1] - n_cls - n_reg)


def _patch_grid(tokens: Tensor, groups: TokenGroups, hw: tuple[int, int],
                p: tuple[int, int]) -> Tensor:
    """Patch tokens as a ``(N, D, H/p, W/p)`` map."""
    h, w = hw[0] // p[0], hw[1] // p[1]
    patches = tokens[:, groups.patches]
    if patches.shape[1] != h * w:
        raise ValueError(f"{patches.shape[1]} patch tokens do not form the {h}×{w} grid of a "
                         f"{hw} image")
    return patches.transpose(1, 2).reshape(tokens.shape[0], -1, h, w)


def classification_features(model: nn.Module, images: Tensor) -> Tensor:
    """``[cls ‖ mean(patches)]`` after the final norm, ``(N, 2D)`` (registers excluded)."""
    _require_cls(model, "classification")
    tokens, groups = final_tokens(model, images)
    return torch.cat([tokens[:, groups.cls.start], tokens[:, groups.patches].mean(1)], dim=1)


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


def probe_train_transform(img_size: int = 224) -> transforms.Compose:
    """The ImageNet probe's training augmentation (FACTS §5): RandomResizedCrop(0.08–1,
    bicubic) + horizontal flip + normalise. Use with ``cache_features=False``; validate with
    :func:`raptor.data.imagenet_transform`."""
    info = dataset_info("imagenet")
    return transforms.Compose([
        transforms.RandomResizedCrop(img_size, scale=(0.08, 1.0),
                                     interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(info.mean, info.std)])


# ---------------------------------------------------------------------------------------------
# Heads
# ---------------------------------------------------------------------------------------------

def init_linear_head(probe: nn.Linear, path: str | os.PathLike[str]) -> None:
    """Load DINOv2's released linear head (e.g. ``dinov2_vitb14_reg4_linear_head.pth``) into
    ``probe``. Those files hold an ``nn.Linear`` state dict: ``weight`` (C, 2D) and ``bias``
    (C,) on ``[cls ‖ mean(patches)]`` (DINOv2's ``hub/classifiers.py``, ``layers=1``). Torch
    files are read with ``weights_only=True``; safetensors files work too."""
    state = read_state_dict(path)
    want = {"weight": tuple(probe.weight.shape), "bias": tuple(probe.bias.shape)}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if got != want:
        raise CheckpointError(f"{path}: expected a linear head {want}, got {got}")
    with torch.no_grad():
        probe.weight.copy_(state["weight"])
        probe.bias.copy_(state["bias"])


class SegmentationHead(nn.Module):
    """ADE20k probe: a 1×1 conv ``D → C`` on the patch grid, bilinearly upsampled."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(dim, num_classes, kernel_size=1)

    def forward(self, grid: Tensor, size: tuple[int, int]) -> Tensor:
        """Logits ``(N, C, *size)`` from a ``(N, D, h, w)`` patch grid."""
        return F.interpolate(self.conv(grid), size=size, mode="bilinear", align_corners=False)


def depth_bins(n_bins: int = 256, min_depth: float = 1e-3, max_depth: float = 10.0) -> Tensor:
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

    def __init__(self, dim: int, n_bins: int = 256, min_depth: float = 1e-3,
                 max_depth: float = 10.0, upsample: int = 4) -> None:
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


# ---------------------------------------------------------------------------------------------
# Losses and metrics
# ---------------------------------------------------------------------------------------------

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


def valid_depth(target: Tensor, min_depth: float = 1e-3, max_depth: float = 10.0) -> Tensor:
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
               min_depth: float = 1e-3, max_depth: float = 10.0) -> Tensor:
    """The NYUv2 probe's loss: ``10·SILog(pred, target) + CE(logits, nearest bin of target)``.

    ``pred`` and ``target`` are ``(N, H, W)`` (the padded frame); the cross-entropy runs on the
    logits' grid against the target resampled to it ("nearest-exact") [ours: FACTS does not
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


def rmse(pred: Tensor, target: Tensor, min_depth: float = 1e-3,
         max_depth: float = 10.0) -> Tensor:
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


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Task:
    """What distinguishes the three probes for the shared loop :func:`_fit`."""

    extract: Callable[[Tensor], Features]          # images → frozen features (no_grad)
    check: Callable[[Tensor, Tensor], None]        # images, target → raise on bad input
    loss: Callable[[nn.Module, Features, Tensor], Tensor]
    evaluate: Callable[[nn.Module, Iterable[tuple[Features, Tensor]]], float]
    metric: str
    higher_is_better: bool


def _autocast(device: torch.device, enabled: bool) -> Any:
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def _extracted(loader: Iterable, task: _Task, device: torch.device, amp: bool
               ) -> Iterator[tuple[Features, Tensor]]:
    for images, target in loader:
        images, target = images.to(device), target.to(device)
        task.check(images, target)
        with torch.no_grad(), _autocast(device, amp):
            feats = task.extract(images)
        yield feats, target


def _cache(batches: Iterable[tuple[Features, Tensor]]) -> tuple[Features, Tensor]:
    feats, targets = zip(*((tuple(f.cpu() for f in fs), t.cpu()) for fs, t in batches))
    return tuple(torch.cat(parts) for parts in zip(*feats)), torch.cat(targets)


def _rebatched(cache: tuple[Features, Tensor], batch_size: int, order: Tensor,
               device: torch.device) -> Iterator[tuple[Features, Tensor]]:
    feats, target = cache
    for start in range(0, len(order), batch_size):
        idx = order[start: start + batch_size]
        yield tuple(f[idx].to(device) for f in feats), target[idx].to(device)


def _fit(model: nn.Module, head: nn.Module, task: _Task, train_loader: DataLoader,
         val_loader: DataLoader, cfg: ProbeConfig, device: str | torch.device) -> ProbeResult:
    device = torch.device(device)
    if not cfg.cache_features and getattr(train_loader, "batch_size", None) not in (
            None, cfg.batch_size):
        raise ValueError(f"train_loader.batch_size={train_loader.batch_size} differs from "
                         f"cfg.batch_size={cfg.batch_size}; without cache_features the loader's "
                         f"batches are the training batches")
    model.eval().to(device)
    head.to(device)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    if cfg.cache_features:
        train_cache = _cache(_extracted(train_loader, task, device, cfg.amp))
        val_cache = _cache(_extracted(val_loader, task, device, cfg.amp))
        n = len(train_cache[1])
        steps_per_epoch = math.ceil(n / cfg.batch_size)
    else:
        steps_per_epoch = len(train_loader)
    total = cfg.epochs * steps_per_epoch
    history: list[dict[str, float]] = []
    step = 0
    for epoch in range(cfg.epochs):
        if cfg.cache_features:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(
                cfg.seed * 100_003 + epoch))
            train_batches = _rebatched(train_cache, cfg.batch_size, order, device)
        else:
            train_batches = _extracted(train_loader, task, device, cfg.amp)
        head.train()
        loss_sum, n_steps = torch.zeros((), device=device), 0
        for feats, target in train_batches:
            set_lr(opt, warmup_cosine(step, total, cfg.warmup_steps, cfg.lr, cfg.min_lr))
            with _autocast(device, cfg.amp):
                loss = task.loss(head, feats, target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip_grad is not None:
                nn.utils.clip_grad_norm_(head.parameters(), cfg.clip_grad)
            opt.step()
            loss_sum += loss.detach()
            n_steps += 1
            step += 1
        head.eval()
        val_batches = (_rebatched(val_cache, cfg.batch_size, torch.arange(len(val_cache[1])),
                                  device) if cfg.cache_features
                       else _extracted(val_loader, task, device, cfg.amp))
        with torch.no_grad(), _autocast(device, cfg.amp):
            value = task.evaluate(head, val_batches)
        history.append({"epoch": epoch, "train_loss": float(loss_sum) / max(1, n_steps),
                        task.metric: value})
    values = [h[task.metric] for h in history]
    scored = [e for e, v in enumerate(values) if not math.isnan(v)] or [len(values) - 1]
    sign = 1.0 if task.higher_is_better else -1.0
    best_epoch = max(scored, key=lambda e: sign * values[e])
    return ProbeResult(task.metric, task.higher_is_better, tuple(history), values[best_epoch],
                       best_epoch, values[-1], head)


def _seeded_head(seed: int, build: Callable[[], nn.Module]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _check_num_classes(num_classes: int) -> None:
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2; got {num_classes!r}")


def _check_batch(images: Tensor, target: Tensor, target_ndim: int, what: str) -> None:
    if images.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W); got {tuple(images.shape)}")
    if target.ndim != target_ndim or len(target) != len(images):
        raise ValueError(f"{what} must have shape {'(N,)' if target_ndim == 1 else '(N, H, W)'} "
                         f"with N={len(images)} images; got {tuple(target.shape)}")


def train_linear_probe(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader,
                       cfg: ProbeConfig = IMAGENET_PROBE, *, num_classes: int = 1000,
                       init_head: str | os.PathLike[str] | None = None,
                       device: str | torch.device = "cpu") -> ProbeResult:
    """ImageNet probe (§5, Table 1): train ``Linear(2D → C)`` on :func:`classification_features`;
    metric ``top1`` (validation accuracy in [0, 1]). ``init_head``: DINOv2's released head to
    start from (:func:`init_linear_head`). Loaders yield ``(images, int labels (N,))``."""
    _require_cls(model, "classification")
    _check_num_classes(num_classes)
    dim = int(_backbone(model).embed_dim)
    head = _seeded_head(cfg.seed, lambda: nn.Linear(2 * dim, num_classes))
    if init_head is not None:
        init_linear_head(head, init_head)

    def check(images: Tensor, labels: Tensor) -> None:
        _check_batch(images, labels, 1, "labels")
        if labels.is_floating_point() or labels.min() < 0 or labels.max() >= num_classes:
            raise ValueError(f"labels must be integers in [0, {num_classes}); got "
                             f"{labels.dtype} {labels.min()}..{labels.max()}")

    def evaluate(h: nn.Module, batches: Iterable[tuple[Features, Tensor]]) -> float:
        correct = total = 0
        for (x,), y in batches:
            correct += int((h(x).argmax(1) == y).sum())
            total += len(y)
        return correct / total

    task = _Task(extract=lambda images: (classification_features(model, images),),
                 check=check, loss=lambda h, f, y: F.cross_entropy(h(f[0]).float(), y),
                 evaluate=evaluate, metric="top1", higher_is_better=True)
    return _fit(model, head, task, train_loader, val_loader, cfg, device)


def train_segmentation_probe(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader,
                             cfg: ProbeConfig = ADE20K_PROBE, *, num_classes: int = 150,
                             device: str | torch.device = "cpu") -> ProbeResult:
    """ADE20k probe (§5, Table 1): :class:`SegmentationHead` on the final patch grid; metric
    ``miou`` in [0, 1] over the whole validation set (:func:`miou`). Loaders yield
    ``(images (N, 3, H, W), labels int (N, h, w))`` with labels in [0, C) or 255 (ignored),
    e.g. :class:`raptor.dense_data.ADE20k`; ``H, W`` must be multiples of the patch size."""
    _check_num_classes(num_classes)
    p = patch_size(model)
    head = _seeded_head(cfg.seed, lambda: SegmentationHead(int(_backbone(model).embed_dim),
                                                           num_classes))

    def extract(images: Tensor) -> Features:
        tokens, groups = final_tokens(model, images)
        return (_patch_grid(tokens, groups, _hw(images), p),)

    def check(images: Tensor, labels: Tensor) -> None:
        _check_batch(images, labels, 3, "labels")
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

    task = _Task(extract=extract, check=check,
                 loss=lambda h, f, y: segmentation_loss(h(f[0], _hw(y)), y),
                 evaluate=evaluate, metric="miou", higher_is_better=True)
    return _fit(model, head, task, train_loader, val_loader, cfg, device)


def depth_features(model: nn.Module, images: Tensor) -> tuple[Tensor, Tensor]:
    """The depth probe's inputs: ``images`` centre-padded (value 0) to multiples of the patch
    size, then the final-norm cls ``(N, D)`` and patch grid ``(N, D, H'/p, W'/p)``."""
    _require_cls(model, "depth")
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
                      cfg: ProbeConfig = NYUV2_PROBE, *, n_bins: int = 256,
                      min_depth: float = 1e-3, max_depth: float = 10.0,
                      device: str | torch.device = "cpu") -> ProbeResult:
    """NYUv2 probe (§5, Table 1): :class:`DepthHead` on :func:`depth_features`, loss
    :func:`depth_loss` in the padded frame (padding is invalid ground truth); metric ``rmse``
    (metres, lower is better): per-image :func:`rmse` on the unpadded prediction, averaged over
    the images that have valid pixels. Loaders yield ``(images (N, 3, H, W), depth (N, H, W))``
    in metres, e.g. :class:`raptor.dense_data.NYUv2Depth`."""
    _require_cls(model, "depth")
    p = patch_size(model)
    bins = depth_bins(n_bins, min_depth, max_depth)
    head = _seeded_head(cfg.seed, lambda: DepthHead(int(_backbone(model).embed_dim), n_bins,
                                                    min_depth, max_depth))

    def check(images: Tensor, depth: Tensor) -> None:
        _check_batch(images, depth, 3, "depth")
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

    task = _Task(extract=lambda images: depth_features(model, images), check=check, loss=loss,
                 evaluate=evaluate, metric="rmse", higher_is_better=False)
    return _fit(model, head, task, train_loader, val_loader, cfg, device)


def save_probe(path: str | os.PathLike[str], result: ProbeResult, cfg: ProbeConfig) -> None:
    """Write the trained head atomically as safetensors, with the config and the per-epoch
    history as metadata (:func:`raptor.checkpoint.save_tensors`)."""
    record = {"metric": result.metric, "higher_is_better": result.higher_is_better,
              "history": result.history, "best": result.best, "best_epoch": result.best_epoch,
              "last": result.last}
    save_tensors(path, result.head.state_dict(), dataclasses.asdict(cfg), record)
