import copy
from math import comb

import pytest
import torch

from raptor.metrics import head_accuracy
from raptor.swap import block_of, candidate_swaps, swap_accuracy, swapped
from raptor.teachers import TeacherConfig, build_teacher

PARTITION = ((0, 3), (3, 5), (5, 6))


@pytest.fixture(scope="module")
def phased_model():
    """A ViT whose blocks are identical within each phase: intra swaps are exact no-ops."""
    model = build_teacher(TeacherConfig(depth=6, embed_dim=32, num_heads=2, patch_size=4,
                                        img_size=16, in_chans=1, num_classes=5), seed=0).eval()
    for start, stop in PARTITION:
        for i in range(start + 1, stop):
            model.blocks[i] = copy.deepcopy(model.blocks[start])
    return model


def test_block_of():
    assert block_of(PARTITION) == [0, 0, 0, 1, 1, 2]


def test_intra_swaps_keep_the_function_inter_swaps_change_it(phased_model):
    x = torch.randn(4, 1, 16, 16)
    with torch.no_grad():
        ref = phased_model(x)
        for swaps in candidate_swaps(PARTITION, 2, "intra"):
            assert torch.equal(swapped(phased_model, swaps)(x), ref)
        for swaps in candidate_swaps(PARTITION, 1, "inter"):
            assert not torch.allclose(swapped(phased_model, swaps)(x), ref, atol=1e-4)


def test_swap_copies_the_original_source_and_leaves_model_alone(phased_model):
    before = {k: v.clone() for k, v in phased_model.state_dict().items()}
    out = swapped(phased_model, [(0, 3), (3, 5)])
    assert torch.equal(out.blocks[3].mlp.fc1.weight, phased_model.blocks[5].mlp.fc1.weight)
    assert torch.equal(out.blocks[0].mlp.fc1.weight, phased_model.blocks[3].mlp.fc1.weight)
    assert out.blocks[0] is not phased_model.blocks[3]
    assert all(torch.equal(v, phased_model.state_dict()[k]) for k, v in before.items())


def test_candidate_counts_match_brute_force():
    phase = block_of(PARTITION)
    intra_pairs = {t: sum(phase[s] == phase[t] for s in range(6) if s != t) for t in range(6)}
    # block 5 is alone in its phase: it has no intra partner.
    assert intra_pairs[5] == 0
    singles = candidate_swaps(PARTITION, 1, "intra")
    assert len(singles) == sum(intra_pairs.values())
    inter = candidate_swaps(PARTITION, 2, "inter")
    inter_pairs = {t: 5 - intra_pairs[t] for t in range(6)}
    expected = sum(inter_pairs[a] * inter_pairs[b] for a in range(6) for b in range(a + 1, 6))
    assert len(inter) == expected
    for swaps in inter:
        assert all(phase[t] != phase[s] for t, s in swaps)
        assert len({t for t, _ in swaps}) == 2
    assert comb(6, 2) >= len({tuple(t for t, _ in s) for s in inter})


def test_sampling_is_seeded_and_bounded():
    a = candidate_swaps(PARTITION, 3, "inter", max_sets=10, seed=1)
    b = candidate_swaps(PARTITION, 3, "inter", max_sets=10, seed=1)
    assert a == b and len(a) == 10


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "both"}, "kind"), ({"n_swaps": 0, "kind": "intra"}, "n_swaps")])
def test_candidate_errors(kwargs, match):
    args = {"n_swaps": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        candidate_swaps(PARTITION, **args)


def test_swapped_errors(phased_model):
    with pytest.raises(ValueError, match="once"):
        swapped(phased_model, [(0, 1), (0, 2)])
    with pytest.raises(ValueError, match="distinct"):
        swapped(phased_model, [(0, 0)])
    with pytest.raises(ValueError, match="distinct"):
        swapped(phased_model, [(0, 9)])


def test_swap_accuracy_is_head_accuracy_of_the_swapped_copy_bit_for_bit():
    """The oracle: a deep copy with its blocks replaced, scored by head_accuracy."""
    model = build_teacher(TeacherConfig(depth=6, embed_dim=32, num_heads=2, patch_size=4,
                                        img_size=16, in_chans=1, num_classes=5), seed=1)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # timm's head starts at zero: every prediction would be class 0
        model.head.weight.copy_(torch.randn(model.head.weight.shape, generator=g))
    batches = [(torch.randn(n, 1, 16, 16, generator=g), torch.randint(0, 5, (n,), generator=g))
               for n in (40, 24)]
    sets = [*candidate_swaps(PARTITION, 1, "intra"), *candidate_swaps(PARTITION, 2, "inter")]
    fast = swap_accuracy(model, sets, batches)
    assert fast.tolist() == [head_accuracy(swapped(model, s), batches) for s in sets]
    assert len(set(fast.tolist())) > 1  # the swaps do change the predictions
    with pytest.raises(ValueError, match="target=0, source=9"):
        swap_accuracy(model, [[(0, 9)]], batches)
