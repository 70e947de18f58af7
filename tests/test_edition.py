"""Tests for raptor.book.edition: which verdicts moved from the book's earlier edition, read off
the stored claims of both, and said only of the book that edition was."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from raptor.book import edition
from raptor.book.chapters import spec_for
from raptor.book.claims import FAILS, HOLDS, INCONCLUSIVE, claim

CRITERION = dataclasses.replace(spec_for("distillation", "cpu").distill, stage1_steps=8000,
                                stage2_steps=4000, anneal_steps=1000, val_limit=1000, patience=4)


@pytest.fixture
def earlier(tmp_path: Path) -> Path:
    """An earlier edition at ``cpu`` whose Raptors trained 100 + 100 steps: C15 inconclusive on
    a lowest cosine of 0.843, C25 by construction."""
    (tmp_path / "claims").mkdir()
    fixed = dataclasses.replace(CRITERION, stage1_steps=100, stage2_steps=100, anneal_steps=None,
                                val_limit=None, patience=None)
    fields = dataclasses.asdict(fixed)
    fields.pop("repeats")
    (tmp_path / "distill.json").write_text(json.dumps(fields))
    rows = [dataclasses.asdict(dataclasses.replace(c, chapter="distillation", profile="cpu"))
            for c in (claim("C15", paper="", ours="The lowest cosine is 0.843 (per seed: x)",
                            holds=INCONCLUSIVE),
                      claim("C25", paper="", ours="0.18× the bits", holds="by construction"))]
    (tmp_path / "claims" / "distillation.json").write_text(json.dumps(rows))
    return tmp_path


def said(checks, folder: Path, edition_: str = "cpu", chapter: str = "distillation") -> str:
    return edition.moved(checks, chapter=chapter, edition=edition_, distill=CRITERION,
                         folder=folder).data


def test_a_verdict_that_moved_is_said_with_its_number_then_and_now(earlier: Path) -> None:
    now = [claim("C15", paper="", ours="The lowest cosine is 0.966", holds=HOLDS),
           claim("C25", paper="", ours="0.18× the bits", holds="by construction")]
    text = said(now, earlier)
    assert text.startswith("The verdict that moved from the book's earlier edition, whose "
                           "Raptors were distilled in 2 × 100 steps; here they are distilled in "
                           "stages that stopped where their held-out loss flattened (at most "
                           "8,000 + 4,000 steps):\n\n")
    assert text.endswith("- **C15**, *inconclusive* then: The lowest cosine is 0.843. Now *holds "
                         "at this scale*: The lowest cosine is 0.966.")  # per-seed tail dropped
    assert "C25" not in text


def test_several_verdicts_that_moved_are_listed_under_a_plural(earlier: Path) -> None:
    now = [claim("C15", paper="", ours="The lowest cosine is 0.966", holds=HOLDS),
           claim("C25", paper="", ours="2× the bits", holds=FAILS)]
    text = said(now, earlier)
    assert text.startswith("Verdicts that moved from the book's earlier edition")
    assert text.count("\n- **") == 2 and "- **C25**, *holds by construction* then" in text


def test_where_nothing_moved_the_chapter_says_so(earlier: Path) -> None:
    now = [claim("C15", paper="", ours="The lowest cosine is 0.871", holds=INCONCLUSIVE)]
    assert said(now, earlier).startswith("No verdict of this chapter moved from the book's earlier "
                                         "edition, whose Raptors were distilled in 2 × 100 steps;")


@pytest.mark.parametrize("edition_, chapter", [("cpu with seeds changed", "distillation"),
                                               ("smoke", "distillation"), ("cpu", "dynamics")])
def test_a_run_that_is_not_the_earlier_book_re_executed_says_nothing(
        earlier: Path, edition_: str, chapter: str) -> None:
    """Other settings, another profile, or a chapter the edition did not store."""
    now = [claim("C15", paper="", ours="The lowest cosine is 0.2", holds=FAILS)]
    assert said(now, earlier, edition_, chapter) == ""


def test_the_stored_edition_is_the_fixed_budget_book() -> None:
    """``results/fixed-budget`` holds a claims file per chapter, every one at ``cpu``, and a
    recipe of fixed stages (no plateau rule), which the chapters' sentence words as such."""
    files = sorted((edition.EARLIER / "claims").glob("*.json"))
    assert {f.stem for f in files} >= {"distillation", "stochastic-depth", "functional-phases",
                                       "dynamics", "scaling"}
    assert {c["profile"] for f in files for c in json.loads(f.read_text())} == {"cpu"}
    recipe = edition.earlier_distill()
    assert recipe.patience is None and recipe.val_limit is None
    assert edition.stages(recipe) == "2 × 100 steps"
