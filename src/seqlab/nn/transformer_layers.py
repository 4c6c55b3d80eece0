"""The layers of the Transformer (Vaswani et al. 2017, §3.1–§3.3): the position-wise FFN (§3.3,
eq. 2), AddNorm (the residual connection and layer normalisation around each sub-layer, post- or
pre-norm), and the encoder and decoder blocks that the stacks of :mod:`seqlab.nn.transformer`
repeat N times.

Notation (shapes in comments): B batch, S source length, T target length (new positions),
P positions already decoded (cache), d model width, h heads, d_k = d / h, d_ff FFN width.

Masks are bool, True = may attend (see :mod:`seqlab.nn.attention`). A block stores nothing
between calls: a decoder block is given the self-attention state of the P positions before
(``past_kv``: their keys/values, :class:`~seqlab.nn.kv_cache.KVCache`, or with linear attention
a fixed-size :class:`~seqlab.nn.linear_attention.LinearAttentionState`) and returns it extended
by the T new ones; the stack keeps them in its :class:`~seqlab.nn.transformer.DecoderCache`.
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.attention_positions import AttentionPositions
from seqlab.nn.dropout import Dropout
from seqlab.nn.kv_cache import KVCache
from seqlab.nn.linear_attention import LinearAttentionState, LinearSelfAttention

Norm = Literal["post", "pre"]
Activation = Literal["relu", "gelu"]
AttentionKind = Literal["softmax", "linear"]
SelfState = KVCache | LinearAttentionState


class PositionWiseFFN(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position (§3.3, eq. 2); the Vision
    Transformer uses GELU in place of max(0, ·) (Dosovitskiy et al. 2021, §3.1)."""

    def __init__(self, d_model: int, d_ff: int, activation: Activation = "relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.act = nn.GELU() if activation == "gelu" else nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        """Shape: ``(B, T, d) -> (B, T, d)``."""
        return self.linear2(self.act(self.linear1(x)))  # (B, T, d)


class AddNorm(nn.Module):
    """Residual connection and layer normalisation around one sub-layer (§3.1, §5.4).

    Post-norm (the paper): ``LayerNorm(x + Dropout(Sublayer(x)))``.
    Pre-norm (Xiong et al. 2020): ``x + Dropout(Sublayer(LayerNorm(x)))``.
    Use as ``y = sublayer(addnorm.sublayer_input(x)); x = addnorm(x, y)``.
    """

    def __init__(self, d_model: int, dropout: float = 0.0, norm: Norm = "post"):
        super().__init__()
        if norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', got {norm!r}")
        self.pre_norm = norm == "pre"
        self.dropout = Dropout(dropout)
        self.ln = nn.LayerNorm(d_model)

    def sublayer_input(self, x: Tensor) -> Tensor:
        """What the sub-layer sees: LayerNorm(x) for pre-norm, x itself for post-norm."""
        return self.ln(x) if self.pre_norm else x  # (B, T, d)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        """Combine the residual ``x`` with the sub-layer output ``y``.

        Shape: x ``(B, T, d)``, y ``(B, T, d)`` -> ``(B, T, d)``.
        """
        if self.pre_norm:
            return x + self.dropout(y)  # (B, T, d)
        return self.ln(x + self.dropout(y))  # (B, T, d)


class EncoderBlock(nn.Module):
    """Multi-head self-attention and FFN, each wrapped in AddNorm (§3.1, encoder)."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm: Norm = "post",
        activation: Activation = "relu",
        *,
        attention_dropout: float | None = None,
    ):
        super().__init__()
        p_attn = dropout if attention_dropout is None else attention_dropout
        self.self_attn = MultiHeadAttention(d_model, num_heads, p_attn)
        self.addnorm1 = AddNorm(d_model, dropout, norm)
        self.ffn = PositionWiseFFN(d_model, d_ff, activation)
        self.addnorm2 = AddNorm(d_model, dropout, norm)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
        positions: AttentionPositions | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Encode one layer.

        Args:
            mask: bool, True = may attend, broadcastable to ``(B, S, S)``, e.g. ``(B, 1, S)``.
            positions: a relative scheme's rotation or bias (from the stack).

        Shape:
            x ``(B, S, d)`` -> ``(B, S, d)``, weights ``(B, h, S, S)`` or None.
        """
        h = self.addnorm1.sublayer_input(x)  # (B, S, d)
        y, weights, _ = self.self_attn.self_attention(
            h, mask, need_weights=need_weights, positions=positions
        )  # (B, S, d), (B, h, S, S)
        x = self.addnorm1(x, y)  # (B, S, d)
        x = self.addnorm2(x, self.ffn(self.addnorm2.sublayer_input(x)))  # (B, S, d)
        return x, weights


class DecoderBlock(nn.Module):
    """Masked self-attention, encoder–decoder attention and FFN, each in AddNorm (§3.1).

    With ``cross_attention=False`` the middle sub-layer is absent: a decoder-only (GPT) block.
    ``attention="linear"``: the masked self-attention is causal linear attention
    (:class:`~seqlab.nn.linear_attention.LinearSelfAttention`).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm: Norm = "post",
        cross_attention: bool = True,
        *,
        attention_dropout: float | None = None,
        attention: AttentionKind = "softmax",
    ):
        super().__init__()
        p_attn = dropout if attention_dropout is None else attention_dropout
        self_attention = LinearSelfAttention if attention == "linear" else MultiHeadAttention
        self.self_attn = self_attention(d_model, num_heads, p_attn)
        self.addnorm1 = AddNorm(d_model, dropout, norm)
        self.cross_attn = (
            MultiHeadAttention(d_model, num_heads, p_attn) if cross_attention else None
        )
        self.addnorm2 = AddNorm(d_model, dropout, norm) if cross_attention else None
        self.ffn = PositionWiseFFN(d_model, d_ff)
        self.addnorm3 = AddNorm(d_model, dropout, norm)

    def forward(
        self,
        x: Tensor,
        memory_kv: KVCache | None = None,
        memory_mask: Tensor | None = None,
        *,
        past_kv: SelfState | None = None,
        need_weights: bool = False,
        positions: AttentionPositions | None = None,
    ) -> tuple[Tensor, SelfState, Tensor | None, Tensor | None]:
        """Decode one layer for T new positions after P cached ones.

        Args:
            memory_kv: the encoder output projected by ``cross_attn.project_kv``.
            memory_mask: bool, True = may attend, broadcastable to ``(B, T, S)``.
            past_kv: self-attention keys/values of the P previous positions (linear attention:
                its state after them).
            positions: a relative scheme's rotation or bias (from the stack).

        Shape:
            x ``(B, T, d)`` -> ``(B, T, d)``; self-attention cache of ``(B, h, P + T, d_k)``;
            weights ``(B, h, T, P + T)`` and ``(B, h, T, S)`` or None.
        """
        h = self.addnorm1.sublayer_input(x)  # (B, T, d)
        y, self_w, kv = self.self_attn.self_attention(
            h, cache=past_kv, is_causal=True, need_weights=need_weights, positions=positions
        )  # (B, T, d), (B, h, T, P + T)
        x = self.addnorm1(x, y)  # (B, T, d)
        cross_w = None
        if self.cross_attn is not None:
            if memory_kv is None:
                raise ValueError("this decoder block has cross-attention: pass memory_kv")
            h = self.addnorm2.sublayer_input(x)  # (B, T, d)
            y, cross_w = self.cross_attn.attend(
                h, memory_kv, memory_mask, need_weights=need_weights
            )  # (B, T, d), (B, h, T, S)
            x = self.addnorm2(x, y)  # (B, T, d)
        x = self.addnorm3(x, self.ffn(self.addnorm3.sublayer_input(x)))  # (B, T, d)
        return x, kv, self_w, cross_w
