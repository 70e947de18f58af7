"""Chapter *dynamics*: claims C16–C24 on synthetic curves, the spec, the profiles, a smoke run."""

import dataclasses
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from raptor.book.chapters import dynamics as ch  # noqa: E402
from raptor.book.claims import FAILS, HOLDS, Claim  # noqa: E402
from raptor.book.result import load, save  # noqa: E402
from raptor.book.spec import SpecError, TeacherSpec, from_parameters  # noqa: E402

L = 8
DEPTH = np.arange(L + 1, dtype=float)


def verdict(c: Claim) -> str:
    return c.verdict


def test_c16_directions_converge() -> None:
    rising = {g: np.linspace(0.0, 1.0, L + 1) for g in ("cls", "patches")}
    assert verdict(ch.c16_directions_converge(rising)) == HOLDS
    falling = {g: v[::-1] for g, v in rising.items()}
    assert verdict(ch.c16_directions_converge(falling)) == FAILS
    far = {g: np.r_[np.linspace(0, 0.5, L), 1.0] for g in ("cls", "patches")}  # γ_(L-1) = 0.5
    assert verdict(ch.c16_directions_converge(far)) == FAILS


def test_c17_norms_grow() -> None:
    assert verdict(ch.c17_norms_grow({"cls": 1 + DEPTH, "patches": 2 + DEPTH})) == HOLDS
    assert verdict(ch.c17_norms_grow({"cls": 1 + DEPTH, "patches": 10 - DEPTH})) == FAILS


def test_c18_class_basins() -> None:
    assert verdict(ch.c18_class_basins(0.5, 0.3)) == HOLDS
    assert verdict(ch.c18_class_basins(0.3, 0.5)) == FAILS
    assert verdict(ch.c18_class_basins(1.5, 1.2)) == FAILS  # tighter, but not below 1


def test_c19_self_correction() -> None:
    bends = {"cls": np.array([0.0, 0.2, 0.1]), "patches": np.array([0.0, 0.1, 0.05])}
    c = ch.c19_self_correction(bends, layer=4, eps=0.5)
    assert verdict(c) == HOLDS and c.detail.endswith("layer 4, ε=0.5")
    grows = {"cls": np.array([0.0, 0.1, 0.2]), "patches": np.array([0.0, 0.1, 0.05])}
    assert verdict(ch.c19_self_correction(grows, layer=4, eps=0.5)) == FAILS


def test_c20_sensitivity_by_depth() -> None:
    patches = np.exp(-0.5 * np.arange(L))
    cls_late = np.r_[np.ones(L - 1), 2.0]
    assert verdict(ch.c20_sensitivity_by_depth({"cls": cls_late, "patches": patches})) == HOLDS
    cls_falls = cls_late[::-1]
    assert verdict(ch.c20_sensitivity_by_depth({"cls": cls_falls, "patches": patches})) == FAILS
    assert verdict(ch.c20_sensitivity_by_depth({"cls": cls_late, "patches": patches[::-1]})
                   ) == FAILS


def test_c21_angular_speed() -> None:
    patches = np.array([0.1, 0.1, 0.3, 0.3, 0.3, 0.6, 0.6, 0.6])  # jumps at layers 2 and 5
    speed = {"cls": np.full(L, 0.9), "registers": np.full(L, 0.05), "patches": patches}
    c = ch.c21_angular_speed(speed, [2, 5])
    assert verdict(c) == HOLDS
    assert c.ours == ("registers 0.050 < patches 0.600 < cls 0.900; "
                      "patch change points [2, 5] vs boundaries [2, 5]")
    swapped = {**speed, "cls": speed["registers"], "registers": speed["cls"]}
    assert verdict(ch.c21_angular_speed(swapped, [2, 5])) == FAILS
    late_jump = {**speed, "patches": np.r_[np.full(6, 0.3), 0.5, 0.5]}  # jumps at 6, boundary 2
    assert verdict(ch.c21_angular_speed(late_jump, [2])) == FAILS


def test_c22_update_rank_falls() -> None:
    falling = {"cls": 30 - np.arange(L), "patches": 40 - 2 * np.arange(L)}
    assert verdict(ch.c22_update_rank_falls(falling)) == HOLDS
    assert verdict(ch.c22_update_rank_falls({**falling, "patches": 10 + np.arange(L)})) == FAILS


def test_c23_coherence_rises() -> None:
    kappa = np.linspace(0.2, 0.9, L)
    assert verdict(ch.c23_coherence_rises(kappa, [2, 5])) == HOLDS
    assert verdict(ch.c23_coherence_rises(kappa[::-1], [2, 5])) == FAILS


def test_c24_dmd_near_one() -> None:
    lam = {"cls": np.array([0.99, 0.5]), "registers": np.array([0.9]),
           "patches": np.array([0.8 + 0.1j, 0.8 - 0.1j])}
    c = ch.c24_dmd_near_one(lam, rank=10)
    assert verdict(c) == HOLDS and c.detail.endswith("rank 10, on group-averaged directions; "
                                                     "tolerance 0.02")
    assert verdict(ch.c24_dmd_near_one({**lam, "cls": np.array([1.05])}, rank=10)) == FAILS
    assert verdict(ch.c24_dmd_near_one({**lam, "cls": np.array([0.7])}, rank=10)) == FAILS


def test_thresholds_name_their_source() -> None:
    found = [v for v in vars(ch).values() if isinstance(v, ch.Threshold)]
    assert len(found) == 9
    assert all(t.source.startswith("[ours] ") and len(t.source) > 40 for t in found)


@pytest.mark.parametrize("changes, name", [
    ({"k": 9}, "k"), ({"k": 0}, "k"), ({"p": 1.0}, "p"), ({"eps": 0.0}, "eps"),
    ({"eps": float("nan")}, "eps"), ({"n_images": 1}, "n_images"), ({"n_classes": 0}, "n_classes"),
    ({"n_classes": 11}, "n_classes"), ({"dmd_rank": 0}, "dmd_rank"),
    ({"teacher": TeacherSpec(depth=1)}, "L"),
])
def test_spec_errors_name_the_parameter(changes: dict, name: str) -> None:
    with pytest.raises(SpecError, match=f"parameter '{name}'"):
        dataclasses.replace(ch.Spec(), **changes)


def test_notebook_parameters_are_rejected_by_name() -> None:
    with pytest.raises(SpecError, match="parameter 'k'"):
        from_parameters(ch.Spec, {"L": 4, "k": 5})
    with pytest.raises(SpecError, match="unknown parameter.*'kk'"):
        from_parameters(ch.Spec, {"kk": 5})


def test_profiles_equal_the_old_ones() -> None:
    smoke_teacher = {"L": 4, "D": 32, "heads": 2, "steps": 30, "batch_size": 64,
                     "train_limit": 1024}
    smoke_student = {"stage1_steps": 6, "stage2_steps": 6, "distill_warmup": 2,
                     "distill_limit": 256}
    paper_teacher = {"dataset": "cifar100", "L": 12, "D": 768, "heads": 12, "patch_size": 14,
                     "img_size": 224, "registers": 0, "steps": 8_000, "batch_size": 256,
                     "lr": 5e-4, "train_limit": None}
    paper_student = {"stage1_steps": 20_000, "stage2_steps": 20_000, "distill_lr": 3e-4,
                     "distill_warmup": 1_000, "distill_limit": None}
    smoke = {**smoke_teacher, **smoke_student, "n_images": 64, "k": 2, "n_classes": 3}
    paper = {**paper_teacher, **paper_student, "n_images": 2_000}
    assert ch.SMOKE == from_parameters(ch.Spec, smoke)
    assert ch.PAPER == from_parameters(ch.Spec, paper)


@pytest.mark.slow
def test_smoke_compute_round_trips(smoke_result, tmp_path: Path) -> None:
    result = smoke_result(ch.NAME)
    depth = ch.SMOKE.teacher.depth
    groups = ["cls", "registers", "patches"]
    assert list(result.flow) == ["teacher", "Raptor"]
    for flow in result.flow.values():
        assert list(flow.norms) == groups
        assert all(v.shape == (depth + 1,) for v in [*flow.norms.values(),
                                                      *flow.convergence.values()])
        assert all(v.shape == (depth,) for v in flow.speed.values())
    assert result.pca_paths.shape[1:] == (depth + 1, 2)
    assert result.pca_paths.shape[0] == len(result.pca_labels) > 0
    assert set(result.pca_labels) <= set(range(ch.SMOKE.n_classes))
    assert len(result.partition) == ch.SMOKE.k and len(result.bounds) == ch.SMOKE.k - 1
    assert all(v.shape == (depth,) for v in result.sensitivity.values())
    assert all(v.shape == (depth - result.perturb_layer + 1,) for v in result.distance.values())
    assert all(np.abs(s.eigenvalues).max() < 1.5 for s in result.dmd.values())

    claims = ch.claims(result)
    assert [c.id for c in claims] == [f"C{i}" for i in range(16, 25)]
    assert all(isinstance(c, Claim) and c.verdict in (HOLDS, FAILS) for c in claims)

    save(result, tmp_path / "dynamics")
    back = load(ch.Result, tmp_path / "dynamics")
    assert back.spec == result.spec and back.partition == result.partition
    assert ch.claims(back) == claims
    for a, b in zip(back.dmd.values(), result.dmd.values()):
        np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
    for make in (ch.norms_convergence_figure, ch.basins_figure, ch.perturbation_figure,
                 ch.angular_speed_figure, ch.low_rank_dmd_figure):
        plt.close(make(back))
    assert list(ch.dmd_table(back).columns) == groups
