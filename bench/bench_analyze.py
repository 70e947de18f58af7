"""``python -m raptor analyze``'s pass (:func:`raptor.analysis.analyse`): throughput against timm's
``forward_features`` on the same images, and memory as the number of images grows.

    python bench/bench_analyze.py [--quick]

Prints (1) per-image time of ``forward_features``, of the whole analysis pass (trajectories,
similarity sums, per-image phase matrices and random-walk nulls, the flow metrics of §4) and
their ratio, for a timm ViT-Ti/16 at 224 px; (2) the peak resident memory of a fresh process analysing N random
images of that model in batches, for growing N (it must not grow with N).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

import timm
import torch
from torch.utils.data import DataLoader, TensorDataset

from raptor.analysis import analyse

MODEL = "vit_tiny_patch16_224"
BATCH = 32


def images(n: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 3, 224, 224, generator=g), torch.zeros(n, dtype=torch.long))


def throughput(repeats: int) -> None:
    """Median times of the two, interleaved so that a change in the machine's load hits both."""
    model = timm.create_model(MODEL, pretrained=False).eval()
    data = images(BATCH)
    x = data.tensors[0]
    plain, full = [], []
    for _ in range(repeats + 1):
        with torch.no_grad():
            t0 = time.perf_counter()
            model.forward_features(x)
        t1 = time.perf_counter()
        analyse(model, DataLoader(data, batch_size=BATCH), device="cpu", progress=False)
        plain.append(t1 - t0)
        full.append(time.perf_counter() - t1)
    plain, full = statistics.median(plain[1:]), statistics.median(full[1:])  # first: warm-up
    print(f"{MODEL}, batch {BATCH}, {torch.get_num_threads()} threads: forward_features "
          f"{plain / BATCH * 1e3:.1f} ms/image, analysis pass {full / BATCH * 1e3:.1f} ms/image; "
          f"throughput ratio {plain / full:.3f}")


def peak_rss(n: int) -> float:
    """Peak RSS (MiB) of analysing ``n`` random images (run in a fresh process)."""
    model = timm.create_model(MODEL, pretrained=False).eval()
    analyse(model, DataLoader(images(n) if n <= BATCH else _Random(n), batch_size=BATCH),
            device="cpu", progress=False)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Random(torch.utils.data.Dataset):
    """``n`` random images made on demand, so the data set itself takes no memory."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.randn(3, 224, 224, generator=torch.Generator().manual_seed(i)), 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(peak_rss(args.child))
        return
    throughput(3 if args.quick else 7)
    print("analysis pass, peak RSS of a fresh process (MiB):")
    for n in (128, 512, 2048) if args.quick else (256, 1024, 4096):
        rss = float(subprocess.run([sys.executable, __file__, "--child", str(n)],
                                   capture_output=True, text=True, check=True).stdout)
        print(f"  N={n:>5}: {rss:.0f}")


if __name__ == "__main__":
    main()
