"""Tests of raptor.dinov2.command_line and raptor.dinov2.run_config: the pipeline's options and
their defaults, the paper's run."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
import torch

from raptor.config import DistillConfig
from raptor.dinov2.command_line import build_parser, parse_args
from raptor.dinov2.run_config import PipelineConfig, paper_distill, published_repeats


def test_parse_args_defaults_are_the_papers_and_options_are_the_fields() -> None:
    cfg = parse_args(["--weights", "w.safetensors", "--imagenet", "in", "--out", "o"])
    cuda = torch.cuda.is_available()
    # the DistillConfig the pipeline built field by field before it held one: same run keys
    written_out = DistillConfig(
        repeats=(7, 3, 2), stage1_steps=312_500, stage2_steps=312_500, batch_size=64, lr=3e-4,
        weight_decay=1e-4, warmup_steps=10_000, min_lr=1e-6, grad_clip=1.0, mlp="teacher",
        init="random", seed=0, dataset="imagenet", train_limit=None,
        device="cuda" if cuda else "cpu", bf16=cuda, compile=cuda)
    assert cfg.distill == written_out == PipelineConfig(Path("i"), Path("o"), download=True).distill
    assert cfg.model == "vit_base_patch14_reg4_dinov2.lvd142m" and cfg.img_size == 224
    cpu = parse_args(["--download", "--imagenet", "i", "--out", "o", "--partition", "7,3,2",
                      "--device", "cpu", "--no-depth-scaling", "--stage2-weights", "1,0,1"])
    assert cpu.distill == dataclasses.replace(paper_distill(device="cpu"), depth_scaling=False,
                                              stage2_weights=(1.0, 0.0, 1.0))
    options = {a.dest for a in build_parser()._actions}
    for config, left_out in ((DistillConfig, {"repeats", "dataset"}),
                             (PipelineConfig, {"distill", "progress"})):
        fields = set(typing.get_type_hints(config))
        assert fields - options == left_out  # every other field is an option
    assert options - set(typing.get_type_hints(DistillConfig)) - set(typing.get_type_hints(
        PipelineConfig)) == {"help", "k", "partition", "quiet"}


@pytest.mark.parametrize(("k", "repeats"), [(None, (7, 3, 2)), (2, (7, 5)), (3, (7, 3, 2)),
                                            (4, (4, 3, 3, 2))])
def test_k_gives_the_papers_dinov2_partitions(k: int | None, repeats: tuple[int, ...]) -> None:
    argv = ["--download", "--imagenet", "i", "--out", "o"] + ([] if k is None else ["--k", str(k)])
    assert parse_args(argv).distill.repeats == repeats  # Table 1: 1-7|8-12, 1-7|8-10|11-12, ...
    if k is not None:
        assert published_repeats(k) == repeats
