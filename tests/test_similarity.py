"""Tests for raptor.similarity against a direct loop over layers, images and tokens (numpy)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from raptor.similarity import (SimilarityAccumulator, block_contrast, layer_similarity,
                               mean_offdiagonal, phase_matrix)
from raptor.trajectories import TokenGroups

Trajectory = Callable[..., torch.Tensor]  # the random_trajectory fixture


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def brute_force(traj: np.ndarray, tokens: list[int], mean_first: bool = False) -> np.ndarray:
    """S[l, m] = mean over images and the given tokens of cos(x[n, l, t], x[n, m, t])."""
    n_img, n_layer = traj.shape[:2]
    S = np.zeros((n_layer, n_layer))
    for l in range(n_layer):
        for m in range(n_layer):
            values = []
            for n in range(n_img):
                if mean_first:
                    values.append(cos(traj[n, l, tokens].mean(0), traj[n, m, tokens].mean(0)))
                else:
                    values.extend(cos(traj[n, l, t], traj[n, m, t]) for t in tokens)
            S[l, m] = np.mean(values)
    return S


def expected_mats(traj: np.ndarray, groups: TokenGroups) -> dict[str, np.ndarray]:
    out = {name: brute_force(traj, list(range(s.start, s.stop))) for name, s in groups.items()}
    out["all"] = brute_force(traj, list(range(traj.shape[2])))
    if groups.patches.stop > groups.patches.start:
        out["patch_mean"] = brute_force(traj, list(range(groups.patches.start,
                                                         groups.patches.stop)), mean_first=True)
    return out


def test_against_brute_force_with_every_group(random_trajectory: Trajectory) -> None:
    groups = TokenGroups.from_counts(1, 2, 5)
    traj = random_trajectory(3, 4, 8, 6)
    mats = layer_similarity(traj, groups)
    expected = expected_mats(traj.numpy().astype(np.float64), groups)
    assert sorted(mats) == sorted(expected) == ["all", "cls", "patch_mean", "patches",
                                                "registers"]
    for name, S in mats.items():
        assert S.shape == (4, 4)
        np.testing.assert_allclose(S, expected[name], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(S, S.T, atol=1e-12)
        np.testing.assert_allclose(np.diag(S), 1.0, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), layers=st.integers(2, 5), n_cls=st.integers(0, 1),
       n_reg=st.integers(0, 2), n_patch=st.integers(1, 4), dim=st.integers(2, 5),
       seed=st.integers(0, 10_000), split=st.integers(1, 3))
def test_property_matches_brute_force_and_streams(n: int, layers: int, n_cls: int, n_reg: int,
                                                  n_patch: int, dim: int, seed: int, split: int,
                                                  random_trajectory: Trajectory) -> None:
    groups = TokenGroups.from_counts(n_cls, n_reg, n_patch)
    traj = random_trajectory(n, layers, groups.num_tokens, dim, seed)
    expected = expected_mats(traj.numpy().astype(np.float64), groups)
    batches = [(traj[i:i + split], torch.zeros(len(traj[i:i + split])))
               for i in range(0, n, split)]
    streamed = layer_similarity(iter(batches), groups)
    assert sorted(streamed) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(streamed[name], expected[name], rtol=1e-6, atol=1e-6)


def test_streaming_equals_one_shot(random_trajectory: Trajectory) -> None:
    groups = TokenGroups.from_counts(1, 0, 9)
    traj = random_trajectory(10, 5, 10, 8)
    one = layer_similarity(traj, groups)
    acc = SimilarityAccumulator(groups)
    for chunk in (traj[:3], traj[3:4], traj[4:]):
        acc.update(chunk)
    for name, S in acc.result().items():
        np.testing.assert_allclose(S, one[name], rtol=0, atol=1e-12)


def test_similarity_is_scale_invariant_and_sees_rotation(random_trajectory: Trajectory) -> None:
    groups = TokenGroups.from_counts(1, 0, 3)
    traj = random_trajectory(2, 3, 4, 5)
    scaled = traj * torch.tensor([1.0, 7.0, 0.01]).view(1, 3, 1, 1)
    np.testing.assert_allclose(layer_similarity(scaled, groups)["all"],
                               layer_similarity(traj, groups)["all"], atol=1e-9)
    flipped = traj.clone()
    flipped[:, 2] = -flipped[:, 0]
    S = layer_similarity(flipped, groups)["all"]
    assert S[0, 2] == pytest.approx(-1.0, abs=1e-9)


def test_accumulator_errors() -> None:
    acc = SimilarityAccumulator(TokenGroups.from_counts(1, 0, 4))
    with pytest.raises(ValueError, match="no trajectories"):
        acc.result()
    with pytest.raises(ValueError, match="T=5"):
        acc.update(torch.zeros(2, 3, 6, 4))
    with pytest.raises(ValueError, match="traj must be"):
        acc.update(torch.zeros(3, 5, 4))


S4 = np.array([[1.0, 0.9, 0.2, 0.1],
               [0.9, 1.0, 0.3, 0.2],
               [0.2, 0.3, 1.0, 0.7],
               [0.1, 0.2, 0.7, 1.0]])


def test_mean_offdiagonal_by_hand() -> None:
    assert mean_offdiagonal(S4) == pytest.approx((2 * (0.9 + 0.2 + 0.1 + 0.3 + 0.2 + 0.7)) / 12)
    assert mean_offdiagonal(np.array([[1.0, 0.25], [0.75, 1.0]])) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least 2 layers"):
        mean_offdiagonal(np.ones((1, 1)))


def test_block_contrast_by_hand() -> None:
    inside, across = block_contrast(S4, ((0, 2), (2, 4)))
    assert inside == pytest.approx((0.9 + 0.7) / 2)
    assert across == pytest.approx((0.2 + 0.1 + 0.3 + 0.2) / 4)
    inside, across = block_contrast(S4, ((0, 1), (1, 4)))
    assert inside == pytest.approx((0.3 + 0.2 + 0.7) / 3)
    assert across == pytest.approx((0.9 + 0.2 + 0.1) / 3)
    inside, across = block_contrast(S4, ((0, 1), (1, 2), (2, 3), (3, 4)))
    assert math.isnan(inside) and across == pytest.approx(mean_offdiagonal(S4))


def test_block_contrast_single_block_has_no_across_pairs() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inside, across = block_contrast(S4, ((0, 4),))
    assert inside == pytest.approx(mean_offdiagonal(S4)) and math.isnan(across)


def test_phase_matrix() -> None:
    a = np.arange(16.0).reshape(4, 4)
    b = np.ones((4, 4))
    c = np.full((4, 4), 100.0)
    np.testing.assert_array_equal(phase_matrix({"cls": a, "patch_mean": b, "all": c}),
                                  ((a + b) / 2)[1:, 1:])
    np.testing.assert_array_equal(phase_matrix({"patch_mean": b, "registers": c}), b[1:, 1:])
    np.testing.assert_array_equal(phase_matrix({"cls": a}), a[1:, 1:])
    with pytest.raises(ValueError, match="'cls' or 'patch_mean'"):
        phase_matrix({"all": c, "patches": c})


def test_no_patch_group_means_no_patch_mean(random_trajectory: Trajectory) -> None:
    groups = TokenGroups.from_counts(1, 1, 0)
    mats = layer_similarity(random_trajectory(2, 3, 2, 4), groups)
    assert sorted(mats) == ["all", "cls", "registers"]
