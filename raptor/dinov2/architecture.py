"""The teacher's architecture checked against a run's configuration, on the meta device (no
memory, no weights), before its weights are read."""

from __future__ import annotations

from typing import Any

import timm
import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from raptor.dinov2.run_config import PipelineConfig
from raptor.paper import DINOV2_B_DEPTH


def architecture(cfg: PipelineConfig) -> VisionTransformer:
    """The teacher's architecture on the meta device (no memory, no weights)."""
    if not timm.is_model(cfg.model.split(".")[0]):
        close = timm.list_models(f"{cfg.model.split('_')[0]}_*")[:8]
        raise ValueError(f"--model: unknown timm model {cfg.model!r}; similar names: {close}")
    try:
        model = _create(cfg.model, teacher_kwargs(cfg))
    except TypeError as err:
        if isinstance(_create(cfg.model, {}), VisionTransformer):
            raise ValueError(f"--model-kwargs {cfg.model_kwargs} not accepted by {cfg.model}: "
                             f"{err}") from err
        model = _create(cfg.model, {})
    if not isinstance(model, VisionTransformer):
        raise ValueError(f"--model {cfg.model!r} is a {type(model).__name__}, not a timm "
                         f"VisionTransformer")
    if model.patch_embed.proj.in_channels != 3:
        raise ValueError(f"the teacher takes {model.patch_embed.proj.in_channels} input "
                         f"channels; ImageNet images are RGB: in_chans must be 3")
    if not model.has_class_token:
        raise ValueError(f"--model {cfg.model!r} has no cls token; the probes of §5 need one")
    patch = model.patch_embed.patch_size[0]
    if cfg.img_size % patch:
        raise ValueError(f"--img-size={cfg.img_size} must be a multiple of {cfg.model}'s patch "
                         f"size {patch} (e.g. {max(1, round(cfg.img_size / patch)) * patch})")
    repeats, depth = cfg.distill.repeats, len(model.blocks)
    if sum(repeats) != depth:
        raise ValueError(f"the partition {','.join(map(str, repeats))} sums to {sum(repeats)}, "
                         f"but the teacher has {depth} blocks (the published partitions of --k "
                         f"are DINOv2-B's {DINOV2_B_DEPTH}): pass --partition n_1,...,n_k")
    return model


def _create(name: str, kwargs: dict[str, Any]) -> nn.Module:
    """``timm.create_model`` without weights, on the meta device where its init allows."""
    try:
        with torch.device("meta"):
            return timm.create_model(name, pretrained=False, **kwargs)
    except (RuntimeError, NotImplementedError):  # an init that needs real tensors
        return timm.create_model(name, pretrained=False, **kwargs)


def teacher_kwargs(cfg: PipelineConfig) -> dict[str, Any]:
    """The teacher's ``timm.create_model`` arguments: one model at every resolution."""
    return {"img_size": cfg.img_size, "dynamic_img_size": True, **cfg.model_kwargs}
