"""Time to a plan and to a refusal that builds a model: ``python -m raptor sweep --chapter C
--profile paper --dry-run`` (fresh process, no data) and, in one process, the check of a
pretrained ViT against a weights file of another architecture (timm models built on the meta
device), each the median of ``--repeat`` runs after a warm-up, for the code under each ``--tree``
(a checkout; default this one), so that two versions compare in one run.

    python bench/bench_planning.py --repeat 3 --tree /tmp/before --tree .
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MISMATCH = """
import time, timm
from safetensors.torch import save_file
from raptor.book.pretrained import require_vit
from raptor.book.spec import SpecError
other = timm.create_model("vit_small_patch14_reg4_dinov2", pretrained=False, img_size=32)
save_file({k: v.contiguous() for k, v in other.state_dict().items()}, "{path}")
times = []
for _ in range({repeat} + 1):
    start = time.perf_counter()
    try:
        require_vit("vit_tiny_patch16_224", "{path}", 32)
    except SpecError:
        times.append(time.perf_counter() - start)
print(sorted(times[1:])[len(times[1:]) // 2])
"""


def dry_run(tree: Path, chapter: str, scratch: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "RAPTOR_CACHE": f"{scratch}/cache",
           "RAPTOR_DATA": scratch}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "raptor", "sweep", "--chapter", chapter,
                           "--profile", "paper", "--dry-run"], capture_output=True, text=True,
                          env=env, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {chapter}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def mismatch(tree: Path, repeat: int, scratch: str) -> float:
    code = MISMATCH.replace("{path}", f"{scratch}/other.safetensors").replace(
        "{repeat}", str(repeat))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, action="append")
    parser.add_argument("--chapter", action="append")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [Path(".")]]
    chapters = args.chapter or ["distillation", "functional-phases"]
    with tempfile.TemporaryDirectory() as scratch:
        for tree in trees:
            print(f"{tree}: weights of another ViT refused in "
                  f"{mismatch(tree, args.repeat, scratch):.2f} s")
            for chapter in chapters:
                dry_run(tree, chapter, scratch)  # warm-up: the file cache
                t = statistics.median(dry_run(tree, chapter, scratch)
                                      for _ in range(args.repeat))
                print(f"{tree}: {chapter} dry run at paper {t:6.1f} s")


if __name__ == "__main__":
    main()
