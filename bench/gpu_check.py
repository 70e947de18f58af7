"""GPU check: can the paper's DINOv2 distillation run here, and how long would it take?

Builds DINOv2 ViT-B/14 with 4 registers at 224 px (paper §3; random weights unless
``--weights`` is given: throughput does not depend on the values) and the Raptor of the paper's
k = 3 partition ``1–7 | 8–10 | 11–12`` (repeats 7, 3, 2; Table 1). It times the training
step of :func:`raptor.train.distill` — teacher trajectory online under ``no_grad``, the stage's
loss (stage 1: :class:`raptor.losses.BlockObjective`, each block's; stage 2:
:class:`raptor.losses.Objective`), backward, per-block (stage 1) or global (stage 2) gradient
clipping at 1.0, AdamW — on synthetic images, in bf16 autocast, in two modes:
``eager`` and ``compile``, ``torch.compile`` on each block as ``DistillConfig(bf16=True,
compile=True)`` does (the Raptor passes the depth index as a tensor, so one graph serves every
layer). Three
steps matter (§3, Fig. 6): stage 1 while ``λ > 0`` (the first 25%: TF *and* AR losses), stage 1
afterwards (AR only), and stage 2 (the chained blocks, AR). It prints images/s, ms/step, an
estimate of the matmul throughput, the peak GPU memory (``torch.cuda.max_memory_allocated``)
and the time of the paper's schedule (312,500 steps per stage at batch 64), also for N GPUs
assuming linear scaling (DDP's all-reduce and the data loader are not measured: the images
are synthetic, so the loader must deliver the printed images/s on its own).

Without CUDA (or with ``--cpu``) it runs the same code on a reduced model so it can be tried
anywhere: depth 12, width 192, 3 heads, 112 px (69 tokens), batch 8, float32, eager by default; its
extrapolation is for that reduced model on that CPU, not for the paper's run.

Each step is one call of :func:`raptor.loop.train`, the loop :func:`raptor.train.distill` runs
(with its per-step host synchronisation of the non-finite guard), on the teacher's trajectory.

On CUDA it writes ``bench/gpu_check.json`` (``--record`` elsewhere): the device and the training
throughput of its fastest mode over the paper's schedule (TFLOP/s, the FLOPs of the schedule's steps
over their time), from which ``python -m raptor sweep --dry-run`` estimates GPU-hours. A CPU run
writes a record only where ``--record`` asks for one.

    .venv/bin/python bench/gpu_check.py [--quick] [--weights FILE] [--batch-size 64]
                                        [--modes eager,compile] [--cpu] [--gpus 1,4,8]
                                        [--record FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import timm
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import counters

from raptor.loop import adamw, train
from raptor.losses import BlockObjective, Objective
from raptor.model import Raptor, flops_per_image
from raptor.paper import DINOV2_B, DINOV2_B_PARTITIONS, RECIPE
from raptor.gpu_cost import GPU_RECORD
from raptor.teachers import load_pretrained
from raptor.train import DistillConfig, build_student
from raptor.trajectories import TokenGroups, trajectory

PAPER_STEPS = RECIPE.stage1_steps  # per stage
PAPER_BATCH = RECIPE.batch_size
ANNEAL_FRAC = RECIPE.anneal_frac  # λ > 0 (TF and AR both computed) over this part of stage 1
REPEATS = tuple(b - a for a, b in DINOV2_B_PARTITIONS[3])  # (7, 3, 2)
CPU_MODEL = {"img_size": 112, "embed_dim": 192, "num_heads": 3}
MODES = ("eager", "compile")
#: (label, stage, λ): λ = 0.5 makes stage 1 compute both its losses, as while annealing.
STEPS = (("stage 1, TF+AR (first 25%)", 1, 0.5), ("stage 1, AR (last 75%)", 1, 0.0),
         ("stage 2, chained AR", 2, 0.0))


@dataclass(frozen=True)
class Row:
    """One measured configuration."""

    mode: str
    step: str
    images_per_s: float
    ms_per_step: float
    tflops: float
    peak_gib: float | None
    first_s: float


def teacher_model(weights: str | None, cpu: bool, device: torch.device) -> nn.Module:
    """DINOv2-B at 224 px (``weights`` or random init), or the reduced CPU model."""
    if cpu:
        model = timm.create_model(DINOV2_B.split(".")[0], pretrained=False, **CPU_MODEL)
    elif weights is not None:
        model = load_pretrained(DINOV2_B, weights, img_size=224)
    else:
        model = timm.create_model(DINOV2_B.split(".")[0], pretrained=False, img_size=224)
    return model.eval().requires_grad_(False).to(device)


def make_step(teacher: nn.Module, raptor: Raptor, stage: int, lam: float, bf16: bool
              ) -> Callable[[torch.Tensor], None]:
    """One optimisation step of ``stage`` at TF weight ``lam``, as :func:`raptor.train.distill`
    takes it (loss weights: the paper's, stage-1 weighting on the block ending at ``L``)."""
    cfg = DistillConfig(repeats=REPEATS)
    depth = raptor.depth
    groups = TokenGroups.from_model(teacher)
    blocks_loss = [BlockObjective(b, seg, groups, cfg.stage1_weights if seg[1] == depth else None)
                   for b, seg in zip(raptor.blocks, raptor.partition)]
    chain = Objective(raptor, groups, cfg.stage2_weights)

    def objective(traj: torch.Tensor, stage: int, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Every block's stage-1 step at once (each trains alone; the work is their sum)."""
        if stage == 2:
            return chain(traj)
        parts = torch.stack([o(traj, lam)[0] for o in blocks_loss])
        return parts.sum(), parts.detach()
    params = raptor.raptor_parameters()
    clip_groups = [list(b.parameters()) for b in raptor.blocks] if stage == 1 else [params]
    optimizer = adamw(params, cfg)
    device_type = next(teacher.parameters()).device.type

    def autocast() -> torch.autocast:
        return torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16)

    def loss(_: int, traj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with autocast():
            value, parts = objective(traj, stage, lam)
        return value, parts.float()

    def step(images: torch.Tensor) -> None:
        with torch.no_grad(), autocast():
            traj = trajectory(teacher, images).float()
        train(f"stage {stage}", [(0, traj)], loss, optimizer, clip_groups, cfg, 1)

    raptor.train()
    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(step: Callable[[torch.Tensor], None], images: torch.Tensor, warmup: int,
            repeats: int, flops: float) -> tuple[float, float, float, float | None, float]:
    """``(images/s, ms/step, TFLOP/s, peak GiB, seconds of the warm-up steps)``."""
    device = images.device
    t0 = time.perf_counter()
    for _ in range(warmup):
        step(images)
    sync(device)
    first = time.perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        step(images)
    sync(device)
    seconds = (time.perf_counter() - t0) / repeats
    peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    ips = len(images) / seconds
    return ips, seconds * 1e3, flops * ips / 1e12, peak, first


def step_flops(teacher: int, student: int, stage: int, lam: float) -> float:
    """Matmul FLOPs per image from the teacher's and the student's forward FLOPs: the teacher's
    forward plus the student's forward and backward (×3), twice over in stage 1 while both TF
    and AR losses are computed."""
    passes = 2 if stage == 1 and 0 < lam < 1 else 1
    return teacher + 3 * passes * student


def print_row(mode: str, step: str, ips: float, ms: float, tflops: float, peak: float | None,
              first: float) -> None:
    peak_text = "n/a" if peak is None else f"{peak:.1f}"
    print(f"{mode:<17}{step:<29}{ips:>9.0f}{ms:>10.1f}{tflops:>9.3g}{peak_text:>10}"
          f"{first:>11.1f}", flush=True)


def time_teacher(teacher: nn.Module, images: torch.Tensor, bf16: bool, warmup: int,
                 repeats: int) -> None:
    """The teacher's forward alone (what every step pays before the student's work)."""
    def forward(x: torch.Tensor) -> None:
        with torch.no_grad(), torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
            trajectory(teacher, x)

    print_row("bf16" if bf16 else "fp32", "teacher forward only",
              *measure(forward, images, warmup, repeats, flops_per_image(teacher)))


def time_mode(teacher: nn.Module, images: torch.Tensor, mode: str, bf16: bool, warmup: int,
              repeats: int) -> list[Row]:
    """The three steps of :data:`STEPS` on a fresh Raptor, each block compiled in the
    ``compile`` mode (as ``DistillConfig(compile=True)`` does)."""
    raptor = build_student(teacher, DistillConfig(repeats=REPEATS)).to(images.device)
    flops = (flops_per_image(teacher), flops_per_image(raptor))
    if mode != "eager":
        torch._dynamo.reset()  # the recompile limit counts per code object, across modes
        for block in raptor.blocks:
            block.compile()
    graphs = counters["stats"]["unique_graphs"]
    label = f"{'bf16' if bf16 else 'fp32'} {mode}"
    rows = []
    for name, stage, lam in STEPS:
        step = make_step(teacher, raptor, stage, lam, bf16)
        rows.append(Row(label, name, *measure(step, images, warmup, repeats,
                                               step_flops(*flops, stage, lam))))
        print_row(label, name, *dataclasses.astuple(rows[-1])[2:])
    if mode != "eager":
        graphs = counters["stats"]["unique_graphs"] - graphs
        limit = torch._dynamo.config.recompile_limit
        print(f"{'':<17}torch.compile traced {graphs} graphs of the block's forward "
              f"(recompile limit {limit}"
              + ("; REACHED: the other variants ran eagerly)" if graphs >= limit else ")"),
              flush=True)
    return rows


def hours(seconds: float) -> str:
    return f"{seconds / 3600:8.1f} h"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps")
    parser.add_argument("--weights", help="DINOv2-B weights file (default: random init)")
    parser.add_argument("--batch-size", type=int, help=f"default {PAPER_BATCH} (CPU: 8)")
    parser.add_argument("--modes", help="comma-separated among eager, compile "
                        "(default: all on CUDA, eager on the CPU)")
    parser.add_argument("--cpu", action="store_true", help="the reduced CPU run even with CUDA")
    parser.add_argument("--gpus", default="1,2,4,8", help="GPU counts to extrapolate to")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--record", help=f"write the throughput record here (default on CUDA: "
                        f"{GPU_RECORD.relative_to(GPU_RECORD.parents[1])})")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cpu = args.cpu or not torch.cuda.is_available()
    device = torch.device("cpu" if cpu else "cuda")
    batch = args.batch_size or (8 if cpu else PAPER_BATCH)
    warmup, repeats = ((1, 2) if args.quick else (1, 3)) if cpu else \
        ((2, 5) if args.quick else (3, 10))
    modes = (args.modes or ("eager" if cpu else ",".join(MODES))).split(",")
    if not set(modes) <= set(MODES):
        parser.error(f"--modes must be among {', '.join(MODES)}, got {args.modes!r}")
    bf16 = not cpu
    gpus = [int(n) for n in args.gpus.split(",")]

    t_start = time.perf_counter()
    teacher = teacher_model(args.weights, cpu, device)
    tokens = TokenGroups.from_model(teacher).num_tokens
    size = teacher.patch_embed.img_size[0]
    where = (f"CPU ({torch.get_num_threads()} threads), REDUCED model: depth 12, width "
             f"{teacher.embed_dim}, {size} px" if cpu else torch.cuda.get_device_name(device))
    print(f"gpu_check on {where}; torch {torch.__version__}\n"
          f"teacher {DINOV2_B.split('.')[0]} at {size} px ({tokens} tokens), "
          f"{'weights ' + args.weights if args.weights else 'random init'}; Raptor k=3 "
          f"repeats {REPEATS}; batch {batch}; synthetic images; warm-up {warmup}, "
          f"timed {repeats} steps\n", flush=True)
    images = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0)
                         ).to(device)

    print(f"{'mode':<17}{'step':<29}{'img/s':>9}{'ms/step':>10}{'TFLOP/s':>9}"
          f"{'peak GiB':>10}{'warm-up s':>11}", flush=True)
    time_teacher(teacher, images, bf16, warmup, repeats)
    rows = [row for mode in modes for row in time_mode(teacher, images, mode, bf16, warmup,
                                                        repeats)]

    measured = ("measured at that batch" if batch == PAPER_BATCH else
                f"images/s measured at batch {batch}, assumed the same at {PAPER_BATCH}")
    print(f"\nThe paper's schedule: {PAPER_STEPS:,} steps per stage at batch {PAPER_BATCH} "
          f"(stage 1: {ANNEAL_FRAC:.0%} TF+AR steps, {1 - ANNEAL_FRAC:.0%} AR steps); "
          f"{measured}.\nN GPUs: time / N, perfect linear scaling under torchrun (optimistic: "
          f"DDP's all-reduce and the data loader are not measured).")
    print(f"{'mode':<17}{'stage 1':>11}{'stage 2':>11}{'total':>11}"
          + "".join(f"{f'total/{n} GPUs':>15}" for n in gpus if n > 1))
    schedule = {}  # label -> (seconds, TFLOP/s) of the paper's schedule
    for label in dict.fromkeys(r.mode for r in rows):
        by_step = {r.step: r for r in rows if r.mode == label}
        images = {name: PAPER_STEPS * PAPER_BATCH * share for name, share in
                  zip(by_step, (ANNEAL_FRAC, 1 - ANNEAL_FRAC, 1.0))}
        seconds = {name: images[name] / r.images_per_s for name, r in by_step.items()}
        s1, s2 = seconds[STEPS[0][0]] + seconds[STEPS[1][0]], seconds[STEPS[2][0]]
        flops = sum(images[name] * r.tflops * 1e12 / r.images_per_s for name, r in by_step.items())
        schedule[label] = (s1 + s2, flops / (s1 + s2) / 1e12)
        print(f"{label:<17}{hours(s1):>11}{hours(s2):>11}{hours(s1 + s2):>11}"
              + "".join(f"{hours((s1 + s2) / n):>15}" for n in gpus if n > 1))
    record = args.record or (None if cpu else GPU_RECORD)
    if record:
        label, (_, tflops) = min(schedule.items(), key=lambda item: item[1][0])
        tmp = f"{record}.tmp"
        with open(tmp, "w") as f:
            json.dump({"device": where, "tflops": tflops, "mode": label, "batch": batch,
                       "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}, f, indent=1)
        os.replace(tmp, record)
        print(f"\nrecord: {record} ({label}, {tflops:.3g} TFLOP/s over the schedule)")
    print(f"\ncheck took {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
