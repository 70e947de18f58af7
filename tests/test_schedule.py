"""Tests for raptor.schedule: learning-rate values at known points, resumable batch order."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import TensorDataset

from raptor.schedule import batches_from, set_lr, warmup_cosine


def test_warmup_cosine_known_points() -> None:
    total, warmup, base, low = 110, 10, 1e-3, 1e-5
    assert warmup_cosine(0, total, warmup, base, low) == pytest.approx(base / 10)
    assert warmup_cosine(4, total, warmup, base, low) == pytest.approx(base * 5 / 10)
    assert warmup_cosine(9, total, warmup, base, low) == pytest.approx(base)
    assert warmup_cosine(10, total, warmup, base, low) == pytest.approx(base)
    assert warmup_cosine(60, total, warmup, base, low) == pytest.approx((base + low) / 2)
    assert warmup_cosine(35, total, warmup, base, low) == pytest.approx(
        low + (base - low) * (1 + math.cos(math.pi / 4)) / 2)
    assert warmup_cosine(110, total, warmup, base, low) == pytest.approx(low)
    assert warmup_cosine(500, total, warmup, base, low) == pytest.approx(low)  # clamped
    assert warmup_cosine(0, 100, 0, base) == pytest.approx(base)  # no warmup
    assert warmup_cosine(100, 100, 0, base) == pytest.approx(0.0, abs=1e-15)


@settings(max_examples=50, deadline=None)
@given(total=st.integers(2, 500), warmup=st.integers(0, 50), data=st.data())
def test_warmup_cosine_shape(total: int, warmup: int, data: st.DataObject) -> None:
    base, low = 1.0, 0.01
    lrs = [warmup_cosine(s, total, warmup, base, low) for s in range(total + 5)]
    assert all(low - 1e-12 <= lr <= base + 1e-12 for lr in lrs)
    rising, falling = lrs[:warmup], lrs[warmup:]
    assert all(a < b for a, b in zip(rising, rising[1:]))
    assert all(a >= b - 1e-12 for a, b in zip(falling, falling[1:]))


def test_set_lr_sets_every_group() -> None:
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 5.0}], lr=1.0)
    set_lr(opt, 0.25)
    assert [g["lr"] for g in opt.param_groups] == [0.25, 0.25]


def index_dataset(n: int) -> TensorDataset:
    return TensorDataset(torch.arange(n))


def take(n_steps: int, **kwargs) -> list[tuple[int, list[int]]]:
    it = batches_from(**kwargs)
    return [(step, batch[0].tolist()) for step, batch in itertools.islice(it, n_steps)]


def test_batches_are_deterministic_and_seeded() -> None:
    a = take(12, dataset=index_dataset(23), batch_size=5, seed=3)
    assert a == take(12, dataset=index_dataset(23), batch_size=5, seed=3)
    assert a != take(12, dataset=index_dataset(23), batch_size=5, seed=4)
    assert [s for s, _ in a] == list(range(12))
    assert all(len(b) == 5 for _, b in a)


@pytest.mark.parametrize("start", [0, 1, 3, 4, 5, 9, 13])
def test_resuming_replays_the_tail(start: int) -> None:
    full = take(16, dataset=index_dataset(23), batch_size=5, seed=1)
    resumed = take(16 - start, dataset=index_dataset(23), batch_size=5, seed=1, start_step=start)
    assert resumed == full[start:]


def test_each_epoch_is_a_permutation() -> None:
    n, bs = 23, 5  # 4 full batches per epoch, 3 images dropped
    batches = [b for _, b in take(4 * 5, dataset=index_dataset(n), batch_size=bs, seed=0)]
    epochs = [sum(batches[e * 4:(e + 1) * 4], []) for e in range(5)]
    for ids in epochs:
        assert len(ids) == 20 and len(set(ids)) == 20 and set(ids) <= set(range(n))
    assert len({tuple(e) for e in epochs}) == 5  # reshuffled each epoch


def test_unshuffled_order() -> None:
    got = take(5, dataset=index_dataset(10), batch_size=4, seed=9, shuffle=False)
    assert got == [(0, [0, 1, 2, 3]), (1, [4, 5, 6, 7]), (2, [0, 1, 2, 3]), (3, [4, 5, 6, 7]),
                   (4, [0, 1, 2, 3])]


@pytest.mark.parametrize("bs", [0, -1, 11])
def test_batch_size_errors(bs: int) -> None:
    with pytest.raises(ValueError, match=r"batch_size must be in \[1, 10\]"):
        next(batches_from(index_dataset(10), batch_size=bs, seed=0))
