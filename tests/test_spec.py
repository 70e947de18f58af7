"""Tests for raptor.book.spec: flat parameter names, type coercion, validation, round trips."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from raptor.book import profiles
from raptor.book.chapters import CHAPTERS, chapter, names
from raptor.book.profiles import DISTILL, PAPER_TEACHER, PAPER_TRAIN, TEACHER, TRAIN
from raptor.book.spec import (Machine, SpecError, diff, fields_of, from_parameters, input_files,
                              literal, nested, param, parameters, require, require_data)
from raptor.catalog import DATASETS
from raptor.teachers import TeacherConfig, TrainConfig
from raptor.train import DistillConfig

ARCHITECTURE = ["L", "D", "heads", "patch_size", "img_size", "registers"]
TRAINING = ["dataset", "steps", "batch_size", "lr", "warmup", "weight_decay", "min_lr",
            "grad_clip", "train_limit", "eval_every", "patience", "half_precision"]
DISTILLATION = ["stage1_steps", "stage2_steps", "distill_lr", "distill_warmup", "distill_limit",
                "distill_val_limit", "distill_eval_every", "distill_patience",
                "distill_decay_frac", "distill_anneal_steps", "distill_half_precision"]
OWN = ["p_values", "ks", "p", "pairs", "weights", "limit", "scale", "flag"]
MACHINE = ["data_root", "device"]


@dataclass(frozen=True)
class Toy:
    """A chapter spec with every kind of field a chapter uses."""

    teacher: TeacherConfig = nested(TEACHER)
    train: TrainConfig = nested(TRAIN)
    distill: DistillConfig = nested(DISTILL)
    p_values: tuple[float, ...] = (0.0, 0.3)
    ks: tuple[int, ...] = (2, 3)
    rate: float = param(0.5, "p")
    pairs: tuple[tuple[int, int], ...] = ((0, 2), (2, 8))
    weights: str | None = None
    limit: int | None = None
    scale: float | None = 1.0
    flag: bool = False
    machine: Machine = nested(Machine)

    def __post_init__(self) -> None:
        require_data(self.teacher, self.train, self.distill)
        require(0 <= self.rate < 1, "p", "in [0, 1)", self.rate)
        require(len(self.ks) > 0 and all(1 <= k <= self.teacher.depth for k in self.ks), "ks",
                f"a non-empty list of k in [1, L = {self.teacher.depth}]", self.ks)


ALL = ARCHITECTURE + TRAINING + DISTILLATION + OWN + MACHINE


def test_nested_fields_flatten_to_their_parameter_names() -> None:
    fields = fields_of(Toy)
    assert list(fields) == ALL
    assert fields["L"].path == ("teacher", "depth") and fields["L"].hint is int
    assert fields["distill_lr"].path == ("distill", "lr")
    assert fields["lr"].path == ("train", "lr")
    assert fields["warmup"].path == ("train", "warmup_steps")
    assert fields["device"].path == ("machine", "device")
    assert fields["p"].path == ("rate",) and fields["p"].hint is float


def test_parameters_and_diff() -> None:
    spec = Toy()
    flat = parameters(spec)
    assert flat["L"] == 12 and flat["distill_limit"] == 5000 and flat["p_values"] == (0.0, 0.3)
    assert flat["p"] == 0.5 and flat["weights"] is None and flat["eval_every"] == 50
    changed = dataclasses.replace(spec, teacher=dataclasses.replace(spec.teacher, depth=4),
                                  rate=0.1)
    assert diff(changed, spec) == {"L": 4, "p": 0.1}
    assert diff(spec, spec) == {}


def test_parameter_names_must_be_unique_also_across_nested_configs() -> None:
    @dataclass(frozen=True)
    class After:
        train: TrainConfig = nested(TRAIN)
        lr: float = 1.0

    @dataclass(frozen=True)
    class Before:
        lr: float = 1.0
        train: TrainConfig = nested(TRAIN)

    for cls in (After, Before):
        with pytest.raises(TypeError, match="two fields use the parameter name 'lr'"):
            fields_of(cls)


@pytest.mark.parametrize("name, value, expected", [
    ("p", 0, 0.0), ("lr", 1, 1.0), ("p_values", [0, 0.5], (0.0, 0.5)), ("ks", (1,), (1,)),
    ("pairs", [[0, 4], (4, 8)], ((0, 4), (4, 8))), ("weights", "w.pth", "w.pth"),
    ("weights", None, None), ("limit", 7, 7), ("limit", None, None), ("scale", 2, 2.0),
    ("scale", None, None), ("flag", True, True), ("data_root", "/d", "/d"),
    ("grad_clip", None, None), ("distill_lr", 1, 1.0)])
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
    ("weights", 3, "a str"), ("steps", 1.5, "an integer")])
def test_wrong_type_names_the_parameter(name: str, value: object, allowed: str) -> None:
    with pytest.raises(SpecError, match=f"parameter '{name}' must be {allowed}, got "):
        from_parameters(Toy, {name: value})


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(SpecError) as info:
        from_parameters(Toy, {"zzz": 1, "depth": 4, "L": 4})
    msg = str(info.value)
    assert msg.startswith("unknown parameter(s) 'depth', 'zzz'; valid parameters: L, D, ")
    assert msg.endswith(", ".join(ALL))
    # a notebook's globals() hold more than its parameters; `profile` is always allowed
    namespace = {"zzz": object(), "profile": "cpu", "L": 4, "__name__": "__main__"}
    assert from_parameters(Toy, namespace, strict=False).teacher.depth == 4
    assert from_parameters(Toy, {"profile": "smoke"}) == Toy()


@pytest.mark.parametrize("name, value, message", [
    ("L", 0, "parameter 'L' must be a positive integer, got 0"),
    ("D", 0, "parameter 'D' must be a positive integer, got 0"),
    ("heads", 3, "parameters: D=64 must be divisible by heads=3"),
    ("patch_size", 5, "parameters: img_size=28 must be divisible by patch_size=5"),
    ("registers", -1, "parameter 'registers' must be >= 0, got -1"),
    ("steps", 0, "parameter 'steps' must be an integer >= 1, got 0"),
    ("batch_size", 0, "parameter 'batch_size' must be an integer >= 1, got 0"),
    ("lr", 0, "parameter 'lr' must be a finite number in (0, inf)"),
    ("lr", float("nan"), "parameter 'lr' must be a finite number in (0, inf)"),
    ("warmup", -1, "parameter 'warmup' must be an integer >= 0, got -1"),
    ("train_limit", 0, "parameter 'train_limit' must be an integer >= 1 or None, got 0"),
    ("eval_every", 0, "parameter 'eval_every' must be an integer >= 1, got 0"),
    ("dataset", "mnist", f"parameter 'dataset' must be one of {', '.join(DATASETS)}"),
    ("stage1_steps", -1, "parameter 'stage1_steps' must be an integer >= 0, got -1"),
    ("distill_lr", -1e-3, "parameter 'distill_lr' must be a finite number in (0, inf)"),
    ("distill_lr", float("inf"), "parameter 'distill_lr' must be a finite number in (0, inf)"),
    ("distill_warmup", -1, "parameter 'distill_warmup' must be an integer >= 0, got -1"),
    ("distill_limit", 0, "parameter 'distill_limit' must be an integer >= 1, got 0"),
    ("device", "tpu", "parameter 'device': device must be 'auto', 'cpu', 'cuda'"),
    ("p", 1.0, "parameter 'p' must be in [0, 1)"), ("ks", [], "parameter 'ks' must be a non-"),
    ("ks", [2, 13], "parameter 'ks' must be a non-empty list of k in [1, L = 12]")])
def test_validation_errors_name_the_notebook_parameter(name: str, value: object, message: str
                                                       ) -> None:
    """The science configurations check their own fields; the error names the parameter as the
    notebook does, not the field."""
    with pytest.raises(SpecError, match="^" + re.escape(message)):
        from_parameters(Toy, {name: value})


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_a_device_that_is_not_here_is_refused_before_any_work() -> None:
    assert Machine().device == "auto"
    with pytest.raises(SpecError, match="parameter 'device': .*CUDA is not available"):
        from_parameters(Toy, {"device": "cuda"})


def test_validation_sees_the_other_parameters() -> None:
    assert from_parameters(Toy, {"ks": [2, 9], "L": 9}).ks == (2, 9)
    assert from_parameters(Toy, {"D": 96, "heads": 3}).teacher.num_heads == 3


def test_a_dataset_brings_its_channels_classes_and_size() -> None:
    spec = from_parameters(Toy, {"dataset": "cifar100", "patch_size": 4})
    assert (spec.teacher.in_chans, spec.teacher.num_classes, spec.teacher.img_size) == (3, 100, 32)
    assert spec.distill.dataset == "cifar100"
    sized = from_parameters(Toy, {"dataset": "cifar100", "img_size": 224, "patch_size": 14})
    assert sized.teacher.img_size == 224
    with pytest.raises(SpecError, match="parameter 'dataset' is 'cifar100' .* the teacher has 1 "
                                        "channels"):
        Toy(train=dataclasses.replace(TRAIN, dataset="cifar100"))


def test_base_is_kept_where_not_overridden() -> None:
    base = dataclasses.replace(Toy(), rate=0.2, teacher=dataclasses.replace(TEACHER, depth=4),
                               train=dataclasses.replace(TRAIN, steps=30))
    spec = from_parameters(Toy, {"steps": 5}, base=base)
    assert (spec.rate, spec.teacher.depth, spec.train.steps) == (0.2, 4, 5)
    assert diff(spec, base) == {"steps": 5}


def parameters_cell(spec: Any, profile: str = "cpu", claims_dir: str = "../claims") -> str:
    """The text of a ``parameters`` cell that writes every parameter of ``spec`` out, as a test's
    notebook holds it (the book's name only their profile: the runner injects the rest)."""
    lines = [f"profile = {profile!r}", f"claims_dir = {claims_dir!r}"]
    lines += [f"{name} = {literal(v)}" for name, v in parameters(spec).items()]
    return "\n".join(lines)


def test_parameters_cell_is_python_that_gives_the_spec_back() -> None:
    cell = parameters_cell(Toy(), profile="smoke")
    lines = cell.splitlines()
    assert lines[0] == "profile = 'smoke'" and "L = 12" in lines and "p_values = [0.0, 0.3]" in lines
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
        "L": depth, "D": heads * draw(st.integers(1, 16)), "heads": heads, "patch_size": 4,
        "img_size": draw(st.sampled_from([16, 32])), "registers": draw(st.integers(0, 4)),
        "dataset": draw(st.sampled_from(["fashion-mnist", "cifar100"])),
        "steps": draw(st.integers(1, 500)),
        "batch_size": draw(st.integers(1, 256)), "lr": draw(number.filter(lambda v: v > 0)),
        "warmup": draw(st.integers(0, 100)), "weight_decay": draw(st.floats(0, 1)),
        "min_lr": draw(st.floats(0, 0.001)), "grad_clip": draw(st.none() | st.floats(0.1, 5)),
        "train_limit": draw(maybe_int), "eval_every": draw(st.integers(1, 100)),
        "patience": draw(st.none() | st.integers(1, 10)), "half_precision": draw(st.booleans()),
        "stage1_steps": (stage1 := draw(st.integers(1, 99))),
        "stage2_steps": draw(st.integers(0, 99)), "distill_lr": draw(st.floats(1e-6, 1.0)),
        "distill_warmup": draw(st.integers(0, 20)), "distill_limit": draw(maybe_int),
        "distill_val_limit": (val := draw(maybe_int)),
        "distill_eval_every": draw(st.integers(1, 100)),
        "distill_patience": draw(st.none() | st.integers(1, 10)) if val else None,
        "distill_decay_frac": draw(st.floats(0.01, 1.0)),
        "distill_anneal_steps": draw(st.none() | st.integers(1, stage1)),
        "distill_half_precision": draw(st.booleans()),
        "p_values": draw(st.lists(rates, max_size=4)),
        "ks": draw(st.lists(st.integers(1, depth), min_size=1, max_size=3)), "p": draw(rates),
        "pairs": draw(pairs), "weights": draw(st.none() | st.text(max_size=5)),
        "limit": draw(maybe_int), "scale": draw(st.none() | number), "flag": draw(st.booleans()),
        "data_root": draw(st.none() | st.text(max_size=8)),
        "device": draw(st.sampled_from(["auto", "cpu"])),
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
    @dataclass(frozen=True)
    class Deeper:
        teacher: TeacherConfig = nested(PAPER_TEACHER)
        train: TrainConfig = nested(PAPER_TRAIN)

    assert Deeper().teacher is PAPER_TEACHER
    assert parameters(Deeper())["D"] == 768
    assert from_parameters(Deeper, {"steps": 400}).train == dataclasses.replace(PAPER_TRAIN,
                                                                                steps=400)


@dataclass(frozen=True)
class _Reads:
    half_weights: bool = True
    old_results: str = "not a file to read"
    tables: tuple[str, ...] = input_files()


@dataclass(frozen=True)
class _Nests:
    reads: _Reads = nested(_Reads)


def test_a_file_to_read_is_marked_on_its_field_not_read_off_its_name(tmp_path: Path) -> None:
    """Only an :func:`input_files` field is checked as files, whatever the names of the others
    (a bool ``half_weights`` once was, and crashed the run), nested or not."""
    from raptor.book.inputs import missing_inputs

    there, gone = tmp_path / "there.json", str(tmp_path / "gone.json")
    there.write_text("{}")
    assert missing_inputs(_Reads()) == []
    assert missing_inputs(_Reads(tables=(str(there), gone))) == [
        f"parameter tables: file {gone} does not exist"]
    assert missing_inputs(_Nests(_Reads(tables=(gone,)))) == [
        f"parameter tables: file {gone} does not exist"]
    assert [n for n, f in fields_of(chapter("scaling").Spec).items() if f.files] == [
        "pipeline_results"]


def _replaces(path: Path) -> list[tuple[str, str, list[str]]]:
    """Each module-level ``NAME = replace(BASE, field=…)`` of ``path``: its name, base and
    fields."""
    out = []
    for node in ast.parse(path.read_text()).body:
        value = getattr(node, "value", None)
        if (isinstance(node, ast.Assign) and isinstance(value, ast.Call)
                and ast.unparse(value.func) in ("replace", "dataclasses.replace")):
            out.append((node.targets[0].id, ast.unparse(value.args[0]),
                        [k.arg for k in value.keywords]))
    return out


@pytest.mark.parametrize("module", ["raptor.book.profiles",
                                    *(f"{c.__name__}.spec" for c in CHAPTERS)])
def test_a_default_is_written_once(module: str) -> None:
    """Every profile object and chapter profile is a ``replace`` of its base that changes each
    field it names: a value equal to the base's restates a default, and the two could drift."""
    mod = importlib.import_module(module)
    found = _replaces(Path(mod.__file__))
    assert found or not dataclasses.fields(mod.Spec), f"{module}: no profile found to check"
    for name, base, fields in found:
        obj, parent = getattr(mod, name), eval(base, vars(mod))
        restated = [f for f in fields if getattr(obj, f) == getattr(parent, f)]
        assert not restated, f"{module}.{name} restates {base}'s {restated}"


def test_chapters_nest_the_profiles_objects() -> None:
    """A chapter's configurations are the profiles' own objects, not copies of their values."""
    shared = {id(v) for v in vars(profiles).values()
              if isinstance(v, (TeacherConfig, TrainConfig, DistillConfig))}
    for name in names():
        mod = chapter(name)
        for spec in (getattr(mod, "Spec", None) and mod.Spec(), getattr(mod, "SMOKE", None),
                     getattr(mod, "PAPER", None)):
            for f in dataclasses.fields(spec) if spec is not None else ():
                value = getattr(spec, f.name)
                if isinstance(value, (TeacherConfig, TrainConfig, DistillConfig)):
                    assert id(value) in shared, f"{name}: {f.name} is not a profile's object"


def test_parameters_and_inputs_are_checked_without_torch() -> None:
    """A spec's parameters, its configurations' values and its inputs are checked with no torch,
    timm, matplotlib or pandas imported (the refusal of a bad value comes at the interpreter's
    start, not after the science's imports)."""
    script = textwrap.dedent("""
        import sys
        from dataclasses import dataclass
        from raptor.book.inputs import missing_inputs
        from raptor.book.profiles import DISTILL, TEACHER, TRAIN
        from raptor.book.spec import Machine, SpecError, from_parameters, nested
        from raptor.config import DistillConfig, TeacherConfig, TrainConfig

        @dataclass(frozen=True)
        class Spec:
            teacher: TeacherConfig = nested(TEACHER)
            train: TrainConfig = nested(TRAIN)
            distill: DistillConfig = nested(DISTILL)
            n_images: int = 10
            machine: Machine = nested(Machine)

        refused = []
        for name, value in (("L", 0), ("distill_lr", -1e-3), ("dataset", "mnist"),
                            ("device", "tpu")):
            try:
                from_parameters(Spec, {name: value})
            except SpecError as err:
                refused.append(str(err))
        spec = from_parameters(Spec, {"n_images": 10_000_000, "data_root": "/nowhere"})
        problems = missing_inputs(spec)
        # every chapter's spec at every profile, and the bad values of the three that name a
        # pretrained ViT (its fit to the weights file, which needs torch, is left to later)
        from raptor.book.chapters import PROFILES, chapter, names, spec_for
        specs = [spec_for(name, profile) for name in names() for profile in PROFILES]
        for name, values in (("phase-structure", {"p_values": [1.5]}),
                             ("phase-structure", {"weights": "/nowhere.safetensors"}),
                             ("finding-phases", {"input_size": 0}),
                             ("analyze", {"model": "vit_tiny_patch16_224"}),
                             ("analyze", {"k_values": [1]})):
            try:
                from_parameters(chapter(name).Spec, values)
            except SpecError as err:
                refused.append(str(err))
        # a weights file that is there: whether it fits the model is checked later, with torch
        from_parameters(chapter("phase-structure").Spec,
                        {"weights": "README.md", "images": "."})
        heavy = [m for m in ("torch", "timm", "torchvision", "matplotlib", "pandas", "scipy")
                 if m in sys.modules]
        print(len(refused), len(problems), len(specs), heavy)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["9", "2", "30", "[]"], done.stdout
