"""Tests for raptor.book.claims: claim IDs, thresholds, verdicts, the JSON and the claims table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from raptor.book.chapters import MODULES, chapter
from raptor.book.claims import (BY_CONSTRUCTION, CLAIMS, FAILS, HOLDS, INCONCLUSIVE, UNTESTABLE,
                                Claim, Threshold, all_of, claim, gather, versus,
                                report, table)


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
    thresholds = [(name, attr, v) for name in MODULES for attr, v in vars(chapter(name)).items()
                  if isinstance(v, Threshold)]
    assert len({name for name, _, _ in thresholds}) >= 6
    for name, attr, t in thresholds:
        ours = t.source.startswith("[ours] ") and len(t.source) > len("[ours] ") + 10
        cites = any(ref in t.source for ref in ("§", "Fig", "Table", "App", "Eq", "eq."))
        assert ours or cites, f"{name}.{attr}: {t.source!r}"


def test_table_columns() -> None:
    t = table([claim("C1", paper="a", ours="b", holds=True),
               claim("C2", paper="c", ours="d", holds=None)])
    assert list(t.index) == ["C1", "C2"]
    assert list(t.columns) == ["claim", "paper", "ours", "verdict", "detail"]
    assert t.loc["C2", "verdict"] == UNTESTABLE


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
                          "verdict": FAILS, "detail": "", "chapter": "phase-structure",
                          "profile": "smoke"}

    g = gather(claims_dir)
    assert list(dict.fromkeys(g.index)) == list(CLAIMS)
    assert len(g) == 26  # C1 was checked in two chapters
    c1 = g.loc[["C1"]]
    assert sorted(c1["chapter"]) == ["finding-phases", "phase-structure"]
    assert sorted(c1["verdict"]) == sorted([HOLDS, UNTESTABLE])
    assert g.loc["C5", "verdict"] == FAILS and g.loc["C5", "profile"] == "smoke"
    untested = g.drop(index=["C1", "C5"])
    assert (untested["verdict"] == "not yet tested").all() and len(untested) == 23


def test_report_and_gather_follow_the_runner_environment(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAPTOR_CLAIMS_DIR", str(tmp_path / "staged"))
    report([claim("C3", paper="p", ours="o", holds=True)], chapter="raptor", profile="smoke",
           claims_dir=tmp_path / "book-claims")
    assert not (tmp_path / "book-claims").exists()
    assert json.loads((tmp_path / "staged" / "raptor.json").read_text())[0]["id"] == "C3"
    monkeypatch.setenv("RAPTOR_CLAIMS_SOURCE", str(tmp_path / "staged"))
    assert gather(tmp_path / "elsewhere").loc["C3", "chapter"] == "raptor"


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


def test_versus_and_claim_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        versus(0.9, 0.1, 0.5)
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        claim("C1", paper="p", ours="o", holds="maybe")
    assert claim("C25", paper="p", ours="o", holds=BY_CONSTRUCTION).verdict == BY_CONSTRUCTION


@pytest.mark.parametrize("parts, verdict", [([HOLDS, HOLDS], HOLDS), ([HOLDS, INCONCLUSIVE],
                         INCONCLUSIVE), ([INCONCLUSIVE, FAILS], FAILS)])
def test_all_of(parts: list[str], verdict: str) -> None:
    assert all_of(parts) == verdict
