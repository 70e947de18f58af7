"""Every default written once (issue 46): the book's family in ``raptor/book/profiles.py``, each
chapter's own in its spec module, and no copy of either in a notebook — a notebook's
``parameters`` cell names its profile, and :func:`raptor.book.chapters.notebook_spec` builds that
profile's spec under what the runner injects."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raptor.book.chapters import PROFILES, chapter, names, notebook_spec, spec_for

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SNAPSHOT = Path(__file__).with_name("profiles.json")
FAMILY = re.compile(r"^FAMILY = Cell\(depth=(\d+),", re.MULTILINE)

# In a fresh interpreter on a copy of the package: what every chapter's notebook and profiles
# resolve to.
RESOLVED = """
import json, sys
from pathlib import Path
from raptor.book.chapters import PROFILES, chapter, names, notebook_spec, spec_for
from raptor.book.spec import notebook_values
book = Path(sys.argv[1])
out = {}
for name in names():
    nb = json.loads((book / chapter(name).NOTEBOOK).read_text())
    (cell,) = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    namespace = {}
    exec("".join(cell["source"]), namespace)
    out[name] = {"notebook": notebook_values(notebook_spec(chapter(name), namespace)),
                 **{p: notebook_values(spec_for(name, p)) for p in PROFILES}}
print(json.dumps(out))
"""


def parameters_cell_of(name: str) -> str:
    nb = json.loads((BOOK / chapter(name).NOTEBOOK).read_text())
    (cell,) = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    return "".join(cell["source"])


@pytest.mark.parametrize("name", names())
def test_a_notebook_names_its_profile_and_copies_no_default(name: str) -> None:
    namespace: dict = {}
    exec(parameters_cell_of(name), namespace)
    assert set(namespace) - {"__builtins__"} == {"profile", "claims_dir"}
    assert namespace["profile"] == "cpu"


@pytest.mark.parametrize("name", names())
@pytest.mark.parametrize("profile", PROFILES)
def test_a_notebook_run_by_hand_runs_its_profiles_spec(name: str, profile: str) -> None:
    namespace: dict = {}
    exec(parameters_cell_of(name), namespace)
    namespace["profile"] = profile  # the cell edited by hand, or a launched notebook's
    assert notebook_spec(chapter(name), namespace) == spec_for(name, profile)


def resolved(package_root: Path) -> dict:
    """:data:`RESOLVED` run on the package in ``package_root`` (with the stored results there)."""
    done = subprocess.run([sys.executable, "-c", RESOLVED, str(BOOK)], capture_output=True,
                          text=True, cwd=package_root, env={"PYTHONPATH": str(package_root),
                                                            "OMP_NUM_THREADS": "1",
                                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_family_depth_changed_in_one_place_reaches_every_chapter(tmp_path: Path) -> None:
    """``FAMILY``'s depth edited in a copy of the package, nothing else: every chapter's ``cpu``
    and ``paper`` specs, and the spec its committed notebook runs, take the new depth; ``smoke``
    keeps its own; every other parameter stays as the profiles' snapshot holds it."""
    shutil.copytree(ROOT / "raptor", tmp_path / "raptor",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "results").symlink_to(ROOT / "results")  # the atlas's stored cells
    profiles = tmp_path / "raptor" / "book" / "profiles.py"
    (old,) = FAMILY.findall(profiles.read_text())
    new = int(old) - 2
    profiles.write_text(FAMILY.sub(f"FAMILY = Cell(depth={new},", profiles.read_text()))
    snapshot = json.loads(SNAPSHOT.read_text())
    got = resolved(tmp_path)
    assert got.keys() == snapshot.keys()
    for name, values in got.items():
        assert values["notebook"] == values["cpu"], name  # the notebook follows its profile
        for profile in PROFILES:
            before, after = snapshot[name][profile], values[profile]
            moved = {k for k in before if before[k] != after[k]}
            if "L" not in before:
                assert not moved, (name, profile, moved)
                continue
            # the positive control's planted partition is the paper's scaled to the depth
            derived = {"planted"} if name == "functional-phases" else set()
            assert moved == ({"L"} | derived if profile != "smoke" else set()), \
                (name, profile, moved)
            assert after["L"] == (new if profile != "smoke" else before["L"]), (name, profile)
    assert resolved(ROOT) == {name: {"notebook": snapshot[name]["cpu"], **snapshot[name]}
                              for name in snapshot}  # unedited: the snapshot, the oracle
