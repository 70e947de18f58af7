"""Compare two executions of the book's claims: verdicts exactly, numbers within a tolerance.

The stored book must not depend on the machine (CPU kernels, thread count). Executed against the
artifact tier, the book only runs forward passes, whose results differ between kernels in the
last bits; a number printed with ``d`` decimals may then differ by one unit in its last place.
:func:`compare` checks every claim of every chapter (``<dir>/<chapter>.json``) against that
tolerance: same claims and verdicts, same text outside the numbers, each number within one unit
of its last printed digit (or ``RTOL`` of its value, whichever is larger).

Retraining from scratch on other kernels moves more than the last digit: 400 steps amplify
last-bit differences (measured: a tier teacher's accuracy 0.8005 → 0.7965, its Raptors' minimum
cosine 0.919 → 0.915). ``make reproduce`` therefore compares verdicts exactly and rounded numbers
within ``REPRODUCE_RTOL`` and ``REPRODUCE_ATOL`` as well.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?(?:[eE]([-+]?\d+))?(%?)")
RTOL = 1e-3  # [ours] forward passes in float32 agree to ~1e-6; room for accumulated reductions
# [ours] an order of magnitude above the retraining differences measured (0.004 in accuracy and
# cosine); far below the effects the claims read.
REPRODUCE_RTOL, REPRODUCE_ATOL = 0.05, 0.01
FIELDS = ("id", "verdict", "paper", "ours", "detail")


def _numbers(text: str) -> tuple[str, list[tuple[float, float]]]:
    """``text`` with its numbers replaced by ``#``, and each number with the unit of its last
    printed digit; a plain integer (a count, a layer, a seed) has unit 0: it must be equal."""
    found = []

    def keep(m: re.Match) -> str:
        decimals, exponent, percent = len(m.group(1) or ""), int(m.group(2) or 0), m.group(3)
        value = float(m.group(0).rstrip("%"))
        rounded = decimals or exponent or percent
        found.append((value, 10.0 ** (exponent - decimals) if rounded else 0.0))
        return "#%" if percent else "#"

    return NUMBER.sub(keep, text), found


def _same_text(a: str, b: str, rtol: float = RTOL, atol: float = 0.0) -> str | None:
    """Why ``a`` and ``b`` differ beyond the tolerance, or ``None``: one unit of the last digit,
    plus ``rtol`` of the value and ``atol`` for a rounded number; integers exactly."""
    (ta, na), (tb, nb) = _numbers(a), _numbers(b)
    if ta != tb or len(na) != len(nb):
        return f"{a!r} != {b!r}"
    for (x, ux), (y, uy) in zip(na, nb):
        unit = max(ux, uy)
        tolerance = unit * 1.0001 + rtol * abs(y) + atol if unit else RTOL * abs(y)
        if abs(x - y) > tolerance:
            return f"{x:g} vs {y:g} beyond the tolerance in {a!r} / {b!r}"
    return None


def compare(expected: str | Path, actual: str | Path, chapters: list[str] | None = None, *,
            rtol: float = RTOL, atol: float = 0.0) -> list[str]:
    """The differences between two claims folders (empty: the same within tolerance), over every
    chapter or only ``chapters``; ``rtol`` and ``atol`` widen the tolerance of rounded numbers
    (a book retrained from scratch, not just re-executed, needs it: ``make reproduce``)."""
    expected, actual = Path(expected), Path(actual)
    names = sorted(p.name for p in expected.glob("*.json")
                   if chapters is None or p.stem in chapters)
    if not names:
        raise FileNotFoundError(f"no claims (*.json) in {expected}"
                                + (f" for chapters {', '.join(chapters)}" if chapters else ""))
    problems = []
    for name in names:
        other = actual / name
        if not other.is_file():
            problems.append(f"{name}: missing in {actual}")
            continue
        a, b = json.loads((expected / name).read_text()), json.loads(other.read_text())
        if [c["id"] for c in a] != [c["id"] for c in b]:
            problems.append(f"{name}: claims {[c['id'] for c in a]} vs {[c['id'] for c in b]}")
            continue
        for ca, cb in zip(a, b):
            if ca["verdict"] != cb["verdict"]:
                problems.append(f"{name} {ca['id']}: verdict {ca['verdict']!r} vs "
                                f"{cb['verdict']!r}")
            for field in FIELDS[2:]:
                why = _same_text(ca[field], cb[field], rtol, atol)
                if why:
                    problems.append(f"{name} {ca['id']} {field}: {why}")
    return problems
