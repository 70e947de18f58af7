"""Processes started by ``torchrun``: joining the process group and sharing the CPU cores.

[ours] The paper trains on several GPUs without saying how; here every rank distils (DDP, see
:mod:`raptor.train`), and the environment ``torchrun`` sets (``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``) says who is who.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def init_distributed(device: str) -> tuple[int, int]:
    """``(rank, world size)``; joins the process group when started by ``torchrun`` with more than
    one process: NCCL with this rank's GPU made current on CUDA, gloo on the CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        if device.startswith("cuda"):
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def cpu_share(cap: int) -> int:
    """This rank's share of the CPU cores (``LOCAL_WORLD_SIZE`` ranks a machine), at most ``cap``."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, min(cap, (os.cpu_count() or 1) // local))
