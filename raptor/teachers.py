"""Teachers: timm ViTs built by one factory, trained as classifiers, or loaded pretrained.

The paper's small-scale experiments (§2) train ViTs from scratch with *uniform*
stochastic depth: every layer is dropped independently with the same probability ``p``. timm's
``drop_path_rate`` instead rises linearly with depth and drops the attention and MLP branches
independently, so the factory swaps in :class:`TeacherBlock`, which drops the whole residual update
of a block (Huang et al. 2016) with probability ``p`` at every depth. ``residual=False`` gives the
no-skip control of §2 (blocks without their skip connections).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import timm
import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block, VisionTransformer, checkpoint_filter_fn
from torch import nn

from raptor import data
from raptor.planning import Plan, get_or_plan, load
from raptor.storage.checkpoint import (half_rounded, load_state_checked, load_tensors,
                                       read_state_dict, save_tensors, save_training_state)
from raptor.config import TeacherConfig, TrainConfig
from raptor.loop import (adamw, batches_from, improves, plateaued, resolve_device, resume, seeded,
                         train)

CONVERGENCE_TOL = 1e-3  # the relative fall of the validation loss that counts (see patience)


class TeacherBlock(Block):
    """A timm :class:`~timm.models.vision_transformer.Block` with whole-layer stochastic depth.

    In training, each sample skips the block's update with probability ``layer_drop`` and the
    kept updates are scaled by ``1 / (1 - layer_drop)`` (so evaluation needs no rescaling).
    ``residual=False`` removes both skip connections.
    """

    def __init__(self, *args: Any, layer_drop: float = 0.0, residual: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layer_drop = layer_drop
        self.residual = residual

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None,
                is_causal: bool = False) -> torch.Tensor:
        if not self.residual:
            x = self.ls1(self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal))
            return self.ls2(self.mlp(self.norm2(x)))
        if not (self.training and self.layer_drop > 0):
            return super().forward(x, attn_mask=attn_mask, is_causal=is_causal)
        a = self.ls1(self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal))
        update = a + self.ls2(self.mlp(self.norm2(x + a)))
        keep = 1.0 - self.layer_drop
        mask = torch.rand(x.shape[0], 1, 1, device=x.device, dtype=x.dtype) < keep
        return x + update * mask / keep


def build_teacher(cfg: TeacherConfig, seed: int = 0) -> VisionTransformer:
    """A timm ViT with :class:`TeacherBlock` blocks, initialised deterministically from ``seed``;
    with ``cfg.tied``, each group's first block stands in every place of its group (one module,
    its parameters counted and trained once)."""
    block_fn = partial(TeacherBlock, layer_drop=cfg.p, residual=cfg.residual)
    with seeded(seed):
        model = VisionTransformer(
            img_size=cfg.img_size, patch_size=cfg.patch_size, in_chans=cfg.in_chans,
            num_classes=cfg.num_classes, embed_dim=cfg.embed_dim, depth=cfg.depth,
            num_heads=cfg.num_heads, mlp_ratio=cfg.mlp_ratio, reg_tokens=cfg.reg_tokens,
            init_values=cfg.layerscale, qkv_bias=True, block_fn=block_fn)
    start = 0
    for n in cfg.tied or ():
        for index in range(start + 1, start + n):
            model.blocks[index] = model.blocks[start]
        start += n
    return model


def parameter_count(cfg: TeacherConfig) -> int:
    """The parameters of a teacher of ``cfg`` (its stochastic depth and skips change none)."""
    return _parameter_count(dataclasses.replace(cfg, p=0.0, residual=True))


@functools.cache
def _parameter_count(cfg: TeacherConfig) -> int:
    with torch.device("meta"):  # counted, nothing allocated
        return sum(p.numel() for p in build_teacher(cfg).parameters())


def check_timm_name(name: str) -> None:
    """Raise :class:`ValueError` with similar names unless ``name`` is a timm model."""
    if not timm.is_model(name.split(".")[0]):
        close = timm.list_models(f"{name.split('_')[0]}_*")[:8]
        raise ValueError(f"unknown timm model {name!r}; similar names: {close}")


def head_classes(state: Mapping[str, torch.Tensor]) -> int:
    """The classes of a ViT state dict's head; 0 for a file without one (DINOv2's, a feature
    extractor's)."""
    return state["head.weight"].shape[0] if "head.weight" in state else 0


def load_pretrained(name: str, weights: str | Path | None = None, *, allow_download: bool = False,
                    **kwargs: Any) -> VisionTransformer:
    """A pretrained timm ViT, e.g. ``vit_base_patch14_reg4_dinov2.lvd142m``.

    Weights come from a local ``weights`` file (safetensors, or a ``weights_only`` torch file;
    position embeddings are resampled to ``img_size`` by timm's checkpoint filter), or from the
    hub when ``allow_download`` is set and a network exists. ``kwargs`` go to
    ``timm.create_model`` (e.g. ``img_size=224``); ``num_classes`` defaults to the file's head
    (0 without one).
    """
    check_timm_name(name)
    if weights is None and not allow_download:
        raise ValueError(f"no weights given for {name!r}: pass weights=<local file> or "
                         f"allow_download=True where a network exists")
    if weights is None:
        return timm.create_model(name, pretrained=True, **kwargs).eval()
    state = read_state_dict(weights)
    kwargs.setdefault("num_classes", head_classes(state))
    model = timm.create_model(name, pretrained=False, **kwargs)
    load_state_checked(model, checkpoint_filter_fn(state, model), source=str(weights))
    return model.eval()


def train_classifier(model: nn.Module, train_set: torch.utils.data.Dataset,
                     val_set: torch.utils.data.Dataset, cfg: TrainConfig, *,
                     config: dict[str, Any], work_path: Path | None = None,
                     checkpoint_every: int = 200, progress: bool = True, device: str = "cpu"
                     ) -> tuple[dict[str, Any], dict[int, dict[str, torch.Tensor]]]:
    """Train ``model`` as a classifier (cross-entropy on its head) with :func:`raptor.loop.train`.

    Resumable from ``work_path``; deterministic on CPU: the batch order depends on ``(seed, epoch)``
    and the dropout / layer-drop noise of step ``s`` on ``(seed, s)``. The model is moved to
    ``device`` (see :func:`~raptor.loop.resolve_device`) and left there. Returns a record (loss
    curve, validation accuracy along training, wall time; with ``cfg.patience``, ``best``: the
    step and loss of the weights kept, ``stopped``: the last step trained, ``converged``: whether
    the criterion stopped it before ``cfg.steps``) and the weights at ``cfg.snapshot_steps``.
    """
    on = torch.device(resolve_device(device))
    model.to(on)
    optimizer = adamw(model.parameters(), cfg)
    record: dict[str, Any] = {"loss": [], "val": [], "seconds": 0.0}
    if cfg.patience is not None:
        record["best"] = {"step": 0, "loss": math.inf}
    snapshots: dict[int, dict[str, torch.Tensor]] = {}
    best: dict[str, torch.Tensor] = {}
    start = 0

    def snapshots_of(saved: dict[str, Any]) -> None:  # verified before the weights are restored
        snapshots.update({s: load_tensors(_snapshot_path(work_path, s), config)[0]
                          for s in saved["snapshots"]})
        if saved.get("best", {}).get("step"):
            best.update(load_tensors(_best_path(work_path), config)[0])

    saved = resume(work_path, model=model, optimizer=optimizer, config=config, check=snapshots_of)
    if saved is not None:
        record, start = saved, saved.pop("step")
        del record["snapshots"]
    t0 = time.perf_counter() - record["seconds"]

    def loss(step: int, batch: tuple[torch.Tensor, torch.Tensor]
             ) -> tuple[torch.Tensor, torch.Tensor]:
        model.train()
        torch.manual_seed(cfg.seed * 1_000_003 + step)
        images, labels = (t.to(on) for t in batch)
        value = F.cross_entropy(model(images), labels)
        return value, value.detach()

    def after_step(step: int, value: torch.Tensor, lr: float) -> None:
        record["loss"].append(round(value.item(), 5))
        done = step + 1
        if done in cfg.snapshot_steps:
            snapshots[done] = {k: v.clone() for k, v in model.state_dict().items()}
        if done % cfg.eval_every == 0 or done == cfg.steps:
            record["val"].append({"step": done, **evaluate(model, val_set)})
            if cfg.patience is not None and \
                    improves(record["val"][-1]["loss"], record["best"]["loss"], CONVERGENCE_TOL):
                record["best"] = {"step": done, "loss": record["val"][-1]["loss"]}
                best.update({k: v.clone() for k, v in model.state_dict().items()})

    def stale() -> bool:
        return cfg.patience is not None and plateaued(record["val"], record["best"]["step"],
                                                      cfg.patience)

    def checkpoint(done: int) -> None:
        record["seconds"] = time.perf_counter() - t0
        for s, state in snapshots.items():
            save_tensors(_snapshot_path(work_path, s), state, config)
        if best:
            save_tensors(_best_path(work_path), best, config)
        save_training_state(work_path, model=model, optimizer=optimizer, config=config,
                            record={**record, "step": done, "snapshots": sorted(snapshots)})

    batches = batches_from(train_set, batch_size=cfg.batch_size, seed=cfg.seed, start_step=start)
    train("teacher", batches, loss, optimizer, [list(model.parameters())], cfg, cfg.steps,
          after_step=after_step, checkpoint=checkpoint if work_path is not None else None,
          checkpoint_every=checkpoint_every, progress=progress, initial=start, stop=stale)
    if cfg.patience is not None:
        record.update(stopped=len(record["loss"]), converged=stale())
        model.load_state_dict(best)
    record["seconds"] = round(time.perf_counter() - t0, 2)
    return record, snapshots


@torch.no_grad()
def evaluate(model: nn.Module, dataset: torch.utils.data.Dataset, batch_size: int = 500
             ) -> dict[str, float]:
    """Top-1 accuracy and mean cross-entropy of ``model`` on ``dataset`` (on the model's device);
    an empty dataset is an error, non-finite pixels a warning."""
    if len(dataset) == 0:
        raise ValueError("evaluate needs a dataset with at least one image, got an empty one")
    model.eval()
    on = next(model.parameters()).device
    correct, loss, n, bad = 0, 0.0, 0, 0
    for images, labels in torch.utils.data.DataLoader(dataset, batch_size=batch_size):
        bad += int((~torch.isfinite(images.flatten(1))).any(1).sum())
        images, labels = images.to(on), labels.to(on)
        logits = model(images)
        loss += F.cross_entropy(logits, labels, reduction="sum").item()
        correct += (logits.argmax(-1) == labels).sum().item()
        n += len(labels)
    if bad:
        warnings.warn(f"evaluate: {bad} of {n} images hold NaN or infinite pixels; the accuracy "
                      f"and loss count them as they come out", stacklevel=2)
    return {"acc": round(correct / n, 5), "loss": round(loss / n, 5)}


def teacher_key(cfg: TeacherConfig, train: TrainConfig | None, seed: int, device: str = "cpu"
                ) -> dict[str, Any]:
    """The cache key of a teacher: its architecture, training recipe and seed, and the kind of
    device it trains on unless the CPU (CUDA's arithmetic gives other weights)."""
    recipe = dataclasses.asdict(train) if train is not None else None
    if recipe is not None:  # fields added later, at their defaults (off), are left out: every
        for later in ("patience", "half_weights"):  # stored key holds
            if not recipe[later]:
                del recipe[later]
    arch = dataclasses.asdict(cfg)
    if arch["tied"] is None:  # likewise: untied, left out
        del arch["tied"]
    key = {"arch": arch, "train": recipe, "seed": seed, "format": 1}
    kind = resolve_device(device).split(":")[0]
    return key if kind == "cpu" or train is None else {**key, "device": kind}


@dataclass(frozen=True)
class TeacherRequest:
    """A teacher as :func:`get_teacher` is asked for it (``train`` ``None``: untrained), with the
    device it resolved: what a planner's :class:`~raptor.planning.Plan` is handed for its
    entry."""

    cfg: TeacherConfig
    train: TrainConfig | None
    seed: int
    device: str


def get_teacher(cfg: TeacherConfig, train: TrainConfig | None = None, *, seed: int = 0,
                data_root: str | Path | None = None, progress: bool = True, device: str = "auto",
                plan: Plan | None = None) -> tuple[VisionTransformer, dict[str, Any]]:
    """The teacher with this configuration: loaded from the cache, or trained on ``device``
    (:func:`~raptor.loop.resolve_device`) and stored.

    ``train=None`` gives the untrained (randomly initialised) network of the paper's controls.
    Returns the model in eval mode on the CPU and its record (training curves, accuracy,
    snapshots' steps). Under a ``plan`` a missing teacher is stood in for, not trained.
    """
    model = build_teacher(cfg, seed)
    if train is None:
        return model.eval(), {"untrained": True}
    device = resolve_device(device)
    key = teacher_key(cfg, train, seed, device)

    def build(work: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        train_set, val_set = data.get_datasets(train.dataset, root=data_root,
                                               img_size=cfg.img_size,
                                               train_limit=train.train_limit,
                                               val_limit=train.val_limit, seed=train.seed)
        record, snaps = train_classifier(model, train_set, val_set, train, config=key,
                                         work_path=work, progress=progress, device=device)
        tensors = dict(model.state_dict())
        for step, state in snaps.items():
            tensors.update({f"snapshot.{step}.{k}": v for k, v in state.items()})
        return (half_rounded(tensors) if train.half_weights else tensors), record

    tensors, record = get_or_plan("teacher", key, build,
                                  request=TeacherRequest(cfg, train, seed, device), plan=plan)
    model.cpu().load_state_dict({k: v for k, v in tensors.items()
                                 if not k.startswith("snapshot.")})
    return model.eval(), record


def teacher_snapshot(cfg: TeacherConfig, train: TrainConfig, step: int, *, seed: int = 0,
                     data_root: str | Path | None = None, device: str = "auto",
                     plan: Plan | None = None) -> VisionTransformer:
    """The teacher's weights at ``step`` (one of ``train.snapshot_steps``), e.g. for Fig. 13."""
    if step not in train.snapshot_steps:
        raise ValueError(f"step {step} is not a snapshot; available: {train.snapshot_steps}")
    get_teacher(cfg, train, seed=seed, data_root=data_root, progress=False, device=device,
                plan=plan)
    tensors, _ = load("teacher", teacher_key(cfg, train, seed, device), plan)
    prefix = f"snapshot.{step}."
    model = build_teacher(cfg, seed)
    model.load_state_dict({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)})
    return model.eval()


def _snapshot_path(work_path: Path, step: int) -> Path:
    return work_path.with_suffix(f".snap{step}.safetensors")


def _best_path(work_path: Path) -> Path:
    return work_path.with_suffix(".best.safetensors")
