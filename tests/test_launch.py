"""A chapter launched from the book (Colab, Binder): its install cell and the ``smoke`` profile."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import papermill
import pytest
import yaml

import raptor.data
from raptor.book.chapters import MODULES, chapter, notebook_spec
from raptor.book.runner import notebook_parameters, resolve
from raptor.book.spec import parameters

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
URL = yaml.safe_load((BOOK / "_config.yml").read_text())["repository"]["url"]
CHAPTERS = [name for name in MODULES if name != "claims"]


def cells(name: str) -> list[dict]:
    return json.loads((BOOK / chapter(name).NOTEBOOK).read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def install_cell(name: str) -> tuple[int, dict]:
    return next((i, c) for i, c in enumerate(cells(name)) if f"git+{URL}" in source(c))


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_install_cell_follows_the_parameters_and_is_folded(name: str) -> None:
    assert URL.startswith("https://") and "<" not in URL
    i, cell = install_cell(name)
    tags = [c["metadata"].get("tags", []) for c in cells(name)]
    assert "hide-cell" in cell["metadata"].get("tags", [])
    # after the parameters (and papermill's injected ones), so that its profile is the one used
    assert max(j for j, t in enumerate(tags) if {"parameters", "injected-parameters"} & set(t)) < i
    assert all("from raptor" not in source(c) for c in cells(name)[:i])


def _run_install_cell(name: str, monkeypatch: pytest.MonkeyPatch, *, fresh: bool
                      ) -> tuple[dict, list]:
    """The parameters, injected and install cells of the committed notebook, executed in order."""
    calls: list = []
    namespace: dict = {}
    real_find_spec = importlib.util.find_spec
    if fresh:
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda mod, *a: None if mod == "raptor" else real_find_spec(mod, *a))
    monkeypatch.setattr(subprocess, "run", lambda cmd, check: calls.append(cmd))
    monkeypatch.setattr(raptor.data, "get_datasets", lambda *a, **k: calls.append(("data", a, k)))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("RAPTOR_DATA", "/nonexistent")
    i, _ = install_cell(name)
    for cell in cells(name)[:i + 1]:
        if cell["cell_type"] == "code":
            exec(source(cell), namespace)
    return namespace, calls


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_launched_chapter_installs_itself_and_runs_at_smoke(
        name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(BOOK / "chapters")  # Binder: the checkout the notebook sits in
    namespace, calls = _run_install_cell(name, monkeypatch, fresh=True)
    assert calls[0] == [sys.executable, "-m", "pip", "install", "-q", "-e", str(ROOT)]
    assert calls[1] == ("data", ("fashion-mnist",), {"download": True})
    assert namespace["profile"] == "smoke"
    assert notebook_spec(chapter(name), namespace) == chapter(name).SMOKE

    monkeypatch.chdir(tmp_path)  # Colab: no checkout, the package comes from the repository
    _, calls = _run_install_cell(name, monkeypatch, fresh=True)
    assert calls[0] == [sys.executable, "-m", "pip", "install", "-q", f"git+{URL}"]


@pytest.mark.parametrize("name", CHAPTERS)
def test_where_the_companion_is_installed_the_install_cell_changes_nothing(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(BOOK / "chapters")
    namespace, calls = _run_install_cell(name, monkeypatch, fresh=False)
    assert calls == [] and namespace["profile"] == "cpu"
    assert notebook_spec(chapter(name), namespace) == chapter(name).Spec()


@pytest.mark.parametrize("name", CHAPTERS)
@pytest.mark.parametrize("profile", ["smoke", "cpu", "paper"])
def test_a_notebook_spec_is_what_the_runner_resolves(name: str, profile: str) -> None:
    mod = chapter(name)
    values = {**parameters(mod.Spec()), "profile": "cpu"}
    values.update(notebook_parameters(name, profile))  # papermill's injected cell
    assert notebook_spec(mod, values) == resolve(name, profile)
    # a parameter set in the notebook wins over the profile's value
    seed_name = next(n for n in parameters(mod.Spec()) if "seed" in n)
    seed_value = (9,) if isinstance(parameters(mod.Spec())[seed_name], tuple) else 9
    values[seed_name] = seed_value
    assert parameters(notebook_spec(mod, values))[seed_name] == seed_value


@pytest.mark.slow
def test_a_chapter_executed_with_profile_smoke_alone_runs_at_smoke(
        smoke_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a launched notebook does once installed: the committed notebook, only ``profile``
    changed, executed by a kernel (raptor's chapter: every stage of the method, in seconds)."""
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    monkeypatch.setenv("RAPTOR_CLAIMS_DIR", str(tmp_path))
    out = tmp_path / "raptor.ipynb"
    papermill.execute_notebook(str(BOOK / chapter("raptor").NOTEBOOK), str(out),
                               parameters={"profile": "smoke"}, cwd=str(tmp_path),
                               kernel_name="python3", progress_bar=False)
    claims = json.loads((tmp_path / "raptor.json").read_text())
    assert claims and {c["profile"] for c in claims} == {"smoke"}
    glued = [o["data"] for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])
             if o.get("metadata", {}).get("scrapbook", {}).get("name") == "raptor-profile"]
    assert glued == [{"application/papermill.record/text/plain": "'smoke'"}]  # figures' captions
