"""raptor.dynamics on synthetic flows on the sphere with known answers (paper Figs. 8–12)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment
from timm.models.vision_transformer import VisionTransformer

from raptor import dynamics as dy
from raptor import low_rank as lr
from raptor import sphere
from raptor.trajectories import TokenGroups, run_layers

GROUPS = TokenGroups(cls=slice(0, 1), registers=slice(1, 3), patches=slice(3, 9))  # T = 9


def random_traj(n: int = 4, layers: int = 6, t: int = 9, d: int = 8, seed: int = 0) -> np.ndarray:
    """Random float64 trajectory (n, layers, t, d) whose norms grow with depth."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, layers, t, d)) * np.arange(1, layers + 1)[None, :, None, None]


def orthonormal_pair(rng: np.random.Generator, d: int) -> tuple[np.ndarray, np.ndarray]:
    q, _ = np.linalg.qr(rng.normal(size=(d, 2)))
    return q[:, 0], q[:, 1]


def rotation_traj(theta: float, n: int = 2, layers: int = 5, t: int = 9, d: int = 6,
                  seed: int = 0) -> np.ndarray:
    """Each token turns by ``theta`` per layer in its own random plane; norms grow."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, layers, t, d))
    steps = np.arange(layers)
    for i in range(n):
        for j in range(t):
            p, q = orthonormal_pair(rng, d)
            out[i, :, j] = (np.cos(steps * theta)[:, None] * p + np.sin(steps * theta)[:, None] * q)
    return out * (1 + steps)[None, :, None, None]


def match_eigs(a: np.ndarray, b: np.ndarray) -> float:
    """Largest distance after the best one-to-one pairing of two eigenvalue sets."""
    cost = np.abs(a[:, None] - b[None, :])
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].max())


# --------------------------------------------------------------------------- norms, γ, speed


def test_norms_match_numpy() -> None:
    x = random_traj()
    res = dy.feature_norms(torch.from_numpy(x), GROUPS)
    for name, s in GROUPS.items():
        norms = np.linalg.norm(x[:, :, s], axis=-1)  # (N, L+1, Tg)
        np.testing.assert_allclose(res[name].mean, norms.mean(axis=(0, 2)), rtol=1e-12)
        np.testing.assert_allclose(res[name].std, norms.std(axis=(0, 2)), rtol=1e-10)
        assert res[name].count == x.shape[0] * (s.stop - s.start)


def test_directions_unit_and_zero_safe() -> None:
    x = np.zeros((3, 4))
    x[0] = [3.0, 4.0, 0.0, 0.0]
    d = dy.directions(x)
    assert isinstance(d, np.ndarray)
    np.testing.assert_allclose(d[0], [0.6, 0.8, 0, 0])
    np.testing.assert_array_equal(d[1:], 0)


def test_convergence_is_one_at_last_layer_and_matches_numpy() -> None:
    x = random_traj()
    res = dy.directional_convergence(x, GROUPS)
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    gamma = np.einsum("nltd,ntd->nlt", u, u[:, -1])
    for name, s in GROUPS.items():
        assert res[name].mean[-1] == 1.0 and res[name].std[-1] == 0.0
        np.testing.assert_allclose(res[name].mean, gamma[:, :, s].mean(axis=(0, 2)), atol=1e-12)
        np.testing.assert_allclose(res[name].std, gamma[:, :, s].std(axis=(0, 2)), atol=1e-10)
    per_image = dy.image_convergence(x, GROUPS)
    for name, s in GROUPS.items():
        assert per_image[name].shape == (x.shape[0], x.shape[1])
        np.testing.assert_allclose(per_image[name], gamma[:, :, s].mean(axis=2), atol=1e-12)
        np.testing.assert_allclose(per_image[name].mean(axis=0), res[name].mean, atol=1e-12)


@pytest.mark.parametrize("theta", [1e-8, 1e-4, 0.3, 2.0, math.pi - 1e-4, math.pi - 1e-7])
def test_angular_speed_equals_rotation_angle(theta: float) -> None:
    res = dy.angular_speed(rotation_traj(theta), GROUPS)
    for stat in res.values():
        # relative accuracy of θ near 0 and of π − θ near π, where arccos fails
        np.testing.assert_allclose(stat.mean, theta, rtol=1e-6)
        np.testing.assert_allclose(math.pi - stat.mean, math.pi - theta, rtol=1e-6)
        assert np.all(stat.std < 1e-6 * theta + 1e-13)


def test_angle_accurate_where_arccos_is_not() -> None:
    a, b = np.array([1.0, 0.0]), np.array([math.cos(1e-9), math.sin(1e-9)])
    assert sphere.angle(a, b) == pytest.approx(1e-9, rel=1e-6)
    assert np.arccos(np.clip(a @ b, -1, 1)) == 0.0  # the naive formula loses it entirely


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-7, math.pi - 1e-7), st.integers(0, 2**16))
def test_angular_speed_property(theta: float, seed: int) -> None:
    res = dy.angular_speed(rotation_traj(theta, n=1, layers=3, seed=seed), GROUPS)
    np.testing.assert_allclose(res["patches"].mean, theta, rtol=1e-6, atol=1e-12)


def test_speed_variance_matches_numpy() -> None:
    x = random_traj()
    u = x / np.linalg.norm(x, axis=-1, keepdims=True)
    s = np.arccos(np.clip(np.einsum("nltd,nltd->nlt", u[:, 1:], u[:, :-1]), -1, 1))
    res = dy.angular_speed(x, GROUPS)["patches"]
    np.testing.assert_allclose(res.mean, s[:, :, 3:].mean(axis=(0, 2)), rtol=1e-9)
    np.testing.assert_allclose(res.var, s[:, :, 3:].var(axis=(0, 2)), rtol=1e-8)


# --------------------------------------------------------------------------- basins


def test_pca_paths_recover_a_plane() -> None:
    rng = np.random.default_rng(1)
    p, q = orthonormal_pair(rng, 10)
    ang = rng.uniform(0, 2 * np.pi, size=(5, 4))
    x = np.zeros((5, 4, 9, 10))
    x[:, :, 0] = np.cos(ang)[..., None] * p + np.sin(ang)[..., None] * q  # cls on a circle
    x[:, :, 1:] = rng.normal(size=(5, 4, 8, 10))
    res = dy.pca_paths(x, GROUPS, n_components=2)
    assert res.paths.shape == (5, 4, 2)
    np.testing.assert_allclose(res.explained_variance_ratio.sum(), 1.0, atol=1e-12)
    recon = res.paths @ res.components + res.mean
    np.testing.assert_allclose(recon, x[:, :, 0], atol=1e-12)
    cov = np.cov(x[:, :, 0].reshape(-1, 10).T, bias=True)
    np.testing.assert_allclose(res.paths.reshape(-1, 2).var(axis=0),
                               np.linalg.eigvalsh(cov)[::-1][:2], rtol=1e-10)


def test_basin_compactness_closed_form() -> None:
    alpha = 0.2
    e = np.eye(3)
    dirs = np.stack([math.cos(alpha) * e[0] + math.sin(alpha) * e[1],
                     math.cos(alpha) * e[0] - math.sin(alpha) * e[1],
                     math.cos(alpha) * e[2] + math.sin(alpha) * e[1],
                     math.cos(alpha) * e[2] - math.sin(alpha) * e[1]]) * 5.0
    res = dy.basin_compactness(dirs, np.array([7, 7, 3, 3]))
    assert res.within == pytest.approx(alpha, rel=1e-12)
    assert res.between == pytest.approx(math.pi / 2, rel=1e-12)
    assert res.ratio == pytest.approx(2 * alpha / math.pi, rel=1e-12)
    np.testing.assert_allclose(res.class_means, [e[2], e[0]], atol=1e-12)


# --------------------------------------------------------------------------- low rank


@pytest.mark.parametrize(("sv", "stable", "effective"), [
    ([2.0, 2.0, 2.0], 3.0, 3.0),
    ([1.0, 0.0, 0.0], 1.0, 1.0),
    ([3.0, 1.0], 10 / 9, math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))),
])
def test_ranks_known_singular_values(sv: list[float], stable: float, effective: float) -> None:
    rng = np.random.default_rng(0)
    u, _ = np.linalg.qr(rng.normal(size=(20, len(sv))))
    v, _ = np.linalg.qr(rng.normal(size=(7, len(sv))))
    m = u @ np.diag(sv) @ v.T
    assert lr.stable_rank(m) == pytest.approx(stable, rel=1e-10)
    assert lr.effective_rank(m) == pytest.approx(effective, rel=1e-8)


def test_ranks_of_zero_matrix_are_zero() -> None:
    assert lr.stable_rank(np.zeros((4, 3))) == 0.0 == lr.effective_rank(np.zeros((4, 3)))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**16))
def test_rank_bounds_property(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(30, k)) @ rng.normal(size=(k, 12))
    for r in (lr.stable_rank(m), lr.effective_rank(m)):
        assert 1 - 1e-9 <= r <= k + 1e-9


def test_update_ranks_confined_subspace_and_svd_oracle() -> None:
    rng = np.random.default_rng(3)
    basis, _ = np.linalg.qr(rng.normal(size=(16, 3)))
    x = rng.normal(size=(5, 6, 9, 3)) @ basis.T  # all states (hence all updates) in a 3-D subspace
    res = lr.update_ranks(x, GROUPS)
    upd = sphere.updates(sphere.directions(torch.from_numpy(x))).numpy()
    for name, s in GROUPS.items():
        for l in range(5):
            m = upd[:, l, s].reshape(-1, 16)
            assert res[name].stable[l] == pytest.approx(lr.stable_rank(m), rel=1e-9)
            assert res[name].effective[l] == pytest.approx(lr.effective_rank(m), rel=1e-6)
            np.testing.assert_allclose(res[name].singular_values[l, :3],
                                       np.linalg.svd(m, compute_uv=False)[:3], rtol=1e-8)
        assert np.all(res[name].stable <= 3 + 1e-9) and np.all(res[name].effective <= 3 + 1e-6)
    assert np.all(res["cls"].stable >= 1 - 1e-9)


def test_coherence_identical_tokens_is_one() -> None:
    x = np.repeat(random_traj(t=1), 9, axis=2)
    res = lr.coherence(x, GROUPS)
    for stat in res.values():
        np.testing.assert_allclose(stat.mean, 1.0, rtol=1e-12)


def test_coherence_independent_updates_near_inverse_sqrt_n() -> None:
    n_tok = 64
    groups = TokenGroups(cls=slice(0, 1), registers=slice(1, 1), patches=slice(1, 1 + n_tok))
    x = np.random.default_rng(5).normal(size=(40, 3, 1 + n_tok, 512))  # independent directions
    res = lr.coherence(x, groups)
    np.testing.assert_allclose(res["patches"].mean, 1 / math.sqrt(n_tok), rtol=0.05)
    np.testing.assert_allclose(res["cls"].mean, 1.0)


# --------------------------------------------------------------------------- DMD


def linear_system(eigs: np.ndarray, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Snapshots (D, steps) of x_{l+1} = A x_l with the given (conjugate-closed) eigenvalues."""
    rng = np.random.default_rng(seed)
    blocks = []
    for lam in eigs:
        if lam.imag > 0:
            blocks.append(np.array([[lam.real, -lam.imag], [lam.imag, lam.real]]))
        elif lam.imag == 0:
            blocks.append(np.array([[lam.real]]))
    d = sum(b.shape[0] for b in blocks)
    core = np.zeros((d, d))
    i = 0
    for b in blocks:
        core[i:i + b.shape[0], i:i + b.shape[0]] = b
        i += b.shape[0]
    p = rng.normal(size=(d, d))
    a = p @ core @ np.linalg.inv(p)
    x = [rng.normal(size=d)]
    for _ in range(steps - 1):
        x.append(a @ x[-1])
    return np.stack(x, axis=1), a


def test_dmd_recovers_known_contraction() -> None:
    eigs = np.array([0.95, 0.8, 0.5, 0.7 + 0.2j, 0.7 - 0.2j])
    x, a = linear_system(eigs, steps=12)
    res = lr.dmd(x, r=5)
    assert res.rank == 5 and res.modes.shape == (5, 5)
    assert match_eigs(res.eigenvalues, eigs) < 1e-8
    assert res.spectral_radius == pytest.approx(0.95, abs=1e-8)
    assert res.median_modulus == pytest.approx(abs(0.7 + 0.2j), abs=1e-8)
    np.testing.assert_allclose(a @ res.modes, res.modes * res.eigenvalues, atol=1e-8)
    np.testing.assert_allclose(res.singular_values, np.linalg.svd(x[:, :-1], compute_uv=False))


@pytest.mark.parametrize("r", [1, 4, 9])
def test_dmd_matches_pydmd(r: int) -> None:
    from pydmd import DMD

    x = np.random.default_rng(r).normal(size=(20, 10)).cumsum(axis=1)
    ours = lr.dmd(x, r)
    ref = DMD(svd_rank=r, exact=True)
    ref.fit(x)
    assert ours.rank == r
    assert match_eigs(ours.eigenvalues, np.asarray(ref.eigs)) < 1e-8


def test_dmd_clips_rank_to_numerical_rank() -> None:
    x, _ = linear_system(np.array([0.9, 0.6]), steps=8)
    res = lr.dmd(x, r=50)
    assert res.rank == 2
    assert match_eigs(res.eigenvalues, np.array([0.9, 0.6])) < 1e-8


def test_dmd_by_group_sees_directions_not_norms() -> None:
    th1, th2 = 0.3, 0.1
    rot = np.zeros((4, 4))
    rot[:2, :2] = [[math.cos(th1), -math.sin(th1)], [math.sin(th1), math.cos(th1)]]
    rot[2:, 2:] = [[math.cos(th2), -math.sin(th2)], [math.sin(th2), math.cos(th2)]]
    states = [np.full(4, 0.5)]
    for _ in range(7):
        states.append(rot @ states[-1])
    grow = np.arange(1, 9)[:, None] ** 2  # norms grow; directions rotate at fixed angles
    x = np.broadcast_to((np.stack(states) * grow)[None, :, None], (3, 8, 9, 4)).copy()
    res = lr.dmd_by_group(x, GROUPS, r=10)
    expected = np.exp(1j * np.array([th1, -th1, th2, -th2]))
    for r in res.values():
        assert r.rank == 4
        assert match_eigs(r.eigenvalues, expected) < 1e-8
        assert r.spectral_radius == pytest.approx(1.0, abs=1e-8)


# --------------------------------------------------------------------------- perturbation


@pytest.fixture(scope="module")
def vit(tiny_vit: Callable[..., VisionTransformer]) -> VisionTransformer:
    return tiny_vit(in_chans=3, depth=6, num_heads=4).double()


VIT_GROUPS = TokenGroups(cls=slice(0, 1), registers=slice(1, 1), patches=slice(1, 17))


def vit_tokens(n: int = 3) -> torch.Tensor:
    return torch.randn(n, 17, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def vit_traj(model: VisionTransformer) -> torch.Tensor:
    with torch.no_grad():
        return run_layers(model, vit_tokens(), 0)


def test_perturbation_vanishes_as_eps_goes_to_zero(vit: VisionTransformer) -> None:
    tokens = vit_traj(vit)[:, 2]
    runs = [dy.perturb(vit, tokens, 2, eps, groups=VIT_GROUPS) for eps in (1e-1, 1e-3, 1e-5)]
    for name in ("cls", "patches"):
        final = [p.distance[name][-1] for p in runs]
        assert final[0] > final[1] > final[2] > 0
        # d_cos is second order and ∠ first order in ε: their scaled forms converge.
        assert final[1] / 1e-6 == pytest.approx(final[2] / 1e-10, rel=1e-2)
        assert runs[1].angular_sensitivity[name] == pytest.approx(
            runs[2].angular_sensitivity[name], rel=1e-2)
    p = runs[-1]
    assert p.clean.shape == p.perturbed.shape == (3, 5, 17, 32)
    np.testing.assert_array_equal(p.clean[:, 0], tokens.numpy())
    np.testing.assert_allclose(p.perturbed[:, 0] - p.clean[:, 0], 1e-5 * p.direction, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(p.direction, axis=-1), 1.0)


def test_identity_network_keeps_the_perturbation(vit: VisionTransformer) -> None:
    ident = VisionTransformer(img_size=16, patch_size=4, embed_dim=32, depth=6, num_heads=4,
                              num_classes=0).double().eval()
    ident.load_state_dict(vit.state_dict())
    with torch.no_grad():
        for block in ident.blocks:  # zero residual branches: every block is the identity
            for lin in (block.attn.proj, block.mlp.fc2):
                lin.weight.zero_()
                lin.bias.zero_()
    tokens = vit_tokens()
    eps = 0.5
    p = dy.perturb(ident, tokens, 1, eps, seed=3, groups=VIT_GROUPS)
    diff = p.perturbed - p.clean
    for k in range(diff.shape[1]):
        np.testing.assert_allclose(diff[:, k], eps * p.direction, atol=1e-14)
    # closed form of the cosine distance between x and x + εu
    x, u = tokens.numpy(), p.direction
    cos = np.einsum("ntd,ntd->nt", x, x + eps * u) / (
        np.linalg.norm(x, axis=-1) * np.linalg.norm(x + eps * u, axis=-1))
    for name, s in VIT_GROUPS.items():
        np.testing.assert_allclose(p.distance[name], (1 - cos[:, s]).mean(), rtol=1e-9)
        assert p.sensitivity[name] == pytest.approx((1 - cos[:, s]).mean() / eps, rel=1e-9)


def test_given_direction_and_seed_reproducibility(vit: VisionTransformer) -> None:
    tokens = vit_tokens()
    e0 = torch.zeros(32, dtype=torch.float64)
    e0[0] = 2.0
    p = dy.perturb(vit, tokens, 4, 1e-2, direction=e0, groups=VIT_GROUPS)
    np.testing.assert_array_equal(p.direction, np.broadcast_to(e0.numpy() / 2, (3, 17, 32)))
    a = dy.perturb(vit, tokens, 4, 1e-2, seed=7, groups=VIT_GROUPS)
    b = dy.perturb(vit, tokens, 4, 1e-2, seed=7, groups=VIT_GROUPS)
    np.testing.assert_array_equal(a.perturbed, b.perturbed)


# --------------------------------------------------------------------------- streaming


def test_streaming_equals_batch() -> None:
    x = torch.from_numpy(random_traj(n=8, seed=9))
    acc = dy.DynamicsAccumulator(GROUPS)
    for chunk in torch.split(x, [3, 1, 4]):
        acc.update(chunk)
    out = acc.result(dmd_rank=3)
    assert out.n_images == 8
    pairs = [(out.norms, dy.feature_norms(x, GROUPS)),
             (out.convergence, dy.directional_convergence(x, GROUPS)),
             (out.speed, dy.angular_speed(x, GROUPS)),
             (out.coherence, lr.coherence(x, GROUPS))]
    for streamed, batch in pairs:
        for name in batch:
            np.testing.assert_allclose(streamed[name].mean, batch[name].mean, rtol=1e-12)
            np.testing.assert_allclose(streamed[name].std, batch[name].std, rtol=1e-10,
                                       atol=1e-14)
            assert streamed[name].count == batch[name].count
    ranks, states, dmds = lr.update_ranks(x, GROUPS), lr.group_states(x, GROUPS), \
        lr.dmd_by_group(x, GROUPS, r=3)
    for name in ranks:
        np.testing.assert_allclose(out.ranks[name].stable, ranks[name].stable, rtol=1e-10)
        np.testing.assert_allclose(out.ranks[name].effective, ranks[name].effective, rtol=1e-8)
        np.testing.assert_allclose(out.states[name], states[name], rtol=1e-12, atol=1e-15)
        assert match_eigs(out.dmd[name].eigenvalues, dmds[name].eigenvalues) < 1e-8


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors(vit: VisionTransformer) -> None:
    x = random_traj()
    with pytest.raises(ValueError, match="traj must have shape"):
        dy.feature_norms(x[0], GROUPS)
    with pytest.raises(ValueError, match="L\\+1 >= 2"):
        dy.angular_speed(x[:, :1], GROUPS)
    with pytest.raises(TypeError, match="floating"):
        dy.feature_norms(x.astype(np.int64), GROUPS)
    with pytest.raises(TypeError, match="TokenGroups"):
        dy.feature_norms(x, {"cls": slice(0, 1)}.values())
    with pytest.raises(ValueError, match="groups.patches"):
        lr.coherence(x[:, :, :5], GROUPS)
    with pytest.raises(ValueError, match="r \\(DMD rank\\)"):
        lr.dmd(x[0, :, 0].T, 0)
    with pytest.raises(ValueError, match="r \\(DMD rank\\)"):
        lr.dmd_by_group(x, GROUPS, r=0)
    with pytest.raises(ValueError, match="X must be"):
        lr.dmd(np.ones(5), 2)
    with pytest.raises(ValueError, match="no dynamics"):
        lr.dmd(np.zeros((3, 4)), 2)
    with pytest.raises(ValueError, match="n_components"):
        dy.pca_paths(x, GROUPS, n_components=0)
    with pytest.raises(ValueError, match="group must be"):
        dy.pca_paths(x, TokenGroups(slice(0, 0), slice(0, 0), slice(0, 9)))
    with pytest.raises(ValueError, match="2 classes"):
        dy.basin_compactness(x[:, 0, 0], np.zeros(4))
    with pytest.raises(ValueError, match="labels"):
        dy.basin_compactness(x[:, 0, 0], np.zeros(3))
    with pytest.raises(ValueError, match="M must be a matrix"):
        lr.stable_rank(np.ones(3))
    tokens = vit_tokens()
    with pytest.raises(ValueError, match="eps must be"):
        dy.perturb(vit, tokens, 1, 0.0, groups=VIT_GROUPS)
    with pytest.raises(ValueError, match="eps must be"):
        dy.perturb(vit, tokens, 1, float("nan"), groups=VIT_GROUPS)
    with pytest.raises(ValueError, match="layer must be"):
        dy.perturb(vit, tokens, 7, 1e-3, groups=VIT_GROUPS)
    with pytest.raises(ValueError, match="layer must be"):
        dy.perturb(vit, tokens, -1, 1e-3, groups=VIT_GROUPS)
    with pytest.raises(ValueError, match="tokens must have shape"):
        dy.perturb(vit, tokens[0], 1, 1e-3, groups=VIT_GROUPS)
    with pytest.raises(ValueError, match="does not broadcast"):
        dy.perturb(vit, tokens, 1, 1e-3, direction=torch.ones(5), groups=VIT_GROUPS)
    with pytest.raises(ValueError, match="non-zero"):
        dy.perturb(vit, tokens, 1, 1e-3, direction=torch.zeros(32), groups=VIT_GROUPS)
    acc = dy.DynamicsAccumulator(GROUPS)
    with pytest.raises(ValueError, match="no batch seen"):
        acc.result()
    acc.update(x)
    with pytest.raises(ValueError, match="like the first batch"):
        acc.update(x[:, :, :, :4])
    with pytest.raises(ValueError, match="r \\(DMD rank\\)"):
        acc.result(dmd_rank=0)
