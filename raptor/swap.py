"""Layer swaps (paper Fig. 15): replace teacher layers by copies of other layers.

If the layers of a phase compute (nearly) the same map, replacing layer ``l`` by a copy of another
layer ``m`` of the *same* max-cut block should keep accuracy, while a layer from a *different*
block should break the network (claim C4). A swap is a pair ``(target, source)`` of block indices
(0-based, ``blocks[target]`` becomes a copy of the original ``blocks[source]``).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from timm.models.vision_transformer import VisionTransformer

from raptor.loop import on_device
from raptor.phases import Partition
from raptor.trajectories import embed, head_logits, run_layers

Swap = tuple[int, int]


def block_of(partition: Partition) -> list[int]:
    """``block_of(partition)[i]`` is the phase index of block ``i`` (0-based blocks)."""
    return [j for j, (start, stop) in enumerate(partition) for _ in range(start, stop)]


def swapped(model: VisionTransformer, swaps: Sequence[Swap]) -> VisionTransformer:
    """A copy of the timm ViT ``model`` whose ``blocks[t]`` is a copy of the original ``blocks[s]``.

    Sources always refer to the *original* blocks, so swaps do not chain.
    """
    _check(swaps, len(model.blocks))
    out = copy.deepcopy(model)
    for t, s in swaps:
        out.blocks[t] = copy.deepcopy(model.blocks[s])
    return out


def _check(swaps: Sequence[Swap], depth: int) -> None:
    targets = [t for t, _ in swaps]
    if not targets or len(set(targets)) != len(targets):
        raise ValueError(f"each layer can be replaced once, got targets {targets}")
    for t, s in swaps:
        if not (0 <= t < depth and 0 <= s < depth) or t == s:
            raise ValueError(f"swap (target={t}, source={s}) needs distinct blocks in [0, {depth})")


@torch.no_grad()
def swap_accuracy(model: VisionTransformer, swap_sets: Sequence[Sequence[Swap]],
                  batches: Iterable, *, device: str | torch.device = "cpu") -> np.ndarray:
    """Top-1 accuracy of ``swapped(model, swaps)`` for each set in ``swap_sets``, as
    :func:`~raptor.metrics.head_accuracy` gives it, bit for bit: each set runs from the unswapped
    trajectory at its first target, so the layers before it are computed once a batch, and the
    blocks are used in place, not copied."""
    depth = len(model.blocks)
    for swaps in swap_sets:
        _check(swaps, depth)
    correct, total = np.zeros(len(swap_sets)), 0
    with on_device(model, device) as device:
        for images, labels in batches:
            states = run_layers(model, embed(model, images.to(device)))
            for i, swaps in enumerate(swap_sets):
                source = dict(swaps)
                x = states[:, min(source)].contiguous()
                for layer in range(min(source), depth):
                    x = model.blocks[source.get(layer, layer)](x)
                correct[i] += (head_logits(model, x).argmax(-1).cpu() == labels).sum().item()
            total += len(labels)
    if total == 0:
        raise ValueError("batches yielded no images")
    return correct / total


def candidate_swaps(partition: Partition, n_swaps: int, kind: str, *, max_sets: int | None = None,
                    seed: int = 0) -> list[tuple[Swap, ...]]:
    """Sets of ``n_swaps`` swaps whose sources lie in the same (``kind="intra"``) or a different
    (``kind="inter"``) max-cut block than their targets.

    Targets are distinct. All valid sets are enumerated in a fixed order; if there are more than
    ``max_sets`` a seeded sample of them is returned (Fig. 15 averages over such choices).
    """
    if kind not in ("intra", "inter"):
        raise ValueError(f"kind must be 'intra' or 'inter', got {kind!r}")
    if n_swaps < 1:
        raise ValueError(f"n_swaps must be >= 1, got {n_swaps}")
    phase = block_of(partition)
    depth = len(phase)
    pairs = [(t, s) for t in range(depth) for s in range(depth)
             if t != s and (phase[t] == phase[s]) == (kind == "intra")]
    by_target: dict[int, list[Swap]] = {}
    for t, s in pairs:
        by_target.setdefault(t, []).append((t, s))
    sets = [combo for targets in itertools.combinations(sorted(by_target), n_swaps)
            for combo in itertools.product(*(by_target[t] for t in targets))]
    if max_sets is not None and len(sets) > max_sets:
        rng = np.random.default_rng(seed)
        sets = [sets[i] for i in sorted(rng.choice(len(sets), size=max_sets, replace=False))]
    return sets
