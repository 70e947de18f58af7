"""Execute the book's chapters with papermill at a profile, then build the book.

A *profile* fixes a chapter's parameters for a compute budget: ``smoke`` (seconds, for tests),
``cpu`` (the default: the committed book, a 2-core machine), ``paper`` (a GPU and the paper's
datasets). Notebooks are executed in place so the book shows them; papermill's injected-parameters
cell is tagged ``remove-cell`` so the rendered book hides it (the chapter's run card lists the
parameters instead).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nbformat

from raptor.profiles import CHAPTERS, PROFILES

BOOK = Path(__file__).resolve().parents[1] / "book"


class RunnerError(ValueError):
    """A bad profile, chapter or parameter, reported before anything runs."""


def chapter_path(chapter: str, book: Path = BOOK) -> Path:
    if chapter not in CHAPTERS:
        raise RunnerError(f"unknown chapter {chapter!r}; valid chapters: {', '.join(CHAPTERS)}")
    return book / CHAPTERS[chapter]


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The defaults of the notebook's ``parameters`` cell, as Python values."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            values: dict[str, Any] = {}
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    values[node.targets[0].id] = ast.literal_eval(node.value)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    values[node.target.id] = ast.literal_eval(node.value)
            return values
    raise RunnerError(f"{path} has no cell tagged 'parameters'")


def chapter_parameters(chapter: str, namespace: Mapping[str, Any], book: Path = BOOK
                       ) -> dict[str, Any]:
    """The chapter's parameters as they stand in ``namespace`` (a notebook's ``globals()``).

    Called right after the parameters cell, so papermill's injected values are included; each is
    checked against the type of its default.
    """
    defaults = notebook_parameters(chapter_path(chapter, book))
    params = {name: namespace[name] for name in defaults}
    for name, value in params.items():
        if not _compatible(defaults[name], value):
            raise RunnerError(f"parameter {name!r} must be of type {type(defaults[name]).__name__}"
                              f" (default {defaults[name]!r}), got {value!r}")
    return params


def parse_value(text: str) -> Any:
    """A command-line value: a Python literal if it parses as one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _compatible(default: Any, value: Any) -> bool:
    if default is None or value is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, (list, tuple)):
        return isinstance(value, (list, tuple))
    return isinstance(value, type(default))


def resolve_parameters(chapter: str, profile: str, overrides: Mapping[str, Any] | None = None,
                       book: Path = BOOK) -> dict[str, Any]:
    """Profile settings plus ``overrides``, checked against the notebook's parameters cell."""
    if profile not in PROFILES:
        raise RunnerError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    defaults = notebook_parameters(chapter_path(chapter, book))
    params = {"profile": profile, **PROFILES[profile].get(chapter, {}), **(overrides or {})}
    for name, value in params.items():
        if name not in defaults:
            raise RunnerError(f"chapter {chapter!r} has no parameter {name!r}; valid parameters: "
                              f"{', '.join(sorted(defaults))}")
        if not _compatible(defaults[name], value):
            raise RunnerError(f"parameter {name!r} of chapter {chapter!r} must be of type "
                              f"{type(defaults[name]).__name__} (default {defaults[name]!r}), "
                              f"got {value!r} of type {type(value).__name__}")
    return params


def execute_chapter(chapter: str, profile: str = "cpu", overrides: Mapping[str, Any] | None = None,
                    *, book: Path = BOOK, output: Path | None = None) -> float:
    """Run one chapter in place (or into ``output``) with papermill; returns the wall time."""
    import papermill

    params = resolve_parameters(chapter, profile, overrides, book)
    path = chapter_path(chapter, book)
    out = output or path
    start = time.perf_counter()
    papermill.execute_notebook(str(path), str(out), parameters=params, cwd=str(path.parent),
                               kernel_name="python3", progress_bar=False)
    _hide_injected_cell(out)
    return time.perf_counter() - start


def _hide_injected_cell(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)


def build_book(book: Path = BOOK, strict: bool = True) -> None:
    """``jupyter-book build book/`` (``-W``: warnings are errors)."""
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(book)]
    cmd += ["-W"] if strict else []
    subprocess.run(cmd, check=True)


def run(profile: str = "cpu", chapters: Sequence[str] | None = None,
        overrides: Mapping[str, Any] | None = None, *, build: bool = True,
        book: Path = BOOK) -> dict[str, float]:
    """Execute ``chapters`` (default: all, in book order) at ``profile``; then build the book.

    Every chapter's parameters are checked before the first one runs. Overrides apply to each
    chapter that has the parameter; one that no selected chapter has is an error.
    """
    chapters = list(chapters or CHAPTERS)
    overrides = dict(overrides or {})
    for chapter in chapters:
        chapter_path(chapter, book)
    for name in overrides:
        if not any(name in notebook_parameters(chapter_path(c, book)) for c in chapters):
            raise RunnerError(f"no selected chapter has a parameter {name!r}")
    plan = {c: {k: v for k, v in overrides.items()
                if k in notebook_parameters(chapter_path(c, book))} for c in chapters}
    for chapter, own in plan.items():
        resolve_parameters(chapter, profile, own, book)
    times = {}
    for chapter, own in plan.items():
        print(f"[raptor] executing {chapter} at profile {profile} ...", flush=True)
        times[chapter] = execute_chapter(chapter, profile, own, book=book)
        print(f"[raptor] {chapter}: {times[chapter]:.0f} s", flush=True)
    if build:
        build_book(book)
    return times
