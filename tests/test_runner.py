"""Tests for raptor.runner and the command line, on a one-notebook book written here."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

import raptor.__main__ as cli
from raptor import runner
from raptor.runner import (RunnerError, chapter_parameters, execute_chapter, notebook_parameters,
                           parse_value, resolve_parameters, run)

PARAMETERS = ('profile = "cpu"\nn = 3\nx = 0.5\nname = "a"\nflag = True\nitems = [1]\n'
              'opt = None\nk: int = 2')
BODY = ('import json\n'
        'json.dump(dict(profile=profile, n=n, x=x, name=name, flag=flag, items=items, opt=opt, '
        'k=k), open("seen.json", "w"))')


def write_notebook(path: Path, parameters: str | None = PARAMETERS) -> None:
    cells = [new_code_cell("# setup")]
    if parameters is not None:
        cells.append(new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    cells.append(new_code_cell(BODY))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture
def book(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A book with chapters 'toy' and 'other' (same notebook) and profiles smoke / cpu."""
    root = tmp_path / "book"
    write_notebook(root / "chapters" / "toy.ipynb")
    write_notebook(root / "other.ipynb")
    write_notebook(root / "bare.ipynb", parameters=None)
    monkeypatch.setattr(runner, "CHAPTERS", {"toy": "chapters/toy.ipynb",
                                             "other": "other.ipynb", "bare": "bare.ipynb"})
    monkeypatch.setattr(runner, "PROFILES", {"smoke": {"toy": {"n": 1, "items": [0]}},
                                             "cpu": {}})
    monkeypatch.setenv("TQDM_DISABLE", "1")  # execute_chapter sets it; restored after the test
    return root


def test_notebook_parameters(book: Path) -> None:
    assert notebook_parameters(book / "chapters" / "toy.ipynb") == {
        "profile": "cpu", "n": 3, "x": 0.5, "name": "a", "flag": True, "items": [1],
        "opt": None, "k": 2}
    with pytest.raises(RunnerError, match="no cell tagged 'parameters'"):
        notebook_parameters(book / "bare.ipynb")


def test_resolve_parameters_profile_and_overrides(book: Path) -> None:
    assert resolve_parameters("toy", "smoke", book=book) == {"profile": "smoke", "n": 1,
                                                             "items": [0]}
    assert resolve_parameters("toy", "smoke", {"n": 9, "x": 2, "items": (1, 2), "opt": "s"},
                              book=book) == {"profile": "smoke", "n": 9, "items": (1, 2),
                                             "x": 2, "opt": "s"}
    assert resolve_parameters("other", "smoke", book=book) == {"profile": "smoke"}


def test_unknown_profile(book: Path) -> None:
    with pytest.raises(RunnerError, match="unknown profile 'nope'; valid profiles: smoke, cpu"):
        resolve_parameters("toy", "nope", book=book)


def test_unknown_chapter(book: Path) -> None:
    with pytest.raises(RunnerError, match="unknown chapter 'ghost'; valid chapters: toy, other"):
        resolve_parameters("ghost", "cpu", book=book)


def test_unknown_parameter(book: Path) -> None:
    with pytest.raises(RunnerError, match="chapter 'toy' has no parameter 'zzz'; valid "
                                          "parameters: flag, items, k, n, name, opt, profile, x"):
        resolve_parameters("toy", "cpu", {"zzz": 1}, book=book)


@pytest.mark.parametrize("name, value, type_name", [
    ("n", "3", "int"), ("n", 2.5, "int"), ("n", True, "int"), ("x", "0.5", "float"),
    ("flag", 1, "bool"), ("name", 3, "str"), ("items", "1", "list"), ("x", False, "float")])
def test_wrong_type(book: Path, name: str, value: object, type_name: str) -> None:
    with pytest.raises(RunnerError, match=f"parameter '{name}' of chapter 'toy' must be of type "
                                          f"{type_name}"):
        resolve_parameters("toy", "cpu", {name: value}, book=book)


def test_chapter_parameters_reads_the_namespace(book: Path) -> None:
    namespace = {"profile": "smoke", "n": 5, "x": 1, "name": "b", "flag": False, "items": [],
                 "opt": 3.0, "k": 4, "unrelated": object()}
    got = chapter_parameters("toy", namespace, book=book)
    assert got == {k: v for k, v in namespace.items() if k != "unrelated"}
    with pytest.raises(RunnerError, match="parameter 'flag' must be of type bool"):
        chapter_parameters("toy", {**namespace, "flag": "yes"}, book=book)


@pytest.mark.parametrize("text, value", [
    ("3", 3), ("0.5", 0.5), ("1e-3", 1e-3), ("[1, 2]", [1, 2]), ("None", None), ("True", True),
    ("'x'", "x"), ("abc", "abc"), ("a b", "a b"), ("fashion-mnist", "fashion-mnist"),
    ("(1,)", (1,)), ("", "")])
def test_parse_value(text: str, value: object) -> None:
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_run_checks_every_chapter_before_running_any(book: Path) -> None:
    before = (book / "chapters" / "toy.ipynb").read_bytes()
    with pytest.raises(RunnerError, match="no selected chapter has a parameter 'zzz'"):
        run("cpu", ["toy", "other"], {"zzz": 1}, build=False, book=book)
    with pytest.raises(RunnerError, match="parameter 'n' of chapter 'toy'"):
        run("cpu", ["toy", "other"], {"n": "many"}, build=False, book=book)
    with pytest.raises(RunnerError, match="unknown chapter 'ghost'"):
        run("cpu", ["toy", "ghost"], build=False, book=book)
    assert (book / "chapters" / "toy.ipynb").read_bytes() == before
    assert not (book / "chapters" / "seen.json").exists()


def test_execute_chapter_runs_papermill_and_hides_injected_cell(book: Path) -> None:
    source = book / "chapters" / "toy.ipynb"
    before = source.read_bytes()
    out = book / "executed.ipynb"
    seconds = execute_chapter("toy", "smoke", {"x": 2, "name": "z"}, book=book, output=out)
    assert seconds > 0
    assert source.read_bytes() == before  # output= leaves the chapter alone
    seen = json.loads((book / "chapters" / "seen.json").read_text())  # cwd: the chapter's folder
    assert seen == {"profile": "smoke", "n": 1, "x": 2, "name": "z", "flag": True,
                    "items": [0], "opt": None, "k": 2}
    nb = nbformat.read(out, as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "remove-cell" in injected[0].metadata["tags"]
    assert 'name = "z"' in injected[0].source
    params_index = next(i for i, c in enumerate(nb.cells)
                        if "parameters" in c.metadata.get("tags", []))
    assert nb.cells[params_index + 1] is injected[0]
    tagged = [c for c in nb.cells if "remove-cell" in c.metadata.get("tags", [])]
    assert tagged == injected


def test_cli_unknown_profile_exits_2(book: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["run", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown profile 'nope'" in err and "valid profiles: smoke, cpu" in err


def test_cli_with_real_profiles(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["run", "--profile", "nope", "--no-build"]) == 2
    assert "valid profiles: smoke, cpu, paper" in capsys.readouterr().err
    assert cli.main(["run", "--chapter", "ghost", "--no-build"]) == 2
    assert "unknown chapter 'ghost'" in capsys.readouterr().err


def test_cli_parses_overrides_and_runs_in_place(book: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(cli, "run", partial(run, book=book))
    assert cli.main(["run", "--profile", "smoke", "--chapter", "toy", "-p", "n", "abc",
                     "--no-build"]) == 2
    assert "parameter 'n' of chapter 'toy' must be of type int" in capsys.readouterr().err
    assert cli.main(["run", "--profile", "cpu", "--chapter", "other", "-p", "n", "7",
                     "-p", "items", "[4, 5]", "-p", "name", "hello", "--no-build"]) == 0
    seen = json.loads((book / "seen.json").read_text())
    assert seen["n"] == 7 and seen["items"] == [4, 5] and seen["name"] == "hello"
    assert seen["profile"] == "cpu"
    nb = nbformat.read(book / "other.ipynb", as_version=4)  # executed in place
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
