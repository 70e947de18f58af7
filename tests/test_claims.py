"""Tests for raptor.claims: claim IDs, verdicts, the per-chapter JSON and the gathered table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from raptor.claims import CLAIMS, FAILS, HOLDS, UNTESTABLE, check, gather, report, table


def test_there_are_25_claims_c1_to_c25() -> None:
    assert list(CLAIMS) == [f"C{i}" for i in range(1, 26)]
    assert all(text.strip() for text in CLAIMS.values())


@pytest.mark.parametrize("bad", ["C0", "C26", "c1", "", "1"])
def test_unknown_claim_id(bad: str) -> None:
    with pytest.raises(ValueError, match=f"unknown claim id {bad!r}; valid: C1..C25"):
        check(bad, paper="x", ours="y", holds=True)


@pytest.mark.parametrize("holds, verdict", [(True, HOLDS), (False, FAILS), (None, UNTESTABLE),
                                            (np.bool_(True), HOLDS), (np.bool_(False), FAILS),
                                            (np.float64(0.7) > 0.5, HOLDS)])
def test_verdicts(holds: object, verdict: str) -> None:
    c = check("C5", paper="higher", ours="0.81 vs 0.62", holds=holds, detail="n=64")
    assert c.verdict == verdict
    assert c.claim == CLAIMS["C5"] and c.detail == "n=64" and c.chapter == ""


def test_table_columns() -> None:
    t = table([check("C1", paper="a", ours="b", holds=True),
               check("C2", paper="c", ours="d", holds=None)])
    assert list(t.index) == ["C1", "C2"]
    assert list(t.columns) == ["claim", "paper", "ours", "verdict", "detail"]
    assert t.loc["C2", "verdict"] == UNTESTABLE


def test_report_writes_json_and_gather_lists_every_claim(tmp_path: Path) -> None:
    claims_dir = tmp_path / "claims"
    report([check("C1", paper="blocks", ours="3 blocks", holds=True),
            check("C5", paper="up", ours="down", holds=False)],
           chapter="phase-structure", profile="smoke", claims_dir=claims_dir)
    report([check("C1", paper="blocks", ours="2 blocks", holds=None)],
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


def test_gather_of_empty_folder(tmp_path: Path) -> None:
    g = gather(tmp_path / "nothing-here")
    assert list(g.index) == list(CLAIMS)
    assert set(g["verdict"]) == {"not yet tested"}
