"""Raptor: a weight-tied, block-recurrent surrogate of a ViT (paper §3, Appendix A.3).

A Raptor has ``k`` blocks; block ``j`` is applied ``n_j`` times in turn, so its depth is
``L = Σ n_j`` (§1, the Block-Recurrent Hypothesis). Every block mirrors the teacher's
timm block exactly (pre-norm attention with fused ``scaled_dot_product_attention``, MLP,
LayerScale, same widths) and adds the depth-scaling MLP of Appendix A.3::

    S = W2 · SiLU(W1 · z + b1) + b2 + 1          (z: the index 1..L of the layer being predicted)
    s_attn, s_mlp, s_out = split(S, 3)
    X'  = X  + s_attn ⊙ LS1(Attn(LN1(X)))
    X'' = X' + s_mlp  ⊙ LS2(MLP(LN2(X')))
    out = s_out ⊙ X''

with ``W2, b2 ~ N(0, 1e-4²)`` so a block starts as the plain block. The LayerScales ``γ1, γ2``
are taken into the scales (``s_attn ⊙ γ1``, ``s_out ⊙ s_mlp ⊙ γ2``), so a layer costs three
products on activations, two of them fused in ``addcmul``: ``X' = X + (s_attn ⊙ γ1) ⊙ Attn(…)``,
``out = s_out ⊙ X' + (s_out ⊙ s_mlp ⊙ γ2) ⊙ MLP(…)`` (Appendix E's runtime parity within a few
percent: ``BENCHMARKS.md``). A segment's scales come from one call of the depth-scaling MLP.

The teacher's embedding (patch embedding, prefix tokens, position embedding, ``norm_pre``) and
its final norm and head are reused, frozen (§5: "Raptor reuses DINOv2's patch embedding and
final LayerNorm"). A Raptor is a :class:`~raptor.trajectories.TrajectoryModel`.

[ours] Choices the paper leaves open:

- The MLP mirrors the teacher's (``mlp="teacher"``), so iso-FLOPs holds exactly. ``"swiglu"`` is
  timm's SwiGLU with hidden width ``round(2H/3)`` (the teacher MLP's parameter and FLOP budget);
  ``"swiglu-wide"`` uses hidden width ``H`` as the authors' code does (1.5× the MLP cost).
- ``init="random"`` (the default everywhere, and the book's) re-initialises the teacher-shaped
  block as timm initialises a ViT (truncated normal std 0.02, zero biases, LayerNorm 1/0,
  LayerScale at its init value), as the authors' code starts from random blocks;
  ``init="teacher"`` starts block ``j`` from a copy of the teacher block at the first layer of
  its segment.
- A Raptor block always has both skip connections, also when copied from a no-skip teacher block
  (``TeacherBlock(residual=False)``): the surrogate's architecture does not change with the teacher.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from timm.layers import LayerScale, SwiGLU
from timm.models.vision_transformer import Attention, Block, VisionTransformer
from torch import nn

from raptor.config import INITS, MLP_VARIANTS, check_repeats
from raptor.paper import DEPTH_HIDDEN, DEPTH_INIT_STD
from raptor.trajectories import TokenGroups, ViTTeacher, layer_stop

Partition = tuple[tuple[int, int], ...]
Scales = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (s_attn, s_mlp, s_out) of one layer


class DepthScaling(nn.Module):
    """``z ↦ W2·SiLU(W1·z + b1) + b2 + 1`` split into ``(s_attn, s_mlp, s_out)`` (Appendix A.3)."""

    def __init__(self, dim: int, hidden: int = DEPTH_HIDDEN) -> None:
        super().__init__()
        self.fc1 = nn.Linear(1, hidden)
        self.act = nn.SiLU()
        self.fc2 = nn.Linear(hidden, 3 * dim)
        nn.init.normal_(self.fc2.weight, std=DEPTH_INIT_STD)
        nn.init.normal_(self.fc2.bias, std=DEPTH_INIT_STD)

    def forward(self, z: int | float | torch.Tensor, like: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Scales for target layer ``z``: a number, or one per sample (shape ``(B,)``).

        Each scale has shape ``(1 or B, 1, D)`` and broadcasts over ``like`` (``(B, T, D)``).
        """
        z = torch.as_tensor(z, dtype=self.fc1.weight.dtype, device=like.device).reshape(-1, 1)
        s = self.fc2(self.act(self.fc1(z))) + 1.0
        return tuple(s.unsqueeze(1).chunk(3, dim=-1))  # type: ignore[return-value]


def _check_scalable(ls1: nn.Module, ls2: nn.Module) -> None:
    """TypeError unless the LayerScales can be taken into the depth scales."""
    for name, ls in (("ls1", ls1), ("ls2", ls2)):
        if not isinstance(ls, (LayerScale, nn.Identity)):
            raise TypeError(f"depth scaling needs {name} to be a LayerScale or Identity, "
                            f"got {type(ls).__name__}")


class RaptorBlock(nn.Module):
    """A teacher-shaped pre-norm transformer block with optional depth scaling (Appendix A.3).

    The sub-modules are those of a timm ``Block``: ``norm1``, ``attn``, ``ls1``, ``norm2``,
    ``mlp``, ``ls2``. With ``depth_scaling=False`` the block computes exactly timm's
    ``x + LS1(Attn(LN1(x)))`` then ``x + LS2(MLP(LN2(x)))``.
    """

    def __init__(self, norm1: nn.Module, attn: nn.Module, ls1: nn.Module, norm2: nn.Module,
                 mlp: nn.Module, ls2: nn.Module, *, depth_scaling: bool = True) -> None:
        super().__init__()
        self.norm1, self.attn, self.ls1 = norm1, attn, ls1
        self.norm2, self.mlp, self.ls2 = norm2, mlp, ls2
        if isinstance(self.attn, Attention):
            self.attn.fused_attn = True  # torch's fused scaled_dot_product_attention
        if not isinstance(norm1, nn.LayerNorm):
            raise TypeError(f"norm1 must be a LayerNorm over the width, got {type(norm1).__name__}")
        if depth_scaling:
            _check_scalable(ls1, ls2)
        self.scale = DepthScaling(int(norm1.normalized_shape[0])) if depth_scaling else None

    @classmethod
    def from_timm(cls, block: Block, *, depth_scaling: bool = True) -> RaptorBlock:
        """A Raptor block holding copies of a timm ``Block``'s (or ``TeacherBlock``'s) weights."""
        if not isinstance(block, Block):
            raise TypeError(f"block must be a timm vision_transformer Block, got "
                            f"{type(block).__name__}")
        parts = [copy.deepcopy(m) for m in (block.norm1, block.attn, block.ls1, block.norm2,
                                            block.mlp, block.ls2)]
        out = cls(*parts, depth_scaling=depth_scaling)  # trainable even if the teacher is frozen
        return out.requires_grad_(True).to(next(block.parameters()).device)

    @property
    def dim(self) -> int:
        return int(self.norm1.normalized_shape[0])

    def forward(self, x: torch.Tensor, z: int | float | torch.Tensor) -> torch.Tensor:
        """Predict layer ``z`` (1..L) from the tokens ``x`` (``(B, T, D)``) of layer ``z - 1``;
        ``z`` is a number or one layer per sample (shape ``(B,)``)."""
        if self.scale is None:
            return self.step(x, None)
        z = torch.as_tensor(z, dtype=torch.float32, device=x.device).reshape(-1)
        return self.step(x, self.scale(z, x))

    def layer_scales(self, z: torch.Tensor) -> list[Scales | None]:
        """The depth scales of each layer of ``z`` (``(n,)``), from one call of the depth-scaling
        MLP; ``None`` each without depth scaling."""
        if self.scale is None or not len(z):
            return [None] * len(z)
        return list(zip(*(s.split(1) for s in self.scale(z, z))))

    def step(self, x: torch.Tensor, scales: Scales | None) -> torch.Tensor:
        """One application with one layer's (or one per sample) ``(s_attn, s_mlp, s_out)``."""
        if scales is None:
            x = x + self.ls1(self.attn(self.norm1(x)))
            return x + self.ls2(self.mlp(self.norm2(x)))
        s_attn, s_mlp, s_out = scales
        x = torch.addcmul(x, _times_gamma(s_attn, self.ls1), self.attn(self.norm1(x)))
        return torch.addcmul(s_out * x, _times_gamma(s_mlp, self.ls2) * s_out,
                             self.mlp(self.norm2(x)))


def _times_gamma(s: torch.Tensor, ls: nn.Module) -> torch.Tensor:
    """``s ⊙ γ``, the depth scale and the LayerScale (identity or timm LayerScale) as one."""
    return s * ls.gamma if isinstance(ls, LayerScale) else s


def reinit_block(block: RaptorBlock) -> RaptorBlock:
    """Re-initialise a block's transformer weights as timm initialises a ViT; the depth scaling
    keeps its own init. Uses the global torch RNG: seed it first for a reproducible block."""
    for name, module in block.named_modules():
        if name.startswith("scale"):
            continue
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.LayerNorm, LayerScale)):
            module.reset_parameters()
    return block


def _swiglu(block: RaptorBlock, variant: str) -> SwiGLU:
    """A SwiGLU MLP replacing ``block.mlp`` (see the module docstring for the widths)."""
    hidden = block.mlp.fc1.out_features
    width = hidden if variant == "swiglu-wide" else round(2 * hidden / 3)
    device = block.mlp.fc1.weight.device
    return SwiGLU(block.dim, width, act_layer=nn.SiLU).to(device)


def make_block(template: Block, *, depth_scaling: bool = True, mlp: str = "teacher",
               init: str = "random") -> RaptorBlock:
    """A Raptor block shaped like the timm block ``template``, copied or freshly initialised."""
    if mlp not in MLP_VARIANTS:
        raise ValueError(f"mlp must be one of {MLP_VARIANTS}, got {mlp!r}")
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if init == "teacher" and mlp != "teacher":
        raise ValueError(f"init='teacher' copies the teacher's MLP and needs mlp='teacher', "
                         f"got mlp={mlp!r}")
    block = RaptorBlock.from_timm(template, depth_scaling=depth_scaling)
    if init == "random":
        if mlp != "teacher":
            block.mlp = _swiglu(block, mlp)
        reinit_block(block)
    return block


def partition_from_repeats(repeats: Sequence[int]) -> Partition:
    """Half-open layer ranges ``(start, stop)`` of the blocks: block ``j`` predicts
    layers ``start+1..stop``."""
    bounds = [0]
    for n in repeats:
        bounds.append(bounds[-1] + n)
    return tuple(zip(bounds[:-1], bounds[1:]))


def repeats_from_partition(partition: Sequence[Sequence[int]], depth: int) -> tuple[int, ...]:
    """``(n_1, …, n_k)`` of a contiguous partition of layers ``0..depth``; ValueError otherwise."""
    pairs = [tuple(p) for p in partition]
    if not pairs or any(len(p) != 2 for p in pairs):
        raise ValueError(f"partition must be a non-empty sequence of (start, stop) pairs, "
                         f"got {partition!r}")
    stops = [0] + [p[1] for p in pairs]
    if [p[0] for p in pairs] != stops[:-1] or stops[-1] != depth or any(
            b <= a for a, b in pairs):
        raise ValueError(f"partition must be contiguous non-empty (start, stop) pairs covering "
                         f"0..{depth}, got {partition!r}")
    return tuple(b - a for a, b in pairs)


class Raptor(nn.Module):
    """``k`` weight-tied blocks applied ``n_1, …, n_k`` times to the frozen teacher's embedding.

    The whole teacher is held as ``teacher`` (a submodule, so ``.to()`` moves it); its
    embedding, final norm and head are used, its blocks only by ``init="teacher"``. It is frozen
    (``requires_grad=False`` on the caller's model: it is shared, not copied) and stays in eval
    mode whatever ``train()`` is called with. Optimise :meth:`raptor_parameters` only; save
    ``raptor.blocks.state_dict()`` to store a student without its teacher.

    Args:
        teacher: a timm ``VisionTransformer`` of depth ``sum(repeats)``.
        repeats: ``(n_1, …, n_k)``, how often each block is applied.
        blocks: ``k`` ready :class:`RaptorBlock`\\s (e.g. trained in stage 1); built otherwise.
        depth_scaling, mlp, init: see :func:`make_block` and the module docstring.
    """

    def __init__(self, teacher: VisionTransformer, repeats: Sequence[int],
                 blocks: Sequence[RaptorBlock] | None = None, *, depth_scaling: bool = True,
                 mlp: str = "teacher", init: str = "random") -> None:
        super().__init__()
        self.repeats = check_repeats(repeats)
        teacher_depth = ViTTeacher(teacher).depth
        if sum(self.repeats) != teacher_depth:
            raise ValueError(f"sum(repeats)={sum(self.repeats)} must equal the teacher's depth "
                             f"{teacher_depth}")
        self.partition: Partition = partition_from_repeats(self.repeats)
        if blocks is None:
            blocks = [make_block(teacher.blocks[start], depth_scaling=depth_scaling, mlp=mlp,
                                 init=init) for start, _ in self.partition]
        elif len(blocks) != len(self.repeats) or not all(
                isinstance(b, RaptorBlock) for b in blocks):
            kinds = sorted({type(b).__name__ for b in blocks})
            raise ValueError(f"blocks must be {len(self.repeats)} RaptorBlocks (one per repeat), "
                             f"got {len(blocks)} of types {kinds}")
        self.blocks = nn.ModuleList(blocks)
        self.teacher = teacher.requires_grad_(False).eval()
        # Layer indices as tensors: a compiled block then sees data, not a new constant per layer.
        self.register_buffer("_z", torch.arange(self.depth + 1, dtype=torch.float32),
                             persistent=False)

    @property
    def depth(self) -> int:
        """``L = Σ n_j``, the number of block applications."""
        return sum(self.repeats)

    def train(self, mode: bool = True) -> Raptor:
        super().train(mode)
        self.teacher.eval()
        return self

    def raptor_parameters(self) -> list[nn.Parameter]:
        """The trainable parameters: the ``k`` blocks (with their depth scaling), no teacher."""
        return list(self.blocks.parameters())

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Layer 0 (the teacher's embedding), ``(N, T, D)``."""
        return ViTTeacher(self.teacher).embed(images)

    def forward_from(self, tokens: torch.Tensor, start: int = 0, stop: int | None = None
                     ) -> torch.Tensor:
        """Layers ``start..stop`` (default L) from the tokens at layer ``start``, which may lie
        inside a segment: ``(N, stop - start + 1, T, D)``, index 0 being ``tokens``."""
        states, stop = [tokens], layer_stop(self.depth, start, stop)
        for block, (first, last) in zip(self.blocks, self.partition):
            layers = self._z[max(first, start) + 1:min(last, stop) + 1]
            for scales in block.layer_scales(layers):
                states.append(block.step(states[-1], scales))
        return torch.stack(states, dim=1)

    def forward(self, tokens0: torch.Tensor) -> torch.Tensor:
        """The whole trajectory ``(N, L+1, T, D)`` from the layer-0 tokens."""
        return self.forward_from(tokens0)

    def final_norm(self, tokens: torch.Tensor) -> torch.Tensor:
        """The teacher's final LayerNorm."""
        return self.teacher.norm(tokens)

    def head(self, tokens: torch.Tensor) -> torch.Tensor:
        """Class logits from final-normed tokens through the teacher's head."""
        return self.teacher.forward_head(tokens)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits through the teacher's frozen final norm and head."""
        return self.head(self.final_norm(self.forward_from(self.embed(images))[:, -1]))


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Parameters of a timm ViT or a Raptor: ``blocks`` (a Raptor's own ``k`` blocks with depth
    scaling; a ViT's ``L`` blocks), ``stem_head`` (everything else of the teacher: embeddings,
    final norm, head; shared and frozen in a Raptor) and their ``total`` (Appendix E: the
    description length of the untied ViT vs the Raptor)."""
    teacher = model.teacher if isinstance(model, Raptor) else ViTTeacher(model).teacher
    own = sum(p.numel() for p in model.blocks.parameters())
    teacher_blocks = sum(p.numel() for p in teacher.blocks.parameters())
    stem_head = sum(p.numel() for p in teacher.parameters()) - teacher_blocks
    return {"blocks": own, "stem_head": stem_head, "total": own + stem_head}


def block_flops(block: nn.Module, tokens: int) -> int:
    """Matmul FLOPs (2 per multiply-add) of one application of ``block`` to ``tokens`` tokens.

    Every ``nn.Linear`` of the attention and MLP costs ``2·T·in·out`` (qkv, proj, fc1, fc2 or
    SwiGLU's three); attention scores ``QKᵀ`` and ``softmax·V`` cost ``2·T²·d_attn`` each. The
    depth-scaling MLP runs once per application on one scalar (``2·(1·16 + 16·3D)``; counted
    per image, an upper bound since it is shared by a batch). Biases, norms, softmax and
    elementwise products are not counted.
    """
    total = 0
    scale = block.scale if isinstance(block, RaptorBlock) else None
    scale_ids = {id(m) for m in scale.modules()} if scale is not None else set()
    for module in block.modules():
        if isinstance(module, nn.Linear):
            rows = 1 if id(module) in scale_ids else tokens
            total += 2 * rows * module.in_features * module.out_features
    attn_dim = block.attn.qkv.out_features // 3
    return total + 2 * 2 * tokens * tokens * attn_dim


def flops_per_image(model: nn.Module) -> int:
    """Matmul FLOPs of the transformer blocks for one image (:func:`block_flops` × applications).

    The stem and head are identical in a teacher and its Raptor and are left out. With depth
    scaling off a Raptor costs exactly what its teacher costs (runtime parity, Appendix E).
    """
    tokens = TokenGroups.from_model(model).num_tokens
    if isinstance(model, Raptor):
        return sum(n * block_flops(b, tokens) for b, n in zip(model.blocks, model.repeats))
    return sum(block_flops(b, tokens) for b in ViTTeacher(model).teacher.blocks)
