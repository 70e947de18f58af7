"""Tests of raptor.dinov2.cost: what the paper's DINOv2 run costs."""

from __future__ import annotations

import timm
import torch

from raptor.dinov2.cost import cost


def test_the_runs_cost_is_six_params_tokens_images() -> None:
    """DINOv2-B at 224 px (256 patches, cls and 4 registers): the distillation's 625,000 steps of
    64 images at 6 FLOPs a parameter and token, the probe's 15 epochs of ImageNet forward."""
    with torch.device("meta"):
        params = sum(p.numel() for p in timm.create_model(
            "vit_base_patch14_reg4_dinov2.lvd142m", pretrained=False, img_size=224).parameters())
    table = cost().iloc[:, 0]
    runs = 6 * params * 261 * 625_000 * 64 + 2 * params * 261 * 15 * 1_281_167
    assert table["one run"].startswith(f"{runs / 1e15:.4g} PFLOP, ")
    assert table.index[3].startswith("Table 1's 9 runs")
    assert table.iloc[3].startswith(f"{9 * runs / 1e15:.4g} PFLOP")
