"""The claims page: every chapter's verdicts on the paper's 25 claims, gathered.

The page is rendered as HTML (:func:`page`): the verdict counts first, then one line per claim,
grouped by the chapter that tests it, with a badge (symbol, word and colour) for the verdict, the
paper's value beside ours and the details folded, styled by the book's ``_static/raptor.css``.
:func:`summary` gives the numbers the intro quotes (glued, not typed).
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pandas as pd
from IPython.display import HTML

from raptor.book.chapters import chapter
from raptor.book.claims import (BY_CONSTRUCTION, CLAIMS, FAILS, HOLDS, INCONCLUSIVE, LEVEL,
                                SEEDS_ALPHA, SIDE_ERROR, UNTESTABLE, UNTESTED, VERDICTS, Claim,
                                Threshold, badge, counted, folded, gather, scoped)
from raptor.book.engine import ENGINE, POWER
from raptor.book.specs import MODULES
from raptor.book.specs.claims_page import NAME, NOTEBOOK, PAPER, SMOKE, Spec  # noqa: F401

BOOK = Path(__file__).resolve().parents[3] / "book"
PAPER_URL = "https://arxiv.org/abs/2512.19941"

# Glue keys of the verdict counts.
COUNT_KEYS = {HOLDS: "n_holds", FAILS: "n_fails", INCONCLUSIVE: "n_inconclusive",
              UNTESTABLE: "n_untestable", BY_CONSTRUCTION: "n_by_construction",
              UNTESTED: "n_untested"}


@dataclass
class Result:
    table: pd.DataFrame


def compute(spec: Spec, claims_dir: str = "claims") -> Result:
    """All 25 claims with every chapter's verdict (``claims_dir`` relative to ``book/``)."""
    return Result(gather(claims_dir))


def claims(result: Result) -> list[Claim]:
    """The page tests no claim of its own."""
    return []


def ours_thresholds() -> dict[str, Threshold]:
    """Every threshold of ours (``[ours]``, with its reason) in the chapters and their claims
    modules, keyed ``<chapter>.<name>``."""
    found = {}
    for name in MODULES:
        if name == NAME:
            continue
        mod = chapter(name)
        for space in (mod, *(v for v in vars(mod).values() if isinstance(v, types.ModuleType)
                             and v.__name__.startswith("raptor.book.chapters."))):
            found.update({f"{name}.{attr}": t for attr, t in vars(space).items()
                          if isinstance(t, Threshold) and t.source.startswith("[ours]")})
    return found


def coverage(n_claims: int, n_tested: int, n_checks: int) -> str:
    """How many of the paper's claims the book checks, and how often, as a sentence."""
    which = (f"Every one of the paper's {n_claims} claims is" if n_tested == n_claims else
             f"{n_tested} of the paper's {n_claims} claims {'is' if n_tested == 1 else 'are'}")
    how = "once each" if n_checks == n_tested else f"in {counted(n_checks, 'check')}"
    return f"{which} checked here, {how}."


def summary(result: Result) -> dict[str, int | float | str]:
    """The page's numbers, for the intro: checks run, claims tested, a count per verdict, the
    sub-tests behind the verdicts and their error rates (``error_rates``, a sentence)."""
    t = result.table
    checks = t[t["verdict"] != UNTESTED]
    counts = checks["verdict"].value_counts()
    measured = checks[checks["verdict"].isin([HOLDS, FAILS, INCONCLUSIVE])]["tests"]
    out: dict[str, int | float | str] = {
        "n_claims": len(CLAIMS), "n_checks": len(checks),
        "n_tested": checks.index.nunique(), "n_chapters": checks["chapter"].nunique(),
        "profile": ", ".join(sorted(set(checks["profile"]))) or "—",
        "n_subtests": int(measured.sum()), "level": f"{LEVEL:.0%}",
        "side_error": f"{SIDE_ERROR:.1%}", "seeds_alpha": f"{SEEDS_ALPHA.value:g}",
    }
    for verdict, key in COUNT_KEYS.items():
        out[key] = int(counts.get(verdict, 0)) if verdict != UNTESTED else len(CLAIMS) - out["n_tested"]
    out["coverage"] = coverage(out["n_claims"], out["n_tested"], out["n_checks"])
    engine = sorted(set(checks.index[checks["detail"].str.contains(ENGINE, regex=False)]),
                    key=lambda c: int(c[1:]))
    voted = sorted(set(checks.index[checks["detail"].str.contains("binomial test", regex=False)]),
                   key=lambda c: int(c[1:]))
    out["engine_claims"] = ", ".join(engine) or "none"
    out["error_rates"] = (
        "What the error rate controls: a verdict is about ViTs trained this way, the models the "
        "recipe produces, not only the few trained here. "
        f"The {out['n_checks']} verdicts rest on {out['n_subtests']} sub-tests, each a "
        f"{out['level']} two-sided interval read against its threshold. On the claims judged by "
        f"the claims engine ({out['engine_claims']}), the trained model is the unit: each part's "
        "interval is a t interval over the per-seed estimates, so that it carries the spread "
        "between seeds (or, for a correlation across the teachers of a sweep, its interval over "
        "those teachers), and 'holds' and 'does not hold' each err by chance with probability up to "
        f"{out['side_error']} for models trained this way. Before any verdict, a power check: a "
        "part whose interval could not clear its threshold (or fit in its band) at this profile's "
        "seeds or images, even for an effect of the paper's size, is not testable here, with the "
        "seeds or images it would need, and so is a claim about phases on teachers in which C1's "
        "test finds none, its numbers beside; beside each part that does not hold, "
        f"the smallest margin the test detects with {POWER:.0%} power. A comparison whose "
        "interval lies within its indifference band (an order within half a layer) is a tie: "
        "the difference the claim needs is absent. A claim of m parts holds only if every part "
        "holds, an "
        f"intersection–union test whose chance error stays at {out['side_error']} whatever m "
        "(Berger 1982); it does not hold only if some part's interval at level 1 − 5%/m lies "
        "wholly against it (Bonferroni over the parts)."
        + (f" The other claims ({', '.join(voted)}) still combine their seeds by a binomial "
           f"test of the seeds' own verdicts at α = {out['seeds_alpha']}, each verdict on an "
           "interval of evaluation noise alone: that controls the error for the seeds at hand, "
           "not for models trained this way (with seeds spread 10× their evaluation error it "
           "errs up to 38% each way)." if voted else "")
        + " Nothing is corrected across claims.")
    return out


def chapter_title(name: str, book: Path = BOOK) -> str:
    """The first heading of chapter ``name``'s notebook (its name where the book is absent)."""
    path = book / "chapters" / f"{MODULES[name]}.ipynb"
    if path.exists():
        for cell in json.loads(path.read_text())["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return name


def evidence_url(name: str) -> str:
    """The claims section of chapter ``name`` (its notebook ``chapters/<module>.ipynb``),
    relative to the claims page."""
    return f"chapters/{MODULES[name]}.html#claims-{name}"


def _claim_html(cid: str, row: pd.Series, anchored: bool) -> str:
    tested = row["chapter"] in MODULES
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
    rank = {name: i for i, name in enumerate(MODULES)}
    for name in sorted(set(t["chapter"]), key=lambda n: (n == "—", rank.get(n, len(rank)), n)):
        title = (f'<a href="{evidence_url(name)}">{escape(chapter_title(name, book))}</a>'
                 if name in MODULES else "Not yet tested by any chapter")
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
