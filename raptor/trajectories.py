"""The residual stream of a ViT through depth: trajectories of shape ``(N, L+1, T, D)``.

Paper §1 (the Block-Recurrent Hypothesis) compares intermediate maps ``f_l``: ``f_0`` is the
embedding (patch embedding + position embedding + prefix tokens, the input of block 1) and
``f_l`` is the output of block ``l``. A *trajectory* stacks them for a batch of images.

Functions here accept any timm :class:`~timm.models.vision_transformer.VisionTransformer`, and any
model that provides ``embed(images)`` and ``forward_from(tokens, start, stop)`` (the Raptor).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

GROUP_NAMES = ("cls", "registers", "patches")


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
        """Read the groups from a timm ViT (``has_class_token``, ``num_reg_tokens``, patch count)."""
        backbone = getattr(model, "teacher_stem", model)
        n_cls = 1 if getattr(backbone, "has_class_token", False) else 0
        n_reg = int(getattr(backbone, "num_reg_tokens", 0))
        n_patch = int(backbone.patch_embed.num_patches)
        return cls.from_counts(n_cls, n_reg, n_patch)

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


def num_layers(model: nn.Module) -> int:
    """Depth ``L`` (number of block applications) of a timm ViT or a Raptor."""
    if hasattr(model, "forward_from"):
        return int(model.depth)
    return len(model.blocks)


def embed(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Layer 0 of the trajectory: the tokens that enter block 1, shape ``(N, T, D)``."""
    if hasattr(model, "forward_from"):
        return model.embed(images)
    x = model.patch_embed(images)
    x = model._pos_embed(x)
    x = model.patch_drop(x)
    return model.norm_pre(x)


def run_layers(model: nn.Module, tokens: torch.Tensor, start: int = 0,
               stop: int | None = None) -> torch.Tensor:
    """Continue a trajectory from the tokens at layer ``start`` through layer ``stop`` (default L).

    Returns ``(N, stop - start + 1, T, D)``; index 0 is ``tokens`` itself.
    """
    depth = num_layers(model)
    stop = depth if stop is None else stop
    if not 0 <= start <= stop <= depth:
        raise ValueError(f"need 0 <= start <= stop <= L={depth}, got start={start}, stop={stop}")
    if tokens.ndim != 3:
        raise ValueError(f"tokens must be (N, T, D), got shape {tuple(tokens.shape)}")
    if hasattr(model, "forward_from"):
        return model.forward_from(tokens, start, stop)
    states = [tokens]
    x = tokens
    for block in model.blocks[start:stop]:
        x = block(x)
        states.append(x)
    return torch.stack(states, dim=1)


def trajectory(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The whole residual stream ``(N, L+1, T, D)`` of ``images`` (paper §1, ``f_0..f_L``)."""
    return run_layers(model, embed(model, images), 0)


def head_logits(model: nn.Module, final_tokens: torch.Tensor) -> torch.Tensor:
    """Class logits from layer-``L`` tokens through the (teacher's) final norm and head."""
    backbone = getattr(model, "teacher_stem", model)
    return backbone.forward_head(backbone.norm(final_tokens))


@torch.no_grad()
def iter_trajectories(model: nn.Module, batches: Iterable, *, device: str | torch.device = "cpu",
                      max_images: int | None = None, dtype: torch.dtype = torch.float32,
                      progress: bool = True) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Stream ``(trajectory, labels)`` per batch, for datasets that do not fit in memory.

    ``batches`` yields ``(images, labels)``; at most ``max_images`` images are used. The model is
    put in eval mode. Trajectories are returned on the CPU in ``dtype``.
    """
    if max_images is not None and max_images < 1:
        raise ValueError(f"max_images must be >= 1 or None, got {max_images}")
    model.eval().to(device)
    seen = 0
    total = max_images if max_images is not None else _length(batches)
    bar = tqdm(total=total, desc="trajectories", unit="img", disable=not progress)
    for images, labels in batches:
        if max_images is not None:
            images, labels = images[: max_images - seen], labels[: max_images - seen]
        traj = trajectory(model, images.to(device)).to("cpu", dtype)
        seen += len(images)
        bar.update(len(images))
        yield traj, labels
        if max_images is not None and seen >= max_images:
            break
    bar.close()


def collect_trajectories(model: nn.Module, batches: Iterable, **kwargs) -> tuple[torch.Tensor,
                                                                                torch.Tensor]:
    """All of :func:`iter_trajectories` concatenated: ``(N, L+1, T, D)`` and ``(N,)`` labels."""
    trajs, labels = zip(*iter_trajectories(model, batches, **kwargs))
    return torch.cat(trajs), torch.cat(labels)


def _length(batches: Iterable) -> int | None:
    dataset = getattr(batches, "dataset", None)
    return len(dataset) if dataset is not None else None
