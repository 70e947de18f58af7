"""A pretrained timm ViT walked beside a chapter's teachers (:class:`Pretrained`). Its values are
checked at once, without torch; its name and weights file against the timm model on the meta
device by :func:`require_vit`, which imports torch and timm (seconds), so it runs after every
other check of a run (:func:`raptor.book.runner.refusals`) and first in the chapters'
``compute``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raptor.book.spec import SpecError, require
from raptor.catalog import DATASETS
from raptor.paper import DINOV2_B


def require_weights(model: str, weights: str | None) -> None:
    """:func:`require` that ``weights`` is a local file (whether it fits ``model`` is
    :func:`require_vit`'s check)."""
    require(weights is not None and Path(weights).expanduser().is_file(), "weights",
            f"an existing local weights file of {model}", weights)


def require_vit(model: str, weights: str, input_size: int | None = None) -> int:
    """The depth of the timm ViT ``model``, after checking, on the meta device and before any
    work, that it is one and that the local file ``weights`` fits it (:class:`SpecError` naming
    the parameter otherwise)."""
    # imported here, not at the top: a spec is checked, and refused, without torch and timm
    # (listed, with this reason, in tests/test_layout.py)
    from raptor import analysis
    from raptor.storage import checkpoint
    try:
        depth = len(analysis.vit_shape(model, input_size).blocks)
    except ValueError as err:
        raise SpecError(f"parameter 'model': {err}") from None
    try:
        analysis.check_weights(model, Path(weights).expanduser(), input_size)
    except checkpoint.CheckpointError as err:
        raise SpecError(f"parameter 'weights': {err}") from None
    return depth


def require_images(images: str) -> None:
    """:func:`require` that ``images`` names a dataset of :mod:`raptor.data` or a folder."""
    require(images in DATASETS or Path(images).expanduser().is_dir(), "images",
            f"one of {', '.join(DATASETS)} or a folder of images", images)


@dataclass(frozen=True)
class Pretrained:
    """A pretrained timm ViT walked beside a chapter's teachers: ``model`` (a timm name) with its
    local ``weights`` file (``None``: no such model), on ``images`` — a dataset of
    :mod:`raptor.data` (its validation split) or a folder of image files — at ``input_size``
    (``None``: the model's own; default DINOv2-B, the paper's model, on ImageNet at 224 px as in
    the paper's §3)."""

    model: str = DINOV2_B
    weights: str | None = None
    images: str = "imagenet"
    input_size: int | None = 224

    def __post_init__(self) -> None:
        require(self.input_size is None or self.input_size >= 1, "input_size", "None or ≥ 1",
                self.input_size)
        if self.weights is not None:
            require_weights(self.model, self.weights)
            require_images(self.images)

    def require_model(self) -> None:
        """:func:`require_vit` of the model, if it has weights (torch and timm)."""
        if self.weights is not None:
            require_vit(self.model, self.weights, self.input_size)

    @property
    def label(self) -> str:
        """The model's name in tables and figures."""
        return "DINOv2-B" if self.model == DINOV2_B else self.model
