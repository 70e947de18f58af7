"""Raptor vs untied teacher: the fwd+bwd step-time ratio over widths and token counts.

Appendix E's runtime parity: a Raptor applying ``k = 2`` blocks ``(3, 3)`` times costs what the
``L = 6`` untied teacher blocks cost, with depth scaling on the activations as well
(:mod:`raptor.model`). Each step is the forward of the whole trajectory from random layer-0
tokens, an MSE against a fixed target trajectory, and the backward (no optimiser: AdamW on the
Raptor's fewer weights would flatter it). The teacher and the Raptors with and without depth
scaling are timed in turn within every repeat, so load changes hit all alike; a shape's ratio is
the median of the per-repeat ratios, its spread their 25–75th percentiles; the ratio of the
fastest steps (contention only ever adds time) is printed too. Times are the process's CPU
time (one torch thread): on a shared machine, time spent descheduled is not counted.

    .venv/bin/python bench/bench_depth_scaling.py [--repeats 11] [--threads 1] [--compile]
                                                  [--widths 64 …] [--tokens 17 …]
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from raptor.model import Raptor
from raptor.teachers import TeacherConfig, build_teacher

WIDTHS = (64, 96, 192, 384, 768)
BATCHES = {17: 64, 65: 16, 257: 4}  # tokens (cls + 4², 8², 16² patches) -> batch: ~1k a step
REPEATS = (3, 3)  # k = 2, L = 6

Step = Callable[[], None]


def steps(dim: int, tokens: int, batch: int, compile_: bool) -> dict[str, Step]:
    """fwd+bwd steps of the untied teacher and the Raptors with / without depth scaling."""
    teacher = build_teacher(TeacherConfig(depth=sum(REPEATS), embed_dim=dim,
                                          num_heads=max(1, dim // 64)), seed=0)
    gen = torch.Generator().manual_seed(0)
    x0 = torch.randn(batch, tokens, dim, generator=gen)
    target = torch.randn(batch, sum(REPEATS), tokens, dim, generator=gen)
    untied = copy.deepcopy(teacher.blocks).requires_grad_(True).train()

    def untied_forward(x: torch.Tensor) -> torch.Tensor:  # the trajectory as forward_from builds it
        states = [x]
        for block in untied:
            states.append(block(states[-1]))
        return torch.stack(states, 1)[:, 1:]

    forwards: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"teacher": untied_forward}
    params: dict[str, list[torch.Tensor]] = {"teacher": list(untied.parameters())}
    for name, scaling in (("scaled", True), ("plain", False)):
        raptor = Raptor(teacher, REPEATS, depth_scaling=scaling).train()
        forwards[name] = lambda x, r=raptor: r.forward_from(x)[:, 1:]
        params[name] = raptor.raptor_parameters()

    def make(name: str) -> Step:
        fwd = torch.compile(forwards[name]) if compile_ else forwards[name]

        def step() -> None:
            for p in params[name]:
                p.grad = None
            nn.functional.mse_loss(fwd(x0), target).backward()
        return step

    return {name: make(name) for name in forwards}


def measure(dim: int, tokens: int, batch: int, warmup: int, repeats: int, compile_: bool
            ) -> dict[str, list[float]]:
    """Per-repeat ratios ``variant / teacher`` for every Raptor variant, the per-repeat seconds of
    each (``<name>_s``), and the teacher's ms."""
    run = steps(dim, tokens, batch, compile_)
    for _ in range(warmup):
        for step in run.values():
            step()
    variants = [name for name in run if name != "teacher"]
    out: dict[str, list[float]] = {"teacher_ms": [], **{name: [] for name in variants},
                                   **{f"{name}_s": [] for name in run}}
    for i in range(repeats):
        order = list(run) if i % 2 == 0 else list(reversed(run))  # no fixed position in a round
        times = {}
        for name in order:
            t0 = time.process_time()
            run[name]()
            times[name] = time.process_time() - t0
        out["teacher_ms"].append(times["teacher"] * 1e3)
        for name, seconds in times.items():
            out[f"{name}_s"].append(seconds)
        for name in variants:
            out[name].append(times[name] / times["teacher"])
    return out


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], statistics.median(values), q[2]


COLUMNS = {"scaled": "depth scaling", "plain": "none"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--compile", action="store_true", help="torch.compile every forward")
    parser.add_argument("--widths", type=int, nargs="+", default=WIDTHS)
    parser.add_argument("--tokens", type=int, nargs="+", default=tuple(BATCHES),
                        choices=tuple(BATCHES))
    parser.add_argument("--batch-scale", type=int, default=1,
                        help="multiply every batch (~1,000 tokens a step) by this")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"threads {args.threads}, repeats {REPEATS}, warm-up {args.warmup}, "
          f"{args.repeats} interleaved repeats, {'compiled' if args.compile else 'eager'}\n")
    names = list(COLUMNS)
    print("| D | tokens × batch | teacher ms | "
          + " | ".join(f"{COLUMNS[n]}: median (p25–p75) / of minima" for n in names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for dim in args.widths:
        for tokens in args.tokens:
            batch = BATCHES[tokens] * args.batch_scale
            r = measure(dim, tokens, batch, args.warmup, args.repeats, args.compile)
            cells = []
            for name in names:
                lo, med, hi = quartiles(r[name])
                least = min(r[f"{name}_s"]) / min(r["teacher_s"])
                cells.append(f"{med:.3f} ({lo:.3f}–{hi:.3f}) / {least:.3f}")
            teacher_ms = statistics.median(r["teacher_ms"])
            print(f"| {dim} | {tokens} × {batch} | {teacher_ms:.1f} | " + " | ".join(cells)
                  + " |", flush=True)


if __name__ == "__main__":
    main()
