"""What each "other kernels" setting of `make nbval` costs: a forward pass of the book's `cpu`
teacher (its family's shape, random weights) over 1,000 images in batches of 250, on one thread,
in a fresh process per setting (the variables are read when torch loads), each the median of
``--repeat`` passes after a warm-up, as a ratio to the machine's default kernels in the same run,
with a digest of the logits: a setting whose digest is the default's computes nothing other.

    python bench/bench_kernels.py --repeat 7
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

SETTINGS = {
    "default kernels": {},
    "ATen scalar": {"ATEN_CPU_CAPABILITY": "default"},
    "oneDNN SSE4.1": {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    "MKL compatible": {"MKL_CBWR": "COMPATIBLE"},
    "MKL AVX": {"MKL_CBWR": "AVX"},
    "MKL dispatch AVX": {"MKL_ENABLE_INSTRUCTIONS": "AVX"},
    "MKL dispatch SSE4.2": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "all three (make nbval)": {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41",
                               "MKL_CBWR": "COMPATIBLE"},
    "ATen AVX2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "oneDNN AVX2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "MKL AVX2": {"MKL_CBWR": "AVX2"},
    "all three at AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                          "MKL_CBWR": "AVX2"},
}

PASS = """
import hashlib, statistics, time, torch
from raptor.book.profiles import TEACHER as cfg
from raptor.teachers import build_teacher
model = build_teacher(cfg, 0).eval()
images = torch.randn(1000, cfg.in_chans, cfg.img_size, cfg.img_size,
                     generator=torch.Generator().manual_seed(0))
times = []
with torch.inference_mode():
    for _ in range({repeat} + 1):
        start = time.perf_counter()
        logits = torch.cat([model(images[i:i + 250]) for i in range(0, 1000, 250)])
        times.append(time.perf_counter() - start)
print(hashlib.sha256(logits.numpy().tobytes()).hexdigest()[:12], statistics.median(times[1:]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    times = {}
    for name, env in SETTINGS.items():
        done = subprocess.run([sys.executable, "-c", PASS.replace("{repeat}", str(args.repeat))],
                              capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1", **env})
        if done.returncode != 0:
            raise SystemExit(f"{name}: {done.stderr[-2000:]}")
        digest, seconds = done.stdout.split()[-2:]
        times[name] = float(seconds)
        print(f"{name:24s} {times[name]:.3f} s  {times[name] / times['default kernels']:.2f}×  "
              f"logits {digest}", flush=True)


if __name__ == "__main__":
    main()
