"""Claims as code: each chapter tests the paper's claims on its own result.

The paper's 25 checkable claims have stable IDs C1–C25 (:data:`CLAIMS`). A chapter's claim is a
named function of its result with named :class:`Threshold` s; it returns a :class:`Claim`: the
paper's number, this run's number and a verdict (:data:`VERDICTS`): ``holds`` / ``does not hold``,
``inconclusive`` when the number's interval spans the threshold (:func:`versus`), ``not testable
here``, or ``by construction`` for a property the model has by design, not by
measurement. Chapters write their claims as JSON next to the book; the claims page gathers them.

A claim is declared once, as data, and judged by :mod:`raptor.book.engine` (seeds the unit of
replication, a power check before any verdict). :func:`across_seeds`' binomial vote over the
seeds' verdicts remains for the atlas's cells, which are not claims.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import HTML
from scipy import stats as st

from raptor.phase_test import EXCESS_MIN, PhaseTest
from raptor.stats import FAILS, HOLDS, INCONCLUSIVE, Interval, Threshold, versus

CLAIMS: dict[str, str] = {
    "C1": "Layer–layer similarity matrices show contiguous block structure across models",
    "C2": "Max-cut boundaries align with the visible blocks",
    "C3": "Max-cut partitions beat random partitions by > 1σ of Raptor accuracy",
    "C4": "Intra-block layer swaps keep accuracy; inter-block swaps collapse it",
    "C5": "Stochastic depth raises layer–layer similarity",
    "C6": "Stochastic depth raises Raptor reconstruction R²",
    "C7": "Stochastic depth raises teacher and student accuracy (up to ~0.6)",
    "C8": "Layer–layer similarity is positively associated with Raptor R²",
    "C9": "An untrained ViT is reconstructed better than a trained one",
    "C10": "Removing the skip branch of an untrained ViT only slightly lowers R²",
    "C11": "R² stays high until the teacher overfits, then cls R² and accuracy drop",
    "C12": "Raptor k=2 recovers ~96% of DINOv2-B IN-1k accuracy, k=3 ~98%",
    "C13": "Accuracy rises from k=2 to k=3 and saturates at k=4",
    "C14": "TF alone collapses; AR with annealed TF recovers; each later step adds",
    "C15": "Raptor keeps high cosine similarity to the teacher through depth",
    "C16": "Token directions converge: γ_l is S-shaped and saturates near 1",
    "C17": "Feature norms grow with depth",
    "C18": "Depth trajectories enter class-dependent angular basins",
    "C19": "Perturbed trajectories bend back (self-correction)",
    "C20": "Patch sensitivity decays with injection depth; cls sensitivity rises when injected late",
    "C21": "Angular speed: registers < patches < cls late; statistics jump at phase boundaries",
    "C22": "Stable and effective rank of updates fall with depth (≈ 6 at the end for DINOv2-B)",
    "C23": "Patch-token coherence rises sharply late",
    "C24": "DMD eigenvalues lie inside the unit circle near +1; cls closest to +1",
    "C25": "A BRH model has a shorter description at the same runtime (Levin complexity)",
}

UNTESTABLE, BY_CONSTRUCTION = "not testable here", "by construction"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, UNTESTABLE, BY_CONSTRUCTION)
UNTESTED = "not yet tested"  # on the claims page: no chapter has checked the claim
# A verdict as the reader should take it: about the models tested here, not the paper's. Every
# page shows these words (badges, tables, the README); the claims' JSON keeps the bare verdict.
SCOPED: dict[str, str] = {
    HOLDS: "holds at this scale",
    FAILS: "not reproduced at this scale",
    INCONCLUSIVE: "inconclusive",
    UNTESTABLE: "not testable here",
    BY_CONSTRUCTION: "holds by construction",
}
# Badge of each verdict: a symbol and the word carry it, the colour (book/_static/raptor.css)
# only repeats it.
BADGES: dict[str, tuple[str, str]] = {
    HOLDS: ("✓", "holds"), FAILS: ("✗", "fails"), INCONCLUSIVE: ("?", "inconclusive"),
    UNTESTABLE: ("–", "untestable"), BY_CONSTRUCTION: ("≡", "construction"),
    UNTESTED: ("·", "untested"),
}


@dataclass(frozen=True)
class Claim:
    """One claim tested in one chapter at one profile."""

    id: str
    claim: str
    paper: str
    ours: str
    verdict: str
    detail: str = ""
    rests_on: str = ""
    tests: int = 1  # the sub-tests its verdict combines (a conjunction's parts, seeds' sums)
    chapter: str = ""
    profile: str = ""
    # the numbers other pages quote, by model: C1's [excess, low, high] (None: no interval)
    values: dict[str, list[float | None]] = field(default_factory=dict)


def claim(claim_id: str, *, paper: str, ours: str, holds: bool | str | None,
          detail: str = "", tests: int = 1) -> Claim:
    """A claim ``claim_id`` tested: ``holds`` is a bool, one of :data:`VERDICTS` (e.g. from
    :func:`versus`), or ``None`` for not testable here; ``tests`` counts the sub-tests
    it combines (``len(parts)`` for ``all_of(parts)``)."""
    if claim_id not in CLAIMS:
        raise ValueError(f"unknown claim id {claim_id!r}; valid: C1..C{len(CLAIMS)}")
    if tests < 1:
        raise ValueError(f"need tests >= 1, got {tests}")
    if isinstance(holds, str):
        if holds not in VERDICTS:
            raise ValueError(f"unknown verdict {holds!r}; valid: {', '.join(VERDICTS)}")
        verdict = holds
    else:
        verdict = UNTESTABLE if holds is None else HOLDS if bool(holds) else FAILS
    return Claim(claim_id, CLAIMS[claim_id], paper, ours, verdict, detail, tests=tests)


SIDE_ERROR = 0.025  # a 95% two-sided interval's chance of lying wholly on one wrong side
LEVEL = 1 - 2 * SIDE_ERROR


SEEDS_ALPHA = Threshold(0.05, "[ours] the conventional 5% level for the combined test over seeds; "
                              "as 0.025 < 0.05, one seed keeps its own verdict")


def across_seeds(per_seed: Mapping[int, Claim]) -> Claim:
    """One claim tested on the models of several seeds (``{seed: claim}``), combined by a
    binomial test of the seeds' verdicts.

    Each seed's verdict from a 95% two-sided interval (:func:`versus`) is a one-sided test at
    ``SIDE_ERROR`` = 2.5% in each direction. Were the claim false, the number of seeds saying
    ``holds`` would be at most Binomial(s, 2.5%); were it true, so would the number saying ``does
    not hold``. It holds if P(Binomial(s, 2.5%) ≥ #holds) < ``SEEDS_ALPHA`` and the same is not
    significant for #does-not-hold; does not hold symmetrically; else (both or neither) it is
    inconclusive. One seed keeps its verdict (P = 2.5% < 5%); more seeds let a stray seed's
    verdict be outvoted instead of only adding ways to fail.

    The binomial assumes the seeds independent: each seed trains its own models, but the seeds
    share the evaluation images, so evaluation noise is shared and the test is approximate. A
    seed's ``does not hold`` from a conjunction errs at most 2.5% where :func:`all_of` corrects
    it (every part with an interval), up to m × 2.5% where a part is a plain verdict.

    The first seed's numbers are shown, every seed's verdict beside them, the others' numbers in
    the detail; ``rests_on`` is kept per seed and ``tests`` summed. A claim not testable (or true
    by construction) for every seed stays so; mixed with measured verdicts it is inconclusive.
    """
    if not per_seed or len({c.id for c in per_seed.values()}) != 1:
        raise ValueError(f"need one claim ID over ≥ 1 seed, got "
                         f"{sorted({c.id for c in per_seed.values()})}")
    (s0, first), *rest = per_seed.items()
    verdicts = [c.verdict for c in per_seed.values()]
    n = len(verdicts)
    p_holds, p_fails = (float(st.binom.sf(verdicts.count(v) - 1, n, SIDE_ERROR))
                        for v in (HOLDS, FAILS))
    holds, fails = p_holds < SEEDS_ALPHA.value, p_fails < SEEDS_ALPHA.value
    if all(v in (HOLDS, FAILS, INCONCLUSIVE) for v in verdicts):
        verdict = HOLDS if holds and not fails else FAILS if fails and not holds else INCONCLUSIVE
    else:
        verdict = verdicts[0] if len(set(verdicts)) == 1 else INCONCLUSIVE
    if not rest:
        return replace(first, verdict=verdict)
    rests_on = "; ".join(f"seed {s}: {c.rests_on}" for s, c in per_seed.items() if c.rests_on)
    return replace(
        first, verdict=verdict, rests_on=rests_on, tests=sum(c.tests for c in per_seed.values()),
        ours=f"seed {s0}: {first.ours} (per seed: "
             + ", ".join(f"{s} {c.verdict}" for s, c in per_seed.items()) + ")",
        detail=f"{first.detail}; combined over {n} seeds by a binomial test of the seeds' "
               f"verdicts (each seed trains its own models; all share the evaluation images): "
               f"{_seeds_that(verdicts.count(HOLDS), 'hold')} (P = {p_holds:.2g}), "
               f"{_seeds_that(verdicts.count(FAILS), 'do not')} (P = {p_fails:.2g}) under "
               f"Binomial({n}, {SIDE_ERROR:g}), significant at "
               f"P < {SEEDS_ALPHA.value:g}; "
               + "; ".join(f"seed {s}: {c.ours}" for s, c in rest))




MIN_PHASED = 2  # models with phases a claim over models needs: a t interval needs two


def excess_text(test: PhaseTest) -> str:
    """C1's result for one model as every page prints it: its largest block excess and 95%
    interval (:meth:`~raptor.phase_test.PhaseTest.interval`)."""
    return f"{Interval(test.excess, *test.interval(), 0.95):+.3f}"


def rests_on_phases(tests: Mapping[str, PhaseTest]) -> str:
    """C1's test of each model (by name) that a claim presupposing phases uses (C2–C4, C21),
    as every page reads it (:meth:`~raptor.phase_test.PhaseTest.verdict`): in which it finds
    phases, with each one's largest block excess and interval."""
    def shown(names: list[str]) -> str:
        return ", ".join(f"{n} {excess_text(tests[n])}" for n in names)

    found = [n for n, t in tests.items() if t.verdict() == HOLDS]
    rest = [n for n in tests if n not in found]
    return "; ".join(
        [f"C1 finds phases in {shown(found)}"] * bool(found)
        + [f"{'none' if found else 'C1 finds no phases'} in {shown(rest)}"] * bool(rest)) \
        + f" (block excess above {EXCESS_MIN.value:+.3f} needed)"


def on_phases(made: Callable[[list[Any]], Claim], tests: Mapping[Any, PhaseTest], *,
              names: Mapping[Any, str] | None = None, needed: int = MIN_PHASED) -> Claim:
    """A claim that presupposes phases (C2–C4, C21's boundaries), judged by ``made`` on those
    models of ``tests`` (model -> C1's test; ``names``: how each is called, default
    ``"seed <model>"``) in which C1 finds phases; where fewer than ``needed`` have them, *not
    testable here*, with what ``made`` measures on all of them beside, not counted."""
    names = names or {m: f"seed {m}" for m in tests}
    rests_on = rests_on_phases({names[m]: t for m, t in tests.items()})
    found = [m for m, t in tests.items() if t.verdict() == HOLDS]
    if len(found) >= needed:
        judged = made(found)
        scope = "" if len(found) == len(tests) else \
            f"judged on the {len(found)} of {len(tests)} models with phases; "
        return replace(judged, rests_on=rests_on, detail=scope + judged.detail)
    measured = made(list(tests))
    why = (f"the teachers have no phases: C1 finds them in {len(found)} of {len(tests)}"
           + (f", and a test over models needs {needed}" if found else ""))
    return replace(measured, verdict=UNTESTABLE, rests_on=rests_on,
                   ours=f"not testable here: {why} (measured on all, not counted: "
                        f"{measured.ours})",
                   detail=f"not testable here: {why}. Measured on all of them, not counted: "
                          + measured.detail)


def scoped(verdict: str) -> str:
    """``verdict`` (one of :data:`VERDICTS`) in the words of :data:`SCOPED`; any other label
    (e.g. ``not yet tested``) unchanged."""
    return SCOPED.get(verdict, verdict)


def listed(items: Sequence[str], conjunction: str = "and") -> str:
    """Items (at least one) as prose: ``a``, ``a and b``, ``a, b and c``."""
    return items[-1] if len(items) < 2 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def counted(n: int, noun: str) -> str:
    """``n`` and a noun that agrees with it: ``1 teacher``, ``3 teachers``."""
    return f"{n} {noun}{'s' * (n != 1)}"


def stated(verdict: str, plural: bool = False) -> str:
    """A verdict as a predicate in the words of :data:`SCOPED`: ``holds at this
    scale``, ``is inconclusive``; ``plural``: of several subjects (``hold …``, ``are …``)."""
    words = scoped(verdict)
    if words.startswith("holds"):
        return words.replace("holds", "hold", 1) if plural else words
    return f"{'are' if plural else 'is'} {words}"


def badge(verdict: str, suffix: str = "", label: str | None = None) -> str:
    """A verdict as an HTML badge: its symbol and scoped words (or ``label``), coloured."""
    symbol, css = BADGES.get(verdict, ("", "untested"))
    text = escape(scoped(verdict) if label is None else label)
    return f'<span class="rc-badge rc-{css}">{symbol} {text}{escape(suffix)}</span>'


class ClaimTable(pd.DataFrame):
    """A chapter's claims table. In a notebook it is HTML: each ID links to its claim on the
    claims page, each verdict is a badge beside it, the detail is folded, the table scrolls in
    its own box on a narrow screen, and (``attrs["json"]``, set by :func:`report`) a link to the
    claims' JSON follows it. A table of no claims shows nothing (not a bare header)."""

    @property
    def _constructor(self) -> type[ClaimTable]:
        return ClaimTable

    def _repr_html_(self) -> str:
        if self.empty:
            return ""
        cols = ["verdict", *(c for c in self.columns if c != "verdict")]  # on screen at 420 px
        head = "".join(f"<th>{escape(c)}</th>" for c in ("id", *cols))
        rows = "".join(
            f'<tr><th><a href="../claims.html#{cid}">{cid}</a></th>'
            + "".join(f"<td>{_cell(c, str(row[c]))}</td>" for c in cols) + "</tr>"
            for cid, row in self.iterrows())
        data = self.attrs.get("json")
        link = (f'<p class="rc-data">These claims as data: <a href="../{data}">{data}</a></p>'
                if data else "")
        return (f'<div class="rc-scroll"><table class="rc-table"><thead><tr>{head}</tr></thead>'
                f"<tbody>{rows}</tbody></table></div>{link}")


def folded(text: str, label: str = "") -> str:
    """``text`` (after ``label``, HTML) as a phone shows a long sentence: folded to its first two
    lines until tapped (``.rc-fold``, book/_static/raptor.css); a wider screen shows it whole."""
    return f'<details class="rc-fold"><summary>{label}{escape(text)}</summary></details>'


def _cell(column: str, value: str) -> str:
    """A claims-table cell as HTML: the verdict a badge, our number folded on a phone, the
    detail folded."""
    if column == "verdict":
        return badge(value)
    if column == "ours":
        return folded(value)
    if column == "detail" and value:
        return f"<details><summary>detail</summary>{escape(value)}</details>"
    return escape(value)


def table(claims: Iterable[Claim]) -> ClaimTable:
    """The claims as a table (the last cell of a chapter); a column "rests on" where a claim
    rests on phases (:func:`resting_on_phases`)."""
    rows = [asdict(c) for c in claims]
    cols = ["id", "claim", "paper", "ours", "verdict", "rests_on", "detail"]
    frame = pd.DataFrame(rows, columns=cols + ["chapter", "profile"])[cols].set_index("id")
    if not frame["rests_on"].astype(bool).any():  # shown only where a claim rests on phases
        frame = frame.drop(columns="rests_on")
    return ClaimTable(frame.rename(columns={"rests_on": "rests on"}))


def report(claims: Iterable[Claim], *, chapter: str, profile: str,
           claims_dir: str | Path = "claims") -> pd.DataFrame:
    """Write the chapter's claims to ``claims_dir/<chapter>.json`` and return them as a table.

    Also lifts pandas' column-width limit so the table shows each claim in full.
    """
    pd.set_option("display.max_colwidth", None)
    checks = [Claim(**{**asdict(c), "chapter": chapter, "profile": profile}) for c in claims]
    path = Path(claims_dir) / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([asdict(c) for c in checks], indent=1, ensure_ascii=False) + "\n")
    out = table(checks)
    out.attrs["json"] = f"claims/{path.name}"  # where the site serves it (book/_config.yml)
    return out


def first_line(text: str) -> str:
    """A claim's number as one line: without the per-seed verdicts that :func:`across_seeds`
    appends (the badge gives the combined verdict)."""
    return text.split(" (per seed: ")[0]


def box(claims: Iterable[Claim]) -> HTML:
    """The verdicts that open a chapter, as HTML: each claim's ID (linked to the claims page), its
    verdict badge and one line — the claim and this run's number. The chapter's key figure and
    its scale (:func:`scale`) follow it in the box."""
    rows = "".join(
        f'<div class="rc-result-row" title="{escape(c.ours)}">'
        f'<a class="rc-result-id" href="../claims.html#{c.id}">{c.id}</a>{badge(c.verdict)}'
        f'<span class="rc-result-claim">{escape(c.claim)}:</span>'
        f'<span class="rc-result-ours">{escape(first_line(c.ours))}</span></div>' for c in claims)
    rows = rows or '<div class="rc-result-row">This chapter tests no claim of its own.</div>'
    return HTML(f'<div class="rc rc-result">{rows}</div>')


def scale(spec, *, profile: str, n_images: int | None = None) -> str:
    """What a chapter's measurements average over, a sentence (its scope sentence, above it, says
    the models: :mod:`raptor.book.scope`): seeds and validation images."""
    seeds = getattr(spec, "seeds", None) or spec.teacher_seeds
    n = spec.n_images if n_images is None else n_images
    return (f"{len(seeds)} seed{'s' * (len(seeds) != 1)}; measured on {n:,} validation images "
            f"(profile {profile}).")


def _seeds_that(count: int, verb: str) -> str:
    """``"1 holds"``, ``"2 hold"``, ``"1 does not"``: a count of seeds and its verb, agreeing."""
    singular = {"hold": "holds", "do not": "does not"}
    return f"{count} {singular[verb] if count == 1 else verb}"


def gather(claims_dir: str | Path = "claims") -> pd.DataFrame:
    """All 25 claims with every check recorded for them in ``claims_dir``; untested ones are
    marked so."""
    found: dict[str, list[dict]] = {cid: [] for cid in CLAIMS}
    for path in sorted(Path(claims_dir).glob("*.json")):
        for c in json.loads(path.read_text()):
            found[c["id"]].append(c)
    rows = []
    for cid, statement in CLAIMS.items():
        for c in found[cid] or [None]:
            rows.append({"id": cid, "claim": statement,
                         "chapter": c["chapter"] if c else "—",
                         "profile": c["profile"] if c else "—",
                         "paper": c["paper"] if c else "",
                         "ours": c["ours"] if c else "",
                         "detail": c.get("detail", "") if c else "",
                         "rests_on": c.get("rests_on", "") if c else "",
                         "tests": c.get("tests", 1) if c else 0,
                         "verdict": c["verdict"] if c else UNTESTED})
    return pd.DataFrame(rows).set_index("id")


def by_verdict(checks: pd.DataFrame) -> HTML:
    """The verdicts in a short table, one row a verdict: its badge and count, then each claim
    it covers, its ID (linked to the claims page, relative to the book's root) and statement
    (``checks``: :func:`gather`'s table)."""
    rows = []
    for verdict in (*VERDICTS, UNTESTED):
        ids = list(dict.fromkeys(checks.index[checks["verdict"] == verdict]))
        if ids:
            items = "; ".join(f'<a href="claims.html#{cid}"><b>{cid}</b></a> {escape(CLAIMS[cid])}'
                              for cid in ids)
            rows.append(f"<tr><th>{badge(verdict, f' · {len(ids)}')}</th><td>{items}</td></tr>")
    return HTML(f'<div class="rc-scroll"><table class="rc-table rc-verdicts"><tbody>{"".join(rows)}'
                "</tbody></table></div>")
