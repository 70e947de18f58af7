"""Plan instead of build: what a chapter would train, found by running it without training.

A planner (:mod:`raptor.sweep`) runs a chapter inside :func:`planning`: then an entry the cache
(:mod:`raptor.storage.cache`) lacks is not built but stood in for, from what its requester asked
for (``request``: the configuration objects behind its key), and in a dry run so are the
evaluation images (:func:`planned_images`); there the requester builds no full-size model either,
but notes the entry (:func:`plan_entry`) and goes on with a small one of its own. The plan is a
context variable, set for the ``with`` block alone (another thread does not plan). Outside a
plan, :func:`get_or_plan` and :func:`load` are the cache's own ``get_or_build`` and
``load_entry``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch

from raptor.storage.cache import Builder, Tensors, entry_name, get_or_build, load_entry

StandIn = Callable[[str, Mapping[str, Any], object], tuple[Tensors, dict[str, Any]]]
Images = Callable[[str, int | None, int, int], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class _Plan:
    """What :func:`planning` holds: the planner's stand-ins for missing entries and (in a dry
    run) for evaluation images, whether stored entries count as missing (``fresh``), and the
    entries stood in for so far, by name."""

    stand_in: StandIn
    images: Images | None
    fresh: bool
    given: dict[str, tuple[Tensors, dict[str, Any]]] = field(default_factory=dict)


_plan: ContextVar[_Plan | None] = ContextVar("raptor.planning.plan", default=None)


@contextmanager
def planning(stand_in: StandIn, images: Images | None = None, *,
             fresh: bool = False) -> Iterator[None]:
    """Plan instead of build: inside, a missing entry is not built; ``stand_in(kind, config,
    request)`` gives what :func:`get_or_plan` (and later :func:`load`) return for it, e.g.
    untrained weights, so a chapter runs to its end and names every training it needs.
    ``images`` (a dry run) stands in for evaluation images: see :func:`planned_images`.
    ``fresh``: :func:`plan_entry` counts every entry as missing, as in an empty cache. The plan
    ends with the block, also when it raises.
    """
    if _plan.get() is not None:
        raise RuntimeError("planning() does not nest")
    token = _plan.set(_Plan(stand_in, images, fresh))
    try:
        yield
    finally:
        _plan.reset(token)


def dry_planning() -> bool:
    """Whether this is a dry run's :func:`planning` (one that stands in for images too)."""
    plan = _plan.get()
    return plan is not None and plan.images is not None


def load(kind: str, config: Mapping[str, Any]) -> tuple[Tensors, dict[str, Any]] | None:
    """The cache's entry (:func:`~raptor.storage.cache.load_entry`); inside :func:`planning`, an
    entry stood in for is its stand-in."""
    plan = _plan.get()
    if plan is not None and entry_name(kind, config) in plan.given:
        return plan.given[entry_name(kind, config)]
    return load_entry(kind, config)


def get_or_plan(kind: str, config: Mapping[str, Any], build: Builder, *, request: object
                ) -> tuple[Tensors, dict[str, Any]]:
    """The cache's :func:`~raptor.storage.cache.get_or_build`; inside :func:`planning` a missing
    entry is not built: the planner's stand-in for ``request`` (what the caller asked for, e.g. a
    :class:`~raptor.teachers.TeacherRequest`) is returned instead."""
    plan = _plan.get()
    if plan is None:
        return get_or_build(kind, config, build)
    found = load(kind, config)
    if found is None:
        found = plan.given[entry_name(kind, config)] = plan.stand_in(kind, config, request)
    return found


def plan_entry(kind: str, config: Mapping[str, Any], request: object) -> None:
    """In :func:`planning`: hand the entry to the planner's stand-in (which notes it as a job)
    unless it is stored or already noted; what the stand-in returns is not loaded into anything."""
    plan = _plan.get()
    if plan is None:
        raise RuntimeError("plan_entry() outside planning()")
    name = entry_name(kind, config)
    if name not in plan.given and (plan.fresh or load_entry(kind, config) is None):
        plan.given[name] = plan.stand_in(kind, config, request)


def planned_images(dataset: str, img_size: int | None, n: int, seed: int
                   ) -> tuple[torch.Tensor, torch.Tensor] | None:
    """In a dry run's :func:`planning`, the planner's stand-in for ``n`` evaluation images of
    ``dataset`` (at ``img_size``, ``None``: its own) drawn with ``seed``; else ``None``: read
    them."""
    plan = _plan.get()
    if plan is None or plan.images is None:
        return None
    return plan.images(dataset, img_size, n, seed)
