"""Every chapter executed by papermill at the `smoke` profile, on a copy of the book.

Run with `make smoke` (not part of the unit tests: it takes a few minutes in all).
"""

import shutil
from pathlib import Path

import nbformat
import pytest

from raptor.profiles import CHAPTERS
from raptor.runner import BOOK, execute_chapter


@pytest.fixture(scope="module")
def book_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("book") / "book"
    shutil.copytree(BOOK, dst, ignore=shutil.ignore_patterns("_build"))
    return dst


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_chapter_runs_at_smoke(chapter: str, book_copy: Path) -> None:
    execute_chapter(chapter, "smoke", book=book_copy)
    nb = nbformat.read(book_copy / CHAPTERS[chapter], as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "remove-cell" in injected[0].metadata["tags"]
    assert "profile = \"smoke\"" in injected[0].source
