"""The book's chapters by name, and each one's spec module: its ``NAME``, its ``NOTEBOOK``
(relative to ``book/``), a frozen ``Spec`` whose defaults are the ``cpu`` profile, and ``SMOKE``
and ``PAPER`` (the other profiles, as ``dataclasses.replace`` of ``Spec()``). A spec module
imports no torch, so a run's parameters are checked, and a bad one refused, before the chapter's
science is imported; the chapter's module (:mod:`raptor.book.chapters`) computes it. A spec that
names a pretrained ViT has ``require_model()``: the check of the model against its weights file,
which imports torch and timm, so the runner calls it only once every other check of every chapter
passed (:func:`raptor.book.runner.model_refusals`), and ``compute`` calls it first.

:data:`MODULES` is the one registration of a chapter: the runner, the command line and the book's
table of contents (``book/_toc.yml``, written by :func:`toc`) all read it.
"""

from __future__ import annotations

import sys
from types import ModuleType

# Every chapter's spec module (each torch-free), reached by name through sys.modules.
from raptor.book.specs import (analyze, atlas, claims_page, dynamics, finding_phases,  # noqa: F401
                               functional_phases, phase_structure, raptor, scaling,
                               stochastic_depth)

# Book order: name -> module (here and in raptor.book.chapters); book/_toc.yml is written from it.
MODULES: dict[str, str] = {
    "phase-structure": "phase_structure",
    "atlas": "atlas",
    "finding-phases": "finding_phases",
    "raptor": "raptor",
    "stochastic-depth": "stochastic_depth",
    "functional-phases": "functional_phases",
    "dynamics": "dynamics",
    "scaling": "scaling",
    "analyze": "analyze",
    "claims": "claims_page",
}
PROFILES = ("smoke", "cpu", "paper")


class ChapterError(ValueError):
    """An unknown chapter or profile."""


def module_of(name: str) -> str:
    """The module name of chapter ``name`` (:class:`ChapterError` listing the valid ones)."""
    if name not in MODULES:
        raise ChapterError(f"unknown chapter {name!r}; valid chapters: {', '.join(MODULES)}")
    return MODULES[name]


def spec_module(name: str) -> ModuleType:
    """The spec module of chapter ``name`` (imported above)."""
    return sys.modules[f"{__name__}.{module_of(name)}"]


def spec_for(name: str, profile: str):
    """Chapter ``name``'s spec at ``profile``."""
    if profile not in PROFILES:
        raise ChapterError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")
    mod = spec_module(name)
    return {"smoke": mod.SMOKE, "cpu": mod.Spec(), "paper": mod.PAPER}[profile]


def toc() -> str:
    """``book/_toc.yml``: the paper's page, then every chapter of :data:`MODULES` whose notebook is
    under ``chapters/`` in book order (numbered), then the pages that gather them (the claims
    page) and the bibliography."""
    pages = {name: spec_module(name).NOTEBOOK.removesuffix(".ipynb") for name in MODULES}
    chapters = [p for p in pages.values() if p.startswith("chapters/")]
    gathered = [p for p in pages.values() if not p.startswith("chapters/")]

    def part(caption: str, files: list[str], numbered: bool = False) -> list[str]:
        return [f"  - caption: {caption}", *(["    numbered: true"] if numbered else []),
                "    chapters:", *(f"      - file: {f}" for f in files)]

    return "\n".join(["format: jb-book", "root: intro", "parts:", *part("The paper", ["paper"]),
                      *part("Chapters", chapters, numbered=True),
                      *part("Results and references", [*gathered, "bibliography"])]) + "\n"
