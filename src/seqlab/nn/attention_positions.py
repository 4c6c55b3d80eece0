"""Where each token is, as a Transformer's self-attention sees it: ``model.positions``.

Two families (the records at the end of this module, read through
:func:`seqlab.catalog.positions`):

- **absolute** (``sinusoidal``, Vaswani et al. 2017 §3.5; ``learned``, GPT): a vector per position
  added to the token embeddings (:mod:`seqlab.nn.positional_encoding`); nothing here.
- **relative** (:mod:`seqlab.nn.relative_positions`): ``rope`` rotates queries and keys (Su et
  al. 2021), ``alibi`` adds ``−m_h·(i − j)`` to the logits (Press et al. 2022), ``t5_bias`` adds
  a learned scalar per head and distance bucket (Raffel et al. 2020, §2.1); ``none`` adds
  nothing: a causal mask alone tells a token how many came before it (Haviv et al. 2022).

A stack (:class:`seqlab.nn.transformer.Encoder`, :class:`~seqlab.nn.transformer.Decoder`) owns one
:class:`RelativePositions` and calls it once per forward pass; what it returns
(:class:`AttentionPositions`: the rotation ``e^{iθ}`` of each position and pair, or the bias) is
handed to every layer's self-attention, so the angles and the bias are computed once, not once per
layer, and T5's bias table is shared by the layers (as in T5). Cross-attention gets no positions.

Incremental decoding: the new queries are the last ``T`` of ``P + T`` positions. RoPE rotates
the new queries and keys at their absolute positions ``P … P + T − 1`` (the cached keys were
rotated when they were new); a bias is built for the new rows only, ``(h, T, P + T)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.catalog import PositionSpec, positions
from seqlab.nn.relative_positions import alibi_slopes, rotary_angles, t5_buckets


@dataclass(frozen=True)
class AttentionPositions:
    """What each self-attention layer of a stack applies in one forward pass.

    ``turn`` ``(T, d_k / 2)``, complex: RoPE's rotation of the ``T`` new queries and keys,
    ``e^{i·t·θ_j}`` per position and pair (complex128 for a float64 stack, complex64
    otherwise, from float64 angles: the same rotation whatever the activations' dtype).
    ``bias`` ``(h, T, P + T)``: added to the logits; with ``hides_future`` it holds −∞ on the
    keys after each query, so it is the causal mask too.
    """

    turn: Tensor | None = None
    bias: Tensor | None = None
    hides_future: bool = False

    def rotate_packed(self, qkv: Tensor) -> Tensor:
        """:meth:`rotate` of the queries and keys as the packed projection lays them out, the
        values passed through: one tensor in, one out, so that the backward pass writes one
        gradient for the projection (slicing q and k out would add a zero-filled one to the
        values' and sum them).

        Shape: ``(B, T, 3, h, d_k) -> (B, T, 3, h, d_k)``.
        """
        if self.turn is None:
            return qkv
        return _PackedRotation.apply(qkv, self.turn[:, None, None, :])  # (T, 1, 1, d_k / 2)

    def rotate(self, x: Tensor) -> Tensor:
        """Rotate each pair of dimensions ``(2i, 2i+1)`` of queries or keys (RoPE); any other
        scheme leaves them as they are.

        Shape: ``(B, h, T, d_k) -> (B, h, T, d_k)``.
        """
        if self.turn is None:
            return x
        return _Rotation.apply(x, self.turn)


class _Rotation(torch.autograd.Function):
    """RoPE's rotation: each pair ``(x_2i, x_2i+1)`` read as the complex number
    ``x_2i + i·x_2i+1`` and multiplied by ``e^{iθ}``, with the gradient of a rotation, the
    inverse rotation (a product by ``e^{−iθ}``): nothing of ``x`` is kept for the backward
    pass, and each pass reads and writes the tensor once."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, turn: Tensor) -> Tensor:
        ctx.save_for_backward(turn)
        return _turn(x, turn)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (turn,) = ctx.saved_tensors
        return _turn(grad, turn.conj()), None


class _PackedRotation(torch.autograd.Function):
    """:class:`_Rotation` of slots 0 and 1 (queries, keys) of a packed ``(B, T, 3, h, d_k)``
    projection, slot 2 (values) copied."""

    @staticmethod
    def forward(ctx: Any, qkv: Tensor, turn: Tensor) -> Tensor:
        ctx.save_for_backward(turn)
        return _turn_packed(qkv, turn)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        (turn,) = ctx.saved_tensors
        return _turn_packed(grad.contiguous(), turn.conj()), None


def _turn_packed(qkv: Tensor, turn: Tensor) -> Tensor:
    out = torch.empty_like(qkv, memory_format=torch.contiguous_format)  # (B, T, 3, h, d_k)
    _turn(qkv[:, :, :2], turn, out=out[:, :, :2])
    out[:, :, 2].copy_(qkv[:, :, 2])
    return out


def _turn(x: Tensor, turn: Tensor, out: Tensor | None = None) -> Tensor:
    """Rotate the pairs of ``x`` by ``turn`` (``e^{±iθ}``, broadcast over ``x``'s pairs): one
    complex product, read in place where the layout allows (float32/64, pairs adjacent);
    bf16/fp16, which have no complex type here, go through float32 and back (the widening and
    narrowing copies cost less than the real formula's strided swap of the pairs), and any
    other layout through a contiguous copy."""
    wide = x if x.dtype in (torch.float32, torch.float64) else x.float()
    if not _complex_ok(wide):
        wide = wide.contiguous()
    pairs = torch.view_as_complex(wide.unflatten(-1, (-1, 2)))  # (..., d_k / 2)
    if out is not None and out.dtype == wide.dtype and _complex_ok(out):
        torch.mul(pairs, turn, out=torch.view_as_complex(out.unflatten(-1, (-1, 2))))
        return out
    turned = torch.view_as_real(pairs * turn).flatten(-2)
    return turned.to(x.dtype) if out is None else out.copy_(turned)


def _complex_ok(x: Tensor) -> bool:
    """Whether the pairs of ``x``'s last dimension can be read as complex numbers in place."""
    strides = (x.storage_offset(), *x.stride()[:-1])
    return x.stride(-1) == 1 and all(s % 2 == 0 for s in strides)


class RelativePositions(nn.Module):
    """The part of ``model.positions`` that acts inside self-attention (module docstring).

    Args:
        kind: a registered scheme (:func:`seqlab.catalog.positions`).
        num_heads, head_dim: of the attention layers.
        causal: the stack's self-attention is causal (a decoder): the bias then hides the
            future, and T5's buckets count only the past.
        num_buckets, max_distance: T5's buckets (32 and 128 in T5).
    """

    def __init__(
        self,
        kind: str,
        num_heads: int,
        head_dim: int,
        causal: bool,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
    ):
        super().__init__()
        spec = position_spec(kind)
        if kind == "none" and not causal:
            raise ValueError(
                "positions: none leaves a bidirectional encoder blind to the order of its inputs (attention "
                "is permutation-equivariant); use it for causal models only"
            )
        self.kind, self.causal = spec.name, causal
        self.num_buckets, self.max_distance = num_buckets, max_distance
        if spec.pairs and head_dim % 2:  # refused by the config first (check_positions)
            raise ValueError(f"positions: rope rotates pairs of dimensions; d_k={head_dim} is odd")
        self.head_dim = head_dim
        if kind == "alibi":
            self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)  # (h,)
        if kind == "t5_bias":
            self.bias_table = nn.Embedding(num_buckets, num_heads)  # (buckets, h)
            nn.init.zeros_(self.bias_table.weight)  # starts as no bias: plain attention

    def forward(
        self, num_new: int, num_past: int, dtype: torch.dtype, device: torch.device
    ) -> AttentionPositions | None:
        """The rotation or bias for ``num_new`` queries after ``num_past`` cached positions;
        None for absolute schemes and ``none``."""
        if self.kind == "rope":
            pos = torch.arange(num_past, num_past + num_new, device=device)
            cos, sin = rotary_angles(pos, self.head_dim)  # (T, d_k / 2) each, float64
            wide = torch.complex128 if dtype == torch.float64 else torch.complex64
            return AttentionPositions(turn=torch.complex(cos, sin).to(wide))  # e^{iθ}
        if self.kind not in ("alibi", "t5_bias"):
            return None
        i = torch.arange(num_past, num_past + num_new, device=device)[:, None]  # (T, 1)
        j = torch.arange(num_past + num_new, device=device)[None, :]  # (1, P + T)
        if self.kind == "alibi":
            bias = -self.slopes[:, None, None] * (i - j).abs()  # (h, T, P + T)
        else:
            buckets = t5_buckets(j - i, self.num_buckets, self.max_distance, not self.causal)
            bias = self.bias_table(buckets).permute(2, 0, 1)  # (h, T, P + T)
        if self.causal:
            bias = bias.masked_fill(j > i, float("-inf"))  # the causal mask, once for all layers
        return AttentionPositions(bias=bias.to(dtype), hides_future=self.causal)


def relative_positions_for(
    kind: str, num_heads: int, d_model: int, causal: bool
) -> RelativePositions | None:
    """The :class:`RelativePositions` a stack of ``d_model``-wide, ``num_heads``-head
    self-attention layers needs for scheme ``kind``; None for absolute schemes."""
    if position_spec(kind).absolute:
        return None
    return RelativePositions(kind, num_heads, d_model // num_heads, causal)


def position_spec(kind: str) -> PositionSpec:
    """The record of the scheme called ``kind``."""
    known = positions()
    if kind not in known:
        raise ValueError(f"unknown positions {kind!r}; choose one of {', '.join(known)}")
    return known[kind]
