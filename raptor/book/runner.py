"""Execute the book's chapters with papermill at a profile, then build the book.

A *profile* fixes a chapter's spec for a compute budget: ``smoke`` (seconds, for tests), ``cpu``
(the default: the committed book, a 2-core machine), ``paper`` (a GPU and the paper's datasets).
Each selected chapter's spec is resolved once — the profile's, with the ``-p`` values over it —
and checked before anything runs; papermill injects every one of its parameters, with the
profile's name and the claims folder, and the notebook hands that spec to ``compute`` whole.
A chapter executes into a temporary notebook that replaces the committed one (and its claims
JSON) only on success; a failed run leaves ``<chapter>.failed.ipynb`` beside it. Runs at a
profile other than ``cpu`` go to ``runs/<profile>/`` unless ``update_book`` is set; ``out`` sends
any run to a folder of its own (e.g. to compare it with the book, :mod:`raptor.book.compare`).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nbformat

from raptor.book.chapters import ChapterError, chapter, names, spec_for
from raptor.book.inputs import missing_inputs, unwritable
from raptor.book.spec import SpecError, fields_of, from_parameters, notebook_values
from raptor.storage.build_log import builds_reported
from raptor.storage.manifest import ArtifactError, artifacts_root, missing_files, retrain_missing

BOOK = Path(__file__).resolve().parents[2] / "book"
BOOK_PROFILE = "cpu"


class RunnerError(ValueError):
    """A bad profile, chapter or parameter, or a failed chapter."""


def parse_value(text: str) -> Any:
    """A command-line value: a Python literal if it parses as one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def resolve(name: str, profile: str, overrides: Mapping[str, Any] | None = None):
    """The chapter's spec at ``profile`` with ``overrides`` (its parameter names), checked."""
    try:
        mod = chapter(name)
        return from_parameters(mod.Spec, overrides or {}, base=spec_for(name, profile))
    except (ChapterError, SpecError) as err:
        raise RunnerError(f"chapter {name!r}: {err}") from None


def notebook_parameters(spec: Any, profile: str) -> dict[str, Any]:
    """What papermill injects: the profile's name and every parameter of ``spec``."""
    return {"profile": profile, **notebook_values(spec)}


def output_path(name: str, profile: str, book: Path = BOOK, update_book: bool = False,
                out: Path | None = None) -> Path:
    """Where a run's notebook goes: ``out`` if given, the book at its own profile, else
    ``runs/<profile>/``."""
    rel = Path(chapter(name).NOTEBOOK)
    if out is not None:
        return Path(out).resolve() / rel
    if profile == BOOK_PROFILE or update_book:
        return book / rel
    return book.parent / "runs" / profile / rel


def claims_folder(name: str, notebook: Path) -> Path:
    """The claims folder of chapter ``name``'s notebook at ``notebook``: ``claims/`` at the root
    of the tree the notebook is in."""
    return notebook.parents[len(Path(chapter(name).NOTEBOOK).parts) - 1] / "claims"


def model_refusals(specs: Mapping[str, Any]) -> list[str]:
    """The checks of these chapters (name -> resolved spec) that import torch and timm (seconds):
    each pretrained ViT a spec names against its weights file (a spec's ``require_model``)."""
    problems = []
    for name, spec in specs.items():
        try:
            getattr(spec, "require_model", lambda: None)()
        except SpecError as err:
            problems.append(f"chapter {name!r}: {err}")
    return problems


def refusals(specs: Mapping[str, Any], profile: str, *, book: Path = BOOK,
             update_book: bool = False, out: Path | None = None) -> list[str]:
    """Everything that would stop the run of these chapters (name -> resolved spec) after work
    had begun: inputs not there (:func:`~raptor.book.inputs.missing_inputs`), folders it cannot
    write, an artifact tier whose manifest cannot be read or lists a file the disk lacks (unless
    ``--retrain-missing``); only when none of these, which need no
    torch, is found, a pretrained model that does not fit its weights (:func:`model_refusals`)."""
    problems = []
    root = artifacts_root()
    try:
        if root is not None and not retrain_missing():
            problems += missing_files(root)
    except ArtifactError as err:
        problems.append(str(err))
    for name, spec in specs.items():
        problems += [f"chapter {name!r}: {p}" for p in missing_inputs(spec)]
        notebook = output_path(name, profile, book, update_book, out)
        for folder in dict.fromkeys((notebook.parent, claims_folder(name, notebook))):
            why = unwritable(folder)
            if why:
                problems.append(f"chapter {name!r}: cannot write {folder}: {why}")
    return problems or model_refusals(specs)


def execute_chapter(name: str, spec: Any, profile: str = BOOK_PROFILE, *, book: Path = BOOK,
                    update_book: bool = False, out: Path | None = None) -> float:
    """Run chapter ``name`` with its resolved ``spec`` (:func:`resolve`) through papermill;
    returns the wall time.

    The notebook and its claims JSON are replaced only when every cell succeeded.
    """
    import papermill

    source = book / chapter(name).NOTEBOOK
    out = output_path(name, profile, book, update_book, out)
    claims_dir = claims_folder(name, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    running = out.with_name(f".{out.stem}.running.ipynb")
    failed = out.with_name(f"{out.stem}.failed.ipynb")
    # beside the claims folder, so that moving the files in is atomic (same file system)
    staged = Path(tempfile.mkdtemp(prefix=".claims-staged-", dir=claims_dir.parent))
    # a chapter writes its claims into ``staged``; the claims page reads the profile's claims
    params = {**notebook_parameters(spec, profile),
              "claims_dir": str(claims_dir if name == "claims" else staged)}
    start = time.perf_counter()
    try:
        # cwd: the output's folder, so a run outside the book writes its figures there too.
        papermill.execute_notebook(str(source), str(running), parameters=params,
                                   cwd=str(out.parent), kernel_name="python3",
                                   progress_bar=False)
    except BaseException as err:
        if running.exists():
            os.replace(running, failed)
        shutil.rmtree(staged, ignore_errors=True)
        if isinstance(err, Exception):
            raise RunnerError(f"chapter {name!r} failed at profile {profile!r}: {err}\n"
                              f"the book is untouched; the failed notebook is {failed}") from err
        raise
    _settle_injected_cell(running, os.path.relpath(claims_dir, out.parent))
    claims_dir.mkdir(parents=True, exist_ok=True)
    for staged_json in staged.glob("*.json"):
        os.replace(staged_json, claims_dir / staged_json.name)
    shutil.rmtree(staged, ignore_errors=True)
    os.replace(running, out)
    failed.unlink(missing_ok=True)  # a stale one would break the book's build (-W)
    return time.perf_counter() - start


def _settle_injected_cell(path: Path, claims_dir: str) -> None:
    """Hide papermill's injected cell, and point its ``claims_dir`` at where the claims now are
    (relative to the notebook), not at the staging folder: the stored notebook, executed again
    (nbval), writes its claims there, not to a path of the machine that ran it."""
    nb = nbformat.read(path, as_version=4)
    line = f"claims_dir = {claims_dir!r}"
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags:
            if "remove-cell" not in tags:
                tags.append("remove-cell")
            cell.source = "\n".join(line if row.startswith("claims_dir = ") else row
                                     for row in cell.source.split("\n"))
    nb.metadata.get("papermill", {}).get("parameters", {}).update(claims_dir=claims_dir)
    nbformat.write(nb, path)


def build_book(book: Path = BOOK, strict: bool = True) -> None:
    """``jupyter-book build book/`` (``-W``: warnings are errors)."""
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(book)]
    cmd += ["-W"] if strict else []
    subprocess.run(cmd, check=True)


def run(profile: str = BOOK_PROFILE, chapters: Sequence[str] | None = None,
        overrides: Mapping[str, Any] | None = None, *, build: bool = True, book: Path = BOOK,
        update_book: bool = False, out: Path | None = None) -> dict[str, float]:
    """Execute ``chapters`` (default: all, in book order) at ``profile``; then build the book.

    Every chapter's parameters, inputs and output folders are checked before the first one runs
    (:func:`refusals`). Each model a chapter trains is reported after it, with why
    (:func:`~raptor.storage.cache.builds_reported`). Overrides apply to each chapter that has the
    parameter; one that no selected chapter has is an error.
    """
    chapters = list(chapters or names())
    overrides = dict(overrides or {})
    try:
        known = {c: fields_of(chapter(c).Spec) for c in chapters}
    except ChapterError as err:
        raise RunnerError(str(err)) from None
    for name in overrides:
        if not any(name in k for k in known.values()):
            valid = sorted(set().union(*known.values()))
            raise RunnerError(f"no selected chapter has a parameter {name!r}; " + (
                f"valid parameters: {', '.join(valid)}" if valid else
                f"the selected chapters ({', '.join(chapters)}) take no parameters"))
    specs = {c: resolve(c, profile, {k: v for k, v in overrides.items() if k in known[c]})
             for c in chapters}
    problems = refusals(specs, profile, book=book, update_book=update_book, out=out)
    if problems:
        raise RunnerError("\n".join(["nothing was run:", *problems]))
    times = {}
    with builds_reported() as built:
        for c, spec in specs.items():
            print(f"[raptor] executing {c} at profile {profile} ...", flush=True)
            try:
                times[c] = execute_chapter(c, spec, profile, book=book, update_book=update_book,
                                           out=out)
                print(f"[raptor] {c}: {times[c]:.0f} s", flush=True)
            finally:
                for line in built():
                    print(f"[raptor] {c} trained {line}", flush=True)
    if build and out is None and (profile == BOOK_PROFILE or update_book):
        build_book(book)
    return times
