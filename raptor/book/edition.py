"""The book's earlier edition, and which verdicts moved since: its Raptors were distilled for a
fixed number of steps, ours until each stage's held-out loss flattens (:mod:`raptor.train`).

``results/fixed-budget/`` holds that edition's claims (``claims/<chapter>.json``, as
:func:`raptor.book.claims.report` wrote them) and the recipe its Raptors were distilled by
(``distill.json``). A chapter says, under its claims check, which of its verdicts moved from
that edition and on which numbers (:func:`moved`): a Raptor trained 100 + 100 steps and one
trained to its plateau are different models, and a verdict that changed with them says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from IPython.display import Markdown

from raptor.book.claims import Claim, first_line, scoped
from raptor.book.scope import stages
from raptor.config import DistillConfig

EARLIER = Path(__file__).resolve().parents[2] / "results" / "fixed-budget"


def earlier_distill(folder: Path = EARLIER) -> DistillConfig:
    """The recipe the earlier edition's Raptors were distilled by."""
    fields = json.loads((folder / "distill.json").read_text())
    tuples = {k: tuple(v) for k, v in fields.items() if isinstance(v, list)}
    return DistillConfig(repeats=(1,), **{**fields, **tuples})


def moved(claims: Iterable[Claim], *, chapter: str, edition: str, distill: DistillConfig,
          folder: Path = EARLIER) -> Markdown:
    """Each of ``claims`` whose verdict differs from the earlier edition's, with its
    number then and now (between the editions the Raptors' training changed, not the tests).

    ``edition`` is the run's profile as :func:`raptor.book.plotting.profile_of` words it (any
    parameter changed from it named) and ``distill`` the run's recipe; a run at other settings
    than the edition's own profile is not that book re-executed: nothing is said.
    """
    path = folder / "claims" / f"{chapter}.json"
    before = {c["id"]: c for c in json.loads(path.read_text())} if path.is_file() else {}
    if not before or {c["profile"] for c in before.values()} != {edition}:
        return Markdown("")
    then, now = stages(earlier_distill(folder)), stages(distill)
    lines = [f"- **{c.id}**, *{scoped(before[c.id]['verdict'])}* then: "
             f"{first_line(before[c.id]['ours'])}. Now *{scoped(c.verdict)}*: {first_line(c.ours)}."
             for c in claims if c.id in before and before[c.id]["verdict"] != c.verdict]
    if not lines:
        return Markdown(f"No verdict of this chapter moved from the book's earlier edition, whose "
                        f"Raptors were distilled in {then}; here they are distilled in {now}.")
    which = "The verdict that moved" if len(lines) == 1 else "Verdicts that moved"
    return Markdown(f"{which} from the book's earlier edition, whose Raptors were distilled in "
                    f"{then}; here they are distilled in {now}:\n\n" + "\n".join(lines))
