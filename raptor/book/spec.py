"""Chapter specs: frozen dataclasses whose flattened fields are a notebook's papermill parameters.

A chapter's ``Spec`` nests the science's own configurations — the teacher's architecture
(:class:`~raptor.config.TeacherConfig`), its training (:class:`~raptor.config.TrainConfig`),
the Raptor's distillation (:class:`~raptor.config.DistillConfig`) — and the :class:`Machine` it
runs on. :data:`PARAMETERS` names the fields of each configuration a notebook sets, with the
paper's names where it has one (``L`` for depth, ``D`` for width); a chapter's own fields are
parameters under their names, or those :func:`param` gives. Types and unknown names are checked
here, values by the configurations themselves, their errors named as the notebook names them.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raptor.catalog import DATASETS, dataset_info
from raptor.config import DistillConfig, TeacherConfig, TrainConfig, check_device


class SpecError(ValueError):
    """A bad chapter parameter, named as the notebook names it."""


def param(default: Any, name: str | None = None, doc: str = "") -> Any:
    """A spec field whose notebook parameter is called ``name`` (default: the field's name)."""
    return field(default=default, metadata={"param": name, "doc": doc})


def input_files(default: tuple[str, ...] = ()) -> Any:
    """A spec field naming files the chapter reads, each checked to be there before any work
    (:func:`raptor.book.inputs.missing_inputs`)."""
    return field(default=default, metadata={"files": True})


def nested(default: Any) -> Any:
    """A nested spec field, defaulting to ``default()`` for a class, else to the (frozen)
    instance ``default``."""
    return field(default_factory=default if isinstance(default, type) else lambda: default)


def require(ok: bool, name: str, allowed: str, value: Any) -> None:
    """Raise :class:`SpecError` naming parameter ``name`` unless ``ok``."""
    if not ok:
        raise SpecError(f"parameter {name!r} must be {allowed}, got {value!r}")


#: A replicate Raptor's distillation seed steps past the teachers' seeds by this much
#: (:func:`raptor.book.experiment.student_of`), which are therefore below it.
REPLICATE_SEEDS = 1000


def require_seeds(seeds: tuple[int, ...]) -> None:
    """:func:`require` for a chapter's ``seeds``: distinct, in [0, :data:`REPLICATE_SEEDS`), at
    least one."""
    require(len(seeds) >= 1 and len(set(seeds)) == len(seeds)
            and all(0 <= s < REPLICATE_SEEDS for s in seeds),
            "seeds", f"a non-empty list of distinct seeds in [0, {REPLICATE_SEEDS})", seeds)


# The fields of each science configuration a notebook sets -> their parameter names (the
# paper's where it has one). The rest are fixed by the chapter (a teacher's channels and
# classes follow its dataset; a student's blocks, its chapter's partition).
PARAMETERS: dict[type, dict[str, str]] = {
    TeacherConfig: {"depth": "L", "embed_dim": "D", "num_heads": "heads",
                    "patch_size": "patch_size", "img_size": "img_size",
                    "reg_tokens": "registers"},
    TrainConfig: {"dataset": "dataset", "steps": "steps", "batch_size": "batch_size", "lr": "lr",
                  "warmup_steps": "warmup", "weight_decay": "weight_decay", "min_lr": "min_lr",
                  "grad_clip": "grad_clip", "train_limit": "train_limit",
                  "eval_every": "eval_every", "patience": "patience",
                  "half_weights": "half_precision"},
    DistillConfig: {"stage1_steps": "stage1_steps", "stage2_steps": "stage2_steps",
                    "lr": "distill_lr", "warmup_steps": "distill_warmup",
                    "train_limit": "distill_limit", "val_limit": "distill_val_limit",
                    "eval_every": "distill_eval_every", "patience": "distill_patience",
                    "decay_frac": "distill_decay_frac", "anneal_steps": "distill_anneal_steps",
                    "half_weights": "distill_half_precision"},
}


@dataclass(frozen=True)
class Machine:
    """Where a chapter reads its data (``data_root``; ``None``: :mod:`raptor.data`'s default) and
    what runs it: ``device`` trains the teachers and their students and runs every forward pass
    (``"auto"``: CUDA when available, else the CPU)."""

    data_root: str | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        try:
            check_device(self.device)
        except ValueError as err:
            raise SpecError(f"parameter 'device': {err}") from None


@dataclass(frozen=True)
class _Field:
    path: tuple[str, ...]
    hint: Any
    files: bool = False  # names files to read (:func:`input_files`)


def fields_of(cls: type) -> dict[str, _Field]:
    """Parameter name -> where it sits in the (nested) spec and its type."""
    out: dict[str, _Field] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if hint in PARAMETERS:
            sub = typing.get_type_hints(hint)
            found = {name: _Field((f.name, field_name), sub[field_name])
                     for field_name, name in PARAMETERS[hint].items()}
        elif dataclasses.is_dataclass(hint):
            found = {name: dataclasses.replace(where, path=(f.name, *where.path))
                     for name, where in fields_of(hint).items()}
        else:
            found = {f.metadata.get("param") or f.name:
                     _Field((f.name,), hint, f.metadata.get("files", False))}
        for name, where in found.items():
            if name in out:
                raise TypeError(f"{cls.__name__}: two fields use the parameter name {name!r}")
            out[name] = where
    return out


def parameters(spec: Any) -> dict[str, Any]:
    """The spec's flat parameters, in the order of its fields."""
    out = {}
    for name, f in fields_of(type(spec)).items():
        value = spec
        for part in f.path:
            value = getattr(value, part)
        out[name] = value
    return out


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """``value`` as type ``hint`` (ints are accepted for floats, lists for tuples), or an error."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(name, value, arg)
            except SpecError as err:
                errors.append(str(err))
        raise SpecError(errors[0])
    if origin is tuple:
        item = args[0]
        require(isinstance(value, (list, tuple)), name, f"a list of {_describe(item)}", value)
        return tuple(_coerce(name, v, item) for v in value)
    if hint is float:
        require(isinstance(value, (int, float)) and not isinstance(value, bool), name,
                "a number", value)
        return float(value)
    if hint is int:
        require(isinstance(value, int) and not isinstance(value, bool), name, "an integer", value)
        return value
    if hint in (bool, str):
        require(isinstance(value, hint), name, f"a {hint.__name__}", value)
        return value
    raise TypeError(f"unsupported spec type {hint!r} for {name!r}")


def _describe(hint: Any) -> str:
    return str(hint) if typing.get_args(hint) else hint.__name__


def from_parameters(cls: type, values: Mapping[str, Any], *, strict: bool = True,
                    base: Any = None) -> Any:
    """The spec ``cls`` with ``values`` (flat parameter names) over ``base`` (default ``cls()``).

    A ``dataset`` other than the base's brings its channels, classes and, unless ``img_size`` is
    given, its image size to the teacher, and its name to the distillation. ``strict``: an
    unknown name is an error listing the valid ones (off for a notebook's ``globals()``, which
    hold more than the parameters).
    """
    known = fields_of(cls)
    if strict:
        unknown = sorted(set(values) - set(known) - {"profile"})
        if unknown:
            raise SpecError(f"unknown parameter(s) {', '.join(map(repr, unknown))}; valid "
                            f"parameters: {', '.join(known)}")
    base = base if base is not None else cls()
    changes = {known[name].path: _coerce(name, values[name], known[name].hint)
               for name in known if name in values}
    if "dataset" in values and values["dataset"] != parameters(base)["dataset"]:
        changes |= _dataset_changes(cls, values["dataset"], keep_size="img_size" in values)
    return _replace(base, changes)


def _dataset_changes(cls: type, dataset: str, keep_size: bool) -> dict[tuple[str, ...], Any]:
    """What a new ``dataset`` changes in ``cls``'s teacher and distillation."""
    require(dataset in DATASETS, "dataset", f"one of {', '.join(DATASETS)}", dataset)
    info = dataset_info(dataset)
    out: dict[tuple[str, ...], Any] = {}
    for name, hint in typing.get_type_hints(cls).items():
        if hint is TeacherConfig:
            out |= {(name, "in_chans"): info.in_chans, (name, "num_classes"): info.num_classes}
            if not keep_size:
                out[(name, "img_size")] = info.image_size
        elif hint is DistillConfig:
            out[(name, "dataset")] = dataset
    return out


def _replace(obj: Any, changes: Mapping[tuple[str, ...], Any]) -> Any:
    """``obj`` with the (nested) fields at ``changes``' paths replaced; a science
    configuration's errors are named with the notebook's parameters."""
    here: dict[str, Any] = {}
    inner: dict[str, dict[tuple[str, ...], Any]] = {}
    for (head, *rest), value in changes.items():
        if rest:
            inner.setdefault(head, {})[tuple(rest)] = value
        else:
            here[head] = value
    here |= {head: _replace(getattr(obj, head), sub) for head, sub in inner.items()}
    try:
        return dataclasses.replace(obj, **here)
    except ValueError as err:
        if type(obj) not in PARAMETERS:  # a chapter's own check: already in its names
            raise
        raise SpecError(_in_parameters(str(err), PARAMETERS[type(obj)])) from None


def _in_parameters(message: str, names: Mapping[str, str]) -> str:
    """A science configuration's error ``message`` in the notebook's parameter names."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    message = pattern.sub(lambda m: names[m.group(1)], message)
    first = message.split(" ", 1)[0]
    if first in names.values() and message.startswith(f"{first} must"):
        return f"parameter {first!r}{message[len(first):]}"
    return f"parameters: {message}"


def require_data(teacher: TeacherConfig, train: TrainConfig,
                 distill: DistillConfig | None = None) -> None:
    """A chapter's teacher and distillation agree with its training's dataset (channels, classes
    and name; :func:`from_parameters` sets them so)."""
    info = dataset_info(train.dataset)
    if (teacher.in_chans, teacher.num_classes) != (info.in_chans, info.num_classes) or (
            distill is not None and distill.dataset != train.dataset):
        raise SpecError(f"parameter 'dataset' is {train.dataset!r} ({info.in_chans} channels, "
                        f"{info.num_classes} classes), but the teacher has {teacher.in_chans} "
                        f"channels and {teacher.num_classes} classes"
                        + (f" and the distillation reads {distill.dataset!r}"
                           if distill is not None else "")
                        + "; set the spec with from_parameters, which makes them agree")


def diff(spec: Any, base: Any) -> dict[str, Any]:
    """The parameters of ``spec`` that differ from ``base`` (what a run card names as changed)."""
    a, b = parameters(spec), parameters(base)
    return {name: value for name, value in a.items() if b[name] != value}


def plain(value: Any) -> Any:
    """``value`` as a notebook holds it: tuples, nested ones too, as lists."""
    return [plain(v) for v in value] if isinstance(value, (tuple, list)) else value


def notebook_values(spec: Any) -> dict[str, Any]:
    """Every parameter of ``spec`` as a notebook holds it (what papermill injects)."""
    return {name: plain(v) for name, v in parameters(spec).items()}


def literal(value: Any) -> str:
    """``value`` as a notebook writes it."""
    return repr(plain(value))
