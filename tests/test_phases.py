"""Tests for raptor.phases: contiguous max-cut DP, hierarchical bisection, random partitions."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from raptor.paper import DINOV2_B_PARTITIONS
from raptor.phases import (
    format_partition,
    hierarchical_maxcut,
    in_segment_weight,
    maxcut,
    partition_to_blocks,
    partition_to_repeats,
    random_partitions,
    validate_partition,
)

FAST = settings(max_examples=60, deadline=None)
Blocks = Callable[..., np.ndarray]  # the planted_blocks fixture


# ---------------------------------------------------------------- oracles and generators


def all_partitions(L: int, k: int) -> list[tuple[tuple[int, int], ...]]:
    """Every contiguous k-partition of L rows, in lexicographic order of the cut points."""
    return [tuple(pairwise([0, *cuts, L])) for cuts in itertools.combinations(range(1, L), k - 1)]


def direct_objective(S: np.ndarray, partition) -> float:
    """In-segment weight by plain slicing of W = 1 - sym(S), independent of prefix sums."""
    W = 1.0 - (S + S.T) / 2.0
    return float(sum(W[a:b, a:b].sum() for a, b in partition))


def make_matrix(kind: str, L: int, rng: np.random.Generator, planted_blocks: Blocks) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(-1, 1, (L, L))
    if kind == "integer":  # exact arithmetic: many exact ties
        return rng.integers(-1, 2, (L, L)).astype(float)
    n_blocks = int(rng.integers(1, L + 1))
    cuts = np.sort(rng.choice(np.arange(1, L), n_blocks - 1, replace=False)) if n_blocks > 1 else []
    sizes = np.diff([0, *cuts, L]).tolist()
    return planted_blocks(sizes, 0.9, 0.2, rng) + rng.normal(0, 0.1, (L, L))


# ---------------------------------------------------------------- maxcut vs brute force


@FAST
@given(
    L=st.integers(1, 14),
    k_frac=st.floats(0, 1),
    kind=st.sampled_from(["uniform", "integer", "blocks"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_maxcut_matches_bruteforce(L, k_frac, kind, seed, planted_blocks: Blocks):
    rng = np.random.default_rng(seed)
    S = make_matrix(kind, L, rng, planted_blocks)
    k = 1 + min(int(k_frac * L), L - 1, 6)  # C(13, 6) = 1716 partitions at most
    candidates = all_partitions(L, k)
    values = np.array([direct_objective(S, p) for p in candidates])
    found = maxcut(S, k)
    assert validate_partition(found, L) == found and len(found) == k
    scale = 1.0 + np.abs(1.0 - (S + S.T) / 2).sum()
    assert in_segment_weight(S, found) == pytest.approx(values.min(), abs=1e-9 * scale)
    optimal = [p for p, v in zip(candidates, values) if v <= values.min() + 1e-9 * scale]
    if len(optimal) == 1:
        assert found == optimal[0]
    else:  # documented tie rule: lexicographically smallest boundaries
        assert found == min(optimal, key=lambda p: [b for _, b in p])


@FAST
@given(L=st.integers(2, 12), k=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_maxcut_tie_rule_on_exact_integer_weights(L, k, seed):
    """Symmetric integer S: objectives are exact integers, so the optimal set is exact."""
    k = min(k, L)
    A = np.random.default_rng(seed).integers(0, 3, (L, L)).astype(float)
    S = np.triu(A) + np.triu(A, 1).T
    candidates = all_partitions(L, k)
    values = [direct_objective(S, p) for p in candidates]
    best = min(values)
    optimal = [p for p, v in zip(candidates, values) if v == best]
    assert maxcut(S, k) == optimal[0]  # all_partitions is in lexicographic cut order


@FAST
@given(L=st.integers(3, 14), k=st.integers(2, 5), seed=st.integers(0, 2**32 - 1))
def test_maxcut_tie_rule_survives_rounding(L, k, seed):
    """A matrix symmetric under depth reversal gives each partition and its mirror the same
    objective in exact arithmetic but not in floating point; the earlier one must still win."""
    k = min(k, L)
    A = np.random.default_rng(seed).uniform(0, 1, (L, L))
    S = (A + A[::-1, ::-1]) / 2
    candidates = all_partitions(L, k)
    values = np.array([direct_objective(S, p) for p in candidates])
    optimal = [p for p, v in zip(candidates, values) if v <= values.min() + 1e-9]
    assert maxcut(S, k) == optimal[0]


def test_maxcut_trivial_k():
    S = np.random.default_rng(0).random((9, 9))
    assert maxcut(S, 1) == ((0, 9),)
    assert maxcut(S, 9) == tuple((i, i + 1) for i in range(9))
    assert maxcut(np.ones((1, 1)), 1) == ((0, 1),)


@FAST
@given(
    sizes=st.lists(st.integers(2, 8), min_size=1, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_planted_blocks_recovered(sizes, seed, planted_blocks: Blocks):
    # Recovery needs a small within-block distance: the objective grows like w_in * sum n_j^2,
    # which favours balanced segments (see test_not_invariant_to_constant_shift).
    S = planted_blocks(sizes, 0.99, 0.3, np.random.default_rng(seed))
    assert maxcut(S, len(sizes)) == tuple(pairwise(np.cumsum([0, *sizes]).tolist()))


# ---------------------------------------------------------------- invariances


@FAST
@given(L=st.integers(2, 14), k=st.integers(1, 5), c=st.floats(0.1, 10), seed=st.integers(0, 2**32 - 1))
def test_maxcut_invariances(L, k, c, seed):
    k = min(k, L)
    S = np.random.default_rng(seed).uniform(-1, 1, (L, L))
    found = maxcut(S, k)
    sym = (S + S.T) / 2
    assert maxcut(S.T, k) == found
    assert maxcut(sym, k) == found
    assert in_segment_weight(S.T, found) == in_segment_weight(S, found) == in_segment_weight(sym, found)
    # W -> c W (S -> 1 - c (1 - S)) scales every objective by c; a constant on the diagonal of
    # S shifts every objective by the same amount (the diagonal is summed once per layer).
    values = np.array([direct_objective(S, p) for p in all_partitions(L, k)])
    if len(values) == 1 or np.sort(values)[1] - values.min() > 1e-6:  # unique optimum
        assert maxcut(1 - c * (1 - S), k) == found
        assert maxcut(S + 3.0 * np.eye(L), k) == found
    assert in_segment_weight(1 - c * (1 - S), found) == pytest.approx(c * in_segment_weight(S, found), rel=1e-9, abs=1e-9)
    assert in_segment_weight(S + 3.0 * np.eye(L), found) == pytest.approx(in_segment_weight(S, found) - 3.0 * L)


def test_not_invariant_to_constant_shift():
    """Adding c to S changes the objective by -c * sum n_j^2, which depends on the partition.

    Constant S: every W entry equals w = 1 - S. With w = 1 the objective sum n_j^2 is minimised
    by the balanced 2 + 2 split; with w = -1 it is maximised by the unbalanced 1 + 3 / 3 + 1
    splits (tie, earliest boundary wins).
    """
    assert maxcut(np.zeros((4, 4)), 2) == ((0, 2), (2, 4))
    assert maxcut(np.full((4, 4), 2.0), 2) == ((0, 1), (1, 4))


# ---------------------------------------------------------------- hierarchical max-cut


def two_level_matrix() -> np.ndarray:
    """8 layers: pairs {0,1},{2,3},{4,5},{6,7} (W = 0 inside), halves {0..3},{4..7}.

    W = a = 1 between pairs of the same half, b = 2 across halves.
    Total weight sum_{i<j} W = 8 pairs * a + 16 pairs * b = 8 + 32 = 40.
    Split 1 (whole set): halves cut 16 * b = 32 (the max: e.g. {0,1,4,5} | {2,3,6,7} cuts
      8 a + 8 b = 24, {0..5} | {6,7} cuts 8 b + 4 a = 20).
    Split 2, 3 (each half): pairs cut 4 * a = 4 (vs 2 for {0,2}|{1,3} or {0}|{1,2,3}).
    Clusters of size 2 < 2 * min_size are never split. Gains in order: 32, 4, 4.
    """
    half = np.arange(8) // 4
    pair = np.arange(8) // 2
    W = np.where(half[:, None] != half[None, :], 2.0, 1.0)
    W[pair[:, None] == pair[None, :]] = 0.0
    return 1.0 - W


def test_hierarchical_hand_worked():
    S = two_level_matrix()
    res = hierarchical_maxcut(S, 0.05)  # threshold 2: all three splits pass
    assert res.total_weight == 40.0
    assert res.gains == (32.0, 4.0, 4.0)
    assert res.clusters == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert res.contiguous and res.partition == ((0, 2), (2, 4), (4, 6), (6, 8))


def test_hierarchical_eps_stopping_rule():
    S = two_level_matrix()
    assert hierarchical_maxcut(S, 0.9).clusters == (tuple(range(8)),)  # 32 <= 36: no split
    assert hierarchical_maxcut(S, 0.9).gains == ()
    half = hierarchical_maxcut(S, 0.5)  # threshold 20: 32 splits, 4 does not
    assert half.partition == ((0, 4), (4, 8)) and half.gains == (32.0,)
    assert 0.1 * 40.0 == 4.0
    assert hierarchical_maxcut(S, 0.1).partition == ((0, 4), (4, 8))  # gain 4 <= 4 stops
    assert hierarchical_maxcut(S, 0.0999).partition == ((0, 2), (2, 4), (4, 6), (6, 8))


def test_hierarchical_non_contiguous():
    """Layers {0, 2} and {1, 3} are alike: W = 0 inside, 1 across; the cut {0,2}|{1,3} gains 4."""
    parity = np.arange(4) % 2
    S = (parity[:, None] == parity[None, :]).astype(float)
    res = hierarchical_maxcut(S, 0.5)
    assert res.clusters == ((0, 2), (1, 3))
    assert not res.contiguous and res.partition is None
    assert res.gains == (4.0,) and res.total_weight == 4.0


def test_hierarchical_min_size():
    S = two_level_matrix()[:3, :3]  # 3 < 2 * min_size: never split, whatever eps
    assert hierarchical_maxcut(S, 0.01).clusters == ((0, 1, 2),)
    assert hierarchical_maxcut(S, 0.01, min_size=1).clusters == ((0, 1), (2,))


@pytest.mark.parametrize("L", [6, 16])
def test_hierarchical_tie_rule(L):
    """Constant W: every balanced bisection ties (L/2 * L/2 cut edges). The first colouring in
    lexicographic order of members 1..L-1 puts members 1..L/2-1 with member 0, i.e. the first
    half. L = 16 has 2^15 colourings, so the tie spans several enumeration chunks."""
    res = hierarchical_maxcut(np.zeros((L, L)), 0.1, min_size=L // 2)
    assert res.gains == ((L // 2) ** 2,)
    assert res.partition == ((0, L // 2), (L // 2, L))


def test_hierarchical_never_makes_empty_cluster():
    """W = -1: every non-trivial cut is negative (best: 1 + 3, gain -3), total = -6 and the
    threshold 0.9 * -6 = -5.4 is below it, so the cluster splits; the empty cut (gain 0) must not
    be chosen. The first tied colouring of (members 1, 2, 3) is (0, 0, 1): {0, 1, 2} | {3}."""
    res = hierarchical_maxcut(np.full((4, 4), 2.0), 0.9)
    assert res.clusters == ((0, 1, 2), (3,)) and res.gains == (-3.0,)


def reference_recursive(W: np.ndarray, threshold: float, min_size: int = 2) -> list[tuple[int, ...]]:
    """Independent oracle: split every cluster whose best bisection beats the threshold."""
    done, todo = [], [tuple(range(len(W)))]
    while todo:
        c = todo.pop()
        best, best_sides = -np.inf, None
        if len(c) >= 2 * min_size:
            for bits in itertools.product([0, 1], repeat=len(c) - 1):
                side = (0, *bits)
                a = [x for x, s in zip(c, side) if s == 0]
                b = [x for x, s in zip(c, side) if s == 1]
                gain = sum(W[i, j] for i in a for j in b) if b else -np.inf
                if gain > best:
                    best, best_sides = gain, (tuple(a), tuple(b))
        if best > threshold:
            todo += list(best_sides)
        else:
            done.append(c)
    return sorted(done)


@settings(max_examples=25, deadline=None)
@given(L=st.integers(1, 9), eps=st.floats(0.01, 0.6), seed=st.integers(0, 2**32 - 1))
def test_hierarchical_matches_recursive_oracle(L, eps, seed):
    S = np.random.default_rng(seed).uniform(-1, 1, (L, L))
    W = 1.0 - (S + S.T) / 2.0
    total = sum(W[i, j] for i in range(L) for j in range(i + 1, L))
    res = hierarchical_maxcut(S, eps)
    assert res.total_weight == pytest.approx(total)
    assert list(res.clusters) == reference_recursive(W, eps * res.total_weight)
    assert sorted(x for c in res.clusters for x in c) == list(range(L))
    assert len(res.gains) == len(res.clusters) - 1
    assert all(g > eps * res.total_weight for g in res.gains)


def test_hierarchical_agrees_with_dp_on_planted_blocks(planted_blocks: Blocks):
    S = planted_blocks([5, 7], 0.99, 0.3, np.random.default_rng(3))
    res = hierarchical_maxcut(S, 0.2)
    assert res.partition == maxcut(S, 2) == ((0, 5), (5, 12))


def test_hierarchical_bruteforce_refusal():
    with pytest.raises(ValueError, match=r"cluster size 21 exceeds max_bruteforce=20"):
        hierarchical_maxcut(np.eye(21), 0.1)
    with pytest.raises(ValueError, match=r"cluster size 6 exceeds max_bruteforce=5"):
        hierarchical_maxcut(np.eye(6), 0.1, max_bruteforce=5)
    assert hierarchical_maxcut(np.eye(3), 0.1, max_bruteforce=2).clusters == ((0, 1, 2),)  # unsplittable


@pytest.mark.parametrize("eps", [0, 1, -0.1, 1.5, float("nan"), True, "0.1", None])
def test_hierarchical_bad_eps(eps):
    with pytest.raises(ValueError, match="eps must be a number in"):
        hierarchical_maxcut(np.eye(4), eps)


def test_hierarchical_bad_sizes():
    with pytest.raises(ValueError, match="min_size"):
        hierarchical_maxcut(np.eye(4), 0.1, min_size=0)
    with pytest.raises(ValueError, match="max_bruteforce"):
        hierarchical_maxcut(np.eye(4), 0.1, max_bruteforce=1)


# ---------------------------------------------------------------- random partitions


def test_random_partitions_valid_distinct_and_deterministic():
    draws = random_partitions(12, 4, 50, seed=7)
    assert len(draws) == len(set(draws)) == 50
    for p in draws:
        assert validate_partition(p, 12) == p and len(p) == 4
    assert random_partitions(12, 4, 50, seed=7) == draws
    assert random_partitions(12, 4, 50, seed=8) != draws
    assert random_partitions(5, 1, 3, seed=0) == [((0, 5),)]
    assert random_partitions(3, 3, 2, seed=0) == [((0, 1), (1, 2), (2, 3))]
    assert random_partitions(5, 2, 0, seed=0) == []


def test_random_partitions_leave_out_exclude_and_give_all_when_fewer_remain():
    maxcut = ((0, 3), (3, 8))
    others = random_partitions(8, 2, 10, seed=0, exclude=[maxcut])
    assert sorted(others) == sorted(set(all_partitions(8, 2)) - {maxcut})  # 6 of C(7, 1) = 7
    assert maxcut not in random_partitions(8, 3, 20, seed=1, exclude=[((0, 1), (1, 2), (2, 8))])
    with pytest.raises(ValueError, match="exclude must hold 2-partitions"):
        random_partitions(8, 2, 3, seed=0, exclude=[((0, 1), (1, 2), (2, 8))])


@pytest.mark.parametrize(("L", "k", "n"), [(7, 3, 1), (6, 4, 3), (9, 2, 4)])
def test_random_partitions_uniform(L, k, n):
    """Each partition is drawn equally often over seeds (uniform without replacement)."""
    support = all_partitions(L, k)
    seeds = 300 * len(support) // n
    counts = Counter(p for seed in range(seeds) for p in random_partitions(L, k, n, seed=seed))
    assert set(counts) == set(support)
    assert chisquare([counts[p] for p in support]).pvalue > 1e-3


@pytest.mark.parametrize(
    ("args", "match"),
    [((0, 1, 1, 0), "L must be"), ((5, 0, 1, 0), "k must be"), ((5, 6, 1, 0), "k must be"), ((5, 2, -1, 0), "n must be")],
)
def test_random_partitions_errors(args, match):
    with pytest.raises(ValueError, match=match):
        random_partitions(*args)


# ---------------------------------------------------------------- helpers and constants


@FAST
@given(repeats=st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_conversion_round_trips(repeats):
    p = validate_partition(tuple(pairwise(np.cumsum([0, *repeats]).tolist())), sum(repeats))
    assert partition_to_repeats(p) == tuple(repeats)
    blocks = partition_to_blocks(p)
    assert [(a - 1, b) for a, b in blocks] == list(p)
    assert format_partition(p) == " | ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in blocks)


def test_dinov2_partitions_and_paper_notation():
    assert {k: partition_to_repeats(p) for k, p in DINOV2_B_PARTITIONS.items()} == {
        2: (7, 5),
        3: (7, 3, 2),
        4: (4, 3, 3, 2),
    }
    for k, p in DINOV2_B_PARTITIONS.items():
        assert validate_partition(p, 12) == p and len(p) == k
    assert format_partition(DINOV2_B_PARTITIONS[2]) == "1–7 | 8–12"
    assert format_partition(DINOV2_B_PARTITIONS[3]) == "1–7 | 8–10 | 11–12"
    assert format_partition(DINOV2_B_PARTITIONS[4]) == "1–4 | 5–7 | 8–10 | 11–12"
    assert partition_to_blocks(DINOV2_B_PARTITIONS[2]) == [(1, 7), (8, 12)]
    assert partition_to_blocks(((0, 1), (1, 3)), first_block=0) == [(0, 0), (1, 2)]
    assert format_partition(((0, 1), (1, 3))) == "1 | 2–3"
    assert validate_partition([[0, 2], [2, 3]], 3) == ((0, 2), (2, 3))


@pytest.mark.parametrize(
    ("partition", "L", "match"),
    [
        ((), 3, "at least one segment"),
        (((1, 3),), 3, "must cover 0..3"),
        (((0, 2),), 3, "must cover 0..3"),
        (((0, 1), (2, 3)), 3, "not contiguous"),
        (((0, 2), (2, 2), (2, 3)), 3, "non-empty"),
        (((0, 2), (2, 1), (1, 3)), 3, "non-empty"),
        (((0, 1.5), (1.5, 3)), 3, "must be ints"),
        ((0, 1, 2), 3, r"\(start, stop\) pairs"),
        (((0, 3),), 0, "L must be"),
    ],
)
def test_validate_partition_errors(partition, L, match):
    with pytest.raises(ValueError, match=match):
        validate_partition(partition, L)


@pytest.mark.parametrize(
    ("S", "match"),
    [
        (np.ones((3, 4)), "square"),
        (np.ones(3), "square"),
        (np.ones((2, 2, 2)), "square"),
        (np.ones((0, 0)), "must not be empty"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "finite"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), "finite"),
    ],
)
def test_bad_similarity_matrix(S, match):
    for call in (lambda: maxcut(S, 1), lambda: in_segment_weight(S, ((0, 1),)), lambda: hierarchical_maxcut(S, 0.1)):
        with pytest.raises(ValueError, match=match):
            call()


def test_bad_k():
    S = np.eye(4)
    for k in (0, 5, -1):
        with pytest.raises(ValueError, match=r"k must be in \[1, 4\]"):
            maxcut(S, k)
    for k in (2.0, True):
        with pytest.raises(TypeError, match="k must be an int"):
            maxcut(S, k)


def test_in_segment_weight_checks_partition_against_L():
    with pytest.raises(ValueError, match="must cover 0..4"):
        in_segment_weight(np.eye(4), ((0, 3),))
