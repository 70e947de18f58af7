"""Benchmark C1's power simulation (``smallest_step``, the d* of every model): its isotonic fits
and bounded searches batched over the replicates (the default) against one scipy
``isotonic_regression`` per fit and one ``minimize_scalar`` per matrix (the code before, forced
by raising ``BATCHED_FROM``), as a ratio in one run, on an atlas cell at the ``cpu`` profile's
100 replicates; the two d* must be equal.

Run: ``.venv/bin/python bench/bench_isotonic.py [--quick]``
"""

from __future__ import annotations

import argparse
import math

from bench_phases import median_ms  # bench/ is on the path when a bench script runs

from raptor import atlas, atlas_design, structure
from raptor.phase_test import K_TRIED, paper_partition, smallest_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7

    cell = atlas.load(atlas_design.RESULTS)[0]
    L = cell.phase.shape[1]
    d_star: dict[str, float] = {}

    def run(name: str, batched_from: float) -> float:
        def once() -> None:
            d_star[name] = smallest_step(cell.phase, paper_partition(L, 3), ks=K_TRIED, reps=100)
        structure.BATCHED_FROM = batched_from
        try:
            return median_ms(once, repeats, warmup=1)
        finally:
            structure.BATCHED_FROM = default

    default = structure.BATCHED_FROM
    before = run("per fit", math.inf)
    after = run("batched", default)
    print(f"smallest_step on {cell.cell.name} ({len(cell.phase)} images, k = {K_TRIED}, "
          f"100 replicates), median of {repeats} runs")
    print(f"  one scipy fit per call (before) {before:8.1f} ms")
    print(f"  batched fits (after)            {after:8.1f} ms  ({before / after:.2f}x faster)")
    print(f"  d* equal: {d_star['per fit'] == d_star['batched']} ({d_star['batched']:.6f})")


if __name__ == "__main__":
    main()
