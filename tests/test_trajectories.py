"""Tests for raptor.trajectories against timm's own forward pass (hooks) and a hand-built embedding."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from raptor.book.experiment import trajectories_of, walk
from raptor.phases import maxcut
from raptor.similarity import layer_similarity, phase_matrix
from raptor.structure import image_growth_nulls, image_phase_matrices, phase_excess
from raptor.trajectories import (TokenGroups, collect_trajectories, embed, head_logits,
                                 TrajectoryModel, iter_trajectories, run_layers, trajectory,
                                 trajectory_model)

N_PATCH = (16 // 4) ** 2
Factory = Callable[..., nn.Module]


@pytest.fixture(scope="session")
def teacher(tiny_teacher: Factory) -> Factory:
    """conftest's tiny teacher with 3 blocks, 2 heads, 3 classes, no registers."""
    return functools.partial(tiny_teacher, depth=3, num_heads=2, num_classes=3, reg_tokens=0)


@pytest.fixture(scope="session")
def plain_vit(tiny_vit: Factory) -> Factory:
    """conftest's stock timm ViT (timm's own Block, independent of raptor.teachers), 3 classes."""
    return functools.partial(tiny_vit, seed=1, num_classes=3)


def images(n: int = 5, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 1, 16, 16, generator=torch.Generator().manual_seed(seed))


def hooked_blocks(model: VisionTransformer, x: torch.Tensor) -> tuple[list[torch.Tensor],
                                                                     torch.Tensor]:
    """Outputs of every block recorded by forward hooks during timm's ``forward_features``."""
    outs: list[torch.Tensor] = []
    hooks = [b.register_forward_hook(lambda m, i, o: outs.append(o.detach().clone()))
             for b in model.blocks]
    try:
        with torch.no_grad():
            feats = model.forward_features(x)
    finally:
        for h in hooks:
            h.remove()
    return outs, feats


def manual_embedding(model: VisionTransformer, x: torch.Tensor) -> torch.Tensor:
    """Patch conv + prefix tokens + position embedding, written out by hand."""
    w = model.patch_embed.proj
    p = F.conv2d(x, w.weight, w.bias, stride=w.stride).flatten(2).transpose(1, 2)
    prefix = [t.expand(len(x), -1, -1) for t in (model.cls_token, model.reg_token)
              if t is not None]
    return torch.cat(prefix + [p], dim=1) + model.pos_embed


@pytest.mark.parametrize("factory, kwargs", [
    ("teacher", {}), ("plain_vit", {}),
    ("plain_vit", dict(class_token=False, reg_tokens=2, global_pool="avg")),
    ("plain_vit", dict(reg_tokens=3))], ids=["teacher", "timm", "regs-no-cls", "cls-regs"])
def test_trajectory_matches_timm_forward(factory: str, kwargs: dict,
                                         request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(factory)(**kwargs)
    x = images()
    with torch.no_grad():
        traj = trajectory(model, x)
        logits = head_logits(model, traj[:, -1])
        expected_logits = model(x)
    T = model.num_prefix_tokens + N_PATCH
    assert traj.shape == (5, 3 + 1, T, 32)
    torch.testing.assert_close(traj[:, 0], manual_embedding(model, x), rtol=1e-5, atol=1e-6)
    outs, feats = hooked_blocks(model, x)
    for layer, out in enumerate(outs, start=1):
        torch.testing.assert_close(traj[:, layer], out, rtol=0, atol=0)
    torch.testing.assert_close(model.norm(traj[:, -1]), feats, rtol=0, atol=0)
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=0)


def test_token_groups_from_model(plain_vit: Factory, teacher: Factory) -> None:
    assert TokenGroups.from_model(plain_vit()) == TokenGroups(slice(0, 1), slice(1, 1),
                                                              slice(1, 17))
    g = TokenGroups.from_model(plain_vit(class_token=False, reg_tokens=2, global_pool="avg"))
    assert g == TokenGroups(slice(0, 0), slice(0, 2), slice(2, 18))
    assert [name for name, _ in g.items()] == ["registers", "patches"]
    assert g.num_tokens == 18
    g = TokenGroups.from_model(plain_vit(reg_tokens=3))
    assert list(g.items()) == [("cls", slice(0, 1)), ("registers", slice(1, 4)),
                               ("patches", slice(4, 20))]
    assert TokenGroups.from_model(teacher(reg_tokens=4)).registers == slice(1, 5)


def test_token_groups_from_counts_errors() -> None:
    for counts in [(2, 0, 4), (-1, 0, 4), (1, -1, 4), (1, 0, -1)]:
        with pytest.raises(ValueError, match="token counts"):
            TokenGroups.from_counts(*counts)


@pytest.mark.parametrize("start", [0, 1, 2, 3])
def test_run_layers_from_middle_is_tail_of_full(start: int, teacher: Factory) -> None:
    model = teacher()
    with torch.no_grad():
        full = trajectory(model, images())
        tail = run_layers(model, full[:, start], start)
        part = run_layers(model, full[:, 0], 0, start)
    assert tail.shape[1] == 3 - start + 1
    torch.testing.assert_close(tail, full[:, start:], rtol=0, atol=0)
    torch.testing.assert_close(part, full[:, :start + 1], rtol=0, atol=0)


@pytest.mark.parametrize("start, stop", [(2, 1), (-1, 2), (0, 4), (4, None)])
def test_run_layers_bad_range(start: int, stop: int | None, teacher: Factory) -> None:
    model = teacher()
    with pytest.raises(ValueError, match="start"):
        run_layers(model, torch.zeros(1, 17, 32), start, stop)


def test_run_layers_bad_ndim(teacher: Factory) -> None:
    with pytest.raises(ValueError, match="tokens must be"):
        run_layers(teacher(), torch.zeros(17, 32))


def test_iter_and_collect_trajectories(teacher: Factory) -> None:
    model = teacher(p=0.5)
    model.train()  # iter_trajectories must switch to eval: layer drop would make runs differ
    x = images(12)
    labels = torch.arange(12)
    batches = [(x[i:i + 4], labels[i:i + 4]) for i in range(0, 12, 4)]
    sizes = [len(t) for t, _ in iter_trajectories(model, batches, max_images=6, progress=False)]
    assert sizes == [4, 2]
    traj, lab = collect_trajectories(model, batches, max_images=6, progress=False,
                                     dtype=torch.float64)
    assert not model.training
    assert traj.dtype == torch.float64 and traj.shape == (6, 4, 17, 32)
    assert torch.equal(lab, labels[:6])
    with torch.no_grad():
        expected = trajectory(model, x[:6]).double()
    torch.testing.assert_close(traj, expected, rtol=1e-6, atol=1e-6)
    full, lab = collect_trajectories(model, batches, progress=False)
    assert full.shape[0] == 12 and torch.equal(lab, labels)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, labels), batch_size=5)
    from_loader, _ = collect_trajectories(model, loader, progress=False)
    torch.testing.assert_close(from_loader, full, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [0, -3])
def test_iter_trajectories_bad_max_images(bad: int, teacher: Factory) -> None:
    batches = [(images(2), torch.zeros(2))]
    with pytest.raises(ValueError, match="max_images"):
        next(iter_trajectories(teacher(), batches, max_images=bad, progress=False))


class Recurrent(nn.Module):
    """A TrajectoryModel other than the Raptor: one linear step applied 4 times on a ViT's
    embedding, the ViT's norm and head."""

    def __init__(self, vit: VisionTransformer) -> None:
        super().__init__()
        self.depth = 4
        self.teacher = vit
        self.step = nn.Linear(32, 32)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return embed(self.teacher, x)

    def forward_from(self, tokens: torch.Tensor, start: int = 0, stop: int | None = None
                     ) -> torch.Tensor:
        states = [tokens]
        for _ in range(start, self.depth if stop is None else stop):
            states.append(self.step(states[-1]))
        return torch.stack(states, dim=1)

    def final_norm(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.teacher.norm(tokens)

    def head(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.teacher.forward_head(tokens)


def test_trajectory_models_are_used_through_the_protocol(plain_vit: Factory) -> None:
    model = Recurrent(plain_vit()).eval()
    x = images(3)
    assert isinstance(model, TrajectoryModel) and trajectory_model(model) is model
    with torch.no_grad():
        traj = trajectory(model, x)
        tokens = model.teacher.forward_features(x)  # norm(blocks(embedding))
    assert trajectory_model(model).depth == 4 and traj.shape == (3, 5, 17, 32)
    with torch.no_grad():
        expected = embed(model.teacher, x)
        for _ in range(4):
            expected = model.step(expected)
        torch.testing.assert_close(traj[:, -1], expected, rtol=0, atol=0)
        vit = model.teacher
        torch.testing.assert_close(head_logits(model, tokens),
                                   vit.forward_head(vit.norm(tokens)), rtol=0, atol=0)
    assert TokenGroups.from_model(model) == TokenGroups.from_model(model.teacher)
    with pytest.raises(TypeError, match="timm VisionTransformer or a Raptor"):
        trajectory(nn.Linear(3, 3), x)


def test_trajectories_of_refuses_no_images_and_warns_on_nan(teacher: Factory) -> None:
    model = teacher(depth=2)
    x, y = torch.randn(4, 1, 16, 16), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match="at least one image.*got 0 images"):
        trajectories_of(model, x[:0], y[:0])
    with pytest.raises(ValueError, match="got 4 images and 3 labels"):
        trajectories_of(model, x, y[:3])
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        trajectories_of(model, x, y, batch_size=0)
    x[1, 0, 2, 2] = float("nan")
    with pytest.warns(UserWarning, match="1 of 4 images hold NaN"):
        traj, _ = trajectories_of(model, x, y, device="cpu")
    assert torch.isfinite(traj[[0, 2, 3]]).all()


def test_trajectories_on_auto_device_equal_cpu_and_give_the_model_back(
        teacher: Factory) -> None:
    """``device='auto'`` (CUDA when available) gives the CPU's trajectories within float
    tolerance (exactly on a CPU-only machine) and leaves the model where it was."""
    model = teacher(depth=2)
    x, y = torch.randn(6, 1, 16, 16), torch.zeros(6, dtype=torch.long)
    on_cpu, _ = trajectories_of(model, x, y, batch_size=4, device="cpu")
    auto, _ = trajectories_of(model, x, y, batch_size=4)
    assert next(model.parameters()).device.type == "cpu" and auto.device.type == "cpu"
    if torch.cuda.is_available():
        torch.testing.assert_close(auto, on_cpu, rtol=1e-4, atol=1e-4)
    else:
        assert torch.equal(auto, on_cpu)


def test_walk_gives_the_steps_it_stands_for_bit_for_bit(teacher: Factory) -> None:
    """A walk's trajectories, phase matrix, max-cuts and block excess are those of the steps
    themselves; without excess asked for, neither it nor the per-image matrices are computed."""
    model, x, y = teacher(), images(12), torch.zeros(12, dtype=torch.long)
    w = walk((model, {"untrained": True}), (x, y), cuts=(2, 3), excess=(2,), n_boot=20,
             boot_seed=1, batch_size=5, device="cpu")
    traj, groups = trajectories_of(model, x, y, device="cpu")
    S = phase_matrix(layer_similarity(traj, groups))
    assert torch.equal(w.traj, traj) and w.groups == groups and np.array_equal(w.S, S)
    assert w.cuts == {k: maxcut(S, k) for k in (2, 3)}
    assert np.array_equal(w.per_image, image_phase_matrices(traj, groups))
    assert w.excess == {2: phase_excess(image_phase_matrices(traj, groups), 2, n_boot=20, seed=1,
                                        growth=image_growth_nulls(traj, groups))}
    assert math.isnan(w.accuracy) and [len(b) for _, b in w.batches(5)] == [5, 5, 2]
    val = [{"step": 50, "acc": 0.1}, {"step": 100, "acc": 0.4}]
    trained = walk((model, {"val": val}), (x, y), device="cpu")
    assert trained.accuracy == 0.4 and trained.per_image is None
    stopped = walk((model, {"val": val, "best": {"step": 50}}), (x, y), device="cpu")
    assert stopped.accuracy == 0.1  # the weights kept at the lowest validation loss
    assert trained.cuts == trained.excess == {}
