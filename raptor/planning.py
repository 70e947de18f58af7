"""Plan instead of build: what a chapter would train, found by running it without training.

A planner (:mod:`raptor.sweep`) hands a chapter's ``compute`` a :class:`Plan`, which goes down
to every request for a model: then an entry the cache (:mod:`raptor.storage.cache`) lacks is not
built but stood in for, from what its requester asked for (``request``: the configuration
objects behind its key), and in a dry run so are the evaluation images (:meth:`Plan.images_of`);
there the requester builds no full-size model either, but notes the entry (:meth:`Plan.note`)
and goes on with a small one of its own. Without a plan (``plan=None``), :func:`get_or_plan` and
:func:`load` are the cache's own ``get_or_build`` and ``load_entry``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from raptor.storage.cache import Builder, Tensors, entry_name, get_or_build, load_entry

StandIn = Callable[[str, Mapping[str, Any], object], tuple[Tensors, dict[str, Any]]]
Images = Callable[[str, int | None, int, int], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Plan:
    """A planner's stand-ins: ``stand_in(kind, config, request)`` gives what :func:`get_or_plan`
    (and later :func:`load`) return for a missing entry, e.g. untrained weights, so a chapter
    runs to its end and names every training it needs; ``images`` (a dry run) stands in for
    evaluation images (:meth:`images_of`). ``fresh``: :meth:`note` counts every entry as missing,
    as in an empty cache. ``given``: the entries stood in for so far, by name."""

    stand_in: StandIn
    images: Images | None = None
    fresh: bool = False
    given: dict[str, tuple[Tensors, dict[str, Any]]] = field(default_factory=dict)

    @property
    def dry(self) -> bool:
        """Whether this is a dry run's plan (one that stands in for images too)."""
        return self.images is not None

    def note(self, kind: str, config: Mapping[str, Any], request: object) -> None:
        """Hand the entry to the stand-in (which notes it as a job) unless it is stored or
        already noted; what the stand-in returns is not loaded into anything."""
        name = entry_name(kind, config)
        if name not in self.given and (self.fresh or load_entry(kind, config) is None):
            self.given[name] = self.stand_in(kind, config, request)

    def images_of(self, dataset: str, img_size: int | None, n: int, seed: int
                  ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """In a dry run, the stand-in for ``n`` evaluation images of ``dataset`` (at
        ``img_size``, ``None``: its own) drawn with ``seed``; else ``None``: read them."""
        return None if self.images is None else self.images(dataset, img_size, n, seed)


def load(kind: str, config: Mapping[str, Any], plan: Plan | None = None
         ) -> tuple[Tensors, dict[str, Any]] | None:
    """The cache's entry (:func:`~raptor.storage.cache.load_entry`); under a ``plan``, an entry
    stood in for is its stand-in."""
    if plan is not None and entry_name(kind, config) in plan.given:
        return plan.given[entry_name(kind, config)]
    return load_entry(kind, config)


def get_or_plan(kind: str, config: Mapping[str, Any], build: Builder, *, request: object,
                plan: Plan | None = None) -> tuple[Tensors, dict[str, Any]]:
    """The cache's :func:`~raptor.storage.cache.get_or_build`; under a ``plan`` a missing entry is
    not built: the plan's stand-in for ``request`` (what the caller asked for, e.g. a
    :class:`~raptor.teachers.TeacherRequest`) is returned instead."""
    if plan is None:
        return get_or_build(kind, config, build)
    found = load(kind, config, plan)
    if found is None:
        found = plan.given[entry_name(kind, config)] = plan.stand_in(kind, config, request)
    return found
