"""The cell that installs the companion where a chapter is opened alone (Colab, Binder), written
once here. A notebook opened in Colab can import nothing before it runs, so each chapter notebook
carries a copy; ``python -m raptor build`` writes the copies from :func:`cell`, and a test holds
each equal to it."""

from __future__ import annotations

import json
from pathlib import Path

REPOSITORY = "https://github.com/raptor-companion/raptor-companion"  # book/_config.yml's
MARK = 'importlib.util.find_spec("raptor") is None'  # how the cell is found in a notebook

SOURCE = f"""\
# Launched in Colab or Binder? In a fresh environment this cell installs the companion (from the
# checkout the notebook sits in on Binder, the artifact tier with it; else from GitHub), fetches
# Fashion-MNIST and sets the `smoke` profile: the chapter then runs in seconds. Where the companion
# is installed it does nothing.
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

if {MARK}:
    checkout = Path.cwd().parent.parent  # book/chapters/ -> the repository
    local = (checkout / "pyproject.toml").is_file()
    source = ["-e", str(checkout)] if local else ["git+{REPOSITORY}"]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *source], check=True)
    sys.path.insert(0, str(checkout))
    importlib.invalidate_caches()
    from raptor.book.chapters import launched

    globals().update(launched(NAME))"""


def cell(name: str) -> str:
    """The install cell of chapter ``name``."""
    return SOURCE.replace("launched(NAME)", f"launched({name!r})")


def write(notebook: Path, name: str) -> bool:
    """Rewrite ``notebook``'s install cell (the code cell that tests :data:`MARK`) as
    :func:`cell` says, leaving every other cell and output as it is; whether it changed."""
    nb = json.loads(notebook.read_text())
    (found,) = [c for c in nb["cells"] if c["cell_type"] == "code" and MARK in "".join(c["source"])]
    if "".join(found["source"]) == cell(name):
        return False
    found["source"] = cell(name).splitlines(keepends=True)
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return True
