"""What the paper's DINOv2 run costs on a GPU (:mod:`raptor.gpu_cost`): one run, and Table 1's."""

from __future__ import annotations

import pandas as pd

from raptor import gpu_cost
from raptor.analysis import vit_shape
from raptor.catalog import dataset_info
from raptor.config import DistillConfig
from raptor.dinov2.run_config import paper_distill
from raptor.paper import DINOV2_B, DINOV2_B_PARTITIONS, IMG_SIZE, TABLE1_SEEDS
from raptor.probes import IMAGENET_PROBE


def cost(distill: DistillConfig | None = None, model: str = DINOV2_B,
         img_size: int = IMG_SIZE) -> pd.DataFrame:
    """What one DINOv2 run (a Raptor of Table 1) costs on a GPU (:mod:`raptor.gpu_cost`), and
    Table 1's runs: the distillation (a Raptor applies its blocks as often as ``model`` has layers,
    so it costs ``model``'s parameters) and the ImageNet linear probe's forward passes through the
    frozen student, every epoch."""
    distill = distill or paper_distill(device="cpu")
    vit = vit_shape(model, img_size)
    params = sum(p.numel() for p in vit.parameters())
    tokens = vit.patch_embed.num_patches + vit.num_prefix_tokens
    source, tflops, mark = gpu_cost.throughput()
    flops = {"distillation": gpu_cost.training_flops(
                 params, tokens, distill.batch_size * (distill.stage1_steps + distill.stage2_steps)),
             "ImageNet linear probe": gpu_cost.training_flops(
                 params, tokens, IMAGENET_PROBE.epochs * dataset_info("imagenet").train_size)
             / 3}  # forward passes only: 2 of the 6
    runs = len(DINOV2_B_PARTITIONS) * TABLE1_SEEDS
    rows = {what: f"{f / 1e15:.4g} PFLOP, {mark}{gpu_cost.gpu_hours(f, tflops):.3g} GPU-hours"
            for what, f in {**flops, "one run": sum(flops.values()),
                            f"Table 1's {runs} runs (k = 2, 3, 4; {TABLE1_SEEDS} seeds)":
                                runs * sum(flops.values())}.items()}
    rows["GPU-hours at"] = f"{tflops:.4g} TFLOP/s ({source})"
    rows["not counted"] = ("the ADE20k and NYUv2 probes (smaller datasets), the teacher's "
                           "forward passes")
    return pd.DataFrame({f"the DINOv2 run: {model} at {img_size} px": rows})
