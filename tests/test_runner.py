"""Tests for raptor.book.runner and the command line, on a one-chapter book written here.

The chapter ``toy`` is a module planted in the registry (``raptor.book.chapters``) and a notebook
in a temporary book. Its kernel imports only the claims module, so each execution takes seconds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import nbformat
import papermill
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook
from safetensors.torch import save_file

from raptor.book import chapters, runner
from raptor.book.runner import (BOOK, RunnerError, notebook_parameters, output_path, parse_value,
                                resolve, run)
from raptor.book.spec import require
from raptor.storage.manifest import PACKED, read_manifest
from tests.test_spec import parameters_cell
import raptor.__main__ as cli


@dataclass(frozen=True)
class Spec:
    n: int = 3
    x: float = 0.5
    items: tuple[int, ...] = (1,)
    fail: bool = False

    def __post_init__(self) -> None:
        require(self.n >= 1, "n", "≥ 1", self.n)


TOY = types.ModuleType("raptor.book.chapters.toy")
TOY.__dict__.update(NAME="toy", NOTEBOOK="chapters/toy.ipynb", Spec=Spec,
                    SMOKE=dataclasses.replace(Spec(), n=1), PAPER=dataclasses.replace(Spec(), n=5))

CELLS = [
    "from pathlib import Path\nfrom raptor.book.claims import claim, report",
    "total = n * x + sum(items)\nPath('figures').mkdir(exist_ok=True)\n"
    "Path('figures/toy.txt').write_text(f'{total}')",
    "report([claim('C5', paper='up', ours=f'{total:.2f}', holds=total > 0)], chapter='toy', "
    "profile=profile, claims_dir=claims_dir)",
    "if fail:\n    raise RuntimeError('planted failure, after the claims were reported')",
]
OLD_CLAIMS = '[{"id": "C5", "ours": "committed"}]\n'


@pytest.fixture
def book(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A book holding the committed notebook and claims of chapter ``toy``, registered."""
    root = tmp_path / "book"
    nb = new_notebook(cells=[new_code_cell(parameters_cell(Spec()),
                                           metadata={"tags": ["parameters"]}),
                             *map(new_code_cell, CELLS)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    (root / "chapters").mkdir(parents=True)
    nbformat.write(nb, root / "chapters" / "toy.ipynb")
    (root / "claims").mkdir()
    (root / "claims" / "toy.json").write_text(OLD_CLAIMS)
    monkeypatch.setattr(chapters, "CHAPTERS", (*chapters.CHAPTERS, TOY))
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def cells_of(path: Path) -> list:
    return nbformat.read(path, as_version=4).cells


def injected(path: Path) -> nbformat.NotebookNode:
    (cell,) = [c for c in cells_of(path) if "injected-parameters" in c.metadata.get("tags", [])]
    return cell


@pytest.mark.parametrize("text, value", [
    ("3", 3), ("0.5", 0.5), ("1e-3", 1e-3), ("[1, 2]", [1, 2]), ("None", None), ("True", True),
    ("'x'", "x"), ("abc", "abc"), ("a b", "a b"), ("fashion-mnist", "fashion-mnist"),
    ("(1,)", (1,)), ("", "")])
def test_parse_value(text: str, value: object) -> None:
    got = parse_value(text)
    assert got == value and type(got) is type(value)


def test_profiles_overrides_and_what_papermill_injects(book: Path) -> None:
    assert resolve("toy", "cpu") == Spec() and resolve("toy", "smoke") == TOY.SMOKE
    assert resolve("toy", "paper", {"x": 2, "items": [4, 5]}) == Spec(n=5, x=2.0, items=(4, 5))
    assert notebook_parameters(Spec(), "cpu") == {"profile": "cpu", "n": 3, "x": 0.5,
                                                  "items": [1], "fail": False}
    spec = resolve("toy", "smoke", {"items": (4, 5), "x": 0.5})  # x at its cpu value, kept
    assert notebook_parameters(spec, "smoke") == {"profile": "smoke", "n": 1, "x": 0.5,
                                                  "items": [4, 5], "fail": False}


@pytest.mark.parametrize("args, message", [
    (("toy", "nope"), "chapter 'toy': unknown profile 'nope'; valid profiles: smoke, cpu, paper"),
    (("ghost", "cpu"), "chapter 'ghost': unknown chapter 'ghost'; valid chapters: "
                       "phase-structure, "),
    (("toy", "cpu", {"zzz": 1}), "chapter 'toy': unknown parameter(s) 'zzz'; valid parameters: "
                                 "n, x, items, fail"),
    (("toy", "cpu", {"n": "many"}), "chapter 'toy': parameter 'n' must be an integer, got 'many'"),
    (("toy", "cpu", {"x": "0.5"}), "chapter 'toy': parameter 'x' must be a number, got '0.5'"),
    (("toy", "cpu", {"items": [1.5]}), "parameter 'items' must be an integer, got 1.5"),
    (("toy", "smoke", {"n": 0}), "chapter 'toy': parameter 'n' must be ≥ 1, got 0")])
def test_bad_input_is_a_runner_error(book: Path, args: tuple, message: str) -> None:
    with pytest.raises(RunnerError) as info:
        resolve(*args)
    assert message in str(info.value)


@pytest.mark.timed
def test_a_bad_parameter_fails_fast_before_any_kernel_starts(book: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    def no_kernel(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    before = files(book.parent)
    start = time.perf_counter()
    with pytest.raises(RunnerError, match="parameter 'n' must be an integer"):
        run("cpu", ["toy"], {"n": "many"}, build=False, book=book)
    with pytest.raises(RunnerError, match="parameter 'n' must be ≥ 1"):
        run("smoke", ["toy"], {"n": -1}, build=False, book=book)
    # every selected chapter is checked before the first one runs
    with pytest.raises(RunnerError, match="chapter 'phase-structure': parameter 'k' must be in"):
        run("cpu", ["toy", "phase-structure"], {"k": 99}, build=False, book=book)
    with pytest.raises(RunnerError, match="no selected chapter has a parameter 'zzz'; valid "
                                          "parameters: fail, items, n, x"):
        run("cpu", ["toy"], {"zzz": 1}, build=False, book=book)
    with pytest.raises(RunnerError, match="unknown chapter 'ghost'"):
        run("cpu", ["toy", "ghost"], build=False, book=book)
    assert time.perf_counter() - start < 1.0
    assert files(book.parent) == before


@pytest.mark.timed
def test_a_tier_file_listed_but_missing_is_refused_before_any_kernel_starts(
        book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_kernel(*args: object, **kwargs: object) -> None:
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    tier = tmp_path / "tier"
    shutil.copytree(Path(__file__).parents[1] / "artifacts", tier)
    used = next(iter(read_manifest(tier)))  # a file the book's chapters read
    (tier / (used + PACKED)).unlink()
    monkeypatch.setenv("RAPTOR_ARTIFACTS", str(tier))
    start = time.perf_counter()
    with pytest.raises(RunnerError) as info:
        run("cpu", ["toy"], build=False, book=book)
    assert time.perf_counter() - start < 1.0
    assert f"{tier / (used + PACKED)} is listed in {tier / 'manifest.json'} but missing: " \
           "restore it (git checkout -- artifacts/)" in str(info.value)
    monkeypatch.setenv("RAPTOR_RETRAIN_MISSING", "1")  # --retrain-missing: no refusal
    assert runner.refusals({}, "cpu", book=book) == []


def test_output_path(book: Path) -> None:
    assert output_path("toy", "cpu", book) == book / "chapters" / "toy.ipynb"
    assert output_path("toy", "smoke", book) == book.parent / "runs/smoke/chapters/toy.ipynb"
    assert output_path("toy", "paper", book, update_book=True) == book / "chapters" / "toy.ipynb"
    assert output_path("claims", "paper", book) == book.parent / "runs/paper/claims.ipynb"
    out = book.parent / "elsewhere"
    assert output_path("toy", "cpu", book, out=out) == out.resolve() / "chapters" / "toy.ipynb"


def test_a_run_with_out_leaves_the_book_alone(book: Path) -> None:
    before = files(book)
    out = book.parent / "runs" / "check"
    run("cpu", ["toy"], {"n": 4}, book=book, out=out)
    assert files(book) == before
    assert (out / "chapters" / "toy.ipynb").is_file()
    [c5] = json.loads((out / "claims" / "toy.json").read_text())
    assert c5["ours"] == "3.00"


def test_a_successful_run_replaces_the_notebook_and_its_claims(book: Path) -> None:
    (book / "chapters" / "toy.failed.ipynb").write_text("{}")  # from an earlier failed run
    assert run("cpu", ["toy"], {"n": 4}, build=False, book=book)["toy"] > 0
    path = book / "chapters" / "toy.ipynb"
    assert all(c.execution_count for c in cells_of(path))
    cell = injected(path)
    assert "remove-cell" in cell.metadata["tags"] and "n = 4" in cell.source
    # the stored notebook names where its claims are, not the staging folder of this machine
    assert "claims_dir = '../claims'" in cell.source and str(book) not in cell.source
    assert nbformat.read(path, as_version=4).metadata.papermill.parameters.claims_dir == "../claims"
    [c5] = json.loads((book / "claims" / "toy.json").read_text())
    assert (c5["ours"], c5["profile"], c5["chapter"], c5["verdict"]) == ("3.00", "cpu", "toy",
                                                                         "holds")
    assert (book / "chapters" / "figures" / "toy.txt").read_text() == "3.0"
    assert sorted(files(book)) == ["chapters/figures/toy.txt", "chapters/toy.ipynb",
                                   "claims/toy.json"]  # no .running or .failed notebook


def test_a_run_reports_each_model_its_kernel_trained_and_why(
        book: Path, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The kernel (another process) trains a cache entry; the run names it after the chapter,
    with why, and a second run, which loads it, names nothing."""
    monkeypatch.setenv("RAPTOR_ARTIFACTS", "")
    path = book / "chapters" / "toy.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(new_code_cell(
        "import torch\nfrom raptor.storage.cache import get_or_build\n"
        "get_or_build('toy', {'n': n}, lambda work: ({'w': torch.ones(1)}, {}))"))
    nbformat.write(nb, path)
    run("cpu", ["toy"], {"n": 4}, build=False, book=book, out=book.parent / "out")
    (entry,) = fresh_cache.glob("toy/*.safetensors")
    assert (f"[raptor] toy trained toy/{entry.name}: neither the cache nor the artifact tier "
            "held it") in capsys.readouterr().out
    run("cpu", ["toy"], {"n": 4}, build=False, book=book, out=book.parent / "out")
    assert "trained" not in capsys.readouterr().out


def test_a_failing_chapter_leaves_the_book_untouched(book: Path) -> None:
    notebook, claims = book / "chapters" / "toy.ipynb", book / "claims" / "toy.json"
    before = notebook.read_bytes(), claims.read_bytes()
    with pytest.raises(RunnerError, match="chapter 'toy' failed at profile 'cpu'") as info:
        run("cpu", ["toy"], {"fail": True}, build=False, book=book)
    failed = book / "chapters" / "toy.failed.ipynb"
    assert f"the book is untouched; the failed notebook is {failed}" in str(info.value)
    assert (notebook.read_bytes(), claims.read_bytes()) == before
    errors = [o for c in cells_of(failed) for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert errors and "planted failure" in errors[0].evalue
    assert not list(book.rglob(".*.running.ipynb"))


def test_a_smoke_run_writes_under_runs_not_into_the_book(book: Path) -> None:
    before = files(book)
    run("smoke", ["toy"], build=False, book=book)
    assert files(book) == before
    runs = book.parent / "runs" / "smoke"
    assert sorted(files(runs)) == ["chapters/figures/toy.txt", "chapters/toy.ipynb",
                                   "claims/toy.json"]
    assert "profile = \"smoke\"" in injected(runs / "chapters" / "toy.ipynb").source
    [c5] = json.loads((runs / "claims" / "toy.json").read_text())
    assert c5["profile"] == "smoke" and c5["ours"] == "1.50"


def test_cli_reports_bad_input_with_exit_code_2(book: Path, capsys: pytest.CaptureFixture
                                                ) -> None:
    assert cli.main(["run", "--chapter", "toy", "-p", "n", "abc", "--no-build"]) == 2
    assert "error: chapter 'toy': parameter 'n' must be an integer, got 'abc'" in (
        capsys.readouterr().err)
    assert cli.main(["run", "--profile", "nope", "--chapter", "toy", "--no-build"]) == 2
    assert "valid profiles: smoke, cpu, paper" in capsys.readouterr().err
    assert cli.main(["run", "--chapter", "ghost", "--no-build"]) == 2
    assert "unknown chapter 'ghost'" in capsys.readouterr().err


def test_cli_passes_its_options_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(cli, "run", lambda *args, **kwargs: calls.append((args, kwargs)))
    assert cli.main(["run", "--profile", "smoke", "--chapter", "toy", "--chapter", "distillation",
                     "-p", "items", "[1, 2]", "-p", "dataset", "cifar100", "--update-book",
                     "--no-build"]) == 0
    assert calls == [(("smoke", ["toy", "distillation"], {"items": [1, 2], "dataset": "cifar100"}),
                      {"build": False, "update_book": True, "out": None})]


def test_a_negative_value_in_scientific_notation_is_a_value(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    calls = []
    monkeypatch.setattr(cli, "run", lambda *args, **kwargs: calls.append(args))
    monkeypatch.setattr(cli._sweep(), "sweep",
                        lambda *args, **kwargs: calls.append(args))
    assert cli.main(["run", "-p", "distill_lr", "-1e-3", "-p", "x", "-2", "-p", "name", "-a",
                     "--no-build"]) == 0
    assert cli.main(["sweep", "--chapter", "distillation", "-p", "p", "-0.5", "--dry-run"]) == 0
    assert calls[0][2] == {"distill_lr": -1e-3, "x": -2, "name": "-a"}
    assert calls[1][2] == {"p": -0.5}


@pytest.mark.parametrize("args, error", [
    (["--chapter", "distillation", "-p", "L", "0"], "parameter 'L' must be a positive integer"),
    (["--chapter", "distillation", "-p", "n_images", "10000000"], "val split has 10,000 images"),
    (["--chapter", "nope"], "unknown chapter 'nope'"),
    (["--chapter", "distillation", "--out", __file__], "is a file, not a folder"),
    (["-p", "L", "0"], "chapter 'phase-structure': parameter 'L' must be a positive integer"),
    (["--chapter", "phase-structure", "-p", "p_values", "[1.5]"],
     "parameter 'p_values' must be rates in [0, 1)"),
    (["--chapter", "analyze", "-p", "model", "vit_tiny_patch16_224"],
     "parameter 'weights' must be an existing local weights file"),
])
def test_the_command_line_refuses_without_importing_torch(args: list[str], error: str) -> None:
    """``python -m raptor run`` checks a chapter's parameters, inputs and output folders, and
    refuses, without importing torch, timm or the plotting libraries (issue 26)."""
    script = ("import sys\nfrom raptor.__main__ import main\n"
              f"code = main({['run', '--profile', 'smoke', '--no-build', *args]!r})\n"
              "heavy = [m for m in ('torch', 'timm', 'torchvision', 'matplotlib', 'pandas', "
              "'scipy', 'papermill') if m in sys.modules]\n"
              "print(code, heavy)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.stdout.split() == ["2", "[]"], done.stdout + done.stderr
    assert error in done.stderr


def test_a_pretrained_vit_is_checked_against_its_weights_after_every_other_check(
        book: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The one check that needs torch (a pretrained ViT against its weights file) runs once every
    other check of every chapter passed, and still before any kernel, naming the parameter."""
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a kernel"))
    monkeypatch.setattr(runner, "missing_inputs", lambda spec: [])  # the data are not the point
    weights = tmp_path / "other.safetensors"
    save_file({"head.weight": torch.zeros(2, 2)}, weights)
    chapters = ["phase-structure", "finding-phases"]
    values = {"model": "vit_tiny_patch16_224", "weights": str(weights), "images": str(tmp_path)}
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(RunnerError) as info:
        run("smoke", chapters, values, build=False, book=book, out=a_file)
    assert "is a file, not a folder" in str(info.value) and "'weights'" not in str(info.value)
    with pytest.raises(RunnerError) as info:
        run("smoke", chapters, values, build=False, book=book, out=tmp_path / "out")
    for name in chapters:
        assert f"chapter {name!r}: parameter 'weights': " in str(info.value)
    assert "does not match the architecture" in str(info.value)
    assert not (tmp_path / "out").exists()

def test_what_a_run_would_need_is_refused_before_any_kernel_starts(
        book: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Inputs that are not there, image counts a split cannot give and folders that cannot be
    written are all named at once, before anything runs."""
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a kernel"))
    with pytest.raises(RunnerError, match=r"the selected chapters \(claims\) take no parameters"):
        run("cpu", ["claims"], {"k": 2}, build=False, book=book)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(RunnerError, match=f"chapter 'toy': cannot write {a_file}/chapters: "
                                          f"{a_file} is a file, not a folder"):
        run("cpu", ["toy"], build=False, book=book, out=a_file)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    if not os.access(locked, os.W_OK):  # root writes anywhere
        with pytest.raises(RunnerError, match=f"{locked} is not writable"):
            run("cpu", ["toy"], build=False, book=book, out=locked / "run")
    with pytest.raises(RunnerError) as info:
        run("smoke", ["distillation"], {"n_images": 10_000_000, "probe_images": 70_000,
                                  "data_root": str(tmp_path / "nowhere")},
            build=False, book=book, out=tmp_path / "out")
    message = str(info.value)
    assert message.startswith("nothing was run:\n")
    assert ("chapter 'distillation': parameter dataset / data_root: dataset 'fashion-mnist' "
            "not found") in message
    assert "parameter n_images: fashion-mnist's val split has 10,000 images, got 10,000,000" \
        in message
    assert "parameter probe_images: fashion-mnist's train split has 60,000 images, got 70,000" \
        in message
    assert not (tmp_path / "out").exists()
    tier = tmp_path / "tier"
    tier.mkdir()
    (tier / "manifest.json").write_text("{")
    monkeypatch.setenv("RAPTOR_ARTIFACTS", str(tier))
    with pytest.raises(RunnerError, match=f"{tier / 'manifest.json'} is not a valid manifest"):
        run("cpu", ["toy"], build=False, book=book)
