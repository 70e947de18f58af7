"""Tests of raptor.model: exactness against the teacher, depth scaling, partitions, counts."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from timm.models.vision_transformer import Block

from raptor.model import (DEPTH_HIDDEN, Raptor, RaptorBlock, count_parameters, flops_per_image,
                          make_block, partition_from_repeats, repeats_from_partition)
from raptor.train import DistillConfig
from raptor.trajectories import TokenGroups, TrajectoryModel, ViTTeacher, head_logits, trajectory



Teacher = Callable[..., torch.nn.Module]


@pytest.fixture(scope="session")
def teacher(tiny_teacher: Teacher) -> Teacher:
    """conftest's tiny teacher (4 blocks of width 32, 16 px, 10 classes), no registers."""
    return functools.partial(tiny_teacher, reg_tokens=0)


def images(n: int = 3) -> torch.Tensor:
    return torch.randn(n, 1, 16, 16, generator=torch.Generator().manual_seed(1))


def identity_scaling(raptor: Raptor) -> None:
    for block in raptor.blocks:
        torch.nn.init.zeros_(block.scale.fc2.weight)
        torch.nn.init.zeros_(block.scale.fc2.bias)


@pytest.mark.parametrize("kw", [{}, {"reg_tokens": 2, "layerscale": 0.1}])
def test_exact_copy_reproduces_teacher_trajectory(kw: dict, teacher: Teacher) -> None:
    t = teacher(**kw)
    x = images()
    ref = trajectory(t, x)
    plain = Raptor(t, (1,) * 4, depth_scaling=False, init="teacher")
    torch.testing.assert_close(trajectory(plain, x), ref, rtol=1e-5, atol=1e-5)
    scaled = Raptor(t, (1,) * 4, init="teacher")
    identity_scaling(scaled)
    torch.testing.assert_close(trajectory(scaled, x), ref, rtol=1e-5, atol=1e-5)
    at_init = trajectory(Raptor(t, (1,) * 4, init="teacher"), x)
    assert ((at_init - ref).norm() / ref.norm()).item() < 1e-3
    torch.testing.assert_close(plain.logits(x), t(x), rtol=1e-5, atol=1e-5)


def test_from_timm_block_copies_weights_and_matches_block() -> None:
    torch.manual_seed(0)
    block = Block(32, 4, qkv_bias=True, init_values=0.5).eval()
    rb = RaptorBlock.from_timm(block, depth_scaling=False)
    for name, p in block.named_parameters():
        q = dict(rb.named_parameters())[name]
        assert torch.equal(p, q) and p.data_ptr() != q.data_ptr()
    x = torch.randn(2, 5, 32)
    assert torch.equal(rb(x, 3), block(x))
    with torch.no_grad():
        rb.attn.qkv.weight.add_(1.0)
    assert not torch.equal(rb.attn.qkv.weight, block.attn.qkv.weight)
    with pytest.raises(TypeError, match="timm vision_transformer Block"):
        RaptorBlock.from_timm(torch.nn.Linear(3, 3))


def test_depth_scaling_formula_against_submodules(teacher: Teacher) -> None:
    torch.manual_seed(0)
    rb = make_block(teacher(layerscale=0.3).blocks[0], init="teacher")
    d = rb.dim
    a, b, c = torch.rand(d) + 0.5, torch.rand(d) + 0.5, torch.rand(d) + 0.5
    with torch.no_grad():
        rb.scale.fc2.weight.zero_()
        rb.scale.fc2.bias.copy_(torch.cat([a, b, c]) - 1)
    x = torch.randn(2, 5, d)
    x1 = x + a * rb.ls1(rb.attn(rb.norm1(x)))
    x2 = x1 + b * rb.ls2(rb.mlp(rb.norm2(x1)))
    torch.testing.assert_close(rb(x, 2), c * x2)


def test_depth_scaling_init_and_per_sample_depths(teacher: Teacher) -> None:
    torch.manual_seed(0)
    rb = make_block(teacher().blocks[0], init="random")
    w = rb.scale.fc2.weight
    assert w.shape == (3 * 32, DEPTH_HIDDEN) and 0.5e-4 < w.std().item() < 2e-4
    x = torch.randn(3, 5, 32)
    scales = torch.cat(rb.scale(torch.tensor([1.0, 2.0, 4.0]), x), dim=-1)
    assert scales.shape == (3, 1, 96) and (scales - 1).abs().max().item() < 1e-2
    per_sample = rb(x, torch.tensor([1, 2, 4]))
    one_by_one = torch.cat([rb(x[i:i + 1], z) for i, z in enumerate((1, 2, 4))])
    torch.testing.assert_close(per_sample, one_by_one)
    assert not torch.allclose(rb(x, 1), rb(x, 4), rtol=0, atol=0)


def test_forward_from_mid_segment_matches_full_forward(teacher: Teacher) -> None:
    torch.manual_seed(0)
    r = Raptor(teacher(), (3, 1), init="random")
    x0 = r.embed(images())
    full = r(x0)
    assert full.shape == (3, 5, 17, 32)
    torch.testing.assert_close(r.forward_from(full[:, 2], 2, 4), full[:, 2:], rtol=1e-6,
                               atol=1e-6)
    torch.testing.assert_close(r.forward_from(full[:, 1], 1, 2), full[:, 1:3])
    assert r.forward_from(full[:, 3], 3, 3).shape == (3, 1, 17, 32)
    with pytest.raises(ValueError, match="start <= stop"):
        r.forward_from(x0, 3, 2)


def test_blocks_are_weight_tied_over_their_segment(teacher: Teacher) -> None:
    torch.manual_seed(0)
    r = Raptor(teacher(), (3, 1), init="random", depth_scaling=False)
    x0 = r.embed(images())
    manual = r.blocks[1](r.blocks[0](r.blocks[0](r.blocks[0](x0, 1), 2), 3), 4)
    torch.testing.assert_close(r(x0)[:, -1], manual)


def test_partition_api_and_errors(teacher: Teacher) -> None:
    t = teacher()
    r = Raptor(t, repeats_from_partition(((0, 3), (3, 4)), 4), depth_scaling=False)
    assert r.repeats == (3, 1) and r.partition == ((0, 3), (3, 4)) and r.depth == 4
    for bad in [((0, 2), (3, 4)), ((0, 3),), ((0, 0), (0, 4)), ((1, 4),), (), ((0, 2, 4),)]:
        with pytest.raises(ValueError, match="partition"):
            repeats_from_partition(bad, 4)
    for bad in [(), (2, 0, 2), (2.0, 2), (True, 3), 4]:
        with pytest.raises(ValueError, match="repeats"):
            Raptor(t, bad)
    with pytest.raises(ValueError, match="teacher's depth 4"):
        Raptor(t, (2, 3))
    with pytest.raises(ValueError, match="RaptorBlocks"):
        Raptor(t, (2, 2), blocks=[make_block(t.blocks[0])])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6))
def test_partition_round_trip(repeats: list[int]) -> None:
    part = partition_from_repeats(repeats)
    assert part[0][0] == 0 and part[-1][1] == sum(repeats)
    assert all(a[1] == b[0] for a, b in zip(part, part[1:]))
    assert repeats_from_partition(part, sum(repeats)) == tuple(repeats)


def test_teacher_is_frozen_shared_and_kept_in_eval(teacher: Teacher) -> None:
    t = teacher()
    r = Raptor(t, (2, 2))
    r.train()
    assert r.training and r.blocks[0].training and not r.teacher.training
    assert r.teacher is t and not any(p.requires_grad for p in t.parameters())
    own = {id(p) for p in r.raptor_parameters()}
    assert own == {id(p) for p in r.blocks.parameters()}
    assert not own & {id(p) for p in t.parameters()}
    again = Raptor(t, (1, 3))  # from the now frozen teacher: its blocks still train
    assert all(p.requires_grad for p in again.raptor_parameters())
    r(r.embed(images())).square().mean().backward()
    assert all(p.grad is not None for p in r.raptor_parameters())
    assert all(p.grad is None for p in t.parameters())


def test_one_init_default_and_the_trajectory_protocol(teacher: Teacher) -> None:
    """``init="random"`` (the book's) is the default of the model and of DistillConfig; a Raptor
    and an adapted timm teacher are TrajectoryModels with the teacher's norm and head."""
    for fn in (Raptor, make_block):
        assert inspect.signature(fn).parameters["init"].default == "random"
    assert DistillConfig.__dataclass_fields__["init"].default == "random"
    t = teacher()
    r = Raptor(t, (2, 2))
    assert isinstance(r, TrajectoryModel) and isinstance(ViTTeacher(t), TrajectoryModel)
    assert not isinstance(t, TrajectoryModel) and r.depth == ViTTeacher(t).depth == 4
    final = trajectory(r, images())[:, -1]
    assert torch.equal(head_logits(r, final), t.forward_head(t.norm(final)))
    assert not any(k.startswith("teacher") for k in r.blocks.state_dict())  # what is stored
    with pytest.raises(TypeError, match="teacher must be a timm VisionTransformer"):
        Raptor(torch.nn.Linear(2, 2), (1,))  # type: ignore[arg-type]


def test_random_init_is_seeded_and_differs_from_teacher(teacher: Teacher) -> None:
    t = teacher(layerscale=0.2)
    with torch.no_grad():  # as if trained: random init must reset these
        t.blocks[0].ls1.gamma.fill_(0.7)
        t.blocks[0].norm1.weight.fill_(3.0)
    torch.manual_seed(5)
    a = Raptor(t, (2, 2), init="random")
    torch.manual_seed(5)
    b = Raptor(t, (2, 2), init="random")
    for (name, p), q in zip(a.blocks.named_parameters(), b.blocks.parameters()):
        assert torch.equal(p, q), name
    assert not torch.equal(a.blocks[0].attn.qkv.weight, t.blocks[0].attn.qkv.weight)
    assert torch.equal(a.blocks[0].ls1.gamma, torch.full((32,), 0.2))
    assert torch.equal(a.blocks[0].norm1.weight, torch.ones(32))
    assert a.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.equal(a.blocks[0].attn.qkv.bias, torch.zeros(96))


def test_parameter_count_is_k_over_l_of_teacher_blocks(teacher: Teacher) -> None:
    t = teacher(reg_tokens=1)
    tc = count_parameters(t)
    off = count_parameters(Raptor(t, (3, 1), depth_scaling=False))
    assert off["blocks"] * 4 == tc["blocks"] * 2
    assert off["stem_head"] == tc["stem_head"] and tc["total"] == sum(
        p.numel() for p in t.parameters())
    on = count_parameters(Raptor(t, (3, 1)))
    d = 32
    assert on["blocks"] - off["blocks"] == 2 * (DEPTH_HIDDEN * 2 + DEPTH_HIDDEN * 3 * d + 3 * d)


def test_flops_match_teacher_without_depth_scaling_and_closed_form(teacher: Teacher) -> None:
    t = teacher(reg_tokens=2)
    tokens, d, hidden, depth = 1 + 2 + 16, 32, 128, 4
    per_block = 2 * tokens * (3 * d * d + d * d + 2 * d * hidden) + 4 * tokens * tokens * d
    assert flops_per_image(t) == depth * per_block
    assert flops_per_image(Raptor(t, (3, 1), depth_scaling=False)) == flops_per_image(t)
    extra = flops_per_image(Raptor(t, (3, 1))) - flops_per_image(t)
    assert extra == depth * 2 * (DEPTH_HIDDEN + DEPTH_HIDDEN * 3 * d)
    assert TokenGroups.from_model(t).num_tokens == tokens


def test_swiglu_variants_and_option_errors(teacher: Teacher) -> None:
    t = teacher()
    mlp_params = sum(p.numel() for p in t.blocks[0].mlp.parameters())
    matched = make_block(t.blocks[0], mlp="swiglu", init="random")
    wide = make_block(t.blocks[0], mlp="swiglu-wide", init="random")
    assert abs(sum(p.numel() for p in matched.mlp.parameters()) / mlp_params - 1) < 0.02
    assert wide.mlp.fc2.in_features == 128
    assert matched(torch.randn(2, 5, 32), 1).shape == (2, 5, 32)
    with pytest.raises(ValueError, match="needs mlp='teacher'"):
        make_block(t.blocks[0], mlp="swiglu", init="teacher")
    with pytest.raises(ValueError, match="mlp must be one of"):
        make_block(t.blocks[0], mlp="geglu", init="random")
    with pytest.raises(ValueError, match="init must be one of"):
        make_block(t.blocks[0], init="zeros")


def unfused_step(block: RaptorBlock, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The reference: Appendix A.3's block with depth scaling, written out plainly."""
    s_attn, s_mlp, s_out = block.scale(z, x)
    x = x + s_attn * block.ls1(block.attn(block.norm1(x)))
    x = x + s_mlp * block.ls2(block.mlp(block.norm2(x)))
    return s_out * x


def unfused_forward_from(r: Raptor, tokens: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    owner = [j for j, n in enumerate(r.repeats) for _ in range(n)]
    states = [tokens]
    for layer in range(start + 1, stop + 1):
        states.append(unfused_step(r.blocks[owner[layer - 1]], states[-1], r._z[layer]))
    return torch.stack(states, dim=1)


def scrambled(r: Raptor) -> Raptor:
    """``r`` in float64 with depth scales and LayerScales far from 1, so a lost scale shows."""
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in r.blocks.named_parameters():
            if "scale.fc2" in name or name.endswith("gamma"):
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
    return r.double()


def grads(params: list[torch.Tensor], out: torch.Tensor, weight: torch.Tensor
          ) -> list[torch.Tensor]:
    """Gradients of ``Σ weight ⊙ out``; zeros for parameters ``out`` does not use."""
    got = torch.autograd.grad((out * weight).sum(), params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, got)]


@settings(max_examples=25, deadline=None)
@given(repeats=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data(),
       heads=st.sampled_from([1, 2]), mlp=st.sampled_from(["teacher", "swiglu"]),
       layerscale=st.sampled_from([None, 0.3]), batch=st.integers(1, 3),
       tokens=st.integers(1, 6))
def test_depth_scaling_equals_the_reference_forward_and_backward(
        repeats: list[int], data: st.DataObject, heads: int, mlp: str, layerscale: float | None,
        batch: int, tokens: int, teacher: Teacher) -> None:
    depth = sum(repeats)
    start = data.draw(st.integers(0, depth - 1), label="start")
    stop = data.draw(st.integers(start + 1, depth), label="stop")
    t = teacher(depth=depth, num_heads=heads, layerscale=layerscale)
    torch.manual_seed(0)
    r = scrambled(Raptor(t, tuple(repeats), mlp=mlp).train())
    x = torch.randn(batch, tokens, 32, dtype=torch.float64)
    weight = torch.randn(batch, stop - start + 1, tokens, 32, dtype=torch.float64)
    params = r.raptor_parameters()
    fused = r.forward_from(x, start, stop)
    ref = unfused_forward_from(r, x, start, stop)
    assert not torch.allclose(ref[:, 1:], x[:, None].expand_as(ref[:, 1:]))
    torch.testing.assert_close(fused, ref, rtol=1e-10, atol=1e-12)
    for g, h, (name, _) in zip(grads(params, fused, weight), grads(params, ref, weight),
                               r.blocks.named_parameters()):
        torch.testing.assert_close(g, h, rtol=1e-9, atol=1e-12, msg=name)


@pytest.mark.parametrize("z", [torch.tensor(3.0), 2, torch.tensor([1, 4, 2])])
def test_block_call_scalar_and_per_sample_depths_equal_unfused(z: object, teacher: Teacher) -> None:
    torch.manual_seed(0)
    r = scrambled(Raptor(teacher(layerscale=0.2), (4,)))
    block = r.blocks[0]
    x = torch.randn(3, 5, 32, dtype=torch.float64, requires_grad=True)
    zt = torch.as_tensor(z, dtype=torch.float64)
    weight = torch.randn(3, 5, 32, dtype=torch.float64)
    params = [x, *block.parameters()]
    fused, ref = block(x, z), unfused_step(block, x, zt)
    torch.testing.assert_close(fused, ref, rtol=1e-10, atol=1e-12)
    for g, h in zip(grads(params, fused, weight), grads(params, ref, weight)):
        torch.testing.assert_close(g, h, rtol=1e-9, atol=1e-12)


def test_scaling_is_checked_and_a_planted_scaling_error_is_caught(
        monkeypatch: pytest.MonkeyPatch, teacher: Teacher) -> None:
    """The state_dict layout is the stored students' one; scales that drop the LayerScale
    (planted) and a LayerScale that cannot be taken into the scales are caught."""
    t = teacher(layerscale=0.2)
    block = make_block(t.blocks[0])
    assert sorted(block.state_dict()) == sorted(
        [f"{m}.{p}" for m in ("norm1", "norm2", "attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2",
                              "scale.fc1", "scale.fc2") for p in ("weight", "bias")]
        + ["ls1.gamma", "ls2.gamma"])
    torch.manual_seed(0)
    r = scrambled(Raptor(t, (2, 2)))
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    ref = unfused_forward_from(r, x, 0, 4)
    torch.testing.assert_close(r.forward_from(x), ref, rtol=1e-10, atol=1e-12)
    monkeypatch.setattr("raptor.model._times_gamma", lambda s, ls: s)  # planted: γ forgotten
    assert not torch.allclose(r.forward_from(x), ref, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="depth scaling needs ls2"):
        RaptorBlock(block.norm1, t.blocks[0].attn, block.ls1, block.norm2, block.mlp,
                    torch.nn.Dropout())
