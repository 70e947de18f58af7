"""The package's layout: its layers import only downwards, without cycles, each module alone.

Layers (README, *Layout*): the storage (``raptor.storage``) below the science (``raptor.*``), the
book layer (``raptor.book``) and the DINOv2 program (``raptor.dinov2``) beside each other above
it, the commands (``raptor.__main__``, ``raptor.sweep``, ``raptor.job_options``) on top.
"""

from __future__ import annotations

import ast
import graphlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from raptor.book import chapters
from raptor.book.findings import BEGIN, END, FindingsError, with_findings

PACKAGE = Path(__file__).resolve().parents[1] / "raptor"
COMMANDS = {"raptor.__main__", "raptor.sweep", "raptor.job_options"}
# The only package imports inside functions, and why each is there.
DEFERRED = {
    ("raptor.__main__", "raptor.sweep"): "torch and the science, for the commands that train: "
    "`run`, `build` and `compare` refuse bad input at the interpreter's start (issue 26)",
    ("raptor.__main__", "raptor.storage.artifacts"): "torch, for the commands that pack the tier",
    ("raptor.book.pretrained", "raptor.analysis"): "torch and timm, for a weights file's check, "
    "which runs after every torch-free check of a run",
    ("raptor.book.pretrained", "raptor.storage.checkpoint"): "its error type, with the above",
    ("raptor.book.findings", "raptor.book.claims"): "the verdicts' words (and torch), for the "
    "README's table: the command line imports the module",
    ("raptor.book.chapters", "raptor.data"): "torch, for the data set a chapter launched in a fresh "
    "environment fetches: the registry imports no torch",
}
# The only packages that import their own modules inside a function (first use): each chapter's
# science() (torch; and the claims page's science imports the registry back).
LAZY = {f"raptor.book.chapters.{p.name}" for p in (PACKAGE / "book" / "chapters").iterdir()
        if (p / "__init__.py").is_file()}
MAX_LINES = 550  # a longer module holds more than one concern: split it (issue 56)
# What each layer may import from the package.
ALLOWED = {
    "storage": {"storage"},
    "science": {"science", "storage"},
    "book": {"book", "science", "storage"},
    "dinov2": {"dinov2", "science", "storage"},
    "commands": {"commands", "book", "dinov2", "science", "storage"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    if module in COMMANDS:
        return "commands"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("storage", "book", "dinov2") else "science"


def imported(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    """The package modules an import statement of ``module`` names."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: resolve against the importing package
            package = module.split(".")[: -node.level + (MODULES[module].name == "__init__.py")]
            base = ".".join([*package, *([base] if base else [])])
        # ``from raptor import data`` imports a module; ``from raptor.data import x``, a name of one
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                 for a in node.names]
    return [n for n in names if n in MODULES]


def imports(module: str) -> tuple[set[str], list[str]]:
    """Package modules ``module`` imports at its top level or in a function listed in
    :data:`DEFERRED`, and any other imported inside a function (but a :data:`LAZY` package's
    own)."""
    tree = ast.parse(MODULES[module].read_text())
    top, nested = set(), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(node):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    for name in imported(n, module):
                        if (module, name) in DEFERRED:
                            top.add(name)
                        elif not (module in LAZY and name.startswith(f"{module}.")):
                            nested.append(f"{module}:{n.lineno} imports {name}")
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top |= set(imported(node, module))
    return top - {module}, nested


def test_layers_import_only_what_they_may() -> None:
    wrong = [f"{m} ({layer(m)}) imports {d} ({layer(d)})" for m in MODULES
             for d in imports(m)[0] if layer(d) not in ALLOWED[layer(m)]]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles_and_no_imports_inside_functions_but_the_listed() -> None:
    graph = {m: imports(m)[0] for m in MODULES}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle
    nested = [line for m in MODULES for line in imports(m)[1]]
    assert not nested, "package imports inside functions hide the layering:\n" + "\n".join(nested)
    stale = [pair for pair in DEFERRED if pair[1] not in graph[pair[0]]]
    assert not stale, f"listed in DEFERRED but not imported: {stale}"


def test_no_import_by_name() -> None:
    """Registries import their modules by statements, which this file's checks read."""
    by_name = [m for m, p in MODULES.items()
               if "import_module" in p.read_text() or "__import__" in p.read_text()]
    assert not by_name, f"importlib by a name known at run time: {by_name}"


def test_no_module_over_the_line_limit() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by concern): {long}"


def test_the_import_rules_see_a_planted_import(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from raptor import sweep\n    return sweep\n")
    monkeypatch.setitem(MODULES, "raptor.planted", planted)
    top, nested = imports("raptor.planted")
    assert not top and nested == ["raptor.planted:2 imports raptor.sweep"]
    monkeypatch.setitem(DEFERRED, ("raptor.planted", "raptor.sweep"), "a reason")
    assert imports("raptor.planted") == ({"raptor.sweep"}, [])
    assert layer("raptor.planted") == "science"  # and the science may not import a command:
    assert "commands" not in ALLOWED["science"]


def test_no_mocking_in_package_code() -> None:
    assert not [m for m, p in MODULES.items() if "unittest" in p.read_text()]


def test_every_module_imports_alone() -> None:
    """Each module imported with no other module of the package loaded before it."""
    script = (
        "import importlib, sys\n"
        f"for name in {sorted(MODULES)!r}:\n"
        "    for loaded in [m for m in sys.modules if m == 'raptor' or m.startswith('raptor.')]:\n"
        "        del sys.modules[loaded]\n"
        "    importlib.import_module(name)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", ["raptor.storage.cache", "raptor.book.runner",
                                    "raptor.dinov2.pipeline", "raptor.phases"])
def test_layers_are_where_the_readme_says(module: str) -> None:
    assert module in MODULES


def test_storage_keeps_no_plan() -> None:
    """A dry run's plan is the planner's state (:mod:`raptor.planning`): storage only stores."""
    for path in (PACKAGE / "storage").glob("*.py"):
        assert "ContextVar" not in path.read_text(), path.name


# --- the documents a newcomer reads (issue 46) ---------------------------------------------------

ROOT = PACKAGE.parent
FIRST_SCREEN = 24  # lines


@pytest.mark.parametrize(("name", "limit"), [("README.md", 10_000), ("BENCHMARKS.md", 12_000)])
def test_the_documents_stay_short(name: str, limit: int) -> None:
    assert len((ROOT / name).read_bytes()) < limit


def test_the_readme_shows_the_three_commands_in_its_first_screen() -> None:
    """How the site is built from the committed notebooks, executed again, and tested."""
    first = "\n".join((ROOT / "README.md").read_text().splitlines()[:FIRST_SCREEN])
    assert "jupyter-book build book/" in first and "make book" in first and "make test" in first


def test_the_readme_findings_are_the_stored_claims() -> None:
    readme = (ROOT / "README.md").read_text()
    assert with_findings(readme, ROOT / "book" / "claims") == readme, \
        "the README's findings differ from book/claims: run `python -m raptor findings`"


def test_the_findings_table_is_written_from_the_claims_and_nothing_else(tmp_path: Path) -> None:
    claims = [{"id": "C10", "chapter": "b", "claim": "x | y", "verdict": "holds"},
              {"id": "C2", "chapter": "a", "claim": "z", "verdict": "does not hold"}]
    (tmp_path / "a.json").write_text(json.dumps(claims))
    readme = f"# t\n{BEGIN}\n| stale | row |\n{END}\ntail\n"
    written = with_findings(readme, tmp_path)
    assert written == (f"# t\n{BEGIN}\n| claim | chapter | the paper says | the book finds |\n"
                       f"|---|---|---|---|\n| C2 | a | z | not reproduced at this scale |\n"
                       f"| C10 | b | x / y | holds at this scale |\n{END}\ntail\n")
    assert with_findings(written, tmp_path) == written
    with pytest.raises(FindingsError, match="markers|one line"):
        with_findings("# no table\n", tmp_path)
    with pytest.raises(FindingsError, match="no claims"):
        with_findings(readme, tmp_path / "empty")


# --- a chapter registered once -------------------------------------------------------------------


def test_the_table_of_contents_is_written_from_the_chapters_registry() -> None:
    assert (ROOT / "book" / "_toc.yml").read_text() == chapters.toc(), \
        "book/_toc.yml differs from raptor.book.chapters.CHAPTERS: run `python -m raptor build`"
    registered = {package.NOTEBOOK for package in chapters.CHAPTERS}
    on_disk = {str(p.relative_to(ROOT / "book")) for p in (ROOT / "book").rglob("*.ipynb")
               if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts}
    assert registered == on_disk, "a notebook in book/ that is not a registered chapter, or back"


def test_a_chapter_registered_is_in_the_table_of_contents(monkeypatch: pytest.MonkeyPatch) -> None:
    registered = chapters.CHAPTERS
    monkeypatch.setattr(chapters, "CHAPTERS", (*registered, chapters.distillation))  # twice
    assert chapters.toc().count("      - file: chapters/distillation\n") == 2
    monkeypatch.setattr(chapters, "CHAPTERS", tuple(c for c in registered
                                                    if c is not chapters.dynamics))
    assert "chapters/dynamics" not in chapters.toc() and "chapters/scaling" in chapters.toc()


CHAPTER_MODULES = ("spec", "compute", "claims", "figures")


def test_every_chapter_package_is_registered_once_with_its_modules() -> None:
    """Each package under ``raptor/book/chapters`` is in :data:`~raptor.book.chapters.CHAPTERS`
    once, with its spec, compute, claims and figures modules and no others."""
    folder = PACKAGE / "book" / "chapters"
    on_disk = sorted(p.name for p in folder.iterdir() if (p / "__init__.py").is_file())
    registered = [package.__name__.rsplit(".", 1)[1] for package in chapters.CHAPTERS]
    assert sorted(registered) == on_disk and len(set(registered)) == len(registered)
    assert len(set(chapters.names())) == len(registered), "two chapters of one name"
    assert not [p.name for p in folder.glob("*.py") if p.name != "__init__.py"], \
        "a chapter is a package, not a module"
    for name in on_disk:
        modules = {p.stem for p in (folder / name).glob("*.py")} - {"__init__"}
        assert modules == set(CHAPTER_MODULES), (name, modules)


def test_science_imports_every_chapters_modules() -> None:
    """:func:`~raptor.book.chapters.science` gives every chapter with each of its modules
    imported (a new chapter's too), in a fresh interpreter."""
    script = ("import pathlib\n"
              "from raptor.book import chapters\n"
              "for package in chapters.CHAPTERS:\n"
              "    folder = pathlib.Path(package.__file__).parent\n"
              "    loaded = chapters.science(package.NAME)\n"
              "    missing = [p.stem for p in folder.glob('*.py')\n"
              "               if p.stem != '__init__' and not hasattr(loaded, p.stem)]\n"
              "    assert not missing, (package.NAME, missing)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr


def test_the_chapters_registry_and_specs_import_no_torch() -> None:
    """The registry and every chapter's package and spec, imported alone, import no torch: a
    run's parameters are checked before the science is imported."""
    script = ("import sys\n"
              "import raptor.book.chapters\n"
              "from raptor.book.chapters.analyze import spec\n"
              "print(sorted(m for m in ('torch', 'timm', 'matplotlib', 'pandas')"
              " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
