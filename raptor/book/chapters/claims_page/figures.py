"""The claims page as HTML: the verdict counts, then each claim on one line, grouped by chapter."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pandas as pd
from IPython.display import HTML

from raptor.book.chapters import chapter, names
from raptor.book.chapters.claims_page.claims import COUNT_KEYS, summary
from raptor.book.chapters.claims_page.compute import Result, ours_thresholds
from raptor.book.figure_table import Figure
from raptor.book.claims import (CLAIMS, FAILS, HOLDS, UNTESTED, VERDICTS, badge, folded,
                                scoped)

BOOK = Path(__file__).resolve().parents[4] / "book"
PAPER_URL = "https://arxiv.org/abs/2512.19941"
FIGURES: tuple[Figure, ...] = ()  # the page is a table of claims, no figure


def chapter_title(name: str, book: Path = BOOK) -> str:
    """The first heading of chapter ``name``'s notebook (its name where the book is absent)."""
    path = book / chapter(name).NOTEBOOK
    if path.exists():
        for cell in json.loads(path.read_text())["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return name


def evidence_url(name: str) -> str:
    """The claims section of chapter ``name`` (its notebook's page), relative to the claims
    page."""
    return f"{chapter(name).NOTEBOOK.removesuffix('.ipynb')}.html#claims-{name}"


def _claim_html(cid: str, row: pd.Series, anchored: bool) -> str:
    tested = row["chapter"] in names()
    ident = f'<a class="rc-id" href="{evidence_url(row["chapter"])}">{cid}</a>' if tested \
        else f'<span class="rc-id">{cid}</span>'
    head = f'<div class="rc-line">{ident}{badge(row["verdict"])}<span>{escape(CLAIMS[cid])}</span></div>'
    if not tested:
        return f'<div class="rc-claim"{f" id={cid!r}" if anchored else ""}>{head}</div>'
    shown = {"paper": row["paper"], "ours": row["ours"], "rests on": row["rests_on"]}
    vals = ('<div class="rc-vals">' + "".join(f"<div>{folded(text, f'<b>{name}</b> ')}</div>"
                                              for name, text in shown.items() if text) + "</div>")
    more = (f'<details><summary>details</summary>{escape(row["detail"] or "—")} · profile '
            f'<code>{escape(row["profile"])}</code></details>')
    return f'<div class="rc-claim"{f" id={cid!r}" if anchored else ""}>{head}{vals}{more}</div>'


def page(result: Result, book: Path = BOOK) -> HTML:
    """The claims page: verdict counts, then each claim on one line, grouped by chapter."""
    t = result.table.reset_index()
    s = summary(result)
    counts = "".join(badge(v, f" · {s[COUNT_KEYS[v]]}") for v in (*VERDICTS, UNTESTED)
                     if s[COUNT_KEYS[v]] or v in (HOLDS, FAILS))
    strip = "".join(f'<a href="#{r.id}" title="{escape(r.chapter)}: {escape(scoped(r.verdict))}">'
                    f'{badge(r.verdict, label=r.id)}</a>' for r in t.itertuples())
    parts = ['<div class="rc">',
             f'<p>{escape(s["coverage"])} Profile <code>{escape(str(s["profile"]))}</code>; '
             f'the paper: <a href="{PAPER_URL}">arXiv 2512.19941</a>.</p>',
             f'<div class="rc-counts">{counts}</div>', f'<div class="rc-strip">{strip}</div>']
    seen: set[str] = set()
    rank = {name: i for i, name in enumerate(names())}
    for name in sorted(set(t["chapter"]), key=lambda n: (n == "—", rank.get(n, len(rank)), n)):
        title = (f'<a href="{evidence_url(name)}">{escape(chapter_title(name, book))}</a>'
                 if name in rank else "Not yet tested by any chapter")
        parts.append(f'<div class="rc-chapter">{title}</div>')
        for _, row in t[t["chapter"] == name].iterrows():
            parts.append(_claim_html(row["id"], row, row["id"] not in seen))
            seen.add(row["id"])
    ours = ours_thresholds()
    parts.append(f'<details class="rc-ours"><summary>The {len(ours)} thresholds of ours '
                 "([ours]: the paper gives no number), each with its reason</summary><ul>"
                 + "".join(f"<li><code>{escape(key)}</code> = {t.value:g}: "
                           f"{escape(t.source.removeprefix('[ours]').strip())}</li>"
                           for key, t in ours.items()) + "</ul></details>")
    parts.append("</div>")
    return HTML("".join(parts))
