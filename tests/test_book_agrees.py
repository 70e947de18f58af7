"""The committed book agrees with itself: every C1 result a page quotes for a model, and every
C1 result it quotes for DINOv2-B, is the one the phase-structure chapter stored; no other
statistic speaks of phases; the book's teachers are named apart from the atlas's cells."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from raptor.atlas_design import Cell
from raptor.book.profiles import FAMILY, TEACHER, TRAIN
from raptor.teachers import teacher_key

BOOK = Path(__file__).resolve().parents[1] / "book"
# A model's C1 result as every page prints it: its name, the excess and its 95% interval.
QUOTE = re.compile(r"(?P<planted>planted, )?(?:p=(?P<p>\d\.\d+), )?seed (?P<seed>\d+) "
                   r"(?P<x>[+-]\d\.\d{3}) \[(?P<lo>[+-]\d\.\d{3}), (?P<hi>[+-]\d\.\d{3})\]")
AT_K = re.compile(r"(?P<x>[+-]\d\.\d{3}) at k = (?P<k>\d)")
# The wording of the max-cut statistic that once judged phases beside C1's test.
RETIRED = ("C1: no phases", "C1: phases shown", "C1: weak phases", "C1 needs > 0.01")


def stored() -> dict[str, list[float | None]]:
    """C1's result per model, as the phase-structure chapter stored it."""
    (c1,) = [c for c in json.loads((BOOK / "claims" / "phase-structure.json").read_text())
             if c["id"] == "C1"]
    return c1["values"]


def texts() -> list[tuple[str, str, str]]:
    """Every text a reader meets, as (page, where, text): each notebook's markdown and each
    output's text (glued values by their name), and each chapter's stored claims."""
    out = []
    for path in sorted((BOOK / "chapters").glob("*.ipynb")) + [BOOK / "claims.ipynb"]:
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "markdown":
                out.append((path.name, f"cell {i}", "".join(cell["source"])))
            for o in cell.get("outputs", []):
                name = o.get("metadata", {}).get("scrapbook", {}).get("name", f"cell {i}")
                for kind, value in o.get("data", {}).items():
                    if kind.startswith(("text/", "application/papermill.record/text")):
                        out.append((path.name, name, "".join(value)))
                if o.get("output_type") == "stream":
                    out.append((path.name, f"cell {i}", "".join(o["text"])))
    for path in (BOOK / "intro.md", BOOK.parent / "README.md"):
        out.append((path.name, "text", path.read_text()))
    for path in sorted((BOOK / "claims").glob("*.json")):
        for c in json.loads(path.read_text()):
            for field in ("ours", "detail", "rests_on"):
                out.append((path.name, f"{c['id']} {field}", c[field]))
    return out


@pytest.fixture(scope="module")
def book() -> tuple[dict[str, list[float | None]], list[tuple[str, str, str]]]:
    return stored(), texts()


def test_every_c1_result_quoted_for_a_model_is_the_stored_one(book) -> None:
    values, pages = book
    quoted = 0
    for page, where, text in pages:
        for m in QUOTE.finditer(text):
            if m["planted"]:  # the positive control's teachers: other models, one chapter's
                continue
            name = f"p={m['p'] or TEACHER.p}, seed {m['seed']}"
            assert name in values, (page, where, m[0])
            want = [f"{v:+.3f}" for v in values[name]]
            assert [m["x"], m["lo"], m["hi"]] == want, (page, where, m[0], want)
            quoted += 1
    assert quoted >= 10  # the intro's, chapters' and rests-on lines' quotes were read


def test_every_c1_result_quoted_for_dinov2b_is_the_stored_one(book) -> None:
    values, pages = book
    want = f"{values['DINOv2-B'][0]:+.3f}"
    quoted = [(page, where, m[0]) for page, where, text in pages
              if "dinov2b" in where.lower() or "DINOv2-B" in text
              for m in AT_K.finditer(text)]
    assert quoted and all(q.split(" at ")[0] == want for _, _, q in quoted), quoted


def test_no_retired_statistic_speaks_of_phases(book) -> None:
    _, pages = book
    said = [(page, where, w) for page, where, text in pages for w in RETIRED if w in text]
    assert not said, said


def test_the_books_teachers_are_named_apart_from_the_atlas_cells(book) -> None:
    """The book's teacher of a cell and seed is another model than the atlas's (its weights are
    rounded to float16 in training): they differ in key, and no page but the atlas's calls a
    book teacher by a cell's name."""
    cell = Cell(FAMILY.depth, FAMILY.width, FAMILY.train_size, FAMILY.p, seed=1)
    assert teacher_key(TEACHER, replace(TRAIN, seed=1), 1) != \
        teacher_key(cell.teacher(), cell.training(), 1)
    _, pages = book
    named = re.compile(re.escape(cell.name.removesuffix("-s1")) + r"-s\d")
    assert not [(page, where) for page, where, text in pages
                if page != "atlas.ipynb" and named.search(text)]
