"""torch's fused attention kernel against timm's plain path (``fused_attn = False``: the scores,
softmax and product written out), the same maths, on the book's shapes (D = 64, 4 heads, 19
tokens). Whether the plain path pays for the models' forward passes and training steps, which use
the fused kernel (:class:`raptor.model.RaptorBlock`, timm's teachers).

Timed alternately in one process on one thread (warm-up, repeats, median), as the plain path's
speed-up over the fused kernel: the attention alone (a batch of 128, forward without gradients
and forward with backward), a teacher's trajectory over 500 images without gradients (the book's
forward passes), a k = 3 Raptor's stage-2 training step (``bench_train_step``'s). First checks that
the two paths agree.

    OMP_NUM_THREADS=1 python bench/bench_attention.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Attention
from torch import nn

from bench_train_step import BATCH, TEACHER, setup, timed
from raptor.teachers import build_teacher
from raptor.trajectories import trajectory


def use_fused(model: nn.Module, fused: bool) -> None:
    """Every timm attention in ``model`` on the fused kernel (``True``) or the plain path."""
    for module in model.modules():
        if isinstance(module, Attention):
            module.fused_attn = fused


def speedup(run: Callable[[bool], None], repeats: int) -> tuple[float, float]:
    """``(fused seconds, plain's speed-up)``: medians of ``run(fused)`` timed alternately."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for i in range(repeats + 2):
        for fused in (True, False):
            took = timed(lambda: run(fused))
            if i >= 2:  # the first two rounds warm up
                times[fused].append(took)
    fused_s = statistics.median(times[True])
    return fused_s, fused_s / statistics.median(times[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    heads = TEACHER.num_heads
    q, k, v = (torch.randn(BATCH, heads, 19, TEACHER.embed_dim // heads, requires_grad=True)
               for _ in range(3))

    def attend(fused: bool) -> torch.Tensor:
        if fused:
            return F.scaled_dot_product_attention(q, k, v)
        return ((q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v

    teacher = build_teacher(TEACHER).eval()
    images = torch.randn(500, 1, 28, 28)
    raptor, _, step, traj = setup(3)
    with torch.no_grad():
        gap = (attend(True) - attend(False)).abs().max().item()
        use_fused(teacher, False)
        plain = trajectory(teacher, images)
        use_fused(teacher, True)
        gap = max(gap, (trajectory(teacher, images) - plain).abs().max().item())
    print(f"the two paths agree to {gap:.1e} (largest absolute difference)")

    def no_grad(fn: Callable[[bool], object]) -> Callable[[bool], None]:
        def run(fused: bool) -> None:
            with torch.no_grad():
                fn(fused)
        return run

    def trained(fused: bool) -> None:
        use_fused(raptor, fused)
        step(traj)

    def teacher_pass(fused: bool) -> None:
        use_fused(teacher, fused)
        trajectory(teacher, images)

    cases = {
        f"attention alone, batch {BATCH}, no gradients": no_grad(attend),
        f"attention alone, batch {BATCH}, forward and backward":
            lambda fused: attend(fused).sum().backward(),
        "teacher trajectory, 500 images, no gradients": no_grad(teacher_pass),
        f"Raptor k = 3 stage-2 training step, batch {BATCH}": trained,
    }
    for name, run in cases.items():
        fused_s, ratio = speedup(run, args.repeats)
        print(f"{name}: fused {fused_s * 1e3:.1f} ms, plain path {ratio:.2f}x")


if __name__ == "__main__":
    main()
