"""Chapter *dynamics*: claims C16–C24 on synthetic curves, the result of a smoke run."""

import dataclasses

import numpy as np
import pytest
import torch

from raptor.book.chapters import dynamics as chapter
from raptor.book.chapters import dynamics_claims as ch
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE, Claim

L = 8
DEPTH = np.arange(L + 1, dtype=float)


def verdict(c: Claim) -> str:
    return c.verdict


def core(c: Claim) -> str:
    """A claim's detail before its note on the correction for its parts."""
    return c.detail.split("; a part does not hold only if")[0]


def logistic(mid: float, scale: float = 0.8) -> np.ndarray:
    return 1 / (1 + np.exp(-(DEPTH - mid) / scale))


def gamma_images(curve: np.ndarray, sd: float, n: int, seed: int = 0) -> np.ndarray:
    """``n`` images' γ curves ``(n, L+1)``: ``curve`` plus independent image noise of size
    ``sd`` at layers 0..L−1; γ_L = 1 by construction, as for a real image."""
    y = curve + np.random.default_rng(seed).normal(0, sd, (n, len(curve)))
    y[:, -1] = 1.0
    return y


GROUP_MIDS = (("registers", 3.0), ("patches", 4.2), ("cls", 5.5))


def seeds_of(mids: dict[str, float], shifts: tuple[float, ...] = (-0.1, 0.0, 0.1), *,
             sd: float = 0.1, n: int = 200) -> list[dict[str, np.ndarray]]:
    """Per seed (one a shift of every midpoint: seeds differ), each group's γ images."""
    return [{g: gamma_images(logistic(mid + shift), sd, n, 10 * s + i)
             for i, (g, mid) in enumerate(mids.items())} for s, shift in enumerate(shifts)]


def test_c16_controls_over_seeds() -> None:
    """Judged over seeds, the trained model the unit: logistic curves hold, straight lines do
    not; one seed cannot be judged (no spread between seeds)."""
    c = ch.c16_directions_converge(seeds_of(dict(GROUP_MIDS)))
    assert verdict(c) == HOLDS and c.tests == 9  # 3 groups × (near 1, ΔAICc, midpoint)
    assert c.ours.startswith("Registers γ at layer L−1 is 1.00, above 0.80")
    assert "also how many layers after registers patches reaches γ = 0.9 is" in c.ours
    lines = [{g: gamma_images(np.linspace(0.1, 1.0, L + 1), 0.1, 200, 10 * s + i)
              for i, (g, _) in enumerate(GROUP_MIDS)} for s in range(3)]
    straight = ch.c16_directions_converge(lines)
    assert verdict(straight) == FAILS
    assert "how much better a logistic fits cls γ than a line (ΔAICc) is -1" in straight.ours
    assert verdict(ch.c16_directions_converge(seeds_of(dict(GROUP_MIDS))[:1])) == UNTESTABLE
    short = ch.c16_directions_converge([{"cls": gamma_images(logistic(2.0), 0.1, 20)[:, :5]}])
    assert verdict(short) == UNTESTABLE


def test_c16_fit_at_its_bound_is_inconclusive_and_far_from_1_fails() -> None:
    # A saturating exponential is one arm of an S: the logistic's midpoint sits at its bound
    # (−L) on every seed, so it is not estimated: inconclusive, as the rule says, not "fails".
    arm = [{"cls": gamma_images(1 - 0.9 * np.exp(-DEPTH / (2 + 0.1 * s)), 0.05, 200, s)}
           for s in range(3)]
    c = ch.c16_directions_converge(arm)
    assert verdict(c) == INCONCLUSIVE
    assert "the layer of cls γ's steepest rise sits at its fit's bound" in c.ours
    assert c.ours.startswith("Cls γ at layer L−1 is 0.9")
    # Far from 1 at layer L−1 on every seed.
    far = [{"cls": gamma_images(np.r_[0.5 * logistic(3.5 + 0.1 * s)[:-1], 1.0], 0.1, 200, s)}
           for s in range(3)]
    assert verdict(ch.c16_directions_converge(far)) == FAILS


def test_c16_order_inside_half_a_layer_is_a_tie_beside_the_verdict() -> None:
    """cls reaching 0.9 0.1–0.3 layers before the patches (the cpu book) is a tie within half a
    layer, reported beside the claim, which is judged on its convergence."""
    mids = {"registers": 3.0, "patches": 4.2, "cls": 4.0}
    c = ch.c16_directions_converge(seeds_of(mids))
    assert verdict(c) == HOLDS
    assert "also" in c.ours and "cls reaches γ = 0.9 is -0.2, a tie within ±0.5" in c.ours
    assert "patches before cls" in c.detail and ": tie" in c.detail


def test_crossing_interpolates() -> None:
    assert ch.crossing(np.array([0.0, 0.5, 1.0]), 0.75) == pytest.approx(1.5)
    assert ch.crossing(np.array([0.95, 1.0]), 0.9) == 0.0
    assert ch.crossing(np.array([0.1, 0.2]), 0.9) == float("inf")


def test_c17_norms_grow_both_ways() -> None:
    assert verdict(ch.c17_norms_grow({"cls": 1 + DEPTH, "patches": 2 + DEPTH})) == HOLDS
    assert verdict(ch.c17_norms_grow({"cls": 1 + DEPTH, "patches": 10 - DEPTH})) == FAILS
    # a rise with two swaps in 9 layers: ρ = 0.97, its interval [0.79, 1.00] clears 0.7
    wobbly = 1 + DEPTH[[1, 0, 2, 3, 4, 5, 7, 6, 8]]
    assert verdict(ch.c17_norms_grow({"cls": wobbly})) == HOLDS
    # no trend: ρ = −0.05 [−0.69, +0.64], below 0.7 even at the corrected level
    flat = np.cos(DEPTH)
    c = ch.c17_norms_grow({"cls": flat, "patches": 1 + DEPTH})
    assert c.verdict == FAILS and "Bonferroni over 2 parts" in c.detail


def clustered(spread: float, n: int = 120, classes: int = 3, seed: int = 0, apart: float = 1.0
              ) -> tuple[np.ndarray, np.ndarray]:
    """Directions around ``classes`` class means ``e_0 + apart·e_(c+1)`` with noise ``spread``."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % classes
    x = np.eye(8)[0] + apart * np.eye(8)[labels + 1] + spread * rng.normal(size=(n, 8))
    return x / np.linalg.norm(x, axis=1, keepdims=True), labels


def test_c18_class_basins_on_intervals() -> None:
    loose, labels = clustered(1.0)
    tight, _ = clustered(0.1, seed=1)
    c = ch.c18_class_basins(loose, tight, labels)
    assert verdict(c) == HOLDS and core(c).endswith("95% bootstrap over images")
    assert verdict(ch.c18_class_basins(tight, loose, labels)) == FAILS
    # Tighter at L, but still spread wider than the class means lie apart (ratio > 1).
    wide, _ = clustered(0.3, apart=0.05)
    wider, _ = clustered(0.6, seed=1, apart=0.05)
    assert verdict(ch.c18_class_basins(wider, wide, labels)) == FAILS
    # The same spread at both layers: the change's interval straddles 0.
    again, _ = clustered(0.5, seed=2)
    same, _ = clustered(0.5, seed=3)
    assert verdict(ch.c18_class_basins(again, same, labels)) == INCONCLUSIVE


def deviation(curve: list[float], sd: float, n: int = 200, seed: int = 0) -> np.ndarray:
    """Per-image deviation curves ``(n, len(curve))`` around ``curve``."""
    rng = np.random.default_rng(seed)
    return np.asarray(curve) + rng.normal(0, sd, (n, len(curve)))


def test_c19_self_correction_on_norm_scaled_deviation() -> None:
    share = {"cls": 0.05, "patches": 0.04}
    bends = {"cls": deviation([0.05, 0.08, 0.06, 0.04], 0.01),
             "patches": deviation([0.04, 0.05, 0.03, 0.02], 0.01, seed=1)}
    c = ch.c19_self_correction(bends, share, layer=4)
    assert verdict(c) == HOLDS
    assert c.ours.startswith("cls: ε = 5.0% of ‖x‖, deviation 0.05")
    assert "at layer 5 → 0.04" in c.ours
    assert c.detail.startswith("injection at layer 4; deviation = angle to the clean path")
    # Still growing at layer L: no bending back.
    grows = {**bends, "patches": deviation([0.04, 0.05, 0.06, 0.07], 0.01, seed=1)}
    assert verdict(ch.c19_self_correction(grows, share, layer=4)) == FAILS
    # ... while the cosine distance falls: the detail says that is norm growth.
    falls = {"cls": np.array([0.0, 0.02, 0.01]), "patches": np.array([0.0, 0.03, 0.01])}
    c = ch.c19_self_correction(grows, share, layer=4, distance=falls)
    assert "; does not hold: patches; a part" in c.detail
    assert c.detail.endswith("; the cosine distance does fall for patches, but no more than "
                             "norm growth explains")
    # Pure noise around a flat curve: selecting the peak on other images keeps it from holding.
    for seed in range(5):
        flat = {"cls": deviation([0.08, 0.08, 0.08, 0.08], 0.05, n=100, seed=seed)}
        assert verdict(ch.c19_self_correction(flat, {"cls": 0.05}, layer=4)) != HOLDS
    # A fall from a clear peak smaller than the images' spread at layer L.
    small = deviation([0.05, 0.5, 0.3, 0.47], 0.0, n=40)
    small[:, -1] += np.random.default_rng(5).normal(0, 0.3, 40)
    small[::2, -1] = 0.47  # the peak is located on the even images: at layer 5
    c = ch.c19_self_correction({"cls": small}, {"cls": 0.05}, layer=4)
    assert verdict(c) == INCONCLUSIVE and "peak 0.500 at layer 5" in c.ours


def sensitivity(patches: np.ndarray, cls: np.ndarray, sd: float, n: int = 200
                ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    noise = lambda: np.exp(rng.normal(0, sd, (n, L)))  # noqa: E731
    return {"patches": patches * noise(), "cls": cls * noise()}


def test_c20_tests_the_numbers_it_shows() -> None:
    patches = np.exp(-0.5 * np.arange(L))
    cls_late = np.r_[np.ones(L - 1), 2.0]
    c = ch.c20_sensitivity_by_depth(sensitivity(patches, cls_late, 0.1))
    assert verdict(c) == HOLDS
    assert "cls at layer 7 / at layer 4 = 2.0" in c.ours and "patch log-slope -0.50" in c.ours
    cls_falls = np.linspace(2.0, 1.0, L)
    assert verdict(ch.c20_sensitivity_by_depth(sensitivity(patches, cls_falls, 0.1))) == FAILS
    assert verdict(ch.c20_sensitivity_by_depth(sensitivity(patches[::-1], cls_late, 0.1))
                   ) == FAILS
    # cls at L−1 is 5% above L/2 but images scatter by a factor e: inconclusive.
    cls_barely = np.r_[np.ones(L - 1), 1.05]
    assert verdict(ch.c20_sensitivity_by_depth(sensitivity(patches, cls_barely, 1.0))
                   ) == INCONCLUSIVE


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


def test_c21_is_labelled_a_comparison_without_a_test() -> None:
    """Equal speeds with noise: the claimed order, and so "holds", comes out about 1 time in 6,
    as the detail says (the boundaries' jumps align by chance too)."""
    rng = np.random.default_rng(0)
    runs = [ch.c21_angular_speed({g: 0.3 + rng.normal(0, 0.01, L) for g in SPEED_GROUPS}, [2, 5])
            for _ in range(600)]
    assert np.mean([c.verdict == HOLDS for c in runs]) == pytest.approx(1 / 6, abs=0.05)
    assert runs[0].detail.endswith("which equal speeds would give in the claimed order 1 time "
                                   "in 6")


SPEED_GROUPS = ("cls", "registers", "patches")


def test_c22_stable_and_effective_rank_fall() -> None:
    stable = {"cls": 10 - np.arange(L), "patches": 20 - 2 * np.arange(L)}
    effective = {g: v + 5.0 for g, v in stable.items()}
    c = ch.c22_update_rank_falls(stable, effective, [2, 5], width=64)
    assert verdict(c) == HOLDS and "'≈ 6' not tested" in c.detail
    rising = {**stable, "patches": 10 + np.arange(L)}
    assert verdict(ch.c22_update_rank_falls(rising, effective, [2, 5], width=64)) == FAILS
    assert verdict(ch.c22_update_rank_falls(stable, {**effective, "cls": 5 + np.arange(L)},
                                            [2, 5], width=64)) == FAILS
    assert "ρ stable -1.00 [-1.00, -1.00] / effective" in c.ours
    # Falling, but not significantly (ρ = −0.31 over 8 layers).
    wobbly = {**stable, "cls": np.array([5.0, 7, 4, 6, 3, 8, 2, 4])}
    assert verdict(ch.c22_update_rank_falls(wobbly, effective, [2, 5], width=64)
                   ) == INCONCLUSIVE
    # Rising weakly (ρ = 0.26 [−0.55, 0.82]): no evidence against a fall either.
    weak = ch.c22_update_rank_falls({**stable, "cls": np.array([4.0, 7, 5, 3, 6, 8, 2, 9])},
                                    effective, [2, 5], width=64)
    assert verdict(weak) == INCONCLUSIVE and "ρ stable 0.26 [-0.55, 0.82]" in weak.ours
    few = {g: v[:4] for g, v in stable.items()}
    assert verdict(ch.c22_update_rank_falls(few, few, [1, 2], width=64)) == UNTESTABLE
    # At D = 768, "≈ 6" is tested on the last phase (layers 6–8): 5–7 holds, 15–17 does not.
    near_six = {g: np.r_[30, 25, 20, 15, 10, 7, 6, 5.0] for g in ("cls", "patches")}
    held = ch.c22_update_rank_falls(near_six, near_six, [2, 5], width=768)
    assert verdict(held) == HOLDS and core(held).endswith("within ±3 of 6")
    assert held.detail.endswith("; a part does not hold only if its 99.38% interval lies wholly "
                                "against it (Bonferroni over 8 parts)")
    high = {g: v + 10 for g, v in near_six.items()}
    assert verdict(ch.c22_update_rank_falls(high, high, [2, 5], width=768)) == FAILS
    assert verdict(ch.c22_update_rank_falls(high, high, [2, 5], width=64)) == HOLDS


def kappa_images(mean: np.ndarray, sd: float, n: int = 200) -> np.ndarray:
    return mean + np.random.default_rng(0).normal(0, sd, (n, len(mean)))


def test_c23_sharp_late_rise() -> None:
    jump = np.array([0.3, 0.31, 0.32, 0.33, 0.34, 0.35, 0.8, 0.82])  # +0.45 of 0.52 at layer 7
    c = ch.c23_coherence_rises(kappa_images(jump, 0.02), [2, 5])
    assert verdict(c) == HOLDS and "at layer l+1 = 7 [7, 7] (last phase)" in c.ours
    steady = np.linspace(0.2, 0.9, L)  # each layer carries 1/7 of the rise
    assert verdict(ch.c23_coherence_rises(kappa_images(steady, 0.02), [2, 5])) == FAILS
    early = jump[[0, 6, 7, 7, 7, 7, 7, 7]] + np.linspace(0, 0.01, L)  # sharp, but at layer 2
    assert verdict(ch.c23_coherence_rises(kappa_images(early, 0.02), [2, 5])) == FAILS
    assert verdict(ch.c23_coherence_rises(kappa_images(steady[::-1], 0.02), [2, 5])) == FAILS
    # Half the rise in one layer, give or take the images' spread.
    half = np.array([0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.8, 0.8])
    assert verdict(ch.c23_coherence_rises(kappa_images(half, 0.3), [2, 5])) == INCONCLUSIVE
    # Two like jumps, at layer 2 and at layer 6: where the largest lands is open.
    two = np.array([0.3, 0.3, 0.55, 0.56, 0.57, 0.58, 0.83, 0.84])
    c = ch.c23_coherence_rises(kappa_images(two, 0.3), [2, 5])
    assert verdict(c) == INCONCLUSIVE and "at layer l+1 = 7 [3, 7]" in c.ours
    assert core(c).endswith("; inconclusive: sharp, late")


def nearest(lam: dict[str, np.ndarray], spread: float = 0.01) -> dict[str, np.ndarray]:
    """Bootstrap draws of each group's distance of its nearest eigenvalue to +1."""
    return {g: np.abs(v - 1).min() + np.linspace(-spread, spread, 200) for g, v in lam.items()}


def test_c24_radius_up_to_round_off_and_cls_closest() -> None:
    lam = {"cls": np.array([0.99, 0.5]), "registers": np.array([0.9]),
           "patches": np.array([0.8 + 0.1j, 0.8 - 0.1j])}
    inside = {g: np.abs(v).max() + np.linspace(-0.01, 0.005, 200) for g, v in lam.items()}
    c = ch.c24_dmd_near_one(lam, inside, nearest(lam), rank=10)
    assert verdict(c) == HOLDS and "exact DMD of rank 2 on group-averaged directions (the " \
        "paper's r = 10 needs ≥ 10 layer transitions; this teacher has 2)" in c.detail
    assert c.tests == 5  # |λ| ≤ 1 for each of the three groups, cls closer than each other
    out = {**lam, "cls": np.array([1.006])}
    above = {**inside, "cls": 1.006 + np.linspace(-0.002, 0.002, 200)}
    failed = ch.c24_dmd_near_one(out, above, nearest(out), rank=10)
    assert verdict(failed) == FAILS and core(failed).endswith("; does not hold: cls |λ| ≤ 1")
    far = {**lam, "cls": np.array([0.7])}
    assert verdict(ch.c24_dmd_near_one(far, inside, nearest(far), rank=10)) == FAILS
    spans = {**inside, "cls": 1.0 + np.linspace(-0.01, 0.01, 200)}
    assert verdict(ch.c24_dmd_near_one(lam, spans, nearest(lam), rank=10)) == INCONCLUSIVE
    # cls only as close as registers within noise: the order is not earned either way
    tie = {**lam, "registers": np.array([0.99])}
    draws = nearest(tie)
    draws["registers"] = draws["registers"][::-1]  # paired differences spread around 0
    assert verdict(ch.c24_dmd_near_one(tie, inside, draws, rank=10)) == INCONCLUSIVE


def test_thresholds_name_their_source() -> None:
    found = [v for v in vars(ch).values() if isinstance(v, ch.Threshold)]
    assert len(found) == 15
    ours = [t for t in found if t.source.startswith("[ours] ")]
    assert all(len(t.source) > 40 for t in ours)
    assert {t.source for t in found if t not in ours} == {t.source for t in (
        ch.ZERO_AICC, ch.NO_GAP, ch.FINAL_RANK)}
    assert "§4, Fig. 12 left" in ch.FINAL_RANK.source


@pytest.mark.slow
def test_smoke_result(smoke_result) -> None:
    result = smoke_result(chapter.NAME)
    depth = chapter.SMOKE.teacher.depth
    groups = ["cls", "registers", "patches"]
    (run,) = result.runs
    assert run.seed == chapter.SMOKE.seeds[0]
    assert list(run.flow) == ["teacher", "Raptor"]
    for flow in run.flow.values():
        assert list(flow.norms) == groups
        assert all(v.shape == (depth + 1,) for v in [*flow.norms.values(),
                                                      *flow.convergence.values()])
        assert all(v.shape == (depth,) for v in flow.speed.values())
    assert run.pca_paths.shape[1:] == (depth + 1, 2)
    assert run.pca_paths.shape[0] == (run.labels < chapter.SMOKE.n_classes).sum() > 0
    assert len(run.partition) == chapter.SMOKE.k
    assert all(v.shape == (len(run.labels), depth) for v in run.sensitivity_images.values())
    assert all(v.shape == (depth - run.perturb_layer + 1,) for v in run.distance.values())
    assert all(np.abs(lam).max() < 1.5 for lam in run.dmd.values())

    assert list(chapter.dmd_table(result).index.get_level_values("group")) == groups
    assert list(chapter.seeds_table(result).index) == list(chapter.SMOKE.seeds)
    assert len(chapter.share_table(result)) == 3
    claims = chapter.claims(result)
    assert [c.id for c in claims] == [f"C{i}" for i in range(16, 25)]
    assert claims[0].verdict == UNTESTABLE  # γ over L + 1 = 5 layers: too few for the fit
    assert all(c.tests >= 1 for c in claims) and claims[1].tests == len(groups)  # C17 per group


@pytest.mark.slow
def test_claims_combine_the_seeds(smoke_result) -> None:
    """With two seeds (the smoke run twice), C16 is declared over both (the engine) and C17–C24
    are judged on each and combined."""
    result = smoke_result(chapter.NAME)
    (run,) = result.runs
    twice = chapter.Result(dataclasses.replace(result.spec, seeds=(0, 1)),
                           [run, dataclasses.replace(run, seed=1)])
    single, both = chapter.claims(result), chapter.claims(twice)
    assert [c.verdict for c in both] == [c.verdict for c in single]
    assert all("per seed: 0 " in c.ours and "seed 1: " in c.detail for c in both[1:])


@pytest.mark.slow
def test_figures_show_what_the_claims_measure(smoke_result) -> None:
    """The DMD panel names the rank used; C19's panel plots the norm-rescaled deviation."""
    result = smoke_result(chapter.NAME)
    (run,) = result.runs
    used = max(len(lam) for lam in run.dmd.values())
    assert used < result.spec.dmd_rank  # the smoke teacher has fewer transitions than r
    title = chapter.low_rank_dmd_figure(result).axes[2].get_title()
    assert title == f"(C) DMD, rank {used}\n(paper: r = {result.spec.dmd_rank})"
    ax = chapter.perturbation_figure(result).axes[2]
    assert ax.get_ylabel() == (rf"angle $\times \Vert x_l \Vert / "
                                rf"\Vert x_{{{run.perturb_layer}}} \Vert$")
    cls = run.relative_deviation["cls"]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), cls[1::2].mean(axis=0))


def test_image_deviation_is_per_image_and_in_injection_norm_units(tiny_teacher) -> None:
    from raptor import dynamics
    from raptor.trajectories import TokenGroups

    model = tiny_teacher()
    groups = TokenGroups.from_model(model)
    tokens = 3 * torch.randn(6, 18, 32, generator=torch.Generator().manual_seed(0))
    p = dynamics.perturb(model, tokens, 1, 0.5, groups=groups)
    dev = dynamics.image_deviation(p, groups)
    for g, d in dev.items():
        assert d["distance"].shape == d["relative"].shape == (6, len(model.blocks) - 1 + 1)
        np.testing.assert_allclose(d["distance"].mean(axis=0), p.distance[g], rtol=1e-5)
    # The oracle for one patch token at the last layer: angle × ‖x_L‖ / ‖x_1‖.
    c, q = p.clean[0, :, 5].astype(float), p.perturbed[0, :, 5].astype(float)
    cos = c[-1] @ q[-1] / np.linalg.norm(c[-1]) / np.linalg.norm(q[-1])
    angle = np.arccos(np.clip(cos, -1, 1))
    one = dynamics.image_deviation(
        dynamics.Perturbation(p.layer, p.eps, p.direction, p.clean[:, :, 5:6],
                              p.perturbed[:, :, 5:6], {}, {}, {}),
        TokenGroups.from_counts(0, 0, 1))
    assert one["patches"]["relative"][0, -1] == pytest.approx(
        angle * np.linalg.norm(c[-1]) / np.linalg.norm(c[0]), rel=1e-4)
    # A radial perturbation (along the token itself) turns no direction at injection.
    radial = dynamics.perturb(model, tokens, 1, 0.5, direction=tokens, groups=groups)
    for d in dynamics.image_deviation(radial, groups).values():
        assert np.abs(d["relative"][:, 0]).max() < 1e-5


# --- power: each claim can hold at the cpu profile's n, and does not on a no-effect input ----

N_CPU = 1000  # images at the cpu profile; L = 8 layers, k = 3 phases (boundaries 2, 5)
BOUNDS = [2, 5]


def _noisy(curve: np.ndarray, sd: float, seed: int) -> np.ndarray:
    return curve + np.random.default_rng(seed).normal(0, sd, np.shape(curve))


def _power_inputs(effect: bool) -> dict[str, Claim]:
    """Each of C16–C24 on a synthetic input at the cpu profile's size: with the claimed effect
    (``effect``), else without it; noise at or above what the cpu book measured."""
    rng = np.random.default_rng(0)
    if effect:
        gamma = {g: gamma_images(logistic(mid), 0.1, N_CPU, i)
                 for i, (g, mid) in enumerate(GROUP_MIDS)}
        norms = {g: _noisy(1 + 0.5 * DEPTH, 0.05, i) for i, g in enumerate(gamma)}
        first, labels = clustered(1.0, n=N_CPU)
        last, _ = clustered(0.3, n=N_CPU, seed=1)
        dev = {g: deviation([0.05, 0.08, 0.07, 0.06], 0.05, n=N_CPU, seed=i)
               for i, g in enumerate(gamma)}
        sens = sensitivity(np.exp(-0.2 * np.arange(L)), np.r_[np.ones(L - 1), 1.2], 0.5,
                           n=N_CPU)
        speed = {"registers": _noisy(np.full(L, 0.2), 0.01, 1),
                 "patches": np.array([0.1, 0.1, 0.25, 0.25, 0.25, 0.4, 0.4, 0.4]),
                 "cls": _noisy(np.full(L, 0.6), 0.01, 2)}
        ranks = {g: _noisy(20 - 2 * np.arange(L, dtype=float), 1.0, i)
                 for i, g in enumerate(gamma)}
        kappa = kappa_images(np.array([0.3, 0.31, 0.32, 0.33, 0.34, 0.35, 0.7, 0.72]), 0.1,
                             n=N_CPU)
        lam = {"cls": np.array([0.97, 0.5]), "registers": np.array([0.9]),
               "patches": np.array([0.85])}
    else:
        gamma = {g: gamma_images(np.r_[np.linspace(0.1, 0.95, L), 1.0], 0.1, N_CPU, i)
                 for i, (g, _) in enumerate(GROUP_MIDS)}
        norms = {g: _noisy(np.full(L + 1, 3.0), 0.05, i) for i, g in enumerate(gamma)}
        first, labels = clustered(0.5, n=N_CPU)
        last, _ = clustered(0.5, n=N_CPU, seed=1)
        dev = {g: deviation([0.05, 0.07, 0.07, 0.07], 0.05, n=N_CPU, seed=i)
               for i, g in enumerate(gamma)}
        sens = sensitivity(np.ones(L), np.ones(L), 0.5, n=N_CPU)
        speed = {g: _noisy(np.full(L, 0.3), 0.01, i) for i, g in enumerate(gamma)}
        ranks = {g: _noisy(np.full(L, 10.0), 1.0, i) for i, g in enumerate(gamma)}
        kappa = kappa_images(np.linspace(0.3, 0.72, L), 0.1, n=N_CPU)
        lam = {"cls": np.array([0.5]), "registers": np.array([0.9]),
               "patches": np.array([0.85])}
    radius = {g: np.abs(v).max() + rng.normal(0, 0.01, 200) for g, v in lam.items()}
    c16 = (seeds_of(dict(GROUP_MIDS), n=N_CPU) if effect else
           [{g: gamma_images(np.r_[np.linspace(0.1, 0.95, L), 1.0], 0.1, N_CPU, 10 * s + i)
             for i, (g, _) in enumerate(GROUP_MIDS)} for s in range(3)])
    return {"C16": ch.c16_directions_converge(c16), "C17": ch.c17_norms_grow(norms),
            "C18": ch.c18_class_basins(first, last, labels),
            "C19": ch.c19_self_correction(dev, {g: 0.1 for g in dev}, layer=4),
            "C20": ch.c20_sensitivity_by_depth(sens), "C21": ch.c21_angular_speed(speed, BOUNDS),
            "C22": ch.c22_update_rank_falls(ranks, {g: v + 3 for g, v in ranks.items()}, BOUNDS,
                                            width=64),
            "C23": ch.c23_coherence_rises(kappa, BOUNDS),
            "C24": ch.c24_dmd_near_one(lam, radius, nearest(lam), rank=10)}


def test_power_every_claim_can_hold_at_the_cpu_profile() -> None:
    """C16–C24 reach "holds" on an ideal input of the cpu profile's size (1,000 images, L = 8,
    k = 3), each with noise, and not on an input without the effect."""
    ideal, null = _power_inputs(True), _power_inputs(False)
    assert {c: v.verdict for c, v in ideal.items()} == {c: HOLDS for c in ideal}
    assert {c: v.verdict for c, v in null.items() if v.verdict == HOLDS} == {}
