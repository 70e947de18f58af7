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
  ``claims(result) -> list[Claim]`` (each declared on :mod:`raptor.book.engine` where it can be);
- the notebook ``book/<NOTEBOOK>``: a ``parameters`` cell naming only the profile and the claims
  folder (no default copied: the runner injects the resolved spec's parameters after it),
  ``compute`` on the spec (:func:`notebook_spec`), its figures and its claims table, executed and
  committed with outputs; its claims are written to ``book/claims/<name>.json``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from raptor import data
from raptor.book.spec import from_parameters, notebook_values
from raptor.book.specs import module_of, spec_for


def chapter(name: str) -> ModuleType:
    """The module of chapter ``name``. The chapters' modules (torch and the science) are imported
    on the first call, not with this package, which one of them (the claims page) imports."""
    module = module_of(name)
    from raptor.book.chapters import (analyze, atlas, claims_page, dynamics,  # noqa: F401
                                      finding_phases, functional_phases, phase_structure, raptor,
                                      scaling, stochastic_depth)
    return sys.modules[f"{__name__}.{module}"]


def notebook_spec(module: ModuleType, values: Mapping[str, Any]):
    """A chapter notebook's spec: its profile's (``profile``, which the ``parameters`` cell names;
    default ``cpu``) with every parameter the notebook holds over it (what ``python -m raptor
    run`` injected: the resolved spec whole). No default is copied into a notebook: a notebook
    run by hand runs its profile's spec, as the spec module writes it."""
    base = spec_for(module.NAME, values.get("profile", "cpu"))
    return from_parameters(module.Spec, values, strict=False, base=base)


def launched(name: str) -> dict[str, Any]:
    """Chapter ``name`` launched in a fresh environment (Colab, Binder; its install cell):
    Fashion-MNIST fetched into ``$RAPTOR_DATA`` (default ``~/raptor-data``); returns the
    ``smoke`` profile's parameters, for the notebook's globals (over those the runner injected
    for ``cpu``)."""
    os.environ.setdefault("RAPTOR_DATA", str(Path.home() / "raptor-data"))
    data.get_datasets("fashion-mnist", download=True)
    print("A fresh environment: the `smoke` profile. For the stored book's `cpu` profile, run the "
          "two cells above again (the parameters and the injected parameters), then the cells "
          "after this one.")
    return {"profile": "smoke", **notebook_values(spec_for(name, "smoke"))}
