"""The ``scope`` directive: what a page's results were tested on, at what scale.

``:::{scope}`` on a chapter renders :func:`raptor.book.scope.sentence` for the profile the
chapter's notebook was executed at (its papermill-injected ``profile``, else its parameters
cell's); ``:::{scope} claims.ipynb`` on a Markdown page reads that notebook's profile instead.
The sentence is built from the profile's spec at build time, so it cannot drift from the models.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from raptor.book import scope
from raptor.book.scope import sentence

PROFILE = re.compile(r"^profile\s*=\s*['\"]([\w-]+)['\"]", re.M)


def notebook_profile(path: Path) -> str:
    """The profile notebook ``path`` ran at: its injected parameters', else its parameters'."""
    cells = json.loads(path.read_text())["cells"]
    for tag in ("injected-parameters", "parameters"):
        for cell in cells:
            if tag in cell.get("metadata", {}).get("tags", []):
                if m := PROFILE.search("".join(cell["source"])):
                    return m[1]
    raise ValueError(f"{path}: no `profile = ...` in a parameters cell")


class Scope(SphinxDirective):
    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        here = Path(self.env.doc2path(self.env.docname))
        source = here.parent / self.arguments[0] if self.arguments else here
        if source.suffix != ".ipynb":
            raise self.error(f"scope: {source.name} is not a notebook; name the one that gives "
                             "the profile, e.g. ```{scope} claims.ipynb```")
        self.env.note_dependency(str(source))
        self.env.note_dependency(scope.__file__)  # a changed sentence rebuilds the page
        box = nodes.container(classes=["rc-scope"])
        box += self.parse_text_to_nodes(sentence(notebook_profile(source)))
        return [box]


def setup(app):
    app.add_directive("scope", Scope)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
