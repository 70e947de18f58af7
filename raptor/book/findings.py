"""What the book found, as a table for the README: every claim's ID, chapter, statement and
verdict, read from the stored claims (``book/claims/<chapter>.json``), so that no verdict is typed
by hand. ``python -m raptor findings`` rewrites the README's table between its two markers;
``tests/test_layout.py`` checks the README against the stored claims."""

from __future__ import annotations

import json
import re
from pathlib import Path

BEGIN = "<!-- findings: written by `python -m raptor findings` from book/claims -->"
END = "<!-- /findings -->"


class FindingsError(ValueError):
    """A claims folder without claims, or a README without the table's markers."""


def findings_table(claims: Path) -> str:
    """The markdown table of every claim stored in ``claims`` (``*.json``), by ID number."""
    from raptor.book.claims import scoped  # not at the top: the command line imports this module

    rows = [c for f in sorted(claims.glob("*.json")) for c in json.loads(f.read_text())]
    if not rows:
        raise FindingsError(f"no claims in {claims}")
    rows.sort(key=lambda c: int(re.sub(r"\D", "", c["id"]) or 0))
    cells = [f"| {c['id']} | {c['chapter']} | {c['claim'].replace('|', '/')} | "
             f"{scoped(c['verdict'])} |" for c in rows]
    return "\n".join(["| claim | chapter | the paper says | the book finds |", "|---|---|---|---|",
                      *cells])


def with_findings(readme: str, claims: Path) -> str:
    """``readme`` with the text between :data:`BEGIN` and :data:`END` replaced by
    :func:`findings_table` of ``claims``."""
    if (readme.count(BEGIN), readme.count(END)) != (1, 1) or \
            readme.index(BEGIN) > readme.index(END):
        raise FindingsError(f"the README needs one line {BEGIN!r} and one {END!r} after it")
    head, rest = readme.split(BEGIN)
    return f"{head}{BEGIN}\n{findings_table(claims)}\n{END}{rest.split(END, 1)[1]}"
