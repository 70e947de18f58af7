"""The stochastic-depth chapter: its claims on known inputs, the result of a smoke run."""

import dataclasses
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np
import pytest

from raptor.book.chapters import stochastic_depth as chapter
from raptor.book.chapters.stochastic_depth import claims, compute, figures
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE
from raptor.book.engine import ENGINE

P = [0.0, 0.0, 0.2, 0.2, 0.4, 0.4, 0.6, 0.6, 0.8, 0.8]
RISING = [0.70, 0.71, 0.74, 0.75, 0.78, 0.79, 0.82, 0.83, 0.86, 0.87]
P12 = [0.0] * 3 + [0.15] * 3 + [0.3] * 3 + [0.45] * 3
RISING_12 = [0.70, 0.71, 0.72, 0.75, 0.76, 0.77, 0.80, 0.81, 0.82, 0.85, 0.86, 0.87]
WEAK = [0.74, 0.80, 0.72, 0.79, 0.73, 0.76, 0.81, 0.75, 0.78, 0.82, 0.77, 0.74]  # ρ = 0.34


# --- claims on synthetic inputs --------------------------------------------------------------

def test_c5_similarity_rises_both_ways() -> None:
    c = claims.c5_similarity_rises(P, RISING)
    assert c.verdict == HOLDS
    assert "ρ 0.98 [0.91, 1.00] on [-1.00, 1.00] vs above 0.00 [ours]: holds" in c.detail
    assert c.ours == ("Spearman ρ of the teachers' mean off-diagonal similarity with p is 0.98, "
                      "above 0.00") and ENGINE in c.detail  # ties: ρ < 1
    assert claims.c5_similarity_rises(P, RISING[::-1]).verdict == FAILS
    # A weak positive trend (ρ = 0.34, n = 12) is no evidence either way; nor is none at all.
    weak = claims.c5_similarity_rises(P12, WEAK)
    assert weak.verdict == INCONCLUSIVE and "ρ 0.34 [-0.31, 0.77]" in weak.detail
    assert weak.ours.endswith("not clearly above 0.00 on 12 trained models")
    # beside the miss, the correlation the test detects with 80% power (Fisher's z, n = 12)
    assert "80% power only for a true value of 0.74 or more (0.74 above the bar 0.00)" in weak.detail
    assert claims.c5_similarity_rises(P, [0.8, 0.7] * 5).verdict == INCONCLUSIVE
    assert claims.c5_similarity_rises(P[:4], RISING[:4]).verdict == UNTESTABLE


def test_c6_r2_rises_both_ways() -> None:
    assert claims.c6_r2_rises(P, RISING).verdict == HOLDS
    assert claims.c6_r2_rises(P, RISING[::-1]).verdict == FAILS
    assert claims.c6_r2_rises(P12, WEAK).verdict == INCONCLUSIVE


def test_c7_accuracy_rises_only_up_to_0_6() -> None:
    # Accuracy rises up to p = 0.6 and collapses at 0.8: the collapse is outside the claim.
    acc = RISING[:8] + [0.1, 0.1]
    c = claims.c7_accuracy_rises(P, acc, acc)
    assert c.verdict == HOLDS and c.tests == 2 and "over p ≤ 0.6" in c.detail
    assert "teacher ρ 0.98 [0.81, 1.00]" in c.detail and "student ρ 0.98 [0.81, 1.00]" in c.detail
    assert "a part does not hold only at the 97.50% level, Bonferroni over 2 parts" in c.detail
    # Both must rise: a falling student accuracy fails the claim, a weak rise leaves it open.
    assert claims.c7_accuracy_rises(P, acc, acc[:8][::-1] + [0.1, 0.1]).verdict == FAILS
    assert claims.c7_accuracy_rises(P12, RISING_12, WEAK).verdict == INCONCLUSIVE
    assert claims.c7_accuracy_rises(P12, WEAK, RISING_12[::-1]).verdict == FAILS


# Four rates × three seeds: similarity and R² share the rate's effect (BASE) and differ by
# the teacher's deviation from its rate's mean (DEV).
BASE, DEV = np.repeat([0.75, 0.8, 0.85, 0.9], 3), np.array([-0.01, 0.0, 0.01] * 4)


def test_c8_judges_the_pooled_association_fig_4e_plots() -> None:
    """C8 is judged on Pearson's r over the teachers, the statistic Fig. 4E plots and its title
    gives; the correlation within rates is reported beside it, not deciding."""
    c = claims.c8_similarity_predicts_r2(P12, BASE + DEV, 0.5 * BASE + 0.5 * DEV
                                         + np.array([0, 0.001, -0.001] * 4))
    assert c.verdict == HOLDS and "r 1.00 [" in c.detail and "also r within p 0.98 [" in c.detail
    assert "partial correlation given p" in c.detail
    # against the rate: pooled r < 0
    against = claims.c8_similarity_predicts_r2(P12, BASE + DEV, 0.5 * BASE[::-1] - 0.5 * DEV)
    assert against.verdict == FAILS
    # Both driven by p alone: pooled r = 0.98 holds (the paper's association), within rates
    # nothing either way, said beside it.
    rng = np.random.default_rng(0)
    driven = claims.c8_similarity_predicts_r2(P12, BASE + 0.01 * rng.normal(size=12),
                                              0.5 * BASE + 0.01 * rng.normal(size=12))
    assert driven.verdict == HOLDS and "r 0.98 [0.92, 0.99]" in driven.detail
    assert "within the 4 rates is" in driven.ours and "not clearly above" in driven.ours
    # One teacher per rate: the pooled r is judged, nothing within rates to measure.
    few = claims.c8_similarity_predicts_r2(P12[::3], BASE[::3], BASE[::3])
    assert "needs at least rates + 3 = 7 teachers" in few.detail
    # the figure's panel (E) is titled with the statistic C8 judges
    sweep = compute.Result(chapter.Spec(), [
        compute.Run(p, i % 3, np.array([[0, s], [s, 0]]), ((0, 1), (1, 2)),
                    {"cls": np.array([0, r]), "patches": np.array([0, r])}, 0.5, 0.5)
        for i, (p, s, r) in enumerate(zip(P12, BASE + DEV, 0.5 * BASE + 0.5 * DEV
                                          + np.array([0, 0.001, -0.001] * 4)))])
    fig = figures.SWEEP(sweep)
    table = compute.sweep_table(sweep)
    c8 = claims.c8_similarity_predicts_r2(list(table["p"]), list(table["mean similarity"]),
                                          list(table["R²"]))
    shown = re.search(r"r = (\S+ \[\S+, \S+\])", fig.axes[2].get_title()).group(1)
    assert f"r {shown}" in c8.detail
    plt.close(fig)


def test_committed_claims_text() -> None:
    """The claims' fixed texts as the committed book prints them."""
    c = claims.c7_accuracy_rises(P, RISING, RISING)
    assert c.paper == "teacher and student accuracy rise with p up to ~0.6 (Fig. 4C)"


def test_claims_of_the_committed_cpu_run() -> None:
    """The committed book's sweep (4 decimals, no ties: exact ranks) gives its checks."""
    rows = [(0.0, 0.7822, 0.806, 0.771, 0.9572, 0.9795),
            (0.0, 0.7767, 0.791, 0.757, 0.9098, 0.9762),
            (0.15, 0.8043, 0.796, 0.760, 0.9476, 0.9808),
            (0.15, 0.8033, 0.778, 0.763, 0.9378, 0.9796),
            (0.3, 0.8384, 0.785, 0.758, 0.9472, 0.9838),
            (0.3, 0.8326, 0.770, 0.751, 0.9470, 0.9847),
            (0.45, 0.8638, 0.760, 0.748, 0.9683, 0.9891),
            (0.45, 0.8646, 0.754, 0.739, 0.9729, 0.9891)]  # p, similarity, acc ×2, R² ×2
    runs = [compute.Run(p, i % 2, np.array([[0, s], [s, 0]]), ((0, 2), (2, 5), (5, 8)),
                        {"cls": np.array([0, rc]), "patches": np.array([0, rp])}, ta, sa)
            for i, (p, s, ta, sa, rc, rp) in enumerate(rows)]
    checks = claims.claims(compute.Result(chapter.Spec(), runs))
    assert [c.verdict for c in checks] == [HOLDS, INCONCLUSIVE, FAILS, HOLDS]
    for c, shown in zip(checks, ("ρ 0.98 [0.81, 1.00]", "ρ 0.68 [-0.14, 0.95]",
                                 "teacher ρ -0.88 [-0.98, -0.32]", "r 0.80 [0.22, 0.96]")):
        assert shown in c.detail and ENGINE in c.detail, c.id
    assert "student ρ -0.78 [-0.97, -0.05]" in checks[2].detail
    assert "also r within p 0.69 [-0.50, 0.98]" in checks[3].detail
    assert [c.tests for c in checks] == [1, 1, 2, 1]  # C7: teacher and student


# --- the chapter at smoke --------------------------------------------------------------------

@pytest.mark.slow
def test_smoke_result(smoke_result) -> None:
    result = smoke_result(chapter.NAME)
    spec, L = chapter.SMOKE, chapter.SMOKE.teacher.depth
    assert [(r.p, r.seed) for r in result.runs] == [(p, s) for p in spec.p_values
                                                   for s in spec.seeds]
    for r in result.runs:
        assert r.similarity.shape == (L, L) and len(r.partition) == spec.k
        assert r.r2["cls"].shape == r.r2["patches"].shape == (L + 1,)
        assert 0 <= r.teacher_acc <= 1 and 0 <= r.student_acc <= 1
    assert [c.id for c in claims.claims(result)] == ["C5", "C6", "C7", "C8"]


def test_similarity_figure_shows_the_first_seed() -> None:
    spec = dataclasses.replace(chapter.SMOKE, seeds=(1, 0))
    S = {s: np.full((4, 4), 0.5 + s / 4) for s in (0, 1)}
    runs = [compute.Run(p, s, S[s], ((0, 2), (2, 4)), {}, 0.5, 0.5)
            for p in spec.p_values for s in spec.seeds]
    fig = figures.SIMILARITY(compute.Result(spec, runs))
    shown = [ax.images[0].get_array() for ax in fig.axes if ax.images]
    assert len(shown) == len(spec.p_values) and all(np.all(a == 0.75) for a in shown)
    plt.close(fig)


@pytest.mark.slow
def test_findings_say_what_each_verdict_says(smoke_result) -> None:
    """A rise with p and the association are worded by the verdict, never typed."""
    result = smoke_result(chapter.NAME)
    checks = claims.claims(result)
    said = {v: claims.findings(result, [dataclasses.replace(c, verdict=v) for c in checks])
            for v in (HOLDS, FAILS, INCONCLUSIVE)}
    assert [said[v]["similarity"].split(" with p")[0] for v in said] == \
        ["rises", "does not rise", "does not clearly rise"]
    assert [said[v]["accuracy"].split(" with p")[0] for v in said] == \
        ["rise", "do not rise", "do not clearly rise"]
    assert [said[v]["association"].split(" across")[0] for v in said] == \
        ["go together", "do not go together", "are not clearly associated"]
