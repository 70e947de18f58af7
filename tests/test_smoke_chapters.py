"""Every chapter at the ``smoke`` profile: ``compute`` in-process, then its notebook end to end.

Part of the unit tests (``make smoke`` runs it alone); the chapters' models are trained once into a
shared smoke cache (the ``smoke_result`` fixture), which the chapters' own tests reuse. For each
chapter of :data:`raptor.book.chapters.CHAPTERS`, ``compute(SMOKE)`` must return the chapter's
``Result`` with every field of its declared type, render its figures, and its ``claims`` must be
:class:`~raptor.book.claims.Claim` s with valid ids and verdicts, and every claim a test decides
must show the numbers its verdict rests on, all finite. One chapter also runs through the runner
(papermill) into a copy of the book, so the notebook path, with the parameters as papermill writes
them, is covered too; ``make nbval`` executes every notebook.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import types
import typing
from pathlib import Path
from typing import Any

import matplotlib
import nbformat
import pytest

from raptor.book.chapters import chapter, names, science
from raptor.book.claims import BY_CONSTRUCTION, CLAIMS, UNTESTABLE, VERDICTS, Claim
from raptor.book.runner import BOOK, execute_chapter, resolve

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def check_type(value: Any, hint: Any, where: str) -> None:
    """Assert ``value`` is of type ``hint`` (dataclasses, dicts, lists and tuples recursively)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return check_type(value, arg, where)
            except AssertionError as err:
                errors.append(str(err))
        raise AssertionError("; ".join(errors))
    if dataclasses.is_dataclass(hint):
        assert isinstance(value, hint), f"{where}: {type(value).__name__}, not {hint.__name__}"
        hints = typing.get_type_hints(hint)
        for f in dataclasses.fields(hint):
            check_type(getattr(value, f.name), hints[f.name], f"{where}.{f.name}")
    elif origin is dict:
        assert isinstance(value, dict), f"{where}: {type(value).__name__}, not a dict"
        for k, v in value.items():
            check_type(k, args[0], f"{where} key {k!r}")
            check_type(v, args[1], f"{where}[{k!r}]")
    elif origin in (list, tuple):
        assert isinstance(value, origin), f"{where}: {type(value).__name__}, not a {origin}"
        items = args[:1] * len(value) if origin is list or args[-1:] == (...,) else args
        assert len(items) == len(value), f"{where}: {len(value)} items, not {len(items)}"
        for i, (v, h) in enumerate(zip(value, items)):
            check_type(v, h, f"{where}[{i}]")
    elif hint is float:
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (
            f"{where}: {value!r} is not a number")
    elif hint is int:
        assert isinstance(value, int) and not isinstance(value, bool), (
            f"{where}: {value!r} is not an integer")
    else:
        assert isinstance(value, origin or hint), f"{where}: {type(value).__name__}, not {hint}"


NUMBER = re.compile(r"(?<![\w.])[-+−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
NOT_FINITE = re.compile(r"\b(?:nan|inf|infinity)\b", re.IGNORECASE)
STORED = {c["id"]: c["verdict"] for f in (BOOK / "claims").glob("*.json")
          for c in json.loads(f.read_text())}


def check_claims(claims: Any) -> None:
    """Each claim valid, its verdict one of :data:`VERDICTS`, ``by construction`` exactly where
    the stored book's is (arithmetic, at any profile), and, where a test decided it, the numbers
    it rests on shown in ``ours``, every one finite."""
    assert isinstance(claims, list), f"claims() returned a {type(claims).__name__}"
    for c in claims:
        assert isinstance(c, Claim), f"{c!r} is not a Claim"
        assert c.id in CLAIMS and c.claim == CLAIMS[c.id]
        assert c.verdict in VERDICTS
        assert c.paper.strip() and c.ours.strip(), c
        assert (c.verdict == BY_CONSTRUCTION) == (STORED.get(c.id) == BY_CONSTRUCTION), c
        if c.verdict not in (UNTESTABLE, BY_CONSTRUCTION):
            assert NUMBER.search(c.ours), f"{c.id}: no number behind {c.verdict!r}: {c.ours!r}"
            assert not NOT_FINITE.search(c.ours), f"{c.id}: a number is not finite: {c.ours!r}"


def test_the_claims_check_refuses_what_it_must() -> None:
    good = Claim("C5", CLAIMS["C5"], "paper", "ρ=0.97, 95% CI [0.87, 0.99]", VERDICTS[0])
    check_claims([good])
    for bad in (dataclasses.replace(good, verdict="probably"),
                dataclasses.replace(good, ours="the similarity rose"),
                dataclasses.replace(good, ours="ρ=nan, 95% CI [nan, nan]"),
                dataclasses.replace(good, ours="ρ=inf"),
                dataclasses.replace(good, verdict=BY_CONSTRUCTION),
                dataclasses.replace(good, id="C99")):
        with pytest.raises(AssertionError):
            check_claims([bad])
    check_claims([dataclasses.replace(good, ours="not at this profile", verdict=UNTESTABLE)])


@pytest.mark.parametrize("name", names())
def test_compute_at_smoke(name: str, smoke_result) -> None:
    mod = science(name)
    result = smoke_result(name)
    check_type(result, mod.compute.Result, "result")
    if "spec" in {f.name for f in dataclasses.fields(result)}:
        assert result.spec == mod.SMOKE
    check_claims(mod.claims.claims(result))
    for figure in mod.figures.FIGURES:
        fig = figure(result)
        assert isinstance(fig, plt.Figure), figure.name
        plt.close(fig)


# One chapter through papermill: the runner's path is the same for every chapter, and nbval
# executes every notebook (`make nbval`).
@pytest.mark.slow
@pytest.mark.parametrize("name", ["dynamics"])
def test_a_chapter_end_to_end_through_the_runner(name: str, smoke_result, smoke_cache: Path,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook view of a chapter, executed by papermill at ``smoke`` on a copy of the
    book, from the smoke cache (the models ``compute`` trained): no error output, the parameters
    injected, the claims stored and checked, the book copy untouched."""
    smoke_result(name)
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    book = tmp_path / "book"
    shutil.copytree(BOOK, book, ignore=shutil.ignore_patterns("_build", "figures"))
    before = {p: p.read_bytes() for p in book.rglob("*") if p.is_file()}
    assert execute_chapter(name, resolve(name, "smoke"), "smoke", book=book) > 0
    assert {p: p.read_bytes() for p in book.rglob("*") if p.is_file()} == before
    nb = nbformat.read(tmp_path / "runs" / "smoke" / chapter(name).NOTEBOOK, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "remove-cell" in injected[0].metadata["tags"]
    assert 'profile = "smoke"' in injected[0].source
    stored = tmp_path / "runs" / "smoke" / "claims" / f"{name}.json"
    if name != "claims":  # the claims page gathers the others' files and stores none
        claims = json.loads(stored.read_text())
        assert {c["profile"] for c in claims} <= {"smoke"}
        assert {c["chapter"] for c in claims} == {name}
        check_claims([Claim(**c) for c in claims])
