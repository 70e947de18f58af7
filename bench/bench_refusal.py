"""Time to a refusal: ``python -m raptor run`` with a bad parameter, a missing input, and a
pretrained ViT's weights file that does not fit it (the one check that imports torch; it is
reached only where Fashion-MNIST is found), against the interpreter's start and ``import torch``
alone, each the median of ``--repeat`` fresh processes (after one warm-up of each).

    python bench/bench_refusal.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = [sys.executable, "-m", "raptor", "run", "--no-build"]
SCRATCH = tempfile.gettempdir() + "/bench-refusal"
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import torch": [sys.executable, "-c", "import torch"],
    "run -p L 0 (a bad parameter)": RUN + ["--chapter", "distillation", "-p", "L", "0"],
    "run -p n_images 10000000 (too many images)": RUN + ["--chapter", "distillation", "-p", "n_images",
                                                         "10000000", "--out", SCRATCH],
    "run -p data_root /nowhere (a missing input)": RUN + ["--chapter", "distillation", "-p", "data_root",
                                                          "/nowhere", "--out", SCRATCH],
    "run --chapter nope (an unknown chapter)": RUN + ["--chapter", "nope"],
    "run --out FILE (an existing file)": RUN + ["--chapter", "distillation", "--out", __file__],
    "run -p L 0, every chapter": RUN + ["-p", "L", "0"],
    "run phase-structure -p p_values [1.5]": RUN + ["--chapter", "phase-structure", "-p",
                                                    "p_values", "[1.5]"],
    # passes every torch-free check, so the model check runs (torch, timm)
    "run phase-structure -p weights FILE (unfit)": RUN + [
        "--chapter", "phase-structure", "-p", "weights", __file__, "-p", "images", SCRATCH,
        "--out", SCRATCH],
}


def seconds(cmd: list[str], expect_refusal: bool) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if expect_refusal != (done.returncode == 2):
        raise SystemExit(f"{cmd}: exit {done.returncode}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    times = {}
    Path(SCRATCH).mkdir(exist_ok=True)
    for name, cmd in CASES.items():
        refusal = "run" in cmd
        seconds(cmd, refusal)  # warm-up: the file cache
        times[name] = statistics.median(seconds(cmd, refusal) for _ in range(args.repeat))
    base = times["import torch"]
    for name, t in times.items():
        print(f"{name:45s} {t:6.2f} s  {t / base:5.2f}x import torch")


if __name__ == "__main__":
    main()
