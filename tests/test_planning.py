"""Tests for raptor.planning: a plan stands in for what the cache lacks where it is handed;
without one the cache builds."""

from __future__ import annotations

import pytest
import torch

from raptor.planning import Plan, get_or_plan, load
from raptor.storage.cache import get_or_build
from tests.test_cache import CONFIG, Builder

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _planted(kind: str, config: dict, request: object) -> tuple[dict[str, torch.Tensor], dict]:
    return {"w": torch.zeros(2)}, {"planned": request}


def _images(dataset: str, img_size: int | None, n: int, seed: int) -> tuple:
    return dataset, img_size, n, seed


def test_a_plan_stands_in_where_it_is_handed_and_nowhere_else() -> None:
    build, seen = Builder(), []

    def stand_in(kind: str, config: dict, request: object) -> tuple[dict[str, torch.Tensor], dict]:
        seen.append((kind, config, request))
        return _planted(kind, config, request)

    plan = Plan(stand_in, _images)
    _, record = get_or_plan("toy", CONFIG, build, request="what was asked", plan=plan)
    assert record == {"planned": "what was asked"}
    assert load("toy", CONFIG, plan)[1] == record  # the stand-in, asked for again
    assert plan.dry and plan.images_of("mnist", None, 4, 1) == ("mnist", None, 4, 1)
    assert seen == [("toy", CONFIG, "what was asked")] and build.calls == 0
    assert load("toy", CONFIG) is None  # no stand-in outside its plan
    assert load("toy", CONFIG, Plan(_planted)) is None  # nor in another plan
    _, record = get_or_plan("toy", CONFIG, build, request=None)  # no plan: built
    assert build.calls == 1 and record["acc"] == 0.75
    assert load("toy", CONFIG, plan)[1] == {"planned": "what was asked"}  # the plan's own holds
    reads = Plan(_planted)  # a plan without images: they are read
    assert not reads.dry and reads.images_of("mnist", None, 4, 1) is None


def test_a_plan_notes_missing_entries_once_and_stored_ones_not_at_all() -> None:
    get_or_build("toy", CONFIG, Builder())  # stored
    noted: list[object] = []

    def note(kind: str, config: dict, request: object) -> tuple[dict, dict]:
        noted.append(request)
        return {}, {}

    plan = Plan(note, _images)
    for _ in range(2):
        plan.note("toy", CONFIG, "stored")
        plan.note("toy", {**CONFIG, "seed": 1}, "missing")
    assert noted == ["missing"]
    Plan(note, fresh=True).note("toy", CONFIG, "stored, counted as missing")
    assert noted == ["missing", "stored, counted as missing"]
