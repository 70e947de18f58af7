"""No interval or power line in the stored claims leaves its quantity's range (issue 54): every
claims file of the book is read; a part the engine judged on a bounded quantity prints its range
(``on [lo, hi]``), and its interval and its power line must lie inside it; a correlation (ρ, r)
must print one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

CLAIMS_DIR = Path(__file__).resolve().parents[1] / "book" / "claims"
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?%?"
PART = re.compile(rf"^(?P<name>.*?) (?P<est>{NUMBER}) \[(?P<low>{NUMBER}), (?P<high>{NUMBER})\]"
                  rf"(?: on \[(?P<lo>{NUMBER}), (?P<hi>{NUMBER})\])?(?: \(per seed [^)]*\))? vs ")
POWER = re.compile(rf"80% power to detect a true value (?P<x>{NUMBER}) (?P<side>above|below) "
                   rf"(?P<edge>{NUMBER})")
CORRELATION = re.compile(r"(^|\s)(ρ|r)(\s|$)")


def number(text: str) -> float:
    """A printed number (``+0.72``, ``95.9%``) as a float, in the units it is printed in."""
    return float(text.rstrip("%"))


def out_of_range(detail: str) -> list[str]:
    """The intervals and power lines of ``detail`` that leave their part's printed range, and
    correlations printed without one."""
    bad, bounds = [], None
    for segment in detail.split("; "):
        segment = segment.removeprefix("also ")
        part = PART.search(segment)
        if part:
            bounds = (number(part["lo"]), number(part["hi"])) if part["lo"] else None
            if bounds is None and CORRELATION.search(part["name"]):
                bad.append(f"a correlation without its range: {segment}")
            elif bounds and not bounds[0] <= number(part["low"]) <= number(part["high"]) \
                    <= bounds[1]:
                bad.append(f"an interval outside {bounds}: {segment}")
        power = POWER.search(segment)
        if power and bounds:
            sign = 1 if power["side"] == "above" else -1
            reach = number(power["edge"]) + sign * number(power["x"])
            if not bounds[0] <= reach <= bounds[1]:
                bad.append(f"a power line reaching {reach:g}, outside {bounds}: {segment}")
    return bad


def test_the_check_catches_the_referees_numbers() -> None:
    """The numbers issue 54 found, as the engine would print them with their ranges."""
    found = out_of_range(
        "jumps at boundaries 0.67 [-0.05, 1.38] on [0.00, 1.00] (per seed 0.50, 1.00, 0.50) vs "
        "above 0.50 [ours]: inconclusive; 80% power to detect a true value 0.94 above 0.50; "
        "registers effective falls +0.72 [+0.25, +1.20] on [-1.00, +1.00] (per seed +0.85, "
        "+0.81, +0.50) vs below +0.00: inconclusive; cls stable falls +0.27 [-0.68, +0.98] on "
        "[-1.00, +1.00] (per seed +0.04, +0.06, +0.71) vs below +0.00: inconclusive; 80% power "
        "to detect a true value +1.25 below +0.00; ρ 0.5 [0.1, 0.8] vs above 0.00: holds")
    assert len(found) == 5, found
    assert not out_of_range("inter 1 98.1% [93.0%, 99.4%] on [0.0%, 100.0%] (per seed 98.8%, "
                            "98.3%, 97.1%) vs below 60.0% [ours]: does not hold; 80% power to "
                            "detect a true value 5.0% below 60.0%")


@pytest.mark.parametrize("path", sorted(CLAIMS_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_no_stored_claim_leaves_its_range(path: Path) -> None:
    bad = [f"{c['id']}: {b}" for c in json.loads(path.read_text())
           for b in out_of_range(c.get("detail", ""))]
    assert not bad, "\n".join(bad)
