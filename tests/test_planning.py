"""Tests for raptor.planning: a plan stands in for what the cache lacks, in its own block and
context only; outside a plan the cache builds."""

from __future__ import annotations

import threading

import pytest
import torch

from raptor.planning import (dry_planning, get_or_plan, load, plan_entry, planned_images,
                             planning)
from raptor.storage.cache import get_or_build
from tests.test_cache import CONFIG, Builder

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _planted(kind: str, config: dict, request: object) -> tuple[dict[str, torch.Tensor], dict]:
    return {"w": torch.zeros(2)}, {"planned": request}


def _images(dataset: str, img_size: int | None, n: int, seed: int) -> tuple:
    return dataset, img_size, n, seed


def test_planning_stands_in_inside_its_block_only_even_when_it_raises() -> None:
    build, seen = Builder(), []

    def stand_in(kind: str, config: dict, request: object) -> tuple[dict[str, torch.Tensor], dict]:
        seen.append((kind, config, request))
        return _planted(kind, config, request)

    with pytest.raises(RuntimeError, match="planted failure"):
        with planning(stand_in, _images):
            _, record = get_or_plan("toy", CONFIG, build, request="what was asked")
            assert record == {"planned": "what was asked"}
            assert load("toy", CONFIG)[1] == record  # the stand-in, asked for again
            assert planned_images("mnist", None, 4, 1) == ("mnist", None, 4, 1)
            with pytest.raises(RuntimeError, match="does not nest"):
                with planning(_planted):
                    pass
            assert planned_images("mnist", 8, 2, 0) == ("mnist", 8, 2, 0)  # the outer plan holds
            raise RuntimeError("planted failure")
    assert seen == [("toy", CONFIG, "what was asked")] and build.calls == 0
    assert planned_images("mnist", None, 4, 1) is None
    assert load("toy", CONFIG) is None  # no stand-in survives its plan
    _, record = get_or_plan("toy", CONFIG, build, request=None)  # no plan: built
    assert build.calls == 1 and record["acc"] == 0.75
    with planning(_planted):  # a plan without images: they are read
        assert planned_images("mnist", None, 4, 1) is None


def test_a_dry_plan_notes_missing_entries_once_and_stored_ones_not_at_all() -> None:
    get_or_build("toy", CONFIG, Builder())  # stored
    noted: list[object] = []
    assert not dry_planning()
    with pytest.raises(RuntimeError, match="outside planning"):
        plan_entry("toy", CONFIG, "asked")
    with planning(lambda kind, config, request: noted.append(request) or ({}, {})):
        assert not dry_planning()  # a plan that reads images
    with planning(lambda kind, config, request: noted.append(request) or ({}, {}), _images):
        assert dry_planning()
        for _ in range(2):
            plan_entry("toy", CONFIG, "stored")
            plan_entry("toy", {**CONFIG, "seed": 1}, "missing")
    assert noted == ["missing"]


def test_a_plan_holds_in_its_own_context_only() -> None:
    """The plan is a context variable: another thread does not plan, and plans of its own."""
    found: list[object] = []

    def elsewhere() -> None:
        found.append(planned_images("mnist", None, 4, 1))
        with planning(_planted, _images):
            found.append(planned_images("mnist", None, 4, 2))

    with planning(_planted, _images):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert planned_images("mnist", None, 4, 3) == ("mnist", None, 4, 3)
    assert found == [None, ("mnist", None, 4, 2)]
