"""Tests for raptor.book.scope and the book's ``scope`` directive: what the book tested, at what
scale, read off each profile's spec, never written by hand."""

from __future__ import annotations

import dataclasses
import doctest
import importlib.util
import json
import re
from pathlib import Path

import pytest

from raptor.book import scope
from raptor.book.scope import sentence
from raptor.book.chapters import PROFILES, ChapterError, spec_for
from raptor.catalog import dataset_info

ROOT = Path(__file__).resolve().parents[1]


def test_the_docstrings_example_holds() -> None:
    """:func:`sentence`'s example, run as a doctest (pytest collects none under ``raptor/``)."""
    run = doctest.testmod(scope)
    assert run.attempted == 1 and run.failed == 0


@pytest.mark.parametrize("profile", PROFILES)
def test_the_sentence_says_what_each_profile_trains(profile: str) -> None:
    spec = spec_for("distillation", profile)
    t, train, distill = spec.teacher, spec.train, spec.distill
    text = sentence(profile)
    assert text.startswith(f"Tested at `{profile}`: ViTs of {t.depth} blocks, width {t.embed_dim}")
    n = train.train_limit or dataset_info(train.dataset).train_size
    assert f"from scratch on {n:,} " in text
    assert f"{distill.stage1_steps:,} steps" in text
    assert ("validation loss stopped falling" in text) == bool(train.patience)
    assert text.endswith("so each verdict is about this scale.") and text.count(". ") == 0


def test_the_book_says_what_it_did_not_run_and_why() -> None:
    assert "DINOv2-B and CIFAR-100 were not run (they need a GPU)" in sentence("cpu")
    assert "Fashion-MNIST" in sentence("cpu") and "5,000" in sentence("cpu")
    assert "CIFAR-100 images for" in sentence("paper") and "were not run" not in sentence("paper")
    assert "in 2 × 100 steps; " in sentence("cpu")  # on the teachers' images: not said twice
    assert "on 256 Fashion-MNIST images" in sentence("smoke")  # and at smoke on fewer


def test_students_under_the_convergence_criterion_are_said_to_stop_at_their_plateau(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = spec_for("distillation", "cpu")
    criterion = dataclasses.replace(spec.distill, stage1_steps=8000, stage2_steps=4000,
                                    val_limit=1000, patience=4)
    monkeypatch.setattr(scope, "spec_for", lambda *_: dataclasses.replace(spec, distill=criterion))
    assert ("Raptors distilled from them in stages that stopped where their held-out loss "
            "flattened (at most 8,000 + 4,000 steps); ") in sentence("cpu")


def test_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ChapterError, match="unknown profile 'gpu'; valid profiles: smoke, cpu"):
        sentence("gpu")


def _directive():
    spec = importlib.util.spec_from_file_location("scope_ext", ROOT / "book/_ext/scope.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _notebook(path: Path, cells: list[tuple[list[str], str]]) -> Path:
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {"tags": tags},
                                           "source": src} for tags, src in cells]}))
    return path


def test_the_directive_reads_the_profile_the_notebook_ran_at(tmp_path: Path) -> None:
    read = _directive().notebook_profile
    plain = _notebook(tmp_path / "a.ipynb", [(["parameters"], "profile = 'cpu'\nk = 3")])
    assert read(plain) == "cpu"
    injected = _notebook(tmp_path / "b.ipynb", [(["parameters"], "profile = 'cpu'"),
                                                (["injected-parameters"], 'profile = "smoke"')])
    assert read(injected) == "smoke"
    with pytest.raises(ValueError, match="no `profile = ...` in a parameters cell"):
        read(_notebook(tmp_path / "c.ipynb", [([], "profile = 'cpu'")]))


def test_every_page_that_must_open_with_its_scope_asks_for_it() -> None:
    pages = [ROOT / "book/intro.md", ROOT / "book/claims.ipynb",
             *sorted((ROOT / "book/chapters").glob("*.ipynb"))]
    for page in pages:
        text = page.read_text()
        if page.suffix == ".ipynb":
            text = "".join(json.loads(text)["cells"][0]["source"])
        assert re.search(r"(```|:::)\{scope\}", text), page
