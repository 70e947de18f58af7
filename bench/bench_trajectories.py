"""Trajectory extraction and layer similarity: overhead over a plain forward pass, and memory.

    python bench/bench_trajectories.py [--quick]

Prints (1) the time of `raptor.trajectories.trajectory` vs the model's own `forward_features`
on the same batch, as a ratio, for the `cpu` teacher and a ViT-B/14-shaped teacher; (2) the peak
resident memory of a fresh process that computes layer similarity over N images, streaming in
batches vs holding every trajectory at once, for growing N (streaming must not grow with N).
"""

from __future__ import annotations

import argparse
import statistics
import time
import resource
import subprocess
import sys

import torch

from raptor.similarity import SimilarityAccumulator
from raptor.teachers import TeacherConfig, build_teacher
from raptor.trajectories import TokenGroups, trajectory


def median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def overhead(cfg: TeacherConfig, batch: int, repeats: int) -> None:
    model = build_teacher(cfg).eval()
    x = torch.randn(batch, cfg.in_chans, cfg.img_size, cfg.img_size)
    with torch.no_grad():
        plain = median_time(lambda: model.forward_features(x), repeats)
        traj = median_time(lambda: trajectory(model, x), repeats)
    print(f"L={cfg.depth} D={cfg.embed_dim} img={cfg.img_size}/{cfg.patch_size} batch={batch}: "
          f"forward {plain * 1e3:.1f} ms, trajectory {traj * 1e3:.1f} ms, ratio {traj / plain:.3f}")


def similarity_peak_rss(n_images: int, streaming: bool, batch: int = 250) -> float:
    """Peak RSS (MiB) of computing similarity over ``n_images`` random trajectories of the cpu
    teacher's shape (run in a fresh process)."""
    cfg = TeacherConfig(depth=12, embed_dim=64, num_heads=4, patch_size=7, reg_tokens=2)
    groups = TokenGroups.from_counts(1, cfg.reg_tokens, (cfg.img_size // cfg.patch_size) ** 2)
    gen = torch.Generator().manual_seed(0)
    shape = (batch, cfg.depth + 1, groups.num_tokens, cfg.embed_dim)
    acc = SimilarityAccumulator(groups)
    if streaming:
        for _ in range(n_images // batch):
            acc.update(torch.randn(*shape, generator=gen))
    else:
        acc.update(torch.cat([torch.randn(*shape, generator=gen)
                              for _ in range(n_images // batch)]))
    acc.result()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(similarity_peak_rss(int(args.child[0]), args.child[1] == "stream"))
        return
    repeats = 3 if args.quick else 10
    cpu = TeacherConfig(depth=12, embed_dim=64, num_heads=4, patch_size=7, reg_tokens=2)
    overhead(cpu, 256, repeats)
    vitb = TeacherConfig(depth=12, embed_dim=768, num_heads=12, patch_size=14, img_size=224,
                         in_chans=3, num_classes=100)
    overhead(vitb, 4 if args.quick else 16, repeats)
    print("layer similarity, peak RSS of a fresh process (MiB):")
    for n in (500, 2000, 8000) if args.quick else (1000, 4000, 16000):
        rss = {mode: float(subprocess.run([sys.executable, __file__, "--child", str(n), mode],
                                          capture_output=True, text=True, check=True).stdout)
               for mode in ("stream", "whole")}
        print(f"  N={n:>6}: streaming {rss['stream']:.0f}, all at once {rss['whole']:.0f}")


if __name__ == "__main__":
    main()
