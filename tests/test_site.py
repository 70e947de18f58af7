"""The built book speaks one vocabulary of verdicts and shows none of its machinery (issue 55).

- Every verdict on every page is written in the book's one vocabulary (:data:`TERMS`: the scoped
  words of :data:`raptor.book.claims.SCOPED`, and "not yet tested"): each badge
  (:func:`raptor.book.claims.badge`) shows its colour's symbol and term (or a claim ID, its term
  then in its link's title), maybe a reason (": …") and a count (" · 7"); each cell of a table
  column headed "verdict" or by a claim's ID ("C1") is a badge, a term, or a dash where its row
  has no verdict.
- No executed notebook (``book/chapters/*.ipynb``, ``book/claims.ipynb``) shows a warning in its
  outputs: no stderr stream, no "Warning" or "findfont" text.
- No table has pandas' index-name header row (a second header row naming the index, the rest
  empty).
- No claims table (``rc-table``, or a table with a column of verdicts) is empty, header only.
- No two works are cited in the same words (the paper and its code: "Jacobs et al., 2026a" and
  "2026b", as the references list them).

Planted snippets prove each check catches its fault. The site's checks are marked ``browser``:
they run after ``make build`` with the browser tests, the site built first unless it is fresh
(as in ``tests/test_browser.py``); the notebooks' check and the planted ones need no site.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag  # with the book's theme (pydata-sphinx-theme)

from raptor.book.claims import (BADGES, CLAIMS, FAILS, HOLDS, UNTESTABLE, UNTESTED, VERDICTS,
                                scoped)
from tests.test_browser import BOOK, HTML, book_is_fresh, browser, pages

#: each verdict in the one form a page may write it
TERMS: dict[str, str] = {v: scoped(v) for v in (*VERDICTS, UNTESTED)}
#: a badge's CSS class -> the symbol and term it must show
BY_CLASS: dict[str, tuple[str, str]] = {f"rc-{css}": (symbol, TERMS[v])
                                        for v, (symbol, css) in BADGES.items()}
CLAIM_ID = r"C\d+"
REASON, COUNT = r"(?:: .+?)?", r"(?: · [\d,]+)?"
NO_VERDICT = r"—(?: \(.+\))?"  # a row with no verdict, maybe saying why: "— (no images)"
ANY_TERM = "|".join(map(re.escape, TERMS.values()))
WARNING = re.compile(r"\w*Warning\b|\bwarnings?\.warn|findfont", re.IGNORECASE)
NOTEBOOKS = sorted((BOOK / "chapters").glob("*.ipynb")) + [BOOK / "claims.ipynb"]


def text(el: Tag) -> str:
    return " ".join(el.get_text(" ").split())


def rows(table: Tag) -> list[list[Tag]]:
    """A table's rows as their cells (``th`` and ``td``), header rows first."""
    return [tr.find_all(["th", "td"], recursive=False) for tr in table.find_all("tr")]


def verdict_columns(table: Tag) -> list[int]:
    """The indices of a table's columns of verdicts: headed "verdict" or by a claim's ID."""
    head = table.find("thead")
    cells = rows(head)[0] if head and head.find("tr") else []
    return [i for i, c in enumerate(cells) if text(c) == "verdict" or text(c) in CLAIMS]


# --- the checks ----------------------------------------------------------------------------------

def badge_fault(badge: Tag) -> str | None:
    """What is wrong with a verdict badge's words, or None."""
    shown = text(badge)
    css = next((c for c in badge.get("class", []) if c in BY_CLASS), None)
    if css is None:
        return f"a badge of no verdict: {shown!r}"
    symbol, term = BY_CLASS[css]
    words = rf"{re.escape(symbol)} (?:{re.escape(term)}{REASON}|{CLAIM_ID}){COUNT}"
    if not re.fullmatch(words, shown):
        return f"a badge {shown!r}, not {symbol} {term!r}"
    titled = badge.find_parent(title=True)
    if re.fullmatch(rf"\S+ {CLAIM_ID}", shown) and titled and not re.search(
            rf"(?:^|: ){re.escape(term)}(?::|$)", titled["title"]):
        return f"a badge {shown!r} titled {titled['title']!r}, not {term!r}"
    return None


def verdict_faults(soup: BeautifulSoup) -> list[str]:
    """Verdicts not in the vocabulary: badges, and cells of a column of verdicts (a badge, a
    term, or a dash where a row has none)."""
    out = [f for b in soup.select(".rc-badge") if (f := badge_fault(b))]
    for table in soup.find_all("table"):
        cols = verdict_columns(table)
        for cells in rows(table)[1:] if cols else []:
            for cell in (cells[i] for i in cols if i < len(cells)):
                if not cell.select(".rc-badge") and \
                        not re.fullmatch(rf"(?:{ANY_TERM}){REASON}|{NO_VERDICT}", text(cell)):
                    out.append(f"a verdict {text(cell)!r} in a column of verdicts, not a term")
    return out


def index_row_faults(soup: BeautifulSoup) -> list[str]:
    """Tables with pandas' index-name header row: below the column names, a row that names the
    index in its first cells and leaves the rest empty (or a Styler's ``index_name`` cell)."""
    out = []
    for head in soup.find_all("thead"):
        for cells in rows(head)[1:]:
            words = [text(c) for c in cells]
            named = next((i for i, w in enumerate(words) if not w), len(words))
            if (0 < named < len(words) and not any(words[named:])) or \
                    any("index_name" in c.get("class", []) for c in cells):
                out.append(f"a table with an index header row {[w for w in words if w]}")
    return out


def empty_claims_faults(soup: BeautifulSoup) -> list[str]:
    """Claims tables (``rc-table``, or a table with a column of verdicts) without a row of
    data."""
    tables = {id(t): t for t in soup.select("table.rc-table")}
    tables |= {id(t): t for t in soup.find_all("table") if verdict_columns(t)}
    return [f"an empty claims table headed {[text(c) for c in (rows(t) or [[]])[0]]}"
            for t in tables.values() if not any(tr.find("td") for tr in t.find_all("tr"))]


def citation_faults(soup: BeautifulSoup) -> list[str]:
    """In-text citations (sphinxcontrib-bibtex's ``bibtex-citation`` links) whose words also
    cite another work."""
    cited: dict[str, set[str]] = {}
    for link in soup.select(".bibtex-citation a[href]"):
        cited.setdefault(text(link), set()).add(link["href"])
    return [f"{words!r} cites {len(works)} works" for words, works in cited.items()
            if len(works) > 1]


CHECKS: dict[str, Callable[[BeautifulSoup], list[str]]] = {
    "verdict": verdict_faults, "index": index_row_faults, "empty": empty_claims_faults,
    "citation": citation_faults}


def notebook_faults(nb: dict) -> list[str]:
    """Warnings in an executed notebook's outputs: stderr streams and warning text."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        first_line = "".join(cell.get("source", "")).partition("\n")[0]
        where = f"cell {i} ({first_line[:60]!r})"
        for o in cell.get("outputs", []):
            if o.get("name") == "stderr":
                out.append(f"{where}: a stderr stream {''.join(o['text'])[:120]!r}")
            shown = [o["text"]] if o["output_type"] == "stream" else \
                [v for k, v in o.get("data", {}).items() if k.startswith("text/")]
            for t in ("".join(v) if isinstance(v, list) else v for v in shown):
                out += [f"{where}: {t[max(m.start() - 60, 0):m.end() + 60]!r}"
                        for m in WARNING.finditer(t)]
    return out


@functools.lru_cache(maxsize=None)
def soup_of(page: Path) -> BeautifulSoup:
    return BeautifulSoup(page.read_text(errors="replace"), "html.parser")


def site_faults(site: Path, check: str) -> list[str]:
    return [f"{page.relative_to(site).as_posix()}: {f}" for page in pages(site)
            for f in CHECKS[check](soup_of(page))]


# --- the book ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site() -> Path:
    if not book_is_fresh():
        from raptor.book.runner import build_book
        build_book(BOOK)
    return HTML


@browser
@pytest.mark.parametrize("check", CHECKS)
def test_the_site(site: Path, check: str) -> None:
    assert len(pages(site)) >= 10
    problems = site_faults(site, check)
    assert not problems, "\n".join([*problems, f"the terms: {list(TERMS.values())}"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_executed_notebook_shows_a_warning(path: Path) -> None:
    problems = notebook_faults(json.loads(path.read_text()))
    assert not problems, f"{path.relative_to(BOOK)}:\n" + "\n".join(problems)


# --- planted faults ------------------------------------------------------------------------------

def _badge(verdict: str, words: str) -> str:
    symbol, css = BADGES[verdict]
    return f'<span class="rc-badge rc-{css}">{symbol} {words}</span>'


def _cite(href: str, words: str) -> str:
    return f'<span class="bibtex-citation">[<a href="bibliography.html{href}">{words}</a>]</span>'


CLEAN = (
    f'<p>{_badge(HOLDS, TERMS[HOLDS] + " · 7")}{_badge(UNTESTED, TERMS[UNTESTED])}'
    f'<a title="raptor: {TERMS[FAILS]}">{_badge(FAILS, "C4")}</a></p>'
    '<table class="rc-table"><thead><tr><th>id</th><th>verdict</th><th>ours</th></tr></thead>'
    f'<tbody><tr><th>C1</th><td>{_badge(FAILS, TERMS[FAILS])}</td><td>0.3</td></tr></tbody>'
    '</table><table><thead><tr><th>verdict</th><th>claims</th></tr></thead><tbody>'
    f'<tr><td>{TERMS[UNTESTABLE]}: it needs 7 seeds</td><td>4</td></tr></tbody></table>'
    '<table><thead><tr><th>cell</th><th>C1</th></tr></thead><tbody><tr><td>a</td>'
    f'<td>{TERMS[HOLDS]}</td></tr><tr><td>b</td><td>— (no images)</td></tr></tbody></table>'
    '<table><thead><tr><th></th><th colspan="2">a</th></tr><tr><th>level</th><th>x</th>'
    '<th>y</th></tr></thead><tbody><tr><th>0</th><td>1</td><td>2</td></tr></tbody></table>'
    + _cite("#id2", "Jacobs <em>et al.</em>, 2026a") + _cite("#id3", "Jacobs et al., 2026b")
    + _cite("#id2", "Jacobs et al., 2026a"))


def test_a_clean_page_passes() -> None:
    soup = BeautifulSoup(CLEAN, "html.parser")
    assert {name: check(soup) for name, check in CHECKS.items()} == \
        {name: [] for name in CHECKS}


@pytest.mark.parametrize("check, plant, expect", [
    ("verdict", _badge(FAILS, FAILS), f"a badge '✗ {FAILS}', not ✗ '{TERMS[FAILS]}'"),
    ("verdict", _badge(HOLDS, TERMS[FAILS]), "not ✓ 'holds"),
    ("verdict", f'<a title="x: {HOLDS}">{_badge(FAILS, "C4")}</a>', "titled 'x: "),
    ("verdict", '<span class="rc-badge rc-maybe">~ perhaps</span>', "a badge of no verdict"),
    ("verdict", "<table><thead><tr><th>verdict</th></tr></thead><tbody><tr><td>needs the "
                "paper's scale</td></tr></tbody></table>", "a verdict \"needs the paper's scale\""),
    ("verdict", "<table><thead><tr><th>cell</th><th>C1</th></tr></thead><tbody><tr><td>a</td>"
                f"<td>{FAILS}</td></tr></tbody></table>", f"a verdict '{FAILS}' in a column"),
    ("index", '<table><thead><tr><th></th><th>acc</th></tr><tr><th>model</th><th></th></tr>'
              '</thead><tbody><tr><th>a</th><td>0.8</td></tr></tbody></table>',
     r"an index header row \['model'\]"),
    ("index", '<table><thead><tr><th></th><th>acc</th></tr><tr><th>seed</th><th>step</th>'
              '<th></th></tr></thead><tbody><tr><th>0</th><th>1</th><td>0.8</td></tr></tbody>'
              '</table>', r"an index header row \['seed', 'step'\]"),
    ("index", '<table><thead><tr><th></th><th>acc</th></tr><tr><th class="index_name level0">'
              'cell</th><th class="blank">&nbsp;</th></tr></thead></table>', "an index header"),
    ("empty", '<table class="rc-table"><thead><tr><th>id</th><th>verdict</th></tr></thead>'
              '<tbody></tbody></table>', r"an empty claims table headed \['id', 'verdict'\]"),
    ("empty", "<table><thead><tr><th>verdict</th><th>claims</th></tr></thead></table>",
     "an empty claims table"),
    ("citation", _cite("#id3", "Jacobs et al., 2026a"), "'Jacobs et al., 2026a' cites 2 works"),
])
def test_planted_faults_are_caught(check: str, plant: str, expect: str) -> None:
    problems = CHECKS[check](BeautifulSoup(CLEAN + plant, "html.parser"))
    assert any(re.search(expect, p) for p in problems), problems


def _notebook(*outputs: dict) -> dict:
    return {"cells": [{"cell_type": "code", "source": "fig = plot()\n", "outputs": list(outputs)}]}


def test_a_quiet_notebook_passes() -> None:
    assert notebook_faults(_notebook(
        {"output_type": "stream", "name": "stdout", "text": ["warmup done\n"]},
        {"output_type": "display_data", "data": {"text/plain": "<Figure>", "image/png": "iVBO"}},
    )) == []


@pytest.mark.parametrize("output, expect", [
    ({"output_type": "stream", "name": "stderr", "text": ["100%|██████| 3/3\n"]},
     "cell 0 \\('fig = plot\\(\\)'\\): a stderr stream"),
    ({"output_type": "stream", "name": "stdout",
      "text": "x.py:3: UserWarning: Glyph 8722 missing\n"}, "UserWarning: Glyph"),
    ({"output_type": "display_data", "data": {"text/html": "<pre>RuntimeWarning: overflow</pre>"}},
     "RuntimeWarning"),
    ({"output_type": "execute_result", "data": {"text/plain": [
        "findfont: Font family ['STIXGeneral'] not found"]}}, "findfont: Font family"),
    ({"output_type": "stream", "name": "stdout", "text": "DeprecationWarning: use y\n"},
     "DeprecationWarning"),
])
def test_a_planted_warning_is_caught(output: dict, expect: str) -> None:
    problems = notebook_faults(_notebook(output))
    assert any(re.search(expect, p) for p in problems), problems
