"""Tests of raptor.metrics against numpy / scipy oracles and closed forms."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from torch.utils.data import DataLoader, TensorDataset

from raptor.metrics import (GlobalR2, LayerwiseMeans, Stat, cosine_vectors, evaluate_student,
                            head_accuracy, head_correct, r2_vectors)
from raptor.model import Raptor
from raptor.trajectories import (TokenGroups, collect_trajectories, embed, head_logits,
                                 run_layers)


def ols_r2(y: np.ndarray, x: np.ndarray) -> float:
    """R² of regressing ``y`` on ``x`` with a bias, by least squares (the A.2 definition)."""
    design = np.stack([x, np.ones_like(x)], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    return 1.0 - (resid @ resid) / ((y - y.mean()) @ (y - y.mean()))


def global_r2(pred: torch.Tensor, target: torch.Tensor) -> float:
    acc = GlobalR2()
    acc.update(pred, target)
    return acc.compute()


def layerwise(student: torch.Tensor, teacher: torch.Tensor, groups: TokenGroups,
              stat: Stat = r2_vectors) -> dict[str, np.ndarray]:
    acc = LayerwiseMeans(groups, stat)
    acc.update(student, teacher)
    return acc.compute()


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
    got = layerwise(student, teacher, groups)
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
    cos = layerwise(student, teacher, groups, cosine_vectors)
    manual = cosine_vectors(student, teacher)[:, :, 3:].double().mean(dim=(0, 2)).numpy()
    np.testing.assert_allclose(cos["patches"], manual, rtol=1e-9)
    no_reg = TokenGroups.from_counts(1, 0, 6)
    assert list(layerwise(student, teacher, no_reg)) == ["cls", "patches"]
    with pytest.raises(ValueError, match="T=9"):
        layerwise(student, teacher, TokenGroups.from_counts(1, 0, 8))
    with pytest.raises(ValueError, match="seen no"):
        LayerwiseMeans(groups).compute()


def loader(n: int = 10) -> DataLoader:
    g = torch.Generator().manual_seed(2)
    ds = TensorDataset(torch.randn(n, 1, 16, 16, generator=g), torch.randint(0, 10, (n,),
                                                                             generator=g))
    return DataLoader(ds, batch_size=4)


def test_accuracy_and_evaluation_of_an_exact_copy(tiny_teacher: Callable[..., torch.nn.Module]
                                                  ) -> None:
    t = tiny_teacher()
    data = loader()
    x, y = next(iter(DataLoader(data.dataset, batch_size=10)))
    expected = (t(x).argmax(-1) == y).double().mean().item()
    assert head_accuracy(t, data) == pytest.approx(expected)
    copy = Raptor(t, (1, 1, 1, 1), depth_scaling=False, init="teacher")
    assert head_accuracy(copy, data) == pytest.approx(expected)
    report = evaluate_student(copy, t, data, max_images=7)
    assert report["images"] == 7 and report["agreement"] == 1.0
    assert report["student_acc"] == report["teacher_acc"]
    assert report["student_correct"].tolist() == (t(x[:7]).argmax(-1) == y[:7]).tolist()
    assert min(report["r2"]["cls"]) > 1 - 1e-6 and len(report["r2"]["patches"]) == 5
    assert min(report["cosine"]["registers"]) > 1 - 1e-6
    assert report["global_r2"] == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="max_images"):
        evaluate_student(copy, t, data, max_images=0)


def counted_accuracy(model: torch.nn.Module, batches) -> float:
    """The oracle: correct top-1 classes counted batch by batch, over the images counted."""
    correct = total = 0
    with torch.no_grad():
        for images, labels in batches:
            logits = head_logits(model, run_layers(model, embed(model, images))[:, -1])
            correct += (logits.argmax(-1) == labels).sum().item()
            total += len(labels)
    return correct / total


def test_an_accuracy_over_more_images_reuses_the_evaluations_predictions(
        tiny_teacher: Callable[..., torch.nn.Module]) -> None:
    """C3's accuracy on the test images from the R² evaluation's predictions on its first
    images and :func:`head_correct` on the rest is :func:`head_accuracy` on all of them, to the
    bit, and both the counted accuracy, wherever the batches fall alike."""
    t = tiny_teacher()
    student = Raptor(t, (2, 2), depth_scaling=False)
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(40, 1, 16, 16, generator=g), torch.randint(0, 10, (40,), generator=g)
    batches = [(x[i:i + 8], y[i:i + 8]) for i in range(0, 40, 8)]
    assert head_correct(t, batches).tolist() == (t(x).argmax(-1) == y).tolist()
    for model in (t, student):
        whole = head_accuracy(model, batches)
        assert whole == counted_accuracy(model, batches)
        for first in (1, 3):
            seen = evaluate_student(model, t, batches[:first])["student_correct"]
            rest = head_correct(model, batches[first:])
            assert np.concatenate([seen, rest]).mean() == whole
    with pytest.raises(ValueError, match="no images"):
        head_correct(t, [(x[:0], y[:0])])


def test_evaluation_from_the_teachers_stored_trajectories_is_bit_identical(
        tiny_teacher: Callable[..., torch.nn.Module]) -> None:
    t, data = tiny_teacher(), loader()
    student = Raptor(t, (2, 2), depth_scaling=False, init="teacher")
    traj, _ = collect_trajectories(t, data, progress=False)
    given = evaluate_student(student, t, data, teacher_traj=traj, max_images=7)
    recomputed = evaluate_student(student, t, data, max_images=7)
    assert {k: v for k, v in given.items() if k != "student_correct"} == \
        {k: v for k, v in recomputed.items() if k != "student_correct"}
    assert given["student_correct"].tolist() == recomputed["student_correct"].tolist()
    planted = traj.clone()
    planted[:, -1] += 1.0  # a teacher's trajectory that is not this teacher's: the report moves
    assert evaluate_student(student, t, data, teacher_traj=planted)["r2"] != \
        evaluate_student(student, t, data)["r2"]
