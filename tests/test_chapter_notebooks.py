"""Every name a chapter notebook's prose glues is glued by one of its code cells: by name, or by
the loop that glues its chapter's findings (``glue(f"<chapter>-{key}", …)``), whose keys are
checked on each chapter's smoke run (:func:`findings_keys`)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from raptor.book.chapters import science
from tests.test_prose import faults

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted((BOOK / "chapters").glob("*.ipynb"))
# A glued name in Markdown: a role ({glue:text}`name:.2f`, {glue:md}`name:myst`) or a directive
# (```{glue} name, :::{glue:figure} name); what follows a colon in a role is its format.
USED = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)|^[`:]{3,}\{glue(?::\w+)?\}[ \t]+(\S+)", re.M)
GLUED = re.compile(r'\bglue\(\s*"([^"]+)"')  # glue("name", …)
LOOP = re.compile(r'\bglue\(\s*f"([^"{]*)\{key\}"')  # glue(f"<prefix>{key}", …): its prefix


def sources(path: Path, kind: str) -> list[str]:
    """The sources of the notebook's cells of ``kind`` (``markdown`` or ``code``)."""
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == kind]


def used(path: Path) -> set[str]:
    """The names the notebook's Markdown glues in."""
    return {a or b for text in sources(path, "markdown") for a, b in USED.findall(text)}


def glued(path: Path) -> tuple[set[str], tuple[str, ...]]:
    """The names the notebook's code cells glue by name, and the prefixes of its glue loops."""
    code = sources(path, "code")
    return ({name for text in code for name in GLUED.findall(text)},
            tuple(sorted({prefix for text in code for prefix in LOOP.findall(text)})))


def unglued(path: Path) -> set[str]:
    """The names the Markdown uses that no code cell glues, by name or by a loop's prefix."""
    names, prefixes = glued(path)
    return {name for name in used(path) - names if not name.startswith(prefixes)}


def findings_keys(notebook: str) -> set[str]:
    """The keys the notebook ``notebook`` (as a chapter's ``NOTEBOOK``, relative to ``book/``)
    expects from its chapter's ``findings``: the names its Markdown uses that no code cell glues
    by name, less the prefix of its findings loop."""
    path = BOOK / notebook
    names, (prefix,) = glued(path)
    return {name.removeprefix(prefix) for name in used(path) - names if name.startswith(prefix)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_name_the_prose_glues_is_glued(path: Path) -> None:
    assert not unglued(path), f"{path.name}: glued in Markdown, glued by no code cell"


def test_a_name_glued_nowhere_is_caught(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("{glue:text}`x-a` and {glue:md}`x-b:myst`, "
                                      "{glue:text}`x-c:.2f` and {glue:text}`y-d`\n"
                                      ":::{glue:figure} fig-x\n:::"),
        nbformat.v4.new_code_cell('glue("x-b", 1)\nglue("fig-x", fig, display=False)\n'
                                  'for key, text in claims.findings(result, checks).items():\n'
                                  '    glue(f"x-{key}", text, display=False)')])
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert used(tmp_path / "x.ipynb") == {"x-a", "x-b", "x-c", "y-d", "fig-x"}
    assert unglued(tmp_path / "x.ipynb") == {"y-d"}
    assert findings_keys(str(tmp_path / "x.ipynb")) == {"a", "c"}


@pytest.mark.slow
@pytest.mark.parametrize("name, options", [
    ("finding-phases", {}), ("distillation", {}), ("stochastic-depth", {}), ("dynamics", {}),
    ("scaling", {"profile": "smoke"})])
def test_findings_of_the_smoke_run(smoke_result, name: str, options: dict) -> None:
    """A chapter's ``findings`` gives every key its notebook's Found sentence glues, each a clean
    phrase."""
    module = science(name)
    result = smoke_result(name)
    found = module.claims.findings(result, module.claims.claims(result, **options))
    assert set(found) == findings_keys(module.NOTEBOOK)
    assert all(text and not faults(text) for text in found.values()), found
