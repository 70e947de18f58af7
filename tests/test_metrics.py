"""Tests of raptor.metrics against numpy / scipy oracles and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import minimize
from scipy.special import logsumexp
from torch.utils.data import DataLoader, TensorDataset

from raptor.metrics import (GlobalR2, LayerwiseMeans, cosine_vectors, evaluate_student,
                            global_r2, head_accuracy, layerwise_cosine, layerwise_r2,
                            linear_probe, probe_features, r2_vectors)
from raptor.model import Raptor
from raptor.teachers import TeacherConfig, build_teacher
from raptor.trajectories import TokenGroups


def ols_r2(y: np.ndarray, x: np.ndarray) -> float:
    """R² of regressing ``y`` on ``x`` with a bias, by least squares (the A.2 definition)."""
    design = np.stack([x, np.ones_like(x)], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    return 1.0 - (resid @ resid) / ((y - y.mean()) @ (y - y.mean()))


vectors = arrays(np.float64, (2, 6), elements=st.floats(-10, 10))


@settings(max_examples=60, deadline=None)
@given(vectors, st.floats(-5, 5), st.floats(-5, 5))
def test_r2_vectors_is_ols_with_bias_and_squared_correlation(v: np.ndarray, a: float,
                                                             b: float) -> None:
    s, t = v
    assume(np.ptp(s) > 1e-3 and np.ptp(t) > 1e-3)
    r2 = r2_vectors(torch.tensor(s), torch.tensor(t)).item()
    assert r2 == pytest.approx(ols_r2(s, t), abs=1e-9)
    assert r2 == pytest.approx(np.corrcoef(s, t)[0, 1] ** 2, abs=1e-9)
    assert r2 == pytest.approx(r2_vectors(torch.tensor(t), torch.tensor(s)).item(), abs=1e-12)
    assert -1e-12 <= r2 <= 1 + 1e-12
    if abs(a) > 1e-2:
        assert r2_vectors(torch.tensor(a * s + b), torch.tensor(t)).item() == pytest.approx(
            r2, abs=1e-8)


def test_r2_vectors_edge_cases() -> None:
    t = torch.randn(4, 8)
    assert torch.allclose(r2_vectors(3 * t - 1, t), torch.ones(4))
    assert torch.equal(r2_vectors(torch.ones(4, 8), t), torch.zeros(4))
    with pytest.raises(ValueError, match="shapes differ"):
        r2_vectors(t, t[:, :3])


def test_cosine_and_global_r2_closed_forms() -> None:
    g = torch.Generator().manual_seed(0)
    p, t = torch.randn(5, 7, 3, generator=g), torch.randn(5, 7, 3, generator=g)
    pn, tn = p.numpy().astype(np.float64), t.numpy().astype(np.float64)
    cos = (pn * tn).sum(-1) / np.linalg.norm(pn, axis=-1) / np.linalg.norm(tn, axis=-1)
    np.testing.assert_allclose(cosine_vectors(p, t).numpy(), cos, rtol=1e-5)
    expected = 1 - ((pn - tn) ** 2).mean() / pn.var()
    assert global_r2(p, t) == pytest.approx(expected, rel=1e-6)
    assert global_r2(p, p) == 1.0
    stream = GlobalR2()
    for chunk_p, chunk_t in zip(p.split(2), t.split(2)):
        stream.update(chunk_p, chunk_t)
    assert stream.compute() == pytest.approx(expected, rel=1e-9)
    with pytest.raises(ValueError, match="no values"):
        GlobalR2().compute()


def test_layerwise_means_brute_force_and_streaming() -> None:
    g = torch.Generator().manual_seed(1)
    groups = TokenGroups.from_counts(1, 2, 4)
    teacher = torch.randn(6, 3, 7, 5, generator=g)
    student = teacher + 0.5 * torch.randn(6, 3, 7, 5, generator=g)
    got = layerwise_r2(student, teacher, groups)
    assert list(got) == ["cls", "registers", "patches"]
    for name, sl in groups.items():
        for layer in range(3):
            vals = [ols_r2(student[n, layer, k].double().numpy(), teacher[n, layer, k].double()
                           .numpy()) for n in range(6) for k in range(sl.start, sl.stop)]
            assert got[name][layer] == pytest.approx(np.mean(vals), abs=1e-6)
    stream = LayerwiseMeans(groups)
    stream.update(student[:2], teacher[:2])
    stream.update(student[2:], teacher[2:])
    for name in got:
        np.testing.assert_allclose(stream.compute()[name], got[name], rtol=1e-12)
    cos = layerwise_cosine(student, teacher, groups)
    manual = cosine_vectors(student, teacher)[:, :, 3:].double().mean(dim=(0, 2)).numpy()
    np.testing.assert_allclose(cos["patches"], manual, rtol=1e-9)
    no_reg = TokenGroups.from_counts(1, 0, 6)
    assert list(layerwise_r2(student, teacher, no_reg)) == ["cls", "patches"]
    with pytest.raises(ValueError, match="T=9"):
        layerwise_r2(student, teacher, TokenGroups.from_counts(1, 0, 8))
    with pytest.raises(ValueError, match="seen no"):
        LayerwiseMeans(groups).compute()


TINY = TeacherConfig(depth=4, embed_dim=32, num_heads=4, patch_size=4, img_size=16, in_chans=1,
                     num_classes=10, reg_tokens=1)


def loader(n: int = 10) -> DataLoader:
    g = torch.Generator().manual_seed(2)
    ds = TensorDataset(torch.randn(n, 1, 16, 16, generator=g), torch.randint(0, 10, (n,),
                                                                             generator=g))
    return DataLoader(ds, batch_size=4)


def test_accuracy_and_evaluation_of_an_exact_copy() -> None:
    t = build_teacher(TINY).eval()
    data = loader()
    x, y = next(iter(DataLoader(data.dataset, batch_size=10)))
    expected = (t(x).argmax(-1) == y).double().mean().item()
    assert head_accuracy(t, data) == pytest.approx(expected)
    copy = Raptor(t, (1, 1, 1, 1), depth_scaling=False)
    assert head_accuracy(copy, data) == pytest.approx(expected)
    report = evaluate_student(copy, t, data, max_images=7)
    assert report["images"] == 7 and report["agreement"] == 1.0
    assert report["student_acc"] == report["teacher_acc"]
    assert min(report["r2"]["cls"]) > 1 - 1e-6 and len(report["r2"]["patches"]) == 5
    assert min(report["cosine"]["registers"]) > 1 - 1e-6
    assert report["global_r2"] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="max_images"):
        evaluate_student(copy, t, data, max_images=0)


def test_probe_features_are_cls_and_mean_patch_after_final_norm() -> None:
    t = build_teacher(TINY).eval()
    feats, labels = probe_features(t, loader())
    x = loader().dataset.tensors[0]
    tokens = t.forward_features(x)  # timm: final norm applied to the last layer
    expected = torch.cat([tokens[:, 0], tokens[:, 2:].mean(1)], dim=1)
    torch.testing.assert_close(feats, expected, rtol=1e-5, atol=1e-5)
    assert feats.shape == (10, 64) and torch.equal(labels, loader().dataset.tensors[1])


def test_linear_probe_reaches_the_scipy_optimum() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    y = (x @ rng.normal(size=(4, 3))).argmax(1)
    y[:5] = (y[:5] + 1) % 3  # not separable: a finite optimum
    l2 = 0.05
    out = linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x[:20]),
                       torch.tensor(y[:20]), l2=l2)
    z = (x - x.mean(0)) / x.std(0)

    def objective(theta: np.ndarray) -> float:
        w, b = theta[:12].reshape(3, 4), theta[12:]
        logits = z @ w.T + b
        return float((logsumexp(logits, axis=1) - logits[np.arange(60), y]).mean()
                     + 0.5 * l2 * (w ** 2).sum())

    best = minimize(objective, np.zeros(15), method="BFGS", options={"gtol": 1e-10})
    assert out["objective"] == pytest.approx(best.fun, rel=1e-7)
    assert out["train_acc"] >= 0.8 and 0 <= out["val_acc"] <= 1
    again = linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x[:20]),
                         torch.tensor(y[:20]), l2=l2)
    assert again == out
    with pytest.raises(ValueError, match="same F"):
        linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x[:, :2]), torch.tensor(y))
    with pytest.raises(ValueError, match="l2 >= 0"):
        linear_probe(torch.tensor(x), torch.tensor(y), torch.tensor(x), torch.tensor(y), l2=-1)
