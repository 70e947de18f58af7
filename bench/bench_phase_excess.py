"""Benchmark C1's ladder of nulls: the cost of each null's fit on one matrix, and of the whole
cross-fitted ``phase_excess`` with its bootstrap (one model, one k), and of three k from one
set of resamples (``phase_excesses``, as the chapters call it) against one call per k, as ratios
in one run.

Run: ``.venv/bin/python bench/bench_phase_excess.py [--quick]``
"""

from __future__ import annotations

import argparse

from bench_phases import median_ms  # bench/ is on the path when a bench script runs

from raptor import controls
from raptor.structure import phase_excess, phase_excesses, stationary_null, warped_decay_null


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 11

    per_image, growth = controls.control("random walk", 1000)
    S = per_image.mean(0)
    stationary = median_ms(lambda: stationary_null(S), 10 * repeats)
    warped = median_ms(lambda: warped_decay_null(S), 10 * repeats)
    print(f"one null on a {len(S)} x {len(S)} matrix, median of {10 * repeats} runs")
    print(f"  stationary   {stationary:7.3f} ms")
    print(f"  warped decay {warped:7.3f} ms  ({warped / stationary:.1f}x the stationary)")

    print(f"\nphase_excess, 1000 images, k = 3, n_boot = 200, median of {repeats} runs")
    matrices = median_ms(lambda: phase_excess(per_image, 3, n_boot=200), repeats, warmup=1)
    walk = median_ms(lambda: phase_excess(per_image, 3, growth=growth, n_boot=200), repeats,
                     warmup=1)
    print(f"  stationary + warped decay        {matrices:8.1f} ms")
    print(f"  + random walk (per-image nulls)  {walk:8.1f} ms  ({walk / matrices:.2f}x)")

    print(f"\nk = 2, 3, 4 with the random walk, n_boot = 200, median of {repeats} runs")
    each = median_ms(lambda: [phase_excess(per_image, k, growth=growth, n_boot=200)
                              for k in (2, 3, 4)], repeats, warmup=1)
    shared = median_ms(lambda: phase_excesses(per_image, (2, 3, 4), growth=growth, n_boot=200),
                       repeats, warmup=1)
    print(f"  one call per k                   {each:8.1f} ms")
    print(f"  phase_excesses (shared resamples){shared:8.1f} ms  ({each / shared:.2f}x faster)")


if __name__ == "__main__":
    main()
