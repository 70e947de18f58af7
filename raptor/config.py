"""The science's configurations, each checking its own values: a teacher's architecture
(:class:`TeacherConfig`) and training (:class:`TrainConfig`), a Raptor's distillation
(:class:`DistillConfig`), and the device names. Plain data, no torch: a chapter's parameters are
checked before any work (:mod:`raptor.book.spec`); :mod:`raptor.teachers` and :mod:`raptor.train`
build and train from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from raptor.catalog import DATASETS
from raptor.paper import RECIPE, Weights

MLP_VARIANTS = ("teacher", "swiglu", "swiglu-wide")
INITS = ("teacher", "random")


class Optimisation(Protocol):
    """The optimisation fields of every training configuration (same names everywhere)."""

    @property
    def lr(self) -> float: ...
    @property
    def weight_decay(self) -> float: ...
    @property
    def warmup_steps(self) -> int: ...
    @property
    def min_lr(self) -> float: ...
    @property
    def grad_clip(self) -> float | None: ...


def check_recipe(recipe: Optimisation) -> None:
    """Raise :class:`ValueError` naming the field unless ``lr`` is finite and > 0, ``min_lr`` in
    [0, lr], ``weight_decay`` finite and >= 0, ``warmup_steps`` an integer >= 0 and ``grad_clip``
    finite and > 0 or None (no clipping)."""
    def number(name: str, low: float, high: float, open_low: bool, none: bool = False) -> None:
        value = getattr(recipe, name)
        if none and value is None:
            return
        if (not isinstance(value, (int, float)) or isinstance(value, bool)
                or not math.isfinite(value) or not low <= value <= high
                or (open_low and value == low)):
            span = f"{'(' if open_low else '['}{low}, {high}{']' if high < math.inf else ')'}"
            raise ValueError(f"{name} must be a finite number in {span}"
                             f"{' or None' if none else ''}, got {value!r}")

    number("lr", 0, math.inf, True)
    lr = recipe.lr
    number("min_lr", 0, lr, False)
    number("weight_decay", 0, math.inf, False)
    number("grad_clip", 0, math.inf, True, none=True)
    warmup = recipe.warmup_steps
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise ValueError(f"warmup_steps must be an integer >= 0, got {warmup!r}")


def check_repeats(repeats: object) -> tuple[int, ...]:
    """``repeats`` as a tuple; ValueError unless it is a non-empty sequence of positive ints."""
    if not isinstance(repeats, (list, tuple)) or not repeats or any(
            not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in repeats):
        raise ValueError(f"repeats must be a non-empty sequence of positive ints, got {repeats!r}")
    return tuple(repeats)


def check_device(device: str) -> None:
    """Raise :class:`ValueError` unless ``device`` is ``"auto"``, ``"cpu"``, ``"cuda"`` or
    ``"cuda:<index>"``, CUDA being available for the last two."""
    if device == "auto":
        return
    kind, _, index = device.partition(":") if isinstance(device, str) else ("", "", "")
    if kind not in ("cpu", "cuda") or (index and (kind == "cpu" or not index.isdigit())):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:<index>', got {device!r}")
    if kind == "cuda":
        import torch  # only for a CUDA device: every other value is checked without torch

        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but CUDA is not available here; use 'auto' or "
                             "'cpu'")


@dataclass(frozen=True)
class TeacherConfig:
    """Architecture of a ViT teacher (timm ``VisionTransformer`` arguments, paper names).

    ``tied``: the blocks shared within consecutive groups of these sizes (one block applied
    ``n_j`` times, as a Raptor's): a teacher with phases by construction, the trained positive
    control of the claims that presuppose phases [ours]. ``None``: every block its own.
    """

    depth: int = 8
    embed_dim: int = 64
    num_heads: int = 4
    patch_size: int = 4
    img_size: int = 28
    in_chans: int = 1
    num_classes: int = 10
    reg_tokens: int = 0
    mlp_ratio: float = 4.0
    layerscale: float | None = None
    p: float = 0.0
    residual: bool = True
    tied: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.tied is not None:
            object.__setattr__(self, "tied", check_repeats(self.tied))
            if sum(self.tied) != self.depth:
                raise ValueError(f"tied={self.tied} must sum to depth={self.depth}")
        for name in ("depth", "embed_dim", "num_heads", "patch_size", "img_size", "in_chans",
                     "num_classes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.embed_dim % self.num_heads:
            raise ValueError(f"embed_dim={self.embed_dim} must be divisible by "
                             f"num_heads={self.num_heads}")
        if self.img_size % self.patch_size:
            raise ValueError(f"img_size={self.img_size} must be divisible by "
                             f"patch_size={self.patch_size}")
        if not 0.0 <= self.p < 1.0:
            raise ValueError(f"stochastic-depth rate p must be in [0, 1), got {self.p}")
        if self.reg_tokens < 0:
            raise ValueError(f"reg_tokens must be >= 0, got {self.reg_tokens}")
        if self.layerscale is not None and self.layerscale <= 0:
            raise ValueError(f"layerscale must be None or > 0, got {self.layerscale}")


@dataclass(frozen=True)
class TrainConfig:
    """Classifier training: AdamW + warmup/cosine on a named dataset (see :mod:`raptor.data`);
    ``grad_clip=None`` trains without clipping.

    ``patience`` set: training stops once the validation loss (every ``eval_every`` steps) has
    not fallen by a relative :data:`raptor.teachers.CONVERGENCE_TOL` for ``patience`` evaluations in a row, and
    the weights of its lowest are kept — the convergence criterion; ``steps`` is then the
    budget (and the cosine's length). ``None``: all ``steps``, the last weights.
    ``half_weights``: the trained weights (snapshots too) rounded to float16 values, which the
    artifact tier stores in half the bytes (:func:`~raptor.storage.checkpoint.half_rounded`).
    """

    dataset: str = "fashion-mnist"
    steps: int = 600
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 50
    min_lr: float = 1e-5
    grad_clip: float | None = 1.0
    seed: int = 0
    train_limit: int | None = None
    eval_every: int = 200
    val_limit: int | None = 2000
    snapshot_steps: tuple[int, ...] = field(default_factory=tuple)
    patience: int | None = None
    half_weights: bool = False

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        for name, low, none in (("steps", 1, False), ("batch_size", 1, False),
                                ("eval_every", 1, False), ("seed", 0, False),
                                ("train_limit", 1, True), ("val_limit", 1, True),
                                ("patience", 1, True)):
            value = getattr(self, name)
            if not (none and value is None) and (
                    not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise ValueError(f"{name} must be an integer >= {low}{' or None' if none else ''}"
                                 f", got {value!r}")
        check_recipe(self)
        if any(not 0 < s <= self.steps for s in self.snapshot_steps):
            raise ValueError(f"snapshot_steps must lie in [1, steps={self.steps}], "
                             f"got {self.snapshot_steps}")
        if self.patience is not None and self.snapshot_steps:
            raise ValueError("snapshot_steps need a fixed length: set patience=None")


@dataclass(frozen=True)
class DistillConfig:
    """Everything that defines a distilled student (a notebook fills it from papermill).

    ``repeats`` gives ``n_j`` per block (a partition's segment lengths). ``stage1_weights`` apply
    to the stage-1 block that ends at the last layer, other stage-1 blocks use the plain MSE (as
    in the authors' runs); ``stage2_weights`` apply in stage 2; ``weighted=False`` uses the plain
    MSE everywhere (Table 2 before "+ cls weighting"). ``teacher_forcing`` / ``autoregressive``
    select stage 1's losses: both anneal TF into AR over ``anneal_frac`` of stage 1 (over
    ``anneal_steps`` steps where set), one alone is used throughout (Table 2's "TF only").
    ``stage2=False`` skips stage 2 (``stage2_steps`` is then set to 0). ``init="random"``
    follows the authors' randomly initialised blocks. ``grad_clip=None`` trains without clipping. ``dataset`` and ``train_limit`` choose the
    training images in :func:`get_student` (:func:`distill` is given its dataset).
    ``cache_teacher`` keeps the teacher's trajectories of the whole training set in memory.
    ``half_weights`` rounds the student's weights as :class:`TrainConfig`'s does a teacher's.
    ``bf16`` (autocast, teacher included) and ``compile`` (each block) are CUDA-only.

    ``val_limit`` held-out training images (none of the ``train_limit`` ones; never the
    evaluation images) give each stage — each stage-1 block on its own — a validation
    distillation loss every ``eval_every`` steps. ``patience`` set, the convergence criterion: the
    learning rate stays at ``lr`` after the warmup until that loss falls by less than a relative
    :data:`raptor.train.DISTILL_TOL` a reading over ``patience`` readings (of
    :data:`raptor.train.DISTILL_FLOOR` below it; its *plateau*, not before the anneal is over),
    then decays linearly to ``min_lr`` over ``decay_frac`` of the steps run so far, and the stage
    stops (a warmup–stable–decay schedule); the stage's steps are then its cap, by which the
    decay must end. ``None``: all steps on a cosine, the last weights. A cap is no stage length for
    the anneal to be a fraction of: with ``anneal_steps`` set, a curve that plateaus before its cap
    trains the same under any cap.
    """

    repeats: tuple[int, ...]
    stage1_steps: int = 1000
    stage2_steps: int = 1000
    batch_size: int = 128
    lr: float = RECIPE.lr
    weight_decay: float = RECIPE.weight_decay
    warmup_steps: int = 100
    min_lr: float = RECIPE.min_lr
    grad_clip: float | None = RECIPE.grad_clip
    anneal_frac: float = RECIPE.anneal_frac
    anneal_steps: int | None = None
    stage1_weights: Weights = RECIPE.stage1_weights
    stage2_weights: Weights = RECIPE.stage2_weights
    weighted: bool = True
    depth_scaling: bool = True
    teacher_forcing: bool = True
    autoregressive: bool = True
    stage2: bool = True
    mlp: str = "teacher"
    init: str = "random"
    seed: int = 0
    dataset: str = "fashion-mnist"
    train_limit: int | None = None
    cache_teacher: bool = False
    half_weights: bool = False
    device: str = "cpu"
    bf16: bool = False
    compile: bool = False
    val_limit: int | None = None
    eval_every: int = 100
    patience: int | None = None
    decay_frac: float = 0.2

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("repeats", check_repeats(self.repeats))
        for name in ("stage1_steps", "stage2_steps", "seed"):
            check_int(name, getattr(self, name), 0)
        for name in ("batch_size", "eval_every"):
            check_int(name, getattr(self, name), 1)
        for name in ("train_limit", "val_limit", "patience", "anneal_steps"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        if self.patience is not None and self.val_limit is None:
            raise ValueError("patience needs held-out images for its validation loss: set "
                             "val_limit")
        check_recipe(self)
        for name in ("anneal_frac", "decay_frac"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 1:
                raise ValueError(f"{name} must be a number in (0, 1], got {value!r}")
        for name in ("stage1_weights", "stage2_weights"):
            value = getattr(self, name)
            if (not isinstance(value, (list, tuple)) or len(value) != 3
                    or any(not isinstance(w, (int, float)) or not 0 <= w < math.inf
                           for w in value) or sum(value) <= 0):
                raise ValueError(f"{name} must be 3 non-negative numbers (cls, registers, "
                                 f"patches) with a positive sum, got {value!r}")
            set_(name, tuple(float(w) for w in value))
        for name in ("weighted", "depth_scaling", "teacher_forcing", "autoregressive", "stage2",
                     "cache_teacher", "bf16", "compile"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.mlp not in MLP_VARIANTS:
            raise ValueError(f"mlp must be one of {MLP_VARIANTS}, got {self.mlp!r}")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")
        if self.init == "teacher" and self.mlp != "teacher":
            raise ValueError(f"init='teacher' needs mlp='teacher', got mlp={self.mlp!r}")
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        if not isinstance(self.device, str) or self.device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<index>', got {self.device!r}")
        if (self.bf16 or self.compile) and not self.device.startswith("cuda"):
            raise ValueError(f"bf16 and compile are CUDA-only, got bf16={self.bf16}, "
                             f"compile={self.compile} on device={self.device!r}")
        if not self.stage2:
            set_("stage2_steps", 0)
        if self.stage1_steps + self.stage2_steps == 0:
            raise ValueError("nothing to train: stage1_steps and stage2_steps (with stage2) are 0")
        if self.stage1_steps and not (self.teacher_forcing or self.autoregressive):
            raise ValueError("stage 1 needs teacher_forcing or autoregressive (or both)")
        if self.anneal_steps is not None and self.anneal_steps > self.stage1_steps:
            raise ValueError(f"anneal_steps ({self.anneal_steps}) must end within stage 1's "
                             f"{self.stage1_steps} steps")

    def stage1_lambda(self, step: int) -> float:
        """The TF weight ``λ`` at stage-1 ``step`` (1 for TF alone, 0 for AR alone)."""
        if not self.autoregressive:
            return 1.0
        if not self.teacher_forcing:
            return 0.0
        if self.anneal_steps is not None:
            return tf_lambda(step, self.anneal_steps, 1.0)
        return tf_lambda(step, self.stage1_steps, self.anneal_frac)


def tf_lambda(step: int, total: int, anneal_frac: float) -> float:
    """Teacher-forcing weight ``λ = max(0, 1 − step / (anneal_frac · total))`` (§3)."""
    if total < 1 or not 0 < anneal_frac <= 1:
        raise ValueError(f"need total >= 1 and 0 < anneal_frac <= 1, got total={total}, "
                         f"anneal_frac={anneal_frac}")
    return max(0.0, 1.0 - step / (anneal_frac * total))


def check_int(name: str, value: object, low: int) -> None:
    """Raise :class:`ValueError` naming ``name`` unless ``value`` is an integer >= ``low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
