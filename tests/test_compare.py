"""raptor.book.compare: claims of two executions, verdicts exact and numbers within one unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raptor.book.compare import compare


def write(folder: Path, claims: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chapter.json").write_text(json.dumps(claims))
    return folder


def claim(ours: str, verdict: str = "holds", detail: str = "k=3, 1000 images") -> dict:
    return {"id": "C1", "verdict": verdict, "paper": "blocks", "ours": ours, "detail": detail}


@pytest.mark.parametrize("a, b", [
    ("excess +0.012 [+0.010, +0.014]", "excess +0.013 [+0.009, +0.014]"),
    ("97% of the teacher", "98% of the teacher"), ("ratio 1.5e-03", "ratio 1.6e-03")])
def test_last_digit_differences_pass(tmp_path: Path, a: str, b: str) -> None:
    assert compare(write(tmp_path / "a", [claim(a)]), write(tmp_path / "b", [claim(b)])) == []


@pytest.mark.parametrize("a, b, why", [
    ("excess +0.012", "excess +0.015", "beyond one unit"),
    ("97% of the teacher", "99% of the teacher", "beyond one unit"),
    ("seed 1", "seed 2", "beyond one unit"),  # integers are exact
    ("excess +0.012", "excess: +0.012", "!="),
])
def test_larger_differences_fail(tmp_path: Path, a: str, b: str, why: str) -> None:
    (problem,) = compare(write(tmp_path / "a", [claim(a)]), write(tmp_path / "b", [claim(b)]))
    assert why in problem


def test_verdicts_and_claims_must_match(tmp_path: Path) -> None:
    a = write(tmp_path / "a", [claim("x 0.5")])
    assert compare(a, write(tmp_path / "b", [claim("x 0.5", "inconclusive")])) == [
        "chapter.json C1: verdict 'holds' vs 'inconclusive'"]
    assert "claims ['C1'] vs []" in compare(a, write(tmp_path / "c", []))[0]
    assert "missing" in compare(a, tmp_path / "empty")[0]
    with pytest.raises(FileNotFoundError, match="no claims"):
        compare(tmp_path / "empty", a)


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from raptor.__main__ import main

    a = write(tmp_path / "a", [claim("x 0.50")])
    assert main(["compare", str(a), str(write(tmp_path / "b", [claim("x 0.51")]))]) == 0
    assert "matches" in capsys.readouterr().out
    assert main(["compare", str(a), str(write(tmp_path / "c", [claim("x 0.70")]))]) == 1
    assert main(["compare", str(tmp_path / "none"), str(a)]) == 2
