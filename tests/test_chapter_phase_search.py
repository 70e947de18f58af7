"""Chapter *Where do phases appear?*: the grid, its summary and the cheapest family with phases."""

from __future__ import annotations

import dataclasses

from raptor.book.chapters import phase_search as chapter
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE
from raptor.structure import PhaseExcess, Rank

CUT = ((0, 4), (4, 8), (8, 12))


def run(L: int, steps: int, p: float | None, seed: int, value: float) -> chapter.Run:
    e = PhaseExcess(3, CUT, CUT, value, value - 0.002, value + 0.002, 0.95, 1.0, Rank(1, 55))
    return chapter.Run(L, steps, p, seed, 0.8, {3: e})


def result(values: dict[tuple[int, int], float]) -> chapter.Result:
    spec = dataclasses.replace(chapter.Spec(), families=tuple(values), p_values=(0.0,),
                               k_values=(3,))
    runs = [run(L, steps, 0.0, s, v) for (L, steps), v in values.items() for s in range(3)]
    runs += [run(L, 0, None, s, 0.0) for L in spec.depths for s in range(3)]
    return chapter.Result(spec, runs, {})


def test_families_are_ordered_by_cost() -> None:
    spec = dataclasses.replace(chapter.Spec(), families=((12, 1500), (8, 1500), (8, 400)))
    assert spec.by_cost() == [(8, 400), (8, 1500), (12, 1500)]
    assert chapter.Spec().depths == [8, 12]


def test_cheapest_family_is_the_first_where_c1_holds_on_every_seed() -> None:
    t = chapter.EXCESS_MIN.value
    r = result({(8, 400): 0.0, (12, 400): t + 0.01, (12, 1500): t + 0.03})
    assert chapter.cheapest_family(r, 3) == (12, 400)
    assert chapter.cheapest_family(result({f: 0.0 for f in chapter.Spec().by_cost()}), 3) is None
    s = chapter.summary(r)
    assert set(s.verdict) == {HOLDS, FAILS}
    assert (s[s.steps == "untrained"].verdict == FAILS).all()
    assert chapter.claims(r) == []


def test_an_interval_on_the_threshold_is_inconclusive() -> None:
    r = result({f: chapter.EXCESS_MIN.value for f in chapter.Spec().by_cost()})
    assert set(chapter.summary(r).query("steps != 'untrained'").verdict) == {INCONCLUSIVE}
    assert chapter.cheapest_family(r, 3) is None


def test_smoke_result(smoke_result) -> None:
    r = smoke_result("phase-search")
    s = r.spec
    trained = len(s.by_cost()) * len(s.p_values) * len(s.teacher_seeds)
    assert len(r.runs) == trained + len(s.depths) * len(s.teacher_seeds)
    assert set(r.residual) == {f"L={L}, {st} steps, p={s.p_values[0]}" for L, st in s.by_cost()
                               } | {f"L={L}, untrained" for L in s.depths}
    assert len(chapter.table(r)) == len(r.runs) * len(s.k_values)
    for fig in (chapter.excess_figure(r), chapter.residual_figure(r)):
        assert fig.axes


def test_findings_read_the_summary() -> None:
    t = chapter.EXCESS_MIN.value
    r = result({(8, 400): 0.0, (12, 400): t + 0.01, (12, 1500): t + 0.03})
    assert chapter.findings(r, 3) == {"holding": "2", "groups": "3", "best": "L = 12, 400 steps",
                                      "largest": f"{t + 0.03:+.3f} (L = 12, 1500 steps, p = 0.0)",
                                      "untrained": "none"}


def test_the_figure_draws_an_estimate_outside_its_interval() -> None:
    """A cross-fitted estimate may lie outside its bootstrap percentiles (few resamples): the
    figure draws both as they are (matplotlib's errorbar refuses negative error lengths)."""
    r = result({(8, 400): 0.0})
    e = r.runs[0].excess[3]
    r.runs[0].excess[3] = dataclasses.replace(e, low=e.excess + 0.001, high=e.excess + 0.004)
    ax = chapter.excess_figure(r).axes[0]
    (segments,) = [c.get_segments() for c in ax.collections][:1]
    assert any(abs(s[0][1] - (e.excess + 0.001)) < 1e-12 for s in segments)
