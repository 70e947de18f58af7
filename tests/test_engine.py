"""The claims engine on planted cases: power check, seed policy, bounded quantities, ties, the
text."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE, Threshold, across_seeds, \
    claim, versus
from raptor.book.engine import (TIE, Declaration, Part, correlation_over_models, fails_level,
                                judge, of_model, over_seeds, part_verdicts, verdict_of)
from raptor.stats import Interval, rank_correlation

OURS = Threshold(0.9, "[ours] a planted threshold for the tests")
ZERO = Threshold(0.0, "[ours] no difference, for the planted orders")


def test_interval_formats_itself() -> None:
    iv = Interval(0.8671, 0.8634, 0.8712, 0.95)
    assert f"{iv:.3f}" == "0.867 [0.863, 0.871]"
    assert f"{iv:+.2f}" == "+0.87 [+0.86, +0.87]"
    assert f"{Interval(0.5, 0.25, 1.0, 0.95):.0%}" == "50% [25%, 100%]"


def test_a_part_whose_interval_cannot_fit_its_band_is_not_testable_with_the_n_it_needs() -> None:
    # C13's saturation: a paired difference of ±1.5 points at 1,000 images cannot lie within ±1
    sat = of_model(Interval(0.002, -0.013, 0.017, 0.95), 1000)
    p = Part("k=3→4", sat, ZERO, side="inside", band=0.01, paper=0.002)
    ok, need = p.testable()
    assert not ok
    # half-width 0.015 scales as 1/√n; it must fall below 0.01 − 0.002 = 0.008
    assert need == int(np.ceil(1000 * (0.015 / 0.008) ** 2))
    c = judge(Declaration("C13", "saturates at k=4", [p]))
    assert c.verdict == UNTESTABLE and f"it needs {need} images" in c.ours
    # at that n it is testable, and one image fewer it is not
    wider = of_model(Interval(0.002, -0.013, 0.017, 0.95), 1000)
    assert wider.half(n=need) < 0.008 <= wider.half(n=need - 1)
    # seeds: a spread that three seeds cannot bring inside a 0.5 band, with the seeds it needs
    order = over_seeds([0.1, -0.3, 0.4])
    q = Part("order", order, ZERO, side="inside", band=0.5)
    ok, seeds = q.testable()
    assert not ok and seeds is not None and order.half(n=seeds) < 0.5 <= order.half(n=seeds - 1)
    # one seed has no spread between seeds: never testable
    assert judge(Declaration("C15", "p", [Part("k=2", over_seeds([0.95]), OURS)])).verdict \
        == UNTESTABLE


def _simulate(judge_one: Callable[[np.ndarray, float], str], sims: int = 1000, seeds: int = 3,
              ratio: float = 10.0) -> tuple[float, float]:
    """P(holds), P(does not hold) of ``judge_one(per-seed estimates, evaluation SE)`` over
    ``sims`` simulations: a true mean exactly at the threshold, seeds spread ``ratio``× their
    evaluation error."""
    rng = np.random.default_rng(43)
    se, t = 0.002, OURS.value
    out = [judge_one(t + rng.normal(0, ratio * se, seeds) + rng.normal(0, se, seeds), se)
           for _ in range(sims)]
    return out.count(HOLDS) / sims, out.count(FAILS) / sims


def test_seeds_spread_10x_their_evaluation_error_at_the_threshold_err_at_most_5_percent() -> None:
    """Three seeds spread 10× their evaluation error around a mean exactly at the threshold: the
    claim is false at its boundary, and the engine says holds / does not hold each in ≤ 5% of
    1,000 simulations (the binomial vote over the seeds' own verdicts: ~38%, the issue's table)."""
    def engine(values: np.ndarray, se: float) -> str:
        return judge(Declaration("C15", "p", [Part("k=2", over_seeds(values), OURS)])).verdict

    holds, fails = _simulate(engine)
    assert holds <= 0.05 and fails <= 0.05

    def vote(values: np.ndarray, se: float) -> str:
        per_seed = {s: claim("C15", paper="p", ours="o",
                             holds=versus(v - 1.96 * se, v + 1.96 * se, OURS.value))
                    for s, v in enumerate(values)}
        return across_seeds(per_seed).verdict

    old_holds, old_fails = _simulate(vote)
    assert old_holds > 0.25 and old_fails > 0.25


def test_a_true_effect_holds_and_a_false_one_does_not() -> None:
    high = over_seeds([0.95, 0.96, 0.955])
    low = over_seeds([0.82, 0.84, 0.83])
    assert judge(Declaration("C15", "p", [Part("k=2", high, OURS)])).verdict == HOLDS
    c = judge(Declaration("C15", "p", [Part("k=2", high, OURS), Part("k=3", low, OURS)]))
    assert c.verdict == FAILS and c.tests == 2
    assert c.ours.startswith("K=2 is 0.955, above 0.900; but k=3 is 0.830, not above 0.900")
    # the power line says the smallest true value detectable at these seeds, and its margin
    margin = low.detectable(0.9)
    assert (f"does not hold; with 3 seeds, 80% power only for a true value of {0.9 + margin:.3f} "
            f"or more ({margin:.3f} above the bar 0.900)") in c.detail and "[ours]" in c.detail
    below = Part("k=2", low, OURS, side="below")
    assert judge(Declaration("C15", "p", [below])).verdict == HOLDS


def test_a_bounded_quantity_keeps_its_intervals_and_power_lines_in_range() -> None:
    """A share (0.5, 1, 0.5 of two boundaries) and Spearman's ρ (0.85, 0.81, 0.50) over 3 seeds:
    on the t scale they printed 0.67 [−0.05, 1.38] and +0.72 [+0.25, +1.20]; on the logit scale
    of their range both intervals stay inside it."""
    share = over_seeds([0.5, 1.0, 0.5], bounds=(0, 1), step=0.5)
    rho = over_seeds([0.85, 0.81, 0.50], bounds=(-1, 1), step=12 / (13 * 168))
    for e in (share, rho):
        iv = e.interval()
        assert e.bounds[0] <= iv.low <= e.value <= iv.high <= e.bounds[1]
        assert e.bounds[0] <= e.interval(0.999).low and e.interval(0.999).high <= e.bounds[1]
    # an unbounded t interval of the same numbers leaves [0, 1] and [−1, 1]
    assert over_seeds([0.5, 1.0, 0.5]).interval().low < 0
    assert over_seeds([0.85, 0.81, 0.50]).interval().high > 1
    # the power line past 0.49 lies beyond the attainable share: not testable, with its n
    p = Part("jumps", share, Threshold(0.49, "[ours] planted chance"), fmt=".2f")
    ok, need = p.testable()
    assert not ok and need is not None and need > 3
    assert part_verdicts([p]) == [UNTESTABLE]
    c = judge(Declaration("C21", "p", [p]))
    assert f"it needs {need} seeds" in c.ours and "on [0.00, 1.00]" in c.detail
    assert "80% power" not in c.detail
    # with many seeds it is testable, and its power line stays inside [0, 1]
    many = over_seeds(np.tile([0.5, 1.0, 0.5], 10), bounds=(0, 1), step=0.5)
    q = Part("jumps", many, Threshold(0.49, "[ours] planted chance"), fmt=".2f")
    assert q.testable()[0] and 0.49 + many.detectable(0.49) < 1


def test_a_zero_spread_gets_its_power_line_from_the_evaluation_noise() -> None:
    flat = over_seeds([0.01, 0.01, 0.01], noise=[0.002, 0.002, 0.002])
    p = Part("bends back", flat, ZERO, side="below", fmt="+.4f")
    assert flat.spread == 0 and flat.detectable(0.0, "below") > 0.002
    c = judge(Declaration("C19", "p", [p]))
    # below a bar, a signed quantity: the value signed, the margin (a distance) not
    margin = flat.detectable(0.0, "below")
    assert c.verdict == FAILS and (f"80% power only for a true value of {-margin:+.4f} or less "
                                   f"({margin:.4f} below the bar +0.0000)") in c.detail


def test_an_unsettled_part_outranks_one_that_cannot_settle() -> None:
    """C14's order: a part with an interval against the claim at 95% (not at Bonferroni's level)
    makes the claim inconclusive, and says so, though another part is not testable."""
    kept = Part("TF collapses", over_seeds([0.778, 0.900, 0.796]),
                Threshold(0.5, "[ours] planted"), side="below", paper=0.047, fmt=".1%")
    weak = Part("loss", over_seeds([-0.010, -0.036, 0.036]), Threshold(0.01, "[ours] p"),
                side="below", paper=-0.025, fmt="+.1%")
    filler = [Part(f"x{i}", over_seeds([0.5, 0.6, 0.55]), Threshold(0.0, "[ours] p"))
              for i in range(4)]
    parts = [kept, weak, *filler]
    verdicts = part_verdicts(parts)
    assert verdicts[:2] == [INCONCLUSIVE, UNTESTABLE] and kept.read(0.95) == FAILS
    c = judge(Declaration("C14", "p", parts))
    assert c.verdict == INCONCLUSIVE
    assert "not below 50.0% on its 95% interval" in c.ours
    assert "(against it on its 95% interval)" in c.detail
    assert verdict_of([UNTESTABLE, HOLDS]) == UNTESTABLE
    assert verdict_of([UNTESTABLE, INCONCLUSIVE]) == INCONCLUSIVE


def test_an_order_inside_its_band_is_a_tie() -> None:
    # cls reaches 0.9 0.1–0.3 layers before the patches: inside half a layer, a tie
    gap = over_seeds([-0.15, -0.2, -0.25])
    p = Part("patches before cls", gap, ZERO, band=0.5)
    assert p.read(0.95) == TIE and part_verdicts([p]) == [TIE]
    assert "a tie within ±0.500" in judge(Declaration("C16", "p", [p])).ours
    # beyond the band either way: holds / does not hold; straddling its edge: inconclusive
    assert Part("o", over_seeds([1.0, 1.1, 1.2]), ZERO, band=0.5).read(0.95) == HOLDS
    assert Part("o", over_seeds([-1.0, -1.1, -1.2]), ZERO, band=0.5).read(0.95) == FAILS
    assert Part("o", over_seeds([0.2, 0.6, 1.0]), ZERO, band=0.5).read(0.95) == INCONCLUSIVE


def test_does_not_hold_needs_the_bonferroni_level() -> None:
    """Three seeds 0.880 / 0.885 / 0.890: the 95% t interval ends at 0.897 < 0.9, the 97.5% one
    (Bonferroni over two parts) at 0.903: alone it does not hold, in a claim of two inconclusive."""
    e = over_seeds([0.88, 0.885, 0.89])
    assert e.interval(0.95).high < OURS.value < e.interval(fails_level(2)).high
    one, ok = Part("a", e, OURS), Part("b", over_seeds([0.95, 0.96, 0.955]), OURS)
    assert part_verdicts([one]) == [FAILS]
    assert part_verdicts([one, ok]) == [INCONCLUSIVE, HOLDS]


def test_many_parts_keep_both_errors_at_2_5_percent() -> None:
    """Simulated: m = 10 normal estimates (standard error 1) each exactly at its threshold (the
    claim true, at its edge): uncorrected, some part's 95% interval lies wholly below in
    1 − 0.975¹⁰ = 22% of runs; the claim does not hold in 2.5% (Bonferroni; within 3 standard
    errors of the simulation). With one part false at its edge and the others clearly true, it
    holds in 2.5% (intersection–union)."""
    rng = np.random.default_rng(0)
    runs, m = 4000, 10
    fails = holds = naive = 0

    def parts(values: np.ndarray) -> list[Part]:
        return [Part(f"p{i}", of_model(Interval(x, x - 1.96, x + 1.96, 0.95), 100), ZERO)
                for i, x in enumerate(values)]

    for e in rng.normal(0, 1, (runs, m)):
        fails += verdict_of(part_verdicts(parts(e))) == FAILS
        naive += any(p.read(0.95) == FAILS for p in parts(e))
        holds += verdict_of(part_verdicts(parts(e + 10 * (np.arange(m) > 0)))) == HOLDS
    tolerance = 3 * np.sqrt(0.025 * 0.975 / runs)
    assert naive / runs == pytest.approx(1 - 0.975**m, abs=0.03)
    assert fails / runs <= 0.025 + tolerance and holds / runs <= 0.025 + tolerance


def test_detectable_effect_has_80_percent_power() -> None:
    """The margin :meth:`Estimate.detectable` reports is cleared by the 95% t interval of three
    seeds in 80% of simulations (an independent Monte Carlo oracle)."""
    e = over_seeds([0.0, 1.0, 2.0])  # sd 1
    margin, rng = e.detectable(), np.random.default_rng(0)
    cleared = [Part("x", over_seeds(margin + rng.normal(0, 1, 3)), ZERO).read(0.95) == HOLDS
               for _ in range(4000)]
    assert np.mean(cleared) == pytest.approx(0.8, abs=0.02)
    # one model's interval keeps its shape (a Wilson interval stays inside [0, 1])
    wilson = of_model(Interval(1.0, 0.912, 1.0, 0.95), 40, "image subset")
    assert f"{wilson.interval():.0%}" == "100% [91%, 100%]"
    img = of_model(Interval(0.0, -0.02, 0.02, 0.95), 1000)
    assert img.detectable() == pytest.approx((1.959964 + 0.841621) * 0.02 / 1.959964, rel=1e-4)


def test_also_parts_are_reported_but_do_not_decide() -> None:
    held = Part("near 1", over_seeds([0.99, 0.985, 0.99]), Threshold(0.8, "[ours] near 1 here"))
    order = Part("patches before cls", over_seeds([-0.15, -0.2, -0.25]), ZERO, band=0.5)
    c = judge(Declaration("C16", "p", [held], also=[order]))
    assert c.verdict == HOLDS and "also patches before cls is -0.200, a tie" in c.ours


def test_a_correlation_over_models_is_exact_on_fishers_scale() -> None:
    """From its 95% Fisher-z interval, a correlation's interval at any level is the one computed
    at that level, and the correlation detected with 80% power is tanh((z₉₇.₅ + z₈₀) · se)."""
    x = np.arange(12.0)
    y = x + np.random.default_rng(0).normal(0, 6, 12)
    c = rank_correlation(y, x)
    e = correlation_over_models(c.interval, c.n)
    for level in (0.8, 0.95, 0.975, 0.99):
        at = rank_correlation(y, x, level=level)
        assert e.interval(level).low == pytest.approx(at.low, abs=1e-9)
        assert e.interval(level).high == pytest.approx(at.high, abs=1e-9)
    pearson = correlation_over_models(Interval(0.3, *np.tanh(np.arctanh(0.3) + np.array(
        [-1, 1]) * 1.959964 / 3), 0.95), 12)  # Pearson's se = 1 / √(n − 3)
    assert pearson.detectable(0.0) == pytest.approx(np.tanh((1.959964 + 0.841621) / 3), rel=1e-5)
    assert pearson.detectable(0.0, "below") == pytest.approx(pearson.detectable(0.0))
    assert correlation_over_models(Interval(1.0, 1.0, 1.0, 0.95), 8).interval(0.99).low == 1.0


def test_bad_declarations_are_refused() -> None:
    e = over_seeds([1.0, 2.0])
    with pytest.raises(ValueError, match="side must be"):
        Part("x", e, OURS, side="sideways")
    with pytest.raises(ValueError, match="side must be"):
        Part("x", e, OURS, side="inside")
    with pytest.raises(ValueError, match="distinct parts"):
        Declaration("C15", "p", [Part("x", e, OURS), Part("x", e, OURS)])
    with pytest.raises(ValueError, match="distinct parts"):
        Declaration("C99", "p", [Part("x", e, OURS)])
    with pytest.raises(ValueError, match="one finite estimate per seed"):
        over_seeds([])
    with pytest.raises(ValueError, match="low <= high"):
        of_model(Interval(0.0, 1.0, -1.0, 0.95), 10)


HAND_FORMATTED = re.compile(r"\[\{[^{}]*\}, \{[^{}]*\}\]")


def test_no_interval_is_formatted_by_hand_in_the_chapters() -> None:
    """An interval is written only by :class:`~raptor.stats.Interval` itself (``f"{iv:.3f}"``):
    no ``[{low}, {high}]`` typed in a chapter module."""
    chapters = Path(__file__).resolve().parents[1] / "raptor" / "book" / "chapters"
    found = {p.name for p in chapters.glob("*.py") if HAND_FORMATTED.search(p.read_text())}
    assert not found, sorted(found)
    assert HAND_FORMATTED.search('f"{e.excess:+.3f} [{e.low:+.3f}, {e.high:+.3f}]"')
