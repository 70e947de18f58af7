"""The residual stream of a ViT through depth: trajectories of shape ``(N, L+1, T, D)``.

Paper §1 (the Block-Recurrent Hypothesis) compares intermediate maps ``f_l``: ``f_0`` is the
embedding (patch embedding + position embedding + prefix tokens, the input of block 1) and
``f_l`` is the output of block ``l``. A *trajectory* stacks them for a batch of images.

A model with a trajectory is a :class:`TrajectoryModel`: the Raptor implements it, and a timm
:class:`~timm.models.vision_transformer.VisionTransformer` is read through
:class:`ViTTeacher`. The functions here accept either (:func:`trajectory_model`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from timm.models.vision_transformer import VisionTransformer
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

from raptor.loop import on_device

GROUP_NAMES = ("cls", "registers", "patches")


@runtime_checkable
class TrajectoryModel(Protocol):
    """A model with a trajectory (paper §1): layer 0 ``embed(images)`` ``(N, T, D)``; layers
    ``start..stop`` (default ``depth`` = L) from the tokens at ``start`` by ``forward_from``,
    ``(N, stop - start + 1, T, D)`` with index 0 the given tokens; ``final_norm`` of layer-L
    tokens, then ``head`` to class logits. ``teacher`` is the timm ViT whose embedding, norm and
    head it uses (itself, or a Raptor's teacher); its token layout gives :class:`TokenGroups`.
    """

    teacher: VisionTransformer

    @property
    def depth(self) -> int: ...
    def embed(self, images: torch.Tensor) -> torch.Tensor: ...
    def forward_from(self, tokens: torch.Tensor, start: int = 0, stop: int | None = None
                     ) -> torch.Tensor: ...
    def final_norm(self, tokens: torch.Tensor) -> torch.Tensor: ...
    def head(self, tokens: torch.Tensor) -> torch.Tensor: ...


_MEMBERS = ("teacher", "depth", "embed", "forward_from", "final_norm", "head")


def trajectory_model(model: nn.Module) -> TrajectoryModel:
    """``model`` as a :class:`TrajectoryModel`: a timm ViT through :class:`ViTTeacher`, an
    implementation (e.g. a Raptor) as it is."""
    if isinstance(model, VisionTransformer):
        return ViTTeacher(model)
    # hasattr, not isinstance(model, TrajectoryModel): from Python 3.12 a runtime protocol looks
    # its members up statically, and an nn.Module keeps its submodule ``teacher`` out of sight.
    if all(hasattr(model, name) for name in _MEMBERS):
        return model  # type: ignore[return-value]
    raise TypeError(f"model must be a timm VisionTransformer or a Raptor (a TrajectoryModel), "
                    f"got {type(model).__name__}")


def layer_stop(depth: int, start: int, stop: int | None) -> int:
    """``stop`` (default ``depth``) after checking ``0 <= start <= stop <= depth``."""
    stop = depth if stop is None else stop
    if not 0 <= start <= stop <= depth:
        raise ValueError(f"need 0 <= start <= stop <= L={depth}, got start={start}, stop={stop}")
    return stop


class ViTTeacher(nn.Module):
    """A timm ViT as a :class:`TrajectoryModel` (paper §1): layer 0 is its
    embedding (patch embedding, prefix tokens, position embedding, ``norm_pre``), layer ``l`` the
    output of its block ``l``; then its final norm and head."""

    def __init__(self, teacher: VisionTransformer) -> None:
        super().__init__()
        if not isinstance(teacher, VisionTransformer):
            raise TypeError(f"teacher must be a timm VisionTransformer, got "
                            f"{type(teacher).__name__}")
        self.teacher = teacher

    @property
    def depth(self) -> int:
        return len(self.teacher.blocks)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        t = self.teacher
        return t.norm_pre(t.patch_drop(t._pos_embed(t.patch_embed(images))))

    def forward_from(self, tokens: torch.Tensor, start: int = 0, stop: int | None = None
                     ) -> torch.Tensor:
        states = [tokens]
        for block in self.teacher.blocks[start:layer_stop(self.depth, start, stop)]:
            states.append(block(states[-1]))
        return torch.stack(states, dim=1)

    def final_norm(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.teacher.norm(tokens)

    def head(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.teacher.forward_head(tokens)


@dataclass(frozen=True)
class TokenGroups:
    """Token index ranges in timm order ``[cls, registers..., patches...]``.

    An absent group is an empty slice (e.g. ``slice(1, 1)`` when there are no registers).
    """

    cls: slice
    registers: slice
    patches: slice

    @classmethod
    def from_model(cls, model: nn.Module) -> TokenGroups:
        """The groups of a model's teacher (cls token, registers, patches at its image size)."""
        vit = trajectory_model(model).teacher
        return cls.from_counts(int(vit.has_class_token), vit.num_reg_tokens,
                               vit.patch_embed.num_patches)

    @classmethod
    def from_counts(cls, n_cls: int, n_reg: int, n_patch: int) -> TokenGroups:
        """Groups for ``n_cls`` class tokens, ``n_reg`` registers and ``n_patch`` patches."""
        if min(n_cls, n_reg, n_patch) < 0 or n_cls > 1:
            raise ValueError(f"token counts must be >= 0 with at most one cls token, got "
                             f"cls={n_cls}, registers={n_reg}, patches={n_patch}")
        return cls(slice(0, n_cls), slice(n_cls, n_cls + n_reg),
                   slice(n_cls + n_reg, n_cls + n_reg + n_patch))

    @property
    def num_tokens(self) -> int:
        return self.patches.stop

    def items(self) -> Iterator[tuple[str, slice]]:
        """``(name, slice)`` for the non-empty groups, in the order cls, registers, patches."""
        for name in GROUP_NAMES:
            s = getattr(self, name)
            if s.stop > s.start:
                yield name, s


def embed(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Layer 0 of the trajectory: the tokens that enter block 1, shape ``(N, T, D)``."""
    return trajectory_model(model).embed(images)


def run_layers(model: nn.Module, tokens: torch.Tensor, start: int = 0,
               stop: int | None = None) -> torch.Tensor:
    """Continue a trajectory from the tokens at layer ``start`` through layer ``stop`` (default L).

    Returns ``(N, stop - start + 1, T, D)``; index 0 is ``tokens`` itself.
    """
    m = trajectory_model(model)
    stop = layer_stop(m.depth, start, stop)
    if tokens.ndim != 3:
        raise ValueError(f"tokens must be (N, T, D), got shape {tuple(tokens.shape)}")
    return m.forward_from(tokens, start, stop)


def trajectory(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The whole residual stream ``(N, L+1, T, D)`` of ``images`` (paper §1, ``f_0..f_L``)."""
    return run_layers(model, embed(model, images), 0)


def head_logits(model: nn.Module, final_tokens: torch.Tensor) -> torch.Tensor:
    """Class logits from layer-``L`` tokens through the (teacher's) final norm and head."""
    m = trajectory_model(model)
    return m.head(m.final_norm(final_tokens))


@torch.no_grad()
def iter_trajectories(model: nn.Module, batches: Iterable, *, device: str = "auto",
                      max_images: int | None = None, dtype: torch.dtype = torch.float32,
                      bf16: bool = False, progress: bool = True
                      ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Stream ``(trajectory, labels)`` per batch, for datasets that do not fit in memory.

    ``batches`` yields ``(images, labels)``; at most ``max_images`` images are used. The model is
    put in eval mode and runs on ``device`` (:func:`~raptor.loop.resolve_device`: ``"auto"`` is
    CUDA when available), under bfloat16 autocast with ``bf16``; it is given back on its own
    device at the end. Trajectories are returned on the CPU in ``dtype``.
    """
    if max_images is not None and max_images < 1:
        raise ValueError(f"max_images must be >= 1 or None, got {max_images}")
    seen = 0
    total = max_images if max_images is not None else (
        len(batches.dataset) if isinstance(batches, DataLoader) else None)
    with on_device(model, device) as device, tqdm(total=total, desc="trajectories", unit="img",
                                                  disable=not progress) as bar:
        for images, labels in batches:
            if max_images is not None:
                images, labels = images[: max_images - seen], labels[: max_images - seen]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                traj = trajectory(model, images.to(device))
            traj = traj.to("cpu", dtype)
            seen += len(images)
            bar.update(len(images))
            yield traj, labels
            if max_images is not None and seen >= max_images:
                break


def collect_trajectories(model: nn.Module, batches: Iterable, **kwargs) -> tuple[torch.Tensor,
                                                                                torch.Tensor]:
    """All of :func:`iter_trajectories` concatenated: ``(N, L+1, T, D)`` and ``(N,)`` labels."""
    trajs, labels = zip(*iter_trajectories(model, batches, **kwargs))
    return torch.cat(trajs), torch.cat(labels)
