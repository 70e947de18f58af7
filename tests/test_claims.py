"""Tests for raptor.book.claims: claim IDs, thresholds, verdicts, the JSON and the claims table."""

from __future__ import annotations

import ast
import json
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from raptor.book.chapters import names, science
from raptor.book.claims import (BADGES, BY_CONSTRUCTION, CLAIMS, FAILS, HOLDS,
                                INCONCLUSIVE, SEEDS_ALPHA, UNTESTABLE, VERDICTS, Claim, Threshold,
                                across_seeds, claim, counted, excess_text, gather, listed,
                                on_phases, report, rests_on_phases, scoped, stated, table, versus)


def test_there_are_25_claims_c1_to_c25() -> None:
    assert list(CLAIMS) == [f"C{i}" for i in range(1, 26)]
    assert all(text.strip() for text in CLAIMS.values())


@pytest.mark.parametrize("bad", ["C0", "C26", "c1", "", "1"])
def test_unknown_claim_id(bad: str) -> None:
    with pytest.raises(ValueError, match=f"unknown claim id {bad!r}; valid: C1..C25"):
        claim(bad, paper="x", ours="y", holds=True)


@pytest.mark.parametrize("holds, verdict", [(True, HOLDS), (False, FAILS), (None, UNTESTABLE),
                                            (np.bool_(True), HOLDS), (np.bool_(False), FAILS),
                                            (np.float64(0.7) > 0.5, HOLDS)])
def test_verdicts(holds: object, verdict: str) -> None:
    c = claim("C5", paper="higher", ours="0.81 vs 0.62", holds=holds, detail="n=64")
    assert isinstance(c, Claim) and c.verdict == verdict
    assert c.claim == CLAIMS["C5"] and c.detail == "n=64" and c.chapter == ""


def test_threshold_needs_a_source() -> None:
    t = Threshold(0.5, "[ours] half of the range")
    assert (t.value, t.source) == (0.5, "[ours] half of the range")
    for source in ("", "   "):
        with pytest.raises(ValueError, match="a threshold needs a source"):
            Threshold(1.0, source)


def test_every_chapter_threshold_cites_the_paper_or_gives_our_reason() -> None:
    def namespaces(name: str) -> list[types.ModuleType]:  # a chapter's modules
        package = science(name)
        return [package.compute, package.claims, package.figures]

    thresholds = [(name, attr, v) for name in names() for mod in namespaces(name)
                  for attr, v in vars(mod).items() if isinstance(v, Threshold)]
    assert len({name for name, _, _ in thresholds}) >= 6
    for name, attr, t in thresholds:
        ours = t.source.startswith("[ours] ") and len(t.source) > len("[ours] ") + 10
        cites = any(ref in t.source for ref in ("§", "Fig", "Table", "App", "Eq", "eq."))
        assert ours or cites, f"{name}.{attr}: {t.source!r}"


def test_table_columns(phase_test_on) -> None:
    t = table([claim("C1", paper="a", ours="b", holds=True),
               claim("C2", paper="c", ours="d", holds=None)])
    assert list(t.index) == ["C1", "C2"]
    assert list(t.columns) == ["claim", "paper", "ours", "verdict", "detail"]
    assert t.loc["C2", "verdict"] == UNTESTABLE
    resting = table([replace(claim("C3", paper="a", ours="b", holds=True),
                             rests_on=rests_on_phases({"seed 0": phase_test_on(0.1)}))])
    assert list(resting.columns) == ["claim", "paper", "ours", "verdict", "rests on", "detail"]


def test_report_writes_json_and_gather_lists_every_claim(tmp_path: Path) -> None:
    claims_dir = tmp_path / "claims"
    report([claim("C1", paper="blocks", ours="3 blocks", holds=True),
            claim("C5", paper="up", ours="down", holds=False)],
           chapter="phase-structure", profile="smoke", claims_dir=claims_dir)
    report([claim("C1", paper="blocks", ours="2 blocks", holds=None)],
           chapter="finding-phases", profile="cpu", claims_dir=claims_dir)
    written = json.loads((claims_dir / "phase-structure.json").read_text())
    assert [c["id"] for c in written] == ["C1", "C5"]
    assert written[1] == {"id": "C5", "claim": CLAIMS["C5"], "paper": "up", "ours": "down",
                          "verdict": FAILS, "detail": "", "rests_on": "", "tests": 1,
                          "chapter": "phase-structure", "profile": "smoke", "values": {}}

    g = gather(claims_dir)
    assert list(dict.fromkeys(g.index)) == list(CLAIMS)
    assert len(g) == 26  # C1 was checked in two chapters
    c1 = g.loc[["C1"]]
    assert sorted(c1["chapter"]) == ["finding-phases", "phase-structure"]
    assert sorted(c1["verdict"]) == sorted([HOLDS, UNTESTABLE])
    assert g.loc["C5", "verdict"] == FAILS and g.loc["C5", "profile"] == "smoke"
    untested = g.drop(index=["C1", "C5"])
    assert (untested["verdict"] == "not yet tested").all() and len(untested) == 23


def test_report_writes_where_it_is_told_and_gather_reads_there(tmp_path: Path) -> None:
    report([claim("C3", paper="p", ours="o", holds=True)], chapter="distillation", profile="smoke",
           claims_dir=tmp_path / "staged")
    assert json.loads((tmp_path / "staged" / "distillation.json").read_text())[0]["id"] == "C3"
    assert gather(tmp_path / "staged").loc["C3", "chapter"] == "distillation"


def test_gather_of_empty_folder(tmp_path: Path) -> None:
    g = gather(tmp_path / "nothing-here")
    assert list(g.index) == list(CLAIMS)
    assert set(g["verdict"]) == {"not yet tested"}


@pytest.mark.parametrize("low, high, above, verdict", [
    (0.6, 0.9, True, HOLDS), (0.1, 0.4, True, FAILS), (0.4, 0.6, True, INCONCLUSIVE),
    (0.1, 0.4, False, HOLDS), (0.6, 0.9, False, FAILS), (0.4, 0.6, False, INCONCLUSIVE),
    (0.5, 0.5, True, FAILS)])
def test_versus_reads_the_interval_against_the_threshold(low: float, high: float, above: bool,
                                                         verdict: str) -> None:
    assert versus(low, high, 0.5, above=above) == verdict
    assert claim("C1", paper="p", ours="o", holds=verdict).verdict == verdict


@pytest.mark.parametrize("low, high, above, verdict", [
    (2.5, 9.0, True, HOLDS), (-9.0, -2.5, True, FAILS), (-1.0, 1.0, True, INCONCLUSIVE),
    (-2.5, 1.0, True, INCONCLUSIVE), (1.0, 2.5, True, INCONCLUSIVE),
    (-9.0, -2.5, False, HOLDS), (2.5, 9.0, False, FAILS), (-1.0, 1.0, False, INCONCLUSIVE)])
def test_versus_with_a_band_of_indifference(low: float, high: float, above: bool,
                                            verdict: str) -> None:
    """Holds beyond ``threshold``, does not hold only beyond ``against``: an interval inside the
    band between them, or across either edge, is inconclusive."""
    t, f = (2.0, -2.0) if above else (-2.0, 2.0)
    assert versus(low, high, t, above=above, against=f) == verdict
    with pytest.raises(ValueError, match="against"):
        versus(0.0, 1.0, t, above=above, against=t + (1 if above else -1))


def test_versus_and_claim_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        versus(0.9, 0.1, 0.5)
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        claim("C1", paper="p", ours="o", holds="maybe")
    assert claim("C25", paper="p", ours="o", holds=BY_CONSTRUCTION).verdict == BY_CONSTRUCTION


def _c17(verdict: str, ours: str = "rho") -> Claim:
    return claim("C17", paper="p", ours=ours, holds=verdict, detail="d")


@pytest.mark.parametrize("verdicts, verdict", [
    ([HOLDS, HOLDS, HOLDS], HOLDS),
    ([HOLDS, HOLDS, INCONCLUSIVE], HOLDS),  # P(Bin(3, 2.5%) ≥ 2) = 0.0018
    ([HOLDS, INCONCLUSIVE, INCONCLUSIVE], INCONCLUSIVE),  # P(Bin(3, 2.5%) ≥ 1) = 0.073
    ([FAILS, FAILS, HOLDS], FAILS),  # two failures are significant, one success is not
    ([HOLDS, FAILS, HOLDS], HOLDS),  # one stray failure no longer sinks the claim
    ([HOLDS, FAILS], INCONCLUSIVE),  # P(Bin(2, 2.5%) ≥ 1) = 0.049: both ways significant
    ([FAILS, FAILS, FAILS], FAILS),
    ([INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE], INCONCLUSIVE),
    ([UNTESTABLE, UNTESTABLE, UNTESTABLE], UNTESTABLE), ([UNTESTABLE, HOLDS, HOLDS], INCONCLUSIVE),
    ([BY_CONSTRUCTION, BY_CONSTRUCTION], BY_CONSTRUCTION)])
def test_across_seeds_is_a_binomial_test_of_the_seeds_verdicts(verdicts: list[str],
                                                               verdict: str) -> None:
    c = across_seeds({s: _c17(v, f"rho{s}") for s, v in enumerate(verdicts)})
    assert c.verdict == verdict and c.id == "C17" and c.tests == len(verdicts)
    assert c.ours.startswith("seed 0: rho0 (per seed: 0 ") and f"seed {len(verdicts) - 1}: rho" \
        in c.detail
    assert f"combined over {len(verdicts)} seeds by a binomial test of the seeds' verdicts" \
        in c.detail


def test_more_seeds_sharpen_the_combined_test() -> None:
    def combined(verdicts: list[str]) -> str:
        return across_seeds({s: _c17(v) for s, v in enumerate(verdicts)}).verdict

    # one seed of three holding is not enough, two of five are; 2 of 2 and 3 of 5 hold even
    # beside a failing seed, which under "every seed must hold" would have failed the claim
    assert combined([HOLDS, INCONCLUSIVE, INCONCLUSIVE]) == INCONCLUSIVE
    assert combined([HOLDS, HOLDS, INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE]) == HOLDS
    assert combined([HOLDS, HOLDS]) == HOLDS
    assert combined([HOLDS, HOLDS, HOLDS, FAILS, INCONCLUSIVE]) == HOLDS
    assert combined([FAILS, INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE]) \
        == INCONCLUSIVE


@pytest.mark.parametrize("verdict", VERDICTS)
def test_across_seeds_of_one_seed_is_that_claim(verdict: str) -> None:
    # the binomial rule itself: P(Bin(1, 2.5%) ≥ 1) = 0.025 < α, P(... ≥ 0) = 1
    assert SEEDS_ALPHA.value > 0.025 and SEEDS_ALPHA.source.startswith("[ours] ")
    assert across_seeds({3: _c17(verdict)}) == _c17(verdict)


def test_across_seeds_sums_the_sub_tests_and_ids_must_agree() -> None:
    c = {s: claim("C17", paper="p", ours="o", holds=HOLDS, tests=t) for s, t in ((0, 2), (1, 3))}
    assert across_seeds(c).tests == 5
    with pytest.raises(ValueError, match="tests >= 1"):
        claim("C17", paper="p", ours="o", holds=HOLDS, tests=0)
    with pytest.raises(ValueError, match="one claim ID"):
        across_seeds({0: _c17(HOLDS), 1: claim("C18", paper="p", ours="o", holds=True)})
    with pytest.raises(ValueError, match="one claim ID"):
        across_seeds({})


# --- the claims page -----------------------------------------------------------------------------

def test_claim_table_links_each_id_to_the_claims_page() -> None:
    t = table([claim("C3", paper="p", ours="o", holds=True),
               claim("C13", paper="p", ours="o", holds=False)])
    html = t._repr_html_()
    assert '<a href="../claims.html#C3">C3</a>' in html and '../claims.html#C13">C13</a>' in html
    assert "href" not in repr(t) and list(t.index) == ["C3", "C13"]


def test_claim_table_shows_badges_one_header_row_and_its_data(tmp_path: Path) -> None:
    t = report([claim("C5", paper="up", ours="<ρ=0.9>", holds=True, detail="n=12"),
                claim("C7", paper="up", ours="down", holds=False)],
               chapter="stochastic-depth", profile="cpu", claims_dir=tmp_path)
    html = t._repr_html_()
    assert html.count("<tr>") == 3 and "<th>id</th><th>verdict</th><th>claim</th>" in html
    assert '<span class="rc-badge rc-holds">✓ holds at this scale</span>' in html and "rc-fails" in html
    assert "&lt;ρ=0.9&gt;" in html and "<details><summary>detail</summary>n=12</details>" in html
    assert html.startswith('<div class="rc-scroll">')  # a wide table scrolls in its own box
    assert '<a href="../claims/stochastic-depth.json">' in html
    assert (tmp_path / "stochastic-depth.json").is_file()
    assert "rc-data" not in table([claim("C5", paper="up", ours="o", holds=True)])._repr_html_()


def test_box_gives_each_claim_its_badge_and_one_line() -> None:
    from raptor.book.claims import box, first_line
    one = claim("C17", paper="grow", ours="cls: ρ=1.00", holds=True)
    seeds = across_seeds({0: one, 1: one, 2: replace(one, verdict=INCONCLUSIVE)})
    html = box([seeds, claim("C12", paper="96%", ours="—", holds=None)]).data
    assert first_line(seeds.ours) == "seed 0: cls: ρ=1.00" and "per seed" in seeds.ours
    assert html.count('class="rc-result-row"') == 2
    assert '<a class="rc-result-id" href="../claims.html#C17">C17</a>' in html
    assert "✓ holds" in html and "– not testable here" in html
    assert f'<span class="rc-result-claim">{CLAIMS["C17"]}:</span>' in html
    assert '<span class="rc-result-ours">seed 0: cls: ρ=1.00</span>' in html
    assert 'title="seed 0: cls: ρ=1.00 (per seed' in html  # the whole number on hover
    assert "no claim of its own" in box([]).data


def test_by_verdict_lists_each_claim_under_its_verdict(tmp_path: Path) -> None:
    from raptor.book.claims import by_verdict
    report([claim("C5", paper="up", ours="o", holds=True), claim("C6", paper="up", ours="o", holds=True),
            claim("C1", paper="blocks", ours="o", holds=False)],
           chapter="stochastic-depth", profile="cpu", claims_dir=tmp_path)
    html = by_verdict(gather(tmp_path)).data
    assert html.count("<tr>") == 3  # holds, does not hold, not yet tested
    assert "✓ holds at this scale · 2</span>" in html
    assert "✗ not reproduced at this scale · 1</span>" in html
    assert "· not yet tested · 22</span>" in html
    assert html.index('href="claims.html#C5"') < html.index("✗ not reproduced at this scale")
    assert f'<a href="claims.html#C1"><b>C1</b></a> {CLAIMS["C1"]}' in html


def test_scale_names_seeds_and_images() -> None:
    from raptor.book.chapters import dynamics, finding_phases
    from raptor.book.claims import _seeds_that, scale
    said = scale(dynamics.Spec(), profile="cpu")
    assert said == "3 seeds; measured on 1,000 validation images (profile cpu)."
    assert scale(finding_phases.Spec(), profile="cpu", n_images=50).startswith(
        "3 seeds; measured on 50 validation")
    assert [_seeds_that(n, v) for n, v in ((0, "hold"), (1, "hold"), (1, "do not"), (2, "do not"))
            ] == ["0 hold", "1 holds", "1 does not", "2 do not"]


def test_every_verdict_has_its_own_symbol_and_scoped_words() -> None:
    from raptor.book.claims import SCOPED, UNTESTED, badge
    assert set(BADGES) == {*VERDICTS, UNTESTED} and set(SCOPED) == set(VERDICTS)
    assert len({symbol for symbol, _ in BADGES.values()}) == len(BADGES)
    for v in BADGES:
        assert f"{BADGES[v][0]} {scoped(v)}</span>" in badge(v)
    assert scoped("does not hold") == "not reproduced at this scale"
    assert scoped("not testable here") == "not testable here"
    assert scoped("not yet tested") == "not yet tested"


@pytest.mark.parametrize("tested, checks, said", [
    (25, 25, "Every one of the paper's 25 claims is checked here, once each."),
    (1, 1, "1 of the paper's 25 claims is checked here, once each."),
    (24, 26, "24 of the paper's 25 claims are checked here, in 26 checks."),
])
def test_coverage_reads_as_a_sentence(tested: int, checks: int, said: str) -> None:
    from raptor.book.chapters.claims_page.claims import coverage
    assert coverage(25, tested, checks) == said


def test_claims_page_counts_links_and_folds(tmp_path: Path, phase_test_on) -> None:
    from raptor.book.chapters.claims_page import Spec, claims, compute, figures
    d = tmp_path / "claims"
    report([claim("C1", paper="blocks", ours="3 blocks", holds=True, detail="z=2"),
            claim("C5", paper="up", ours="down", holds=False, tests=4)],
           chapter="phase-structure", profile="cpu", claims_dir=d)
    report([replace(claim("C1", paper="blocks", ours="2 blocks", holds=INCONCLUSIVE),
                    rests_on=rests_on_phases({"seed 0": phase_test_on(0.0, noise=0.05)})),
            claim("C12", paper="96%", ours="—", holds=None),
            claim("C25", paper="shorter", ours="tied", holds=BY_CONSTRUCTION)],
           chapter="scaling", profile="cpu", claims_dir=d)
    result = compute.compute(Spec(), claims_dir=str(d))
    s = claims.summary(result)
    assert (s["n_checks"], s["n_tested"], s["n_claims"], s["n_chapters"]) == (5, 4, len(CLAIMS), 2)
    assert s["coverage"] == f"4 of the paper's {len(CLAIMS)} claims are checked here, in 5 checks."
    assert (s["n_holds"], s["n_fails"], s["n_inconclusive"], s["n_untestable"],
            s["n_by_construction"], s["n_untested"]) == (1, 1, 1, 1, 1, len(CLAIMS) - 4)
    assert "alpha" not in s and (s["level"], s["side_error"]) == ("95%", "2.5%")
    assert s["n_subtests"] == 6  # sub-tests of the measured verdicts only: 1 + 4 + 1
    assert s["seeds_alpha"] == "0.05" and "n_chance" not in s
    for said in ("What the error rate controls: a verdict is about ViTs trained this way",
                 "The 5 verdicts rest on 6 sub-tests, each a 95% two-sided interval",
                 "the trained model is the unit", "not testable here, with the seeds "
                 "or images it would need", "80% power", "intersection–union test",
                 "Berger 1982", "at level 1 − 5%/m lies wholly against it (Bonferroni over the "
                 "parts)"):
        assert said in s["error_rates"], said
    assert s["engine_claims"] == "none" and "binomial" not in s["error_rates"]

    html = figures.page(result, book=tmp_path).data
    for v in VERDICTS:
        assert f"{BADGES[v][0]} {scoped(v)} · 1</span>" in html  # the counts up front
    # every check: its ID links to the chapter's claims section; each claim has one anchor
    assert html.count('href="chapters/phase_structure.html#claims-phase-structure">C1</a>') == 1
    assert html.count('href="chapters/scaling.html#claims-scaling">C1</a>') == 1
    for cid in CLAIMS:  # one anchor per claim, and a chip per check in the strip up front
        assert html.count(f"id='{cid}'") == 1 and f'<a href="#{cid}" title=' in html
    assert html.count("<details>") == 5 and "Not yet tested by any chapter" in html
    assert html.index("Not yet tested") > html.index("chapters/scaling.html")  # book order
    assert "<b>paper</b> 96%" in html and "<b>ours</b> —" in html
    assert html.count("<b>rests on</b> C1 finds no phases") == 1  # beside the verdict, not for it


def test_claims_page_says_which_claims_the_engine_judges_and_lists_our_thresholds(
        tmp_path: Path) -> None:
    from raptor.book.chapters.claims_page import Spec, claims, compute, figures
    from raptor.book.engine import Declaration, Part, judge, over_seeds
    d = tmp_path / "claims"
    t = Threshold(0.9, "[ours] a planted threshold")
    voted = across_seeds({s: claim("C17", paper="p", ours="o", holds=True) for s in (0, 1)})
    report([judge(Declaration("C15", "p", [Part("k=2", over_seeds([0.95, 0.96, 0.97]), t)])),
            voted], chapter="distillation", profile="cpu", claims_dir=d)
    result = compute.compute(Spec(), claims_dir=str(d))
    s = claims.summary(result)
    assert s["engine_claims"] == "C15"
    assert "The other claims (C17) still combine their seeds by a binomial test" in \
        s["error_rates"]
    ours = compute.ours_thresholds()
    assert "distillation.MIN_COSINE" in ours and "dynamics.ORDER_BAND" in ours
    assert all(v.source.startswith("[ours]") for v in ours.values())
    html = figures.page(result, book=tmp_path).data
    assert f"The {len(ours)} thresholds of ours" in html
    assert "<code>distillation.MIN_COSINE</code> = 0.9: Fig. 14 shows" in html


def test_claims_page_names_chapters_by_their_titles(tmp_path: Path) -> None:
    from raptor.book.chapters.claims_page import figures
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "scaling.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "markdown", "source": ["# Scaling Raptor\n", "text"]}]}))
    assert figures.chapter_title("scaling", tmp_path) == "Scaling Raptor"
    assert figures.chapter_title("distillation", tmp_path) == "distillation"


def test_rests_on_phases_reads_c1s_test(phase_test_on) -> None:
    """Every model's C1 result as every page prints it (:func:`excess_text`), split by C1's
    verdict: phases found, or not."""
    some, none = phase_test_on(0.1), phase_test_on(0.0, noise=0.05)
    both = rests_on_phases({"seed 0": some, "seed 1": none})
    assert both == (f"C1 finds phases in seed 0 {excess_text(some)}; none in seed 1 "
                    f"{excess_text(none)} (block excess above +0.010 needed)")
    assert rests_on_phases({"seed 1": none}).startswith("C1 finds no phases in seed 1 ")
    assert excess_text(some) == f"{some.excess:+.3f} [{some.interval()[0]:+.3f}, " \
                                f"{some.interval()[1]:+.3f}]"


def test_on_phases_judges_only_where_c1_finds_phases(phase_test_on) -> None:
    """A claim that presupposes phases is made on the models with phases, and is *not testable
    here* with its numbers on all beside where fewer than two have them."""
    some, none = phase_test_on(0.1), phase_test_on(0.0, noise=0.05)
    seen = []

    def made(models: list) -> Claim:
        seen.append(models)
        return claim("C3", paper="p", ours=f"measured on {models}", holds=True, detail="d")

    judged = on_phases(made, {0: some, 1: some, 2: none})
    assert judged.verdict == HOLDS and seen[-1] == [0, 1]
    assert judged.detail.startswith("judged on the 2 of 3 models with phases; d")
    untested = on_phases(made, {0: some, 1: none, 2: none})
    assert untested.verdict == UNTESTABLE and seen[-1] == [0, 1, 2]
    assert untested.ours == ("not testable here: the teachers have no phases: C1 finds them in 1 "
                             "of 3, and a test over models needs 2 (measured on all, not "
                             "counted: measured on [0, 1, 2])")
    assert untested.rests_on.startswith("C1 finds phases in seed 0 ")


def test_no_verdict_is_replaced_after_its_test() -> None:
    """A verdict is what its own test measured: in the package only ``across_seeds`` writes a
    verdict over claims (combining the seeds' own verdicts) and ``on_phases`` (a claim about
    phases on teachers without them is not testable, its numbers beside), and no stored claim
    was set aside."""
    package = Path(__file__).resolve().parents[1] / "raptor"
    writers = set()
    for path in package.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef) and any(
                    isinstance(call, ast.Call) and getattr(call.func, "id", "") == "replace"
                    and any(kw.arg == "verdict" for kw in call.keywords)
                    for call in ast.walk(fn)):
                writers.add(f"{path.name}:{fn.name}")
    assert writers == {"claims.py:across_seeds", "claims.py:on_phases"}
    stored = Path(__file__).resolve().parents[1] / "book" / "claims"
    for path in stored.glob("*.json"):
        for c in json.loads(path.read_text()):
            assert c["verdict"] in VERDICTS and "set aside" not in c["detail"], (path.name, c["id"])


def test_prose_helpers_agree_in_number() -> None:
    assert [listed(x) for x in (["a"], ["a", "b"], ["a", "b", "c"])] == \
        ["a", "a and b", "a, b and c"]
    assert listed(["a", "b", "c"], "or") == "a, b or c"
    assert [counted(n, "layer") for n in (0, 1, 2)] == ["0 layers", "1 layer", "2 layers"]
    assert [stated(v) for v in (HOLDS, FAILS, INCONCLUSIVE, UNTESTABLE)] == \
        ["holds at this scale", "is not reproduced at this scale", "is inconclusive",
         "is not testable here"]
    assert [stated(v, plural=True) for v in (HOLDS, FAILS)] == \
        ["hold at this scale", "are not reproduced at this scale"]
