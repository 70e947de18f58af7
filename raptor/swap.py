"""Layer swaps (paper Fig. 15): replace teacher layers by copies of other layers.

If the layers of a phase compute (nearly) the same map, replacing layer ``l`` by a copy of another
layer ``m`` of the *same* max-cut block should keep accuracy, while a layer from a *different*
block should break the network (claim C4). A swap is a pair ``(target, source)`` of block indices
(0-based, ``blocks[target]`` becomes a copy of the original ``blocks[source]``).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence

import numpy as np
from timm.models.vision_transformer import VisionTransformer

from raptor.phases import Partition

Swap = tuple[int, int]


def block_of(partition: Partition) -> list[int]:
    """``block_of(partition)[i]`` is the phase index of block ``i`` (0-based blocks)."""
    return [j for j, (start, stop) in enumerate(partition) for _ in range(start, stop)]


def swapped(model: VisionTransformer, swaps: Sequence[Swap]) -> VisionTransformer:
    """A copy of the timm ViT ``model`` whose ``blocks[t]`` is a copy of the original ``blocks[s]``.

    Sources always refer to the *original* blocks, so swaps do not chain.
    """
    depth = len(model.blocks)
    targets = [t for t, _ in swaps]
    if len(set(targets)) != len(targets):
        raise ValueError(f"each layer can be replaced once, got targets {targets}")
    for t, s in swaps:
        if not (0 <= t < depth and 0 <= s < depth) or t == s:
            raise ValueError(f"swap (target={t}, source={s}) needs distinct blocks in [0, {depth})")
    out = copy.deepcopy(model)
    for t, s in swaps:
        out.blocks[t] = copy.deepcopy(model.blocks[s])
    return out


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
