"""Tests for raptor.book.result: a chapter's result saved (safetensors + JSON) and loaded back."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.torch
import torch

from raptor.book.chapters import phase_structure
from raptor.book.chapters.phase_structure.compute import Result
from raptor.book.profiles import DISTILL
from raptor.book.result import load, save
from raptor.phase_test import KExcess, PhaseTest
from raptor.structure import NullExcess, PhaseExcess, Rank, matrix_excess
from raptor.train import DistillConfig


@dataclass(frozen=True)
class Fit:
    name: str
    curve: np.ndarray
    r2: float


@dataclass
class Everything:
    spec: DistillConfig
    mats: dict[str, dict[str, np.ndarray]]
    tensor: torch.Tensor
    scalar: np.ndarray
    cuts: dict[str, list[tuple[int, int]]]
    shape: tuple[int, ...]
    by_k: dict[int, float]
    fit: Fit
    fits: dict[str, Fit]
    fit_pair: tuple[Fit, Fit]
    spectrum: np.ndarray
    maybe_fit: Fit | None
    no_fit: Fit | None
    maybe: float | None
    nan: float
    inf: float
    flag: bool
    text: str
    nested: list[dict[str, Any]]


@dataclass
class Other:
    x: float


def everything() -> Everything:
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(4, 4))
    return Everything(
        spec=dataclasses.replace(DISTILL, stage1_steps=3, lr=2e-4, train_limit=None),
        mats={"teacher": {"all": shared, "cls": shared[::-1, ::2], "same": shared},
              "empty": {}, "ints": {"x": np.arange(6, dtype=np.int64).reshape(2, 3).T}},
        tensor=torch.randn(2, 3, generator=torch.Generator().manual_seed(0)).half(),
        scalar=np.array(1.5, dtype=np.float32),
        cuts={"a": [(0, 3), (3, 8)], "b": []}, shape=(2, 9, 64), by_k={2: 0.5, 3: math.nan},
        fit=Fit("x", np.array([1.0, np.nan, np.inf], dtype=np.float32), 0.9),
        fits={"p=0.1": Fit("y", np.ones(2, bool), -1.0), "none": Fit("z", np.zeros(0), 0.0)},
        fit_pair=(Fit("a", np.arange(3, dtype=np.uint8), 1.0), Fit("b", np.arange(2), 2.0)),
        spectrum=np.array([0.9 + 0.1j, 0.9 - 0.1j, -0.3 + 0j]),  # DMD eigenvalues
        maybe_fit=Fit("m", np.zeros((2, 0)), 0.5), no_fit=None, maybe=None, nan=math.nan,
        inf=-math.inf, flag=True, text="ä — ±",
        nested=[{"k": 2, "acc": [0.1, 0.2], "none": None}, {}])


def assert_same(a: Any, b: Any, where: str = "result") -> None:
    """Equal values of equal types, arrays with equal dtype and shape, NaN equal to NaN."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


def test_round_trip_of_every_kind_of_field(tmp_path: Path) -> None:
    result = everything()
    assert save(result, tmp_path / "out" / "r") == tmp_path / "out" / "r"
    assert sorted(os.listdir(tmp_path / "out")) == ["r.json", "r.safetensors"]  # no temp files
    loaded = load(Everything, tmp_path / "out" / "r")
    assert_same(result, loaded)
    assert isinstance(loaded.fit_pair[0], Fit) and isinstance(loaded.fits["none"], Fit)
    assert loaded.spec == result.spec
    # loaded arrays are independent of each other (they were one array when saved)
    loaded.mats["teacher"]["all"][0, 0] = 99.0
    assert loaded.mats["teacher"]["same"][0, 0] != 99.0


def test_round_trip_of_a_chapter_result(tmp_path: Path) -> None:
    cut = ((0, 2), (2, 5))
    test = PhaseTest({2: KExcess(2, cut, 0.02, np.array([0.01, 0.03]), np.array([0.02, 0.019]),
                                 0.5)},
                     {2: KExcess(2, cut, 0.015, np.array([0.0, 0.02]))}, 0.1, cut,
                     np.array([0.2, 0.1]), 0.01, 0.01, 64)
    mats = {"trained, p=0.0": {"all": np.eye(9), "cls": np.full((9, 9), 0.5)}}
    result = Result(
        spec=phase_structure.SMOKE, accuracy={"trained, p=0.0": 0.75, "untrained": math.nan},
        trajectory_shape={"untrained": [64, 5, 19, 32]}, similarity=mats,
        cuts={"untrained": ((0, 2), (2, 5))},
        excess={"untrained": PhaseExcess(2, ((0, 2), (2, 5)), ((0, 3), (3, 5)), 0.02, 0.01, 0.03,
                                         0.95, 0.9, Rank(2, 4),
                                         {"stationary": NullExcess(0.05, 0.04, 0.06)}, 0.1)},
        controls={}, paper_dinov2b={2: matrix_excess(np.eye(5), 2)},
        records={"trained, p=0.0": {"loss": [0.9, 0.5], "val": [{"step": 2, "acc": 0.75}],
                                    "best": {"step": 2, "loss": 0.5}, "converged": True}},
        tests={"untrained": test}, control_tests={"plateau": test}, paper_test=test,
        power={"stationary": 0.12, "random walk": math.inf})
    save(result, tmp_path / "phase-structure")
    loaded = load(Result, tmp_path / "phase-structure")
    assert_same(result, loaded)
    assert loaded.excess["untrained"].rank == Rank(2, 4)
    assert loaded.excess["untrained"].null_cut == ((0, 3), (3, 5))
    assert loaded.excess["untrained"].ladder["stationary"] == NullExcess(0.05, 0.04, 0.06)
    assert loaded.tests["untrained"].interval() == test.interval()
    np.testing.assert_array_equal(loaded.paper_test.steps, test.steps)


def test_wrong_type_or_format_is_a_clear_error(tmp_path: Path) -> None:
    path = save(everything(), tmp_path / "r")
    with pytest.raises(ValueError, match=r"holds a 'test_result.Everything' result \(format 1\), "
                                         r"not 'test_result.Other'"):
        load(Other, path)
    meta = json.loads(path.with_suffix(".json").read_text())
    path.with_suffix(".json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(ValueError, match=r"\(format 99\)"):
        load(Everything, path)
    del meta["fields"]["text"]
    meta["fields"]["extra"] = 1
    path.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"fields \['extra', 'text'\] are in one but not"):
        load(Everything, path)
    with pytest.raises(FileNotFoundError):
        load(Everything, tmp_path / "absent")


@pytest.mark.parametrize("value, match", [
    ({1, 2}, "x: cannot store a set"), (np.array(["a"]), "x: cannot store an array of dtype"),
    (np.array([object()]), "x: cannot store an array of dtype object"),
    ({"a": [{(1, 2): 3}]}, "x/0/0: dict keys must be str, int or float")])
def test_values_that_cannot_be_stored(tmp_path: Path, value: object, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        save(Other(value), tmp_path / "r")
    assert not list(tmp_path.iterdir())
    with pytest.raises(TypeError, match="result must be a dataclass, got dict"):
        save({"x": 1}, tmp_path / "r")


@pytest.mark.parametrize("failing", ["safetensors", "json"])
def test_files_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      failing: str) -> None:
    path = save(Other(1.0), tmp_path / "r")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real = safetensors.torch.save_file if failing == "safetensors" else json.dumps

    def half_written(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(*(safetensors.torch, "save_file") if failing == "safetensors"
                        else (json, "dumps"), half_written)
    with pytest.raises(OSError, match="disk full"):
        save(everything(), path)
    monkeypatch.undo()
    # the json file is written second: a failed safetensors write leaves both files as they were
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    if failing == "safetensors":
        assert after == before
    else:
        assert after["r.json"] == before["r.json"] and sorted(after) == sorted(before)
    assert load(Other, path) == Other(1.0)
