"""Tests for raptor.book.spec: flat parameter names, type coercion, validation, round trips."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import re
import textwrap
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raptor.book.spec import (DistillSpec, SpecError, TeacherSpec, diff, fields_of,
                              from_parameters, nested, param, parameters, parameters_cell,
                              require)
from raptor.data import DATASETS
from raptor.teachers import TeacherConfig, TrainConfig
from raptor.train import DistillConfig

TEACHER = ["dataset", "data_root", "L", "D", "heads", "patch_size", "img_size", "registers",
           "steps", "batch_size", "lr", "warmup", "weight_decay", "min_lr", "grad_clip",
           "train_limit", "device"]
DISTILL = ["stage1_steps", "stage2_steps", "distill_lr", "distill_warmup", "distill_limit"]


@dataclass(frozen=True)
class Toy:
    """A chapter spec with every kind of field a chapter uses."""

    teacher: TeacherSpec = nested(TeacherSpec)
    distill: DistillSpec = nested(DistillSpec)
    p_values: tuple[float, ...] = (0.0, 0.3)
    ks: tuple[int, ...] = (2, 3)
    rate: float = param(0.5, "p")
    pairs: tuple[tuple[int, int], ...] = ((0, 2), (2, 8))
    weights: str | None = None
    limit: int | None = None
    scale: float | None = 1.0
    flag: bool = False

    def __post_init__(self) -> None:
        require(0 <= self.rate < 1, "p", "in [0, 1)", self.rate)
        require(len(self.ks) > 0 and all(1 <= k <= self.teacher.depth for k in self.ks), "ks",
                f"a non-empty list of k in [1, L = {self.teacher.depth}]", self.ks)


def test_nested_fields_flatten_to_their_parameter_names() -> None:
    fields = fields_of(Toy)
    assert list(fields) == TEACHER + DISTILL + ["p_values", "ks", "p", "pairs", "weights",
                                                "limit", "scale", "flag"]
    assert fields["L"].path == ("teacher", "depth") and fields["L"].default == 8
    assert fields["distill_lr"].path == ("distill", "lr")
    assert fields["lr"].path == ("teacher", "lr")
    assert fields["p"].path == ("rate",) and fields["p"].hint == float


def test_parameters_and_diff() -> None:
    spec = Toy()
    flat = parameters(spec)
    assert flat["L"] == 8 and flat["distill_limit"] == 5000 and flat["p_values"] == (0.0, 0.3)
    assert flat["p"] == 0.5 and flat["weights"] is None
    changed = dataclasses.replace(spec, teacher=dataclasses.replace(spec.teacher, depth=4),
                                  rate=0.1)
    assert diff(changed, spec) == {"L": 4, "p": 0.1}
    assert diff(spec, spec) == {}


def test_parameter_names_must_be_unique_also_across_nested_specs() -> None:
    @dataclass(frozen=True)
    class After:
        teacher: TeacherSpec = nested(TeacherSpec)
        lr: float = 1.0

    @dataclass(frozen=True)
    class Before:
        lr: float = 1.0
        teacher: TeacherSpec = nested(TeacherSpec)

    for cls in (After, Before):
        with pytest.raises(TypeError, match="two fields use the parameter name 'lr'"):
            fields_of(cls)


@pytest.mark.parametrize("name, value, expected", [
    ("p", 0, 0.0), ("lr", 1, 1.0), ("p_values", [0, 0.5], (0.0, 0.5)), ("ks", (1,), (1,)),
    ("pairs", [[0, 4], (4, 8)], ((0, 4), (4, 8))), ("weights", "w.pth", "w.pth"),
    ("weights", None, None), ("limit", 7, 7), ("limit", None, None), ("scale", 2, 2.0),
    ("scale", None, None), ("flag", True, True), ("data_root", "/d", "/d")])
def test_values_are_coerced_to_the_field_type(name: str, value: object, expected: object) -> None:
    got = parameters(from_parameters(Toy, {name: value}))[name]
    assert got == expected and type(got) is type(expected)
    if isinstance(expected, tuple):
        assert all(type(a) is type(b) for a, b in zip(got, expected))


@pytest.mark.parametrize("name, value, allowed", [
    ("L", 2.0, "an integer"), ("L", True, "an integer"), ("L", "8", "an integer"),
    ("p", "0.5", "a number"), ("p", False, "a number"), ("flag", 1, "a bool"),
    ("dataset", 3, "a str"), ("p_values", 0.3, "a list of float"),
    ("p_values", [0.1, "x"], "a number"),
    ("ks", [2.5], "an integer"), ("pairs", [[0, 1.5]], "an integer"), ("limit", 2.5, "an integer"),
    ("weights", 3, "a str")])
def test_wrong_type_names_the_parameter(name: str, value: object, allowed: str) -> None:
    with pytest.raises(SpecError, match=f"parameter '{name}' must be {allowed}, got "):
        from_parameters(Toy, {name: value})


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(SpecError) as info:
        from_parameters(Toy, {"zzz": 1, "depth": 4, "L": 4})
    msg = str(info.value)
    assert msg.startswith("unknown parameter(s) 'depth', 'zzz'; valid parameters: dataset, ")
    assert msg.endswith(", ".join(TEACHER + DISTILL + ["p_values", "ks", "p", "pairs", "weights",
                                                       "limit", "scale", "flag"]))
    # a notebook's globals() hold more than its parameters; `profile` is always allowed
    namespace = {"zzz": object(), "profile": "cpu", "L": 4, "__name__": "__main__"}
    assert from_parameters(Toy, namespace, strict=False).teacher.depth == 4
    assert from_parameters(Toy, {"profile": "smoke"}) == Toy()


@pytest.mark.parametrize("cls, name, value, allowed", [
    (TeacherSpec, "L", 0, "≥ 1"), (TeacherSpec, "D", 0, "≥ 1"),
    (TeacherSpec, "heads", 3, "a positive divisor of D = 64"),
    (TeacherSpec, "patch_size", 5, "a positive divisor of the image size 28"),
    (TeacherSpec, "registers", -1, "≥ 0"), (TeacherSpec, "steps", -1, "≥ 0"),
    (TeacherSpec, "batch_size", 0, "≥ 1"), (TeacherSpec, "lr", 0, "a finite number > 0"),
    (TeacherSpec, "lr", math.nan, "a finite number > 0"),
    (TeacherSpec, "train_limit", 0, "None or ≥ 1"),
    (TeacherSpec, "dataset", "mnist", f"one of {', '.join(DATASETS)}"),
    (DistillSpec, "stage1_steps", -1, "≥ 0"), (DistillSpec, "stage2_steps", -2, "≥ 0"),
    (DistillSpec, "distill_lr", -1e-3, "a finite number > 0"),
    (DistillSpec, "distill_lr", math.inf, "a finite number > 0"),
    (DistillSpec, "distill_warmup", -1, "≥ 0"),
    (DistillSpec, "distill_limit", 0, "None or ≥ 1"),
    (Toy, "p", 1.0, "in [0, 1)"), (Toy, "ks", [], "a non-empty list"),
    (Toy, "ks", [2, 9], "a non-empty list of k in [1, L = 8]")])
def test_validation_errors_name_the_notebook_parameter(cls: type, name: str, value: object,
                                                       allowed: str) -> None:
    for spec_cls in {cls, Toy}:  # alone and nested in a chapter's spec
        with pytest.raises(SpecError, match=re.escape(f"parameter '{name}' must be {allowed}")):
            from_parameters(spec_cls, {name: value})


def test_validation_sees_the_other_parameters() -> None:
    assert from_parameters(Toy, {"ks": [2, 9], "L": 9}).ks == (2, 9)
    assert from_parameters(Toy, {"D": 96, "heads": 3}).teacher.num_heads == 3


def test_base_is_kept_where_not_overridden() -> None:
    base = dataclasses.replace(Toy(), rate=0.2,
                               teacher=dataclasses.replace(TeacherSpec(), depth=4, steps=30))
    spec = from_parameters(Toy, {"steps": 5}, base=base)
    assert (spec.rate, spec.teacher.depth, spec.teacher.steps) == (0.2, 4, 5)
    assert diff(spec, base) == {"steps": 5}


def test_parameters_cell_is_python_that_gives_the_spec_back() -> None:
    cell = parameters_cell(Toy(), profile="smoke")
    lines = cell.splitlines()
    assert lines[0] == "profile = 'smoke'" and "L = 8" in lines and "p_values = [0.0, 0.3]" in lines
    namespace: dict = {}
    exec(cell, namespace)
    assert namespace["profile"] == "smoke" and isinstance(namespace["ks"], list)
    assert from_parameters(Toy, namespace, strict=False) == Toy()


@st.composite
def toy_values(draw: st.DrawFn) -> dict[str, object]:
    """Valid flat parameters for ``Toy``, as a notebook or ``-p`` gives them (lists, ints)."""
    heads = draw(st.integers(1, 4))
    depth = draw(st.integers(1, 12))
    number = st.one_of(st.integers(0, 5), st.floats(0.001, 10.0, allow_nan=False))
    maybe_int = st.none() | st.integers(1, 10_000)
    rates = st.floats(0, 0.99) | st.just(0)
    pairs = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)).map(list), max_size=3)
    return {
        "dataset": draw(st.sampled_from(["fashion-mnist", "cifar100"])),
        "data_root": draw(st.none() | st.text(max_size=8)), "L": depth,
        "D": heads * draw(st.integers(1, 16)), "heads": heads, "patch_size": 4,
        "img_size": draw(st.none() | st.sampled_from([16, 32])),
        "registers": draw(st.integers(0, 4)), "steps": draw(st.integers(0, 500)),
        "batch_size": draw(st.integers(1, 256)), "lr": draw(number.filter(lambda v: v > 0)),
        "warmup": draw(st.integers(0, 100)), "weight_decay": draw(st.floats(0, 1)),
        "min_lr": draw(st.floats(0, 0.001)), "grad_clip": draw(st.none() | st.floats(0.1, 5)),
        "train_limit": draw(maybe_int), "device": draw(st.sampled_from(["auto", "cpu"])),
        "stage1_steps": draw(st.integers(0, 99)),
        "stage2_steps": draw(st.integers(0, 99)), "distill_lr": draw(st.floats(1e-6, 1.0)),
        "distill_warmup": draw(st.integers(0, 20)), "distill_limit": draw(maybe_int),
        "p_values": draw(st.lists(rates, max_size=4)),
        "ks": draw(st.lists(st.integers(1, depth), min_size=1, max_size=3)), "p": draw(rates),
        "pairs": draw(pairs), "weights": draw(st.none() | st.text(max_size=5)),
        "limit": draw(maybe_int), "scale": draw(st.none() | number), "flag": draw(st.booleans()),
    }


@settings(max_examples=60, deadline=None)
@given(values=toy_values())
def test_round_trip_parameters_from_parameters(values: dict[str, object]) -> None:
    spec = from_parameters(Toy, values)
    flat = parameters(spec)
    assert flat == {k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
                    if isinstance(v, list) else v for k, v in values.items()}
    assert from_parameters(Toy, flat) == spec
    namespace: dict = {}
    exec(parameters_cell(spec), namespace)
    assert from_parameters(Toy, namespace, strict=False) == spec
    hints = {name: f.hint for name, f in fields_of(Toy).items()}
    for name, value in flat.items():
        if hints[name] is float:
            assert type(value) is float, name
        if isinstance(value, tuple) and hints[name] == tuple[float, ...]:
            assert all(type(x) is float for x in value), name


def test_a_nested_field_may_default_to_an_instance() -> None:
    family = TeacherSpec(depth=12, steps=1500)

    @dataclass(frozen=True)
    class Deeper:
        teacher: TeacherSpec = nested(family)

    assert Deeper().teacher is family
    assert parameters(Deeper())["L"] == 12
    assert from_parameters(Deeper, {"steps": 400}).teacher == TeacherSpec(depth=12, steps=400)


@pytest.mark.parametrize("spec, science", [(TeacherSpec, (TeacherConfig, TrainConfig)),
                                           (DistillSpec, (DistillConfig,))])
def test_a_default_the_science_config_holds_is_written_there_only(spec: type, science: tuple
                                                                  ) -> None:
    """A spec field whose default is its science config's (same name, same value) takes it from
    there: written as a literal in the spec, the two could drift apart."""
    source = inspect.getsource(spec)
    tree = ast.parse(textwrap.dedent(source)).body[0]
    defaults = {f.name: f.default for cls in science for f in dataclasses.fields(cls)}
    written = []
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "param":
                value = value.args[0]
            name = node.target.id
            if isinstance(value, ast.Constant) and name in defaults \
                    and defaults[name] == value.value:
                written.append(name)
    assert not written, f"{spec.__name__} restates science defaults: {written}"
    assert TeacherSpec().training() == dataclasses.replace(
        TrainConfig(), steps=TeacherSpec.steps, eval_every=TeacherSpec.steps // 4)
