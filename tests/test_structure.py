from collections.abc import Callable

import numpy as np
import pytest
import torch

from raptor.structure import Contrast, boundaries, boundary_shift, contrast_vs_random, subset_stability
from raptor.trajectories import TokenGroups

Blocks = Callable[..., np.ndarray]  # the planted_blocks fixture


def test_contrast_of_planted_partition_beats_random(planted_blocks: Blocks):
    S = planted_blocks([3, 3, 2])
    c = contrast_vs_random(S, ((0, 3), (3, 6), (6, 8)), n_random=30, seed=0)
    assert c.inside == pytest.approx(0.9) and c.across == pytest.approx(0.2)
    assert c.contrast == pytest.approx(0.7)
    assert c.z > 1 and c.random_mean < c.contrast


def test_contrast_z_closed_form():
    c = Contrast(inside=0.8, across=0.5, random_mean=0.1, random_std=0.05)
    assert c.z == pytest.approx((0.3 - 0.1) / 0.05)


def test_boundaries_and_shift():
    a, b = ((0, 3), (3, 6), (6, 8)), ((0, 4), (4, 6), (6, 8))
    assert boundaries(a) == (3, 6)
    assert boundary_shift(a, b) == 1 and boundary_shift(a, a) == 0
    assert boundary_shift(((0, 8),), ((0, 8),)) == 0
    with pytest.raises(ValueError, match="blocks"):
        boundary_shift(a, ((0, 8),))


def _phased_trajectory(n=40, seed=0):
    """Tokens that keep one direction in layers 1-3 and another in layers 4-6."""
    g = torch.Generator().manual_seed(seed)
    groups = TokenGroups.from_counts(1, 0, 4)
    base = torch.randn(n, 3, groups.num_tokens, 16, generator=g)
    layers = [torch.randn(n, groups.num_tokens, 16, generator=g)]
    for phase in (0, 0, 0, 1, 1, 1, 2, 2):
        layers.append(base[:, phase] + 0.05 * torch.randn(n, groups.num_tokens, 16, generator=g))
    return torch.stack(layers, dim=1), groups


def test_subset_stability_on_planted_phases():
    traj, groups = _phased_trajectory()
    stab = subset_stability(traj, groups, [3], [5, 40], n_resamples=4)
    assert stab == {3: {5: 1.0, 40: 1.0}}


def test_subset_stability_errors(planted_blocks: Blocks):
    traj, groups = _phased_trajectory(n=10)
    with pytest.raises(ValueError, match="image_counts"):
        subset_stability(traj, groups, [2], [11], 2)
    with pytest.raises(ValueError, match="n_resamples"):
        subset_stability(traj, groups, [2], [5], 0)
    with pytest.raises(ValueError, match="n_random"):
        contrast_vs_random(planted_blocks([3, 3, 2]), ((0, 8),), n_random=1)
