"""Peak memory and time of the streaming DynamicsAccumulator vs the whole-array batch functions.

Synthetic float32 trajectories (N, L+1 = 13, T = 261 (cls, 4 registers, 256 patches), D = 96),
generated batch by batch from per-batch seeds, so both paths see the same data. Each configuration
runs in a fresh subprocess; peak memory = peak RSS (ru_maxrss) minus the RSS after imports.
Times include generating the synthetic data (the stand-in for a data source) and are the best of
``--repeats`` runs after one warm-up run (the warm-up run is the one whose memory is measured).

    .venv/bin/python bench/bench_dynamics.py            # N = 500, 1000, 2000; whole array to 1000
    .venv/bin/python bench/bench_dynamics.py --quick    # N = 100, 200, 400, one timed run
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from raptor import dynamics as dy
from raptor import low_rank
from raptor.trajectories import TokenGroups

GROUPS = TokenGroups.from_counts(1, 4, 256)
LAYERS, TOKENS = 13, 261


def batch(index: int, size: int, dim: int) -> torch.Tensor:
    """Batch ``index`` of the synthetic data set: a random walk whose norms grow with depth."""
    gen = torch.Generator().manual_seed(index)
    steps = torch.randn(size, LAYERS, TOKENS, dim, generator=gen)
    return steps.cumsum_(dim=1)


def run_stream(n: int, size: int, dim: int) -> dy.DynamicsSummary:
    acc = dy.DynamicsAccumulator(GROUPS)
    for i in range(n // size):
        acc.update(batch(i, size, dim))
    return acc.result()


def run_whole(n: int, size: int, dim: int) -> dict[str, object]:
    x = torch.cat([batch(i, size, dim) for i in range(n // size)])
    return {"norms": dy.feature_norms(x, GROUPS),
            "convergence": dy.directional_convergence(x, GROUPS),
            "speed": dy.angular_speed(x, GROUPS), "coherence": low_rank.coherence(x, GROUPS),
            "ranks": low_rank.update_ranks(x, GROUPS),
            "dmd": low_rank.dmd_by_group(x, GROUPS)}


def child(mode: str, n: int, size: int, dim: int, repeats: int) -> None:
    torch.set_num_threads(1)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn = run_stream if mode == "stream" else run_whole
    out = fn(n, size, dim)
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n, size, dim)
        times.append(time.perf_counter() - t0)
    speed = out.speed if mode == "stream" else out["speed"]
    print(json.dumps({"peak_mb": peak_mb, "time_s": min(times),
                      "speed_patches": speed["patches"].mean.tolist()}))


def measure(mode: str, n: int, size: int, dim: int, repeats: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", mode, str(n), str(size), str(dim), str(repeats)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="N = 100, 200, 400, one timed run")
    p.add_argument("--dim", type=int, default=96)
    p.add_argument("--batch", type=int, default=None,
                   help="images per batch (default 100, quick 50)")
    p.add_argument("--whole-max", type=int, default=1000,
                   help="largest N for the whole-array run (about 5 GB per 1,000 images at D = 96)")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        mode, *nums = args.child
        child(mode, *map(int, nums))
        return
    sizes, size, repeats = ((100, 200, 400), args.batch or 50, 1) if args.quick else \
        ((500, 1000, 2000), args.batch or 100, 3)
    print(f"T = {TOKENS}, L+1 = {LAYERS}, D = {args.dim}, float32, batch = {size}, "
          f"best of {repeats} after warm-up; 1 thread per run")
    print(f"{'N':>6} {'mode':>7} {'peak MB':>9} {'time s':>8} {'img/s':>7} "
          f"{'whole/stream mem':>17}")
    for n in sizes:
        stream = measure("stream", n, size, args.dim, repeats)
        print(f"{n:>6} {'stream':>7} {stream['peak_mb']:>9.0f} {stream['time_s']:>8.2f} "
              f"{n / stream['time_s']:>7.0f}")
        if n <= args.whole_max:
            whole = measure("whole", n, size, args.dim, repeats)
            diff = max(abs(a - b) for a, b in zip(whole["speed_patches"], stream["speed_patches"]))
            print(f"{n:>6} {'whole':>7} {whole['peak_mb']:>9.0f} {whole['time_s']:>8.2f} "
                  f"{n / whole['time_s']:>7.0f} {whole['peak_mb'] / stream['peak_mb']:>16.1f}x"
                  f"   (max |Δ speed| = {diff:.1e} rad)")


if __name__ == "__main__":
    main()
