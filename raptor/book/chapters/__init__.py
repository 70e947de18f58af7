"""The book's chapters, one module each. What a chapter provides (its contract):

- a spec module ``raptor/book/specs/<module>.py``, importing no torch: ``NAME`` (its name on the
  command line), ``NOTEBOOK`` (its notebook, relative to ``book/``), a frozen ``Spec`` whose
  defaults are the ``cpu`` profile and whose fields check their own values, and ``SMOKE`` and
  ``PAPER`` as ``dataclasses.replace`` of it; a spec that names a pretrained ViT adds
  ``require_model()``;
- its one registration, ``name: module`` in :data:`raptor.book.specs.MODULES` (book order; the
  table of contents is written from it: :func:`raptor.book.specs.toc`);
- this package's module ``<module>.py``, re-exporting the spec module's names and defining a
  ``Result`` dataclass, ``compute(spec) -> Result`` (all the work; no notebook needed) and
  ``claims(result) -> list[Claim]``; one whose claims run significance tests lists their levels in
  ``ALPHAS`` (the claims page quotes them);
- the notebook ``book/<NOTEBOOK>``: a ``parameters`` cell, ``compute`` on the spec
  (:func:`notebook_spec`), its figures and its claims table, executed and committed with outputs;
  its claims are written to ``book/claims/<name>.json``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from raptor import data
from raptor.book.spec import SpecError, from_parameters, notebook_values
from raptor.book.specs import module_of, spec_for


def chapter(name: str) -> ModuleType:
    """The module of chapter ``name``."""
    return importlib.import_module(f"{__name__}.{module_of(name)}")


def notebook_spec(module: ModuleType, values: Mapping[str, Any]):
    """A chapter notebook's spec: every parameter as the notebook holds it (its ``parameters``
    cell, then what ``python -m raptor run`` injected: the resolved spec whole). ``profile`` only
    names the run; a profile other than ``cpu`` with every parameter at its ``cpu`` value was
    set alone, which would silently run ``cpu``: an error."""
    spec = from_parameters(module.Spec, values, strict=False)
    profile = values.get("profile", "cpu")
    if profile != "cpu" and spec == module.Spec() != spec_for(module.NAME, profile):
        raise SpecError(f"profile {profile!r} was set without its parameters; run "
                        f"`python -m raptor run --profile {profile} --chapter {module.NAME}`, "
                        "which injects them")
    return spec


def launched(name: str) -> dict[str, Any]:
    """Chapter ``name`` launched in a fresh environment (Colab, Binder; its install cell):
    Fashion-MNIST fetched into ``$RAPTOR_DATA`` (default ``~/raptor-data``); returns the
    ``smoke`` profile's parameters, for the notebook's globals."""
    os.environ.setdefault("RAPTOR_DATA", str(Path.home() / "raptor-data"))
    data.get_datasets("fashion-mnist", download=True)
    print("A fresh environment: the `smoke` profile. For the stored book's `cpu` profile, run the "
          "parameters cell above again, then the cells after this one.")
    return {"profile": "smoke", **notebook_values(spec_for(name, "smoke"))}
