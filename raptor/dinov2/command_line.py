"""The command line of ``python -m raptor.dinov2.pipeline``: a :class:`PipelineConfig` from its
arguments."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence

from raptor.config import DistillConfig
from raptor.dinov2.cli import add_options, field_defaults, numbers
from raptor.dinov2.run_config import PipelineConfig, paper_distill, published_repeats
from raptor.paper import DINOV2_B_PARTITIONS

DESCRIPTION = "The paper's DINOv2 run (§5, Table 1) as one resumable command: distil, save, probe."

#: Fields that are not options one to one: ``repeats`` comes from ``--k`` / ``--partition``, the
#: dataset is ImageNet, ``progress`` is ``--quiet``.
_NOT_OPTIONS = ("distill", "repeats", "dataset", "progress")
_HELP = {
    "imagenet": "folder with train/ and val/", "out": "run folder (resumable)",
    "weights": "local weights file of --model (safetensors or a weights-only torch file)",
    "download": "fetch the weights from the hub instead (needs a network)",
    "model": "timm ViT name", "model_kwargs": "JSON object of extra timm.create_model arguments",
    "loader_threads": "threads decoding a training batch (None: a share of the cores)",
    "ade20k": "ADEChallengeData2016 folder", "nyuv2": "nyu_depth_v2 folder (BTS layout)",
    "linear_head": "DINOv2's linear head to start the ImageNet probe from",
    "probe_teacher": "probe the teacher too", "probe_epochs": "override every probe's epochs",
    "probe_batch_size": "override every probe's batch size",
    "probe_cache_features": "compute features once (no ImageNet augmentation)",
    "workers": "the probes' DataLoader processes (None: a share of the cores)",
    "dry_run": "check everything, print the plan, train nothing",
    "device": "cpu, cuda or cuda:<i> (None: cuda when available)",
    "bf16": "None: on CUDA", "compile": "None: on CUDA"}


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m raptor.dinov2.pipeline``: one option per field of
    :class:`PipelineConfig` and of :class:`~raptor.config.DistillConfig` (:mod:`raptor.dinov2.cli`;
    defaults: the paper's §3/§5 run), ``--k`` / ``--partition`` for the repeats and ``--quiet``."""
    p = argparse.ArgumentParser(prog="python -m raptor.dinov2.pipeline", description=DESCRIPTION,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    paper = {n: None if n in ("device", "bf16", "compile") else v  # None: automatic
             for n, v in dataclasses.asdict(paper_distill(device="cpu")).items()}
    add_options(p.add_argument_group("run and probes (§5)"), PipelineConfig,
                field_defaults(PipelineConfig), skip=_NOT_OPTIONS, helps=_HELP)
    g = p.add_argument_group("distillation (§3)")
    add_options(g, DistillConfig, paper, skip=_NOT_OPTIONS, helps=_HELP)
    g.add_argument("--k", type=int, help="number of blocks, with the paper's DINOv2-B "
                   f"partition for k in {sorted(DINOV2_B_PARTITIONS)} (None: 3)")
    g.add_argument("--partition", type=numbers(int), help="repeats n_1,...,n_k instead")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def parse_args(argv: Sequence[str] | None = None) -> PipelineConfig:
    """A :class:`PipelineConfig` from command-line arguments (``sys.argv[1:]`` by default)."""
    args = vars(build_parser().parse_args(argv))
    k, partition = args.pop("k"), args.pop("partition")
    if k is not None and partition is not None and k != len(partition):
        raise ValueError(f"--k={k} contradicts --partition {','.join(map(str, partition))} "
                         f"({len(partition)} blocks); give one of them")
    changes = {name: args.pop(name) for name in typing.get_type_hints(DistillConfig)
               if name not in _NOT_OPTIONS}
    repeats = partition if partition is not None else published_repeats(3 if k is None else k)
    args["distill"] = paper_distill(repeats=repeats, **{n: v for n, v in changes.items()
                                                        if v is not None})
    args["progress"] = not args.pop("quiet")
    return PipelineConfig(**args)
