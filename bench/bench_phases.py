"""Benchmark raptor.phases: maxcut DP cost in k and L (expected O(k L^2)), hierarchical brute force.

Run: ``.venv/bin/python bench/bench_phases.py [--quick]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from raptor.phases import hierarchical_maxcut, maxcut


def block_similarity(L: int, n_blocks: int, seed: int = 0) -> np.ndarray:
    """Noisy contiguous block similarity, the shape of a real layer-layer matrix."""
    rng = np.random.default_rng(seed)
    labels = np.minimum(np.arange(L) * n_blocks // L, n_blocks - 1)
    S = np.where(labels[:, None] == labels[None, :], 0.9, 0.3) + rng.normal(0, 0.05, (L, L))
    return (S + S.T) / 2


def median_ms(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 5 if args.quick else 21

    print(f"maxcut, L = 48, median of {repeats} runs")
    S48 = block_similarity(48, 4)
    for k in range(2, 9):
        print(f"  k = {k}: {median_ms(lambda k=k: maxcut(S48, k), repeats):8.3f} ms")

    k = 4
    Ls = [48, 96, 192, 384] if args.quick else [48, 96, 192, 384, 768]
    print(f"\nmaxcut scaling in L, k = {k}")
    matrices = {L: block_similarity(L, 4) for L in Ls}
    times = [median_ms(lambda L=L: maxcut(matrices[L], k), repeats) for L in Ls]
    for i, (L, t) in enumerate(zip(Ls, times)):
        ratio = "" if i == 0 else f"  ratio to L/2: {t / times[i - 1]:5.2f} (x4 if quadratic)"
        print(f"  L = {L:4d}: {t:9.3f} ms{ratio}")
    slope = np.polyfit(np.log(Ls), np.log(times), 1)[0]
    slope_top = np.polyfit(np.log(Ls[-3:]), np.log(times[-3:]), 1)[0]
    print(f"  log-log slope, all L: {slope:.2f}; L >= {Ls[-3]}: {slope_top:.2f} (quadratic = 2)")
    print("  (above ~128 KiB per array, page faults on fresh temporaries and cache misses inflate the")
    print("   constant; MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=1000000000 removes most)")

    print("\nhierarchical_maxcut (brute-force bisection, O(2^L L^2)), eps = 0.1")
    for L in (12, 16, 20):
        S = block_similarity(L, 3)
        print(f"  L = {L}: {median_ms(lambda S=S: hierarchical_maxcut(S, 0.1), 3, warmup=1):9.1f} ms")


if __name__ == "__main__":
    main()
