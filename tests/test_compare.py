"""raptor.book.compare: claims of two executions, verdicts exact and numbers within one unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raptor.book.compare import REPRODUCE_ATOL, REPRODUCE_RTOL, compare


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
    ("excess +0.012", "excess +0.015", "beyond the tolerance"),
    ("97% of the teacher", "99% of the teacher", "beyond the tolerance"),
    ("seed 1", "seed 2", "beyond the tolerance"),  # integers are exact
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


def test_a_retrained_book_is_compared_with_a_wider_tolerance(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    from raptor.__main__ import main

    a = write(tmp_path / "a", [claim("min cosine 0.919, seed 2")])
    moved = write(tmp_path / "b", [claim("min cosine 0.915, seed 2")])  # as measured retrained
    far = write(tmp_path / "c", [claim("min cosine 0.850, seed 2")])
    other_seed = write(tmp_path / "d", [claim("min cosine 0.919, seed 3")])
    assert compare(a, moved) and not compare(a, moved, rtol=REPRODUCE_RTOL, atol=REPRODUCE_ATOL)
    assert compare(a, far, rtol=REPRODUCE_RTOL, atol=REPRODUCE_ATOL)
    assert compare(a, other_seed, rtol=REPRODUCE_RTOL, atol=REPRODUCE_ATOL)  # integers exact
    assert main(["compare", str(a), str(moved), "--retrained"]) == 0
    assert main(["compare", str(a), str(far), "--retrained"]) == 1
    assert main(["compare", str(a), str(moved), "--retrained", "--chapter", "chapter"]) == 0
    assert main(["compare", str(a), str(moved), "--chapter", "other"]) == 2
    assert "no claims (*.json) in" in capsys.readouterr().err


def test_nbval_checks_claims_cells_exactly_but_their_decimals(tmp_path: Path) -> None:
    """`make nbval` with tests/nbval_sanitize.cfg: a claims cell whose stored output differs from
    the code's in a decimal passes (`raptor compare` checks its numbers within a tolerance); one
    that differs in a word or an integer fails."""
    import subprocess
    import sys

    import nbformat

    printed = "C3 holds: excess +0.012 [+0.010, +0.014] on 3 seeds, 1.5e-03"
    stored = {"same": printed,
              "decimal": printed.replace("+0.012", "+0.013").replace("1.5e", "1.6e"),
              "word": printed.replace("holds", "does not hold"),
              "integer": printed.replace("3 seeds", "4 seeds")}
    nb = nbformat.v4.new_notebook()
    for text in stored.values():
        cell = nbformat.v4.new_code_cell(f"print({printed!r})", execution_count=1,
                                         metadata={"tags": ["nbval-check-output"]})
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text + "\n")]
        nb.cells.append(cell)
    nbformat.write(nb, tmp_path / "claims.ipynb")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    sanitize = Path(__file__).with_name("nbval_sanitize.cfg")
    run = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                          "-c", "pytest.ini", "--rootdir", ".", "--nbval-lax",
                          "--nbval-current-env", "--nbval-sanitize-with", str(sanitize),
                          "claims.ipynb"], cwd=tmp_path, capture_output=True, text=True)
    outcome = {name: ("Cell %d PASSED" % i) in run.stdout for i, name in enumerate(stored)}
    assert outcome == {"same": True, "decimal": True, "word": False, "integer": False}, \
        run.stdout
