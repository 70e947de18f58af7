"""The book's chapters, one package each, and their registry. What a chapter provides (its
contract), in ``raptor/book/chapters/<package>/``:

- ``spec.py``, importing no torch: ``NAME`` (its name on the command line), ``NOTEBOOK`` (its
  notebook, relative to ``book/``), a frozen ``Spec`` whose defaults are the ``cpu`` profile and
  whose fields check their own values, and ``SMOKE`` and ``PAPER`` as ``dataclasses.replace`` of
  it; a spec that names a pretrained ViT adds ``require_model()``: the check of the model against
  its weights file, which imports torch and timm, so the runner calls it only once every other
  check of every chapter passed (:func:`raptor.book.runner.model_refusals`), and ``compute``
  calls it first;
- ``__init__.py``, importing no torch: what the chapter asks, the spec's names, and
  ``science()``, which imports the three modules below (torch) for :func:`science`;
- ``compute.py``: a ``Result`` dataclass and ``compute(spec, plan=None) -> Result`` (all the
  work; no notebook needed), with the helpers of the computation; every model it asks for goes
  through ``plan``, a planner's :class:`~raptor.planning.Plan` (``None``: the cache builds what
  it lacks), so a sweep finds what the chapter would train by running it;
- ``claims.py``: its thresholds, ``claims(result) -> list[Claim]`` (each declared on
  :mod:`raptor.book.engine` where it can be) and ``findings``, the prose that quotes them;
- ``figures.py``: its tables and ``FIGURES``, each figure a
  :class:`~raptor.book.figure_table.Figure` (a table made from the ``Result``, which is the
  figure's CSV, and a drawing of that table alone); a module imports only those before it in
  this list (figures draw the claims' thresholds);
- its registration here: the package imported and placed in :data:`CHAPTERS` (book order; the
  table of contents is written from it: :func:`toc`);
- the notebook ``book/<NOTEBOOK>``: a ``parameters`` cell naming only the profile and the claims
  folder (no default copied: the runner injects the resolved spec's parameters after it),
  ``compute`` on the spec (:func:`notebook_spec`), its figures and its claims table, executed and
  committed with outputs; its claims are written to ``book/claims/<name>.json``.

This package and every chapter's package and spec import no torch, so a run's parameters are
checked, and a bad one refused, before any chapter's science is imported (:func:`science`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from raptor.book.chapters import (analyze, atlas, claims_page, distillation, dynamics,
                                  finding_phases, functional_phases, phase_structure, scaling,
                                  stochastic_depth)
from raptor.book.spec import from_parameters, notebook_values

# Book order; book/_toc.yml is written from it.
CHAPTERS: tuple[ModuleType, ...] = (phase_structure, atlas, finding_phases, distillation,
                                    stochastic_depth, functional_phases, dynamics, scaling,
                                    analyze, claims_page)
PROFILES = ("smoke", "cpu", "paper")


class ChapterError(ValueError):
    """An unknown chapter or profile."""


def names() -> list[str]:
    """Every chapter's name, in book order."""
    return [package.NAME for package in CHAPTERS]


def chapter(name: str) -> ModuleType:
    """The package of chapter ``name`` (:class:`ChapterError` listing the valid ones)."""
    for package in CHAPTERS:
        if package.NAME == name:
            return package
    raise ChapterError(f"unknown chapter {name!r}; valid chapters: {', '.join(names())}")


def science(name: str) -> ModuleType:
    """The package of chapter ``name`` with its ``compute``, ``claims`` and ``figures`` modules
    imported (its ``science()``): torch and the science, on the first call, not with this
    registry, which imports no torch and which the claims page's science imports back."""
    package = chapter(name)
    package.science()
    return package


def spec_for(name: str, profile: str):
    """Chapter ``name``'s spec at ``profile``."""
    if profile not in PROFILES:
        raise ChapterError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    package = chapter(name)
    return {"smoke": package.SMOKE, "cpu": package.Spec(), "paper": package.PAPER}[profile]


def toc() -> str:
    """``book/_toc.yml``: the paper's page, then every chapter of :data:`CHAPTERS` whose notebook
    is under ``chapters/`` in book order (numbered), then the pages that gather them (the claims
    page) and the bibliography."""
    pages = [package.NOTEBOOK.removesuffix(".ipynb") for package in CHAPTERS]
    chapters = [p for p in pages if p.startswith("chapters/")]
    gathered = [p for p in pages if not p.startswith("chapters/")]

    def part(caption: str, files: list[str], numbered: bool = False) -> list[str]:
        return [f"  - caption: {caption}", *(["    numbered: true"] if numbered else []),
                "    chapters:", *(f"      - file: {f}" for f in files)]

    return "\n".join(["format: jb-book", "root: intro", "parts:", *part("The paper", ["paper"]),
                      *part("Chapters", chapters, numbered=True),
                      *part("Results and references", [*gathered, "bibliography"])]) + "\n"


def notebook_spec(package: ModuleType, values: Mapping[str, Any]):
    """A chapter notebook's spec: its profile's (``profile``, which the ``parameters`` cell names;
    default ``cpu``) with every parameter the notebook holds over it (what ``python -m raptor
    run`` injected: the resolved spec whole). No default is copied into a notebook: a notebook
    run by hand runs its profile's spec, as the spec module writes it."""
    base = spec_for(package.NAME, values.get("profile", "cpu"))
    return from_parameters(package.Spec, values, strict=False, base=base)


def launched(name: str) -> dict[str, Any]:
    """Chapter ``name`` launched in a fresh environment (Colab, Binder; its install cell):
    Fashion-MNIST fetched into ``$RAPTOR_DATA`` (default ``~/raptor-data``); returns the
    ``smoke`` profile's parameters, for the notebook's globals (over those the runner injected
    for ``cpu``)."""
    from raptor import data

    os.environ.setdefault("RAPTOR_DATA", str(Path.home() / "raptor-data"))
    data.get_datasets("fashion-mnist", download=True)
    print("A fresh environment: the `smoke` profile. For the stored book's `cpu` profile, run the "
          "two cells above again (the parameters and the injected parameters), then the cells "
          "after this one.")
    return {"profile": "smoke", **notebook_values(spec_for(name, "smoke"))}
