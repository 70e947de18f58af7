"""A chapter launched from the book (Colab, Binder): its install cell and the ``smoke`` profile."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from papermill.translators import translate_parameters

from raptor.book import launch
from raptor.book.chapters import PROFILES, chapter, names, notebook_spec
from raptor.book.runner import RunnerError, notebook_parameters, resolve, run
from raptor.book.spec import parameters
import raptor.data

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
URL = yaml.safe_load((BOOK / "_config.yml").read_text())["repository"]["url"]
CHAPTERS = [name for name in names() if name != "claims"]


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


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_install_cell_is_the_one_written_in_launch(name: str, tmp_path: Path) -> None:
    """Each notebook's copy is :func:`raptor.book.launch.cell`; ``write`` (run by ``python -m
    raptor build``) leaves a current copy alone and rewrites a stale one, and nothing else."""
    assert URL == launch.REPOSITORY
    assert source(install_cell(name)[1]) == launch.cell(name)
    notebook = tmp_path / "chapter.ipynb"
    stored = (BOOK / chapter(name).NOTEBOOK).read_text()
    notebook.write_text(stored)
    assert not launch.write(notebook, name) and notebook.read_text() == stored
    notebook.write_text(stored.replace("sys.path.insert(0, str(checkout))", "pass"))
    assert launch.write(notebook, name) and notebook.read_text() == stored


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


def injected_cell(params: dict) -> str:
    """The cell papermill injects for ``params`` (its own translator: nested lists included)."""
    return translate_parameters("python3", "python", params, "Parameters")


def notebook_namespace(name: str, params: dict) -> dict:
    """A notebook's globals after its parameters cell and papermill's injected one."""
    namespace: dict = {}
    (cell,) = [c for c in cells(name) if "parameters" in c["metadata"].get("tags", [])]
    exec(source(cell), namespace)
    exec(injected_cell(params), namespace)
    return namespace


@pytest.mark.parametrize("name", CHAPTERS)
@pytest.mark.parametrize("profile", PROFILES)
def test_every_parameter_set_to_its_cpu_value_runs_with_that_value(name: str, profile: str
                                                                   ) -> None:
    """``-p NAME VALUE`` with VALUE = the ``cpu`` default, at every profile: the notebook's spec
    is the runner's, so nothing falls back to the profile's value (the bug of issue 24)."""
    mod = chapter(name)
    assert notebook_spec(mod, notebook_namespace(name, notebook_parameters(
        resolve(name, profile), profile))) == resolve(name, profile)
    for param, value in parameters(mod.Spec()).items():
        try:
            spec = resolve(name, profile, {param: value})
        except RunnerError:
            continue  # not valid with the profile's other values (e.g. k beyond a smaller L)
        got = notebook_spec(mod, notebook_namespace(name, notebook_parameters(spec, profile)))
        assert got == spec and parameters(got)[param] == value, param


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_profile_set_alone_in_a_notebook_runs_that_profile(name: str) -> None:
    """The notebook copies no default: its profile's name alone gives the profile's spec."""
    assert notebook_spec(chapter(name), notebook_namespace(name, {"profile": "smoke"})) == \
        chapter(name).SMOKE
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        notebook_spec(chapter(name), {"profile": "nope"})


@pytest.mark.slow
def test_a_chapter_run_with_a_cpu_value_at_smoke_runs_with_it(
        smoke_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run --profile smoke -p n_images 1000`` (the ``cpu`` default) executed by a kernel: the
    raptor chapter's run card and claims show 1,000 images and the ``smoke`` profile."""
    monkeypatch.setenv("RAPTOR_CACHE", str(smoke_cache))
    run("smoke", ["distillation"], {"n_images": 1000}, build=False, out=tmp_path)
    claims = json.loads((tmp_path / "claims" / "distillation.json").read_text())
    assert claims and {c["profile"] for c in claims} == {"smoke"}
    nb = json.loads((tmp_path / chapter("distillation").NOTEBOOK).read_text())
    shown = [json.dumps(o) for c in nb["cells"] for o in c.get("outputs", [])]
    assert any("run card" in o and "n_images=1000" in o for o in shown)
    glued = [o["data"] for c in nb["cells"] for o in c.get("outputs", [])
             if o.get("metadata", {}).get("scrapbook", {}).get("name") == "distillation-profile"]
    assert glued == [{"application/papermill.record/text/plain": "'smoke with n_images changed'"}]
