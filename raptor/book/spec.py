"""Chapter specs: frozen dataclasses whose flattened fields are a notebook's papermill parameters.

A chapter's ``Spec`` nests the specs it shares with other chapters (:class:`TeacherSpec`,
:class:`DistillSpec`), whose fields carry the science modules' own names. Each field's
*parameter* name — what a notebook's ``parameters`` cell and ``-p NAME VALUE`` use — is the
paper's name where it has one (``L`` for depth, ``D`` for width), given by :func:`param`.
Types, unknown names and values are checked here, from the dataclass, before anything runs.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from raptor.data import DATASETS, dataset_info, eval_images
from raptor.loop import resolve_device
from raptor.phases import Partition, partition_to_repeats
from raptor.storage.cache import planned_images
from raptor.teachers import TeacherConfig, TrainConfig, get_teacher, teacher_snapshot
from raptor.train import DistillConfig, get_student


class SpecError(ValueError):
    """A bad chapter parameter, named as the notebook names it."""


def param(default: Any, name: str | None = None, doc: str = "") -> Any:
    """A spec field whose notebook parameter is called ``name`` (default: the field's name)."""
    return field(default=default, metadata={"param": name, "doc": doc})


def nested(default: Any) -> Any:
    """A nested spec field, defaulting to ``default()`` for a class, else to the (frozen)
    instance ``default``."""
    return field(default_factory=default if isinstance(default, type) else lambda: default)


def require(ok: bool, name: str, allowed: str, value: Any) -> None:
    """Raise :class:`SpecError` naming parameter ``name`` unless ``ok``."""
    if not ok:
        raise SpecError(f"parameter {name!r} must be {allowed}, got {value!r}")


def require_seeds(seeds: tuple[int, ...]) -> None:
    """:func:`require` for a chapter's ``seeds``: distinct, ≥ 0, at least one."""
    require(len(seeds) >= 1 and len(set(seeds)) == len(seeds) and all(s >= 0 for s in seeds),
            "seeds", "a non-empty list of distinct seeds ≥ 0", seeds)


@dataclass(frozen=True)
class _Field:
    path: tuple[str, ...]
    hint: Any
    default: Any


def fields_of(cls: type) -> dict[str, _Field]:
    """Parameter name -> where it sits in the (nested) spec, its type and its default."""
    out: dict[str, _Field] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            found = {name: _Field((f.name, *sub.path), sub.hint, sub.default)
                     for name, sub in fields_of(hint).items()}
        else:
            found = {f.metadata.get("param") or f.name: _Field((f.name,), hint, f.default)}
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

    ``strict``: an unknown name is an error listing the valid ones (off for a notebook's
    ``globals()``, which hold more than the parameters).
    """
    known = fields_of(cls)
    if strict:
        unknown = sorted(set(values) - set(known) - {"profile"})
        if unknown:
            raise SpecError(f"unknown parameter(s) {', '.join(map(repr, unknown))}; valid "
                            f"parameters: {', '.join(known)}")
    flat = parameters(base if base is not None else cls())
    flat.update({name: _coerce(name, values[name], known[name].hint)
                 for name in known if name in values})
    return _build(cls, flat, known, ())


def _build(cls: type, flat: dict[str, Any], known: dict[str, _Field], prefix: tuple[str, ...]
           ) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        path = (*prefix, f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            kwargs[f.name] = _build(hints[f.name], flat, known, path)
        else:
            kwargs[f.name] = next(flat[n] for n, k in known.items() if k.path == path)
    return cls(**kwargs)


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


def parameters_cell(spec: Any, profile: str = "cpu", claims_dir: str = "../claims") -> str:
    """The text of a notebook's ``parameters`` cell for ``spec`` (tests keep notebooks in sync)."""
    lines = [f"profile = {profile!r}", f"claims_dir = {claims_dir!r}"]
    lines += [f"{name} = {literal(v)}" for name, v in parameters(spec).items()]
    return "\n".join(lines)


def literal(value: Any) -> str:
    """``value`` as a notebook writes it."""
    return repr(plain(value))


@dataclass(frozen=True)
class TeacherSpec:
    """The teacher family and its training (§2; the ``cpu`` profile's small ViTs by default).

    The paper trains ViT-B/14 on CIFAR-100 (§2); the ``cpu`` profile trains ViTs with
    8 blocks of width 64 on Fashion-MNIST for 400 steps [ours: a 2-core budget]. ``device``
    trains the teachers and their students and runs every forward pass of the chapter
    (``"auto"``: CUDA when available, else the CPU).
    """

    dataset: str = TrainConfig.dataset
    data_root: str | None = None
    depth: int = param(TeacherConfig.depth, "L")
    embed_dim: int = param(TeacherConfig.embed_dim, "D")
    num_heads: int = param(TeacherConfig.num_heads, "heads")
    patch_size: int = 7  # [ours] 4 × 4 patches of a 28-px image
    img_size: int | None = None
    reg_tokens: int = param(2, "registers")  # [ours] as DINOv2-B has registers (§3)
    steps: int = 400  # [ours] see the class docstring
    batch_size: int = TrainConfig.batch_size
    lr: float = TrainConfig.lr
    warmup_steps: int = param(TrainConfig.warmup_steps, "warmup")
    weight_decay: float = TrainConfig.weight_decay
    min_lr: float = TrainConfig.min_lr
    grad_clip: float | None = TrainConfig.grad_clip
    train_limit: int | None = TrainConfig.train_limit
    device: str = "auto"

    def __post_init__(self) -> None:
        require(self.dataset in DATASETS, "dataset", f"one of {', '.join(DATASETS)}", self.dataset)
        info = dataset_info(self.dataset)
        require(self.depth >= 1, "L", "≥ 1", self.depth)
        require(self.embed_dim >= 1, "D", "≥ 1", self.embed_dim)
        require(self.num_heads >= 1 and self.embed_dim % self.num_heads == 0, "heads",
                f"a positive divisor of D = {self.embed_dim}", self.num_heads)
        size = self.img_size or info.image_size
        require(self.patch_size >= 1 and size % self.patch_size == 0, "patch_size",
                f"a positive divisor of the image size {size}", self.patch_size)
        require(self.reg_tokens >= 0, "registers", "≥ 0", self.reg_tokens)
        require(self.steps >= 0, "steps", "≥ 0", self.steps)
        require(self.batch_size >= 1, "batch_size", "≥ 1", self.batch_size)
        require(math.isfinite(self.lr) and self.lr > 0, "lr", "a finite number > 0", self.lr)
        require(self.warmup_steps >= 0, "warmup", "≥ 0", self.warmup_steps)
        require(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay",
                "a finite number ≥ 0", self.weight_decay)
        require(math.isfinite(self.min_lr) and 0 <= self.min_lr <= self.lr, "min_lr",
                "in [0, lr]", self.min_lr)
        require(self.grad_clip is None or (math.isfinite(self.grad_clip) and self.grad_clip > 0),
                "grad_clip", "None or a finite number > 0", self.grad_clip)
        require(self.train_limit is None or self.train_limit >= 1, "train_limit",
                "None or ≥ 1", self.train_limit)
        try:
            resolve_device(self.device)
        except ValueError as err:
            raise SpecError(f"parameter 'device': {err}") from None

    def teacher(self, p: float = 0.0, residual: bool = True) -> TeacherConfig:
        info = dataset_info(self.dataset)
        return TeacherConfig(depth=self.depth, embed_dim=self.embed_dim,
                             num_heads=self.num_heads, patch_size=self.patch_size,
                             img_size=self.img_size or info.image_size, in_chans=info.in_chans,
                             num_classes=info.num_classes, reg_tokens=self.reg_tokens, p=p,
                             residual=residual)

    def training(self, seed: int = 0, **changes: Any) -> TrainConfig:
        base = TrainConfig(dataset=self.dataset, steps=self.steps, batch_size=self.batch_size,
                           lr=self.lr, weight_decay=self.weight_decay,
                           warmup_steps=self.warmup_steps, min_lr=self.min_lr,
                           grad_clip=self.grad_clip, seed=seed, train_limit=self.train_limit,
                           eval_every=max(1, self.steps // 4))
        return dataclasses.replace(base, **changes)

    def get_teacher(self, p: float = 0.0, *, seed: int = 0, trained: bool = True,
                    residual: bool = True, **train_changes: Any):
        """The teacher (trained through the cache, or untrained) and its training record."""
        train = self.training(seed, **train_changes) if trained else None
        return get_teacher(self.teacher(p, residual), train, seed=seed, data_root=self.data_root,
                           progress=False, device=self.device)

    def get_student(self, distill: DistillSpec, p: float, partition: Partition, *, seed: int = 0,
                    trained: bool = True, residual: bool = True,
                    teacher_changes: Mapping[str, Any] | None = None, **changes: Any):
        """The Raptor distilled from that teacher with ``partition`` (max-cut or any), cached.

        ``changes`` override :class:`~raptor.train.DistillConfig` fields (Table 2's ablations).
        """
        train = self.training(seed, **(teacher_changes or {})) if trained else None
        cfg = distill.config(partition, self.dataset, seed,
                             **{"device": resolve_device(self.device), **changes})
        return get_student(self.teacher(p, residual), train, seed, cfg,
                           data_root=self.data_root, progress=False)

    def snapshot_teacher(self, p: float, step: int, *, seed: int = 0, **train_changes: Any
                         ) -> torch.nn.Module:
        """The teacher's weights at training ``step`` (one of its ``snapshot_steps``)."""
        return teacher_snapshot(self.teacher(p), self.training(seed, **train_changes), step,
                                seed=seed, data_root=self.data_root, device=self.device)

    def get_snapshot_student(self, distill: DistillSpec, p: float, partition: Partition,
                             step: int, *, seed: int = 0,
                             teacher_changes: Mapping[str, Any] | None = None):
        """The Raptor of the teacher's weights at training ``step`` (a snapshot, Fig. 13)."""
        train = self.training(seed, **(teacher_changes or {}))
        cfg = distill.config(partition, self.dataset, seed, device=resolve_device(self.device))
        return get_student(self.teacher(p), train, seed, cfg, data_root=self.data_root,
                           snapshot=step, progress=False)

    def eval_images(self, n: int, seed: int = 0, split: str = "val"
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` images and labels of ``split``: a seeded random subset, the same in every chapter."""
        planned = planned_images(self.dataset, self.img_size, n, seed)
        if planned is not None:  # a dry run's plan (raptor.sweep): no data is read
            return planned
        require(split in ("train", "val"), "split", "'train' or 'val'", split)
        try:
            return eval_images(self.dataset, n, seed=seed, split=split, root=self.data_root,
                               img_size=self.img_size)
        except ValueError as err:
            if str(err).startswith("n_images"):  # the data module names the parameter
                raise SpecError(f"parameter {err}") from None
            raise


@dataclass(frozen=True)
class DistillSpec:
    """The Raptor's two-stage distillation (§3, Fig. 6, Eqs. 2–3) at a chapter's budget.

    Field names are :class:`~raptor.train.DistillConfig`'s; the ``cpu`` profile's stages are
    100 steps each on 5,000 training images [ours: a 2-core budget].
    """

    stage1_steps: int = 100
    stage2_steps: int = 100
    lr: float = param(1e-3, "distill_lr")
    warmup_steps: int = param(20, "distill_warmup")
    train_limit: int | None = param(5000, "distill_limit")

    def __post_init__(self) -> None:
        require(self.stage1_steps >= 0, "stage1_steps", "≥ 0", self.stage1_steps)
        require(self.stage2_steps >= 0, "stage2_steps", "≥ 0", self.stage2_steps)
        require(math.isfinite(self.lr) and self.lr > 0, "distill_lr", "a finite number > 0",
                self.lr)
        require(self.warmup_steps >= 0, "distill_warmup", "≥ 0", self.warmup_steps)
        require(self.train_limit is None or self.train_limit >= 1, "distill_limit",
                "None or ≥ 1", self.train_limit)

    def config(self, partition: Partition, dataset: str, seed: int, **changes: Any
               ) -> DistillConfig:
        """The :class:`~raptor.train.DistillConfig` for a student of ``partition``."""
        return DistillConfig(repeats=partition_to_repeats(partition), dataset=dataset, seed=seed,
                             cache_teacher=True, **dataclasses.asdict(self), **changes)
