"""Frozen-backbone probes (§5, Table 1): features, the linear probes, and the shared probe fit.

The backbone (a timm ViT or a Raptor) stays frozen, in eval mode and under ``no_grad``; only the
head trains. Features are the trajectory's last layer after the (teacher's) final norm; here
``[cls ‖ mean(patches)]`` (registers excluded, as in DINOv2's linear head), fitted two ways:

* :func:`train_linear_probe`, the paper's ImageNet probe (App. A.4, Table 4): ``Linear(2D → C)``
  trained with :data:`IMAGENET_PROBE`, optionally from DINOv2's head (:func:`init_linear_head`);
* :func:`linear_probe`, [ours] for small CPU runs: multinomial logistic regression on
  standardised :func:`probe_features`, full batch by L-BFGS in float64 with an L2 penalty
  (deterministic and fast on small feature sets).

:func:`fit_probe` trains a head by epochs of :func:`raptor.loop.train` (here and in
:mod:`raptor.dinov2.dense_probes`), reporting the validation metric after each epoch, the best
(what the paper reports) and the last. ``cache_features=True`` extracts the features once: exact
without random augmentation, fast on a CPU; the ImageNet recipe augments (:func:`probe_train_transform`),
which needs ``cache_features=False``.
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

from raptor import paper
from raptor.storage.checkpoint import CheckpointError, read_state_dict
from raptor.data import dataset_info
from raptor.loop import adamw, on_device, train
from raptor.trajectories import TokenGroups, trajectory, trajectory_model

Features = tuple[Tensor, ...]


@dataclass(frozen=True)
class ProbeConfig:
    """Optimisation of a probe head (defaults: the paper's ImageNet probe, App. A.4).

    ``batch_size`` is the training batch: with ``cache_features`` the cached features are
    re-batched to it (the loaders' own batch size then only sets the extraction batch);
    without, the train loader must yield batches of that size.
    """

    lr: float = paper.IMAGENET_PROBE.lr
    weight_decay: float = paper.IMAGENET_PROBE.weight_decay
    epochs: int = paper.IMAGENET_PROBE.epochs
    batch_size: int = paper.IMAGENET_PROBE.batch_size
    warmup_steps: int = paper.PROBE_WARMUP_STEPS
    min_lr: float = paper.PROBE_MIN_LR
    grad_clip: float | None = paper.PROBE_GRAD_CLIP
    amp: bool = False
    cache_features: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        checks = [("lr", self.lr > 0, "> 0"), ("weight_decay", self.weight_decay >= 0, ">= 0"),
                  ("min_lr", 0 <= self.min_lr <= self.lr, "in [0, lr]"),
                  ("grad_clip", self.grad_clip is None or self.grad_clip > 0, "> 0 or None")]
        for name, low in (("epochs", 1), ("batch_size", 1), ("warmup_steps", 0), ("seed", 0)):
            value = getattr(self, name)
            checks.append((name, isinstance(value, int) and not isinstance(value, bool)
                           and value >= low, f"an int >= {low}"))
        for name, ok, allowed in checks:
            if not ok:
                raise ValueError(f"ProbeConfig.{name} must be {allowed}; got "
                                 f"{getattr(self, name)!r}")


IMAGENET_PROBE = ProbeConfig()
ADE20K_PROBE = ProbeConfig(**dataclasses.asdict(paper.ADE20K_PROBE))
NYUV2_PROBE = ProbeConfig(**dataclasses.asdict(paper.NYUV2_PROBE), amp=True)


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


def _backbone(model: nn.Module) -> nn.Module:
    return trajectory_model(model).teacher


def require_cls(model: nn.Module, probe: str) -> None:
    """Raise unless the backbone has a cls token, which ``probe`` needs."""
    if not _backbone(model).has_class_token:
        raise ValueError(f"the {probe} probe needs a cls token, but the model has none "
                         f"(has_class_token is False)")


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
    if not backbone.dynamic_img_size and fixed != hw:
        raise ValueError(f"the backbone takes {fixed} images only, the probe feeds {hw}: build "
                         f"it with dynamic_img_size=True (timm.create_model(..., "
                         f"dynamic_img_size=True)) to probe at another resolution")


def final_tokens(model: nn.Module, images: Tensor) -> tuple[Tensor, TokenGroups]:
    """Last-layer tokens after the final norm, ``(N, T, D)``, and their groups.

    The groups are counted from the actual token count, so they hold at any input size.
    """
    backbone = _backbone(model)
    _check_input_size(model, (int(images.shape[-2]), int(images.shape[-1])))
    tokens = backbone.norm(trajectory(model, images)[:, -1])
    n_cls, n_reg = int(backbone.has_class_token), backbone.num_reg_tokens
    return tokens, TokenGroups.from_counts(n_cls, n_reg, tokens.shape[1] - n_cls - n_reg)


def classification_features(model: nn.Module, images: Tensor) -> Tensor:
    """``[cls ‖ mean(patches)]`` after the final norm, ``(N, 2D)`` (registers excluded)."""
    require_cls(model, "classification")
    tokens, groups = final_tokens(model, images)
    return torch.cat([tokens[:, groups.cls.start], tokens[:, groups.patches].mean(1)], dim=1)


@torch.no_grad()
def probe_features(model: nn.Module, batches: Iterable, *, device: str | torch.device = "cpu"
                   ) -> tuple[Tensor, Tensor]:
    """:func:`classification_features` ``(N, 2D)`` of all ``(images, labels)`` batches, and the
    labels, on the CPU (the inputs of :func:`linear_probe`); computed on ``device``
    (:func:`~raptor.loop.on_device`)."""
    with on_device(model, device) as device:
        feats, labels = zip(*((classification_features(model, images.to(device)).cpu(), y.cpu())
                              for images, y in batches))
    return torch.cat(feats), torch.cat(labels)


def probe_train_transform(img_size: int = 224) -> transforms.Compose:
    """The ImageNet probe's training augmentation (the authors' code): RandomResizedCrop(0.08–1,
    bicubic) + horizontal flip + normalise. Use with ``cache_features=False``; validate with
    :func:`raptor.data.imagenet_transform`."""
    info = dataset_info("imagenet")
    return transforms.Compose([
        transforms.RandomResizedCrop(img_size, scale=(0.08, 1.0),
                                     interpolation=transforms.InterpolationMode.BICUBIC),
        transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(info.mean, info.std)])


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


@dataclass(frozen=True)
class ProbeTask:
    """What distinguishes one probe from another in :func:`fit_probe`."""

    extract: Callable[[Tensor], Features]          # images → frozen features (no_grad)
    check: Callable[[Tensor, Tensor], None]        # images, target → raise on bad input
    loss: Callable[[nn.Module, Features, Tensor], Tensor]
    evaluate: Callable[[nn.Module, Iterable[tuple[Features, Tensor]]], float]
    metric: str
    higher_is_better: bool


def check_num_classes(num_classes: int) -> None:
    """Raise unless ``num_classes`` is an int >= 2."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an int >= 2; got {num_classes!r}")


def check_batch(images: Tensor, target: Tensor, target_ndim: int, what: str) -> None:
    """Raise unless ``images`` is ``(N, C, H, W)`` and ``target`` (``what``) has ``N`` rows."""
    if images.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W); got {tuple(images.shape)}")
    if target.ndim != target_ndim or len(target) != len(images):
        raise ValueError(f"{what} must have shape {'(N,)' if target_ndim == 1 else '(N, H, W)'} "
                         f"with N={len(images)} images; got {tuple(target.shape)}")


def _autocast(device: torch.device, enabled: bool) -> Any:
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=enabled)


def _extracted(loader: Iterable, task: ProbeTask, device: torch.device, amp: bool
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


def fit_probe(model: nn.Module, build_head: Callable[[], nn.Module], task: ProbeTask,
              train_loader: DataLoader, val_loader: DataLoader, cfg: ProbeConfig,
              device: str | torch.device) -> ProbeResult:
    """Train the head ``build_head()`` (built from ``cfg.seed``) on ``model``'s frozen features,
    ``cfg.epochs`` epochs of :func:`raptor.loop.train`, scoring it on ``val_loader`` after each."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        head = build_head()
    device = torch.device(device)
    if not cfg.cache_features and getattr(train_loader, "batch_size", None) not in (
            None, cfg.batch_size):
        raise ValueError(f"train_loader.batch_size={train_loader.batch_size} differs from "
                         f"cfg.batch_size={cfg.batch_size}; without cache_features the loader's "
                         f"batches are the training batches")
    model.eval().to(device)
    head.to(device)
    opt = adamw(head.parameters(), cfg)
    if cfg.cache_features:
        train_cache, val_cache = (_cache(_extracted(loader, task, device, cfg.amp))
                                  for loader in (train_loader, val_loader))
        n = len(train_cache[1])
    per_epoch = math.ceil(n / cfg.batch_size) if cfg.cache_features else len(train_loader)
    total = cfg.epochs * per_epoch
    history: list[dict[str, float]] = []
    step = 0

    def loss(_: int, batch: tuple[Features, Tensor]) -> tuple[Tensor, Tensor]:
        with _autocast(device, cfg.amp):
            value = task.loss(head, *batch)
        return value, value.detach()

    for epoch in range(cfg.epochs):
        if cfg.cache_features:
            order = torch.randperm(n, generator=torch.Generator().manual_seed(
                cfg.seed * 100_003 + epoch))
            train_batches = _rebatched(train_cache, cfg.batch_size, order, device)
        else:
            train_batches = _extracted(train_loader, task, device, cfg.amp)
        head.train()
        loss_sum, first = torch.zeros((), device=device), step
        step = train(f"{task.metric} probe", enumerate(train_batches, step), loss, opt,
                     [list(head.parameters())], cfg, total,
                     after_step=lambda _, value, __: loss_sum.add_(value), initial=step)
        head.eval()
        val_batches = (_rebatched(val_cache, cfg.batch_size, torch.arange(len(val_cache[1])),
                                  device) if cfg.cache_features
                       else _extracted(val_loader, task, device, cfg.amp))
        with torch.no_grad(), _autocast(device, cfg.amp):
            value = task.evaluate(head, val_batches)
        history.append({"epoch": epoch, "train_loss": float(loss_sum) / max(1, step - first),
                        task.metric: value})
    values = [h[task.metric] for h in history]
    scored = [e for e, v in enumerate(values) if not math.isnan(v)] or [len(values) - 1]
    sign = 1.0 if task.higher_is_better else -1.0
    best_epoch = max(scored, key=lambda e: sign * values[e])
    return ProbeResult(task.metric, task.higher_is_better, tuple(history), values[best_epoch],
                       best_epoch, values[-1], head)


def train_linear_probe(model: nn.Module, train_loader: DataLoader, val_loader: DataLoader,
                       cfg: ProbeConfig = IMAGENET_PROBE, *, num_classes: int = 1000,
                       init_head: str | os.PathLike[str] | None = None,
                       device: str | torch.device = "cpu") -> ProbeResult:
    """ImageNet probe (§5, Table 1): train ``Linear(2D → C)`` on :func:`classification_features`;
    metric ``top1`` (validation accuracy in [0, 1]). ``init_head``: DINOv2's released head to
    start from (:func:`init_linear_head`). Loaders yield ``(images, int labels (N,))``."""
    require_cls(model, "classification")
    check_num_classes(num_classes)
    dim = int(_backbone(model).embed_dim)

    def build_head() -> nn.Linear:
        head = nn.Linear(2 * dim, num_classes)
        if init_head is not None:
            init_linear_head(head, init_head)
        return head

    def check(images: Tensor, labels: Tensor) -> None:
        check_batch(images, labels, 1, "labels")
        if labels.is_floating_point() or labels.min() < 0 or labels.max() >= num_classes:
            raise ValueError(f"labels must be integers in [0, {num_classes}); got "
                             f"{labels.dtype} {labels.min()}..{labels.max()}")

    def evaluate(h: nn.Module, batches: Iterable[tuple[Features, Tensor]]) -> float:
        correct = total = 0
        for (x,), y in batches:
            correct += int((h(x).argmax(1) == y).sum())
            total += len(y)
        return correct / total

    task = ProbeTask(extract=lambda images: (classification_features(model, images),),
                     check=check, loss=lambda h, f, y: F.cross_entropy(h(f[0]).float(), y),
                     evaluate=evaluate, metric="top1", higher_is_better=True)
    return fit_probe(model, build_head, task, train_loader, val_loader, cfg, device)


def linear_probe(train_x: Tensor, train_y: Tensor, val_x: Tensor, val_y: Tensor, *,
                 l2: float = 1e-3, max_iter: int = 2000) -> dict[str, Any]:
    """Fit a softmax linear classifier on ``train_x`` and score it on both sets.

    Minimises ``mean CE + (l2/2)·‖W‖²`` (bias not penalised) on features standardised with the
    training mean and std, full batch, by L-BFGS with strong-Wolfe line search in float64, run to
    convergence: stopped early (300 iterations) the solution depends on the path, and features
    that differ in their last bits between CPU kernels moved a 1,000-image accuracy by 0.2 points.
    Returns ``train_acc``, ``val_acc``, the final training ``objective`` and ``val_correct``,
    per validation row whether its prediction is the label (a tuple of bools, for paired
    comparisons of models on the same images).
    """
    if train_x.ndim != 2 or val_x.ndim != 2 or train_x.shape[1] != val_x.shape[1]:
        raise ValueError(f"features must be (N, F) with the same F, got {tuple(train_x.shape)} "
                         f"and {tuple(val_x.shape)}")
    if len(train_x) != len(train_y) or len(val_x) != len(val_y) or len(train_x) == 0:
        raise ValueError(f"need one label per feature row and a non-empty training set, got "
                         f"{len(train_x)}/{len(train_y)} and {len(val_x)}/{len(val_y)}")
    if l2 < 0 or max_iter < 1:
        raise ValueError(f"need l2 >= 0 and max_iter >= 1, got l2={l2}, max_iter={max_iter}")
    x = train_x.double()
    mean, std = x.mean(0), x.std(0, unbiased=False).clamp_min(1e-12)
    x = (x - mean) / std
    xv = (val_x.double() - mean) / std
    y, yv = train_y.long(), val_y.long()
    classes = int(max(y.max().item(), yv.max().item() if len(yv) else 0)) + 1
    weight = torch.zeros(classes, x.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
                                  tolerance_grad=1e-10, tolerance_change=1e-14,
                                  line_search_fn="strong_wolfe")

    def objective() -> Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(x @ weight.T + bias, y) + 0.5 * l2 * weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(objective)
    with torch.no_grad():
        final = F.cross_entropy(x @ weight.T + bias, y) + 0.5 * l2 * weight.square().sum()
        train_acc = ((x @ weight.T + bias).argmax(-1) == y).double().mean().item()
        val_correct = (xv @ weight.T + bias).argmax(-1) == yv
        val_acc = val_correct.double().mean().item() if len(yv) else float("nan")
    return {"train_acc": train_acc, "val_acc": val_acc, "objective": final.item(),
            "val_correct": tuple(val_correct.tolist())}
