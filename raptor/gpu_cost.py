"""What a training costs on a GPU: FLOPs ≈ 6 × parameters × tokens × images (a forward pass
alone, 2 ×), and GPU-hours at the training throughput that ``bench/gpu_check.py`` recorded in
``bench/gpu_check.json`` (``{"device": ..., "tflops": ...}``), else at :data:`ASSUMED_GPU`'s."""

from __future__ import annotations

import json
from pathlib import Path

GPU_RECORD = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.json"
# Without a measured record: an H100/H200 SXM (989 TFLOP/s dense bf16 peak, the same on both) at
# an assumed 40% of its peak, a fair utilisation for ViT-B training in bf16 (small models reach
# less).
ASSUMED_GPU = ("H100/H200 SXM", 989.0, 0.40)


def training_flops(params: int, tokens: int, images: int) -> float:
    """Training FLOPs ≈ 6 × ``params`` × ``tokens`` × ``images`` (forward 2, backward 4)."""
    return 6.0 * params * tokens * images


def gpu_throughput(record: Path = GPU_RECORD) -> tuple[str, float] | None:
    """``(device, training TFLOP/s)`` measured by ``bench/gpu_check.py``, if it left a record."""
    if not record.is_file():
        return None
    data = json.loads(record.read_text())
    return str(data["device"]), float(data["tflops"])


def assumed_throughput() -> tuple[str, float]:
    """``(what, TFLOP/s)`` of :data:`ASSUMED_GPU`, for an estimate where nothing was measured."""
    name, peak, utilisation = ASSUMED_GPU
    return (f"an estimate: {name} at an assumed {utilisation:.0%} of its {peak:g} TFLOP/s dense "
            f"bf16 peak; no {GPU_RECORD.name} from bench/gpu_check.py here"), peak * utilisation


def throughput() -> tuple[str, float, str]:
    """``(source, TFLOP/s, mark)``: the measured throughput, else the assumed one and ``"~"``."""
    measured = gpu_throughput()
    if measured:
        return f"{measured[0]}, measured by bench/gpu_check.py", measured[1], ""
    return (*assumed_throughput(), "~")


def gpu_hours(flops: float, tflops: float) -> float:
    return flops / tflops / 1e12 / 3600
