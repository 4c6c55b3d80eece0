"""The Transformer (Vaswani et al. 2017): the encoder and decoder stacks (§3.1), their embedding
(§3.4, §3.5) and the decoder's cache. The layers they repeat, the FFN, AddNorm and the encoder
and decoder blocks, are in :mod:`seqlab.nn.transformer_layers` (and importable from here).

Notation (shapes in comments): B batch, S source length, T target length (new positions),
P positions already decoded (cache), d model width, h heads, d_k = d / h, d_ff FFN width,
V vocabulary.

Masks are bool, True = may attend (see :mod:`seqlab.nn.attention`). The source padding mask comes
from the real lengths; the decoder's self-attention is causal.

Incremental decoding uses an explicit :class:`DecoderCache`, passed in and returned, never stored
on a module: per layer the self-attention keys/values of every position decoded so far (or, with
linear attention, the layer's fixed-size state, :mod:`seqlab.nn.linear_attention`), and the
cross-attention keys/values of the encoder output, projected once by :meth:`Decoder.init_cache`.
Decoding token by token with the cache gives the same outputs as one causal pass.

Positions (``positions``, :mod:`seqlab.nn.attention_positions`): an absolute scheme is added to
the embeddings; a relative one is computed once per forward pass by the stack and applied in every
layer's self-attention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from torch import Tensor, nn

from seqlab.nn.attention import padding_mask
from seqlab.nn.attention_positions import position_spec, relative_positions_for
from seqlab.nn.dropout import Dropout
from seqlab.nn.kv_cache import KVCache
from seqlab.nn.linear_attention import LinearAttentionState
from seqlab.nn.positional_encoding import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from seqlab.nn.transformer_layers import (  # noqa: F401 (the layers, importable from here too)
    Activation,
    AddNorm,
    AttentionKind,
    DecoderBlock,
    EncoderBlock,
    Norm,
    PositionWiseFFN,
    SelfState,
)

#: ``model.positions``: a name of :func:`seqlab.catalog.positions`
Positional = str


class _NoAbsolutePositions(nn.Module):
    """Dropout only: the scheme acts inside attention (or there is none)."""

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        return self.dropout(x)  # (B, T, d)


def _positional(kind: Positional, d_model: int, max_len: int, dropout: float) -> nn.Module:
    position_spec(kind)  # a known scheme, or a clear error
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_len, dropout)
    if kind == "learned":
        return LearnedPositionalEncoding(d_model, max_len, dropout)
    return _NoAbsolutePositions(dropout)


class _Embedding(nn.Module):
    """Token embedding scaled by √d plus positional encoding and dropout (§3.4, §3.5).

    With ``input_dim``, the inputs are float frames ``(B, T, input_dim)`` (standardised
    features, :mod:`seqlab.models.audio`) and a linear projection takes the embedding table's
    place; its weights start at N(0, 1/input_dim) and it is not scaled, so it too has unit
    scale at the start.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int,
        dropout: float,
        positional: Positional,
        input_dim: int | None = None,
    ):
        super().__init__()
        self.token: nn.Embedding | nn.Linear
        if input_dim is None:
            self.token = nn.Embedding(vocab_size, d_model)
            nn.init.normal_(self.token.weight, std=d_model**-0.5)  # √d · embedding: unit scale
            self.scale = math.sqrt(d_model)
        else:
            self.token = nn.Linear(input_dim, d_model)
            nn.init.normal_(self.token.weight, std=input_dim**-0.5)
            nn.init.zeros_(self.token.bias)
            self.scale = 1.0
        self.position = _positional(positional, d_model, max_len, dropout)

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        """Shape: tokens ``(B, T)`` (or frames ``(B, T, input_dim)``) -> ``(B, T, d)``."""
        return self.position(self.token(tokens) * self.scale, start)  # (B, T, d)


class Encoder(nn.Module):
    """Stack of N encoder blocks over embedded source tokens (§3.1); with ``input_dim``, over
    projected float frames ``(B, S, input_dim)`` instead (see :class:`_Embedding`)."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        num_layers: int,
        d_ff: int,
        dropout: float = 0.0,
        max_len: int = 1024,
        norm: Norm = "post",
        positions: Positional = "sinusoidal",
        *,
        attention_dropout: float | None = None,
        input_dim: int | None = None,
    ):
        super().__init__()
        self.embed = _Embedding(vocab_size, d_model, max_len, dropout, positions, input_dim)
        self.relative = relative_positions_for(positions, num_heads, d_model, causal=False)
        self.blocks = nn.ModuleList(
            EncoderBlock(
                d_model, num_heads, d_ff, dropout, norm, attention_dropout=attention_dropout
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()

    def forward(
        self, src: Tensor, lengths: Tensor | None = None, *, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor] | None]:
        """Encode a (padded) batch of source sentences.

        Args:
            lengths: real length of each source ``(B,)``; padded keys are masked.
            need_weights: also return each layer's self-attention weights.

        Shape:
            src ``(B, S)`` (frames ``(B, S, input_dim)``) -> memory ``(B, S, d)``, weights list
            of N ``(B, h, S, S)`` or None.
        """
        mask = None if lengths is None else padding_mask(lengths, src.shape[1])  # (B, 1, S)
        x = self.embed(src)  # (B, S, d)
        pos = None if self.relative is None else self.relative(x.shape[1], 0, x.dtype, x.device)
        weights = [] if need_weights else None
        for block in self.blocks:
            x, w = block(x, mask, need_weights=need_weights, positions=pos)  # (B, S, d)
            if weights is not None:
                weights.append(w)
        return self.final_norm(x), weights  # (B, S, d)


@dataclass(frozen=True)
class DecoderCache:
    """Everything incremental decoding needs besides the new tokens.

    ``self_kv[i]``: layer i's self-attention keys/values of all positions decoded so far (with
    linear attention, its fixed-size state);
    ``cross_kv[i]``: layer i's projected encoder output (None for a decoder-only stack);
    ``memory_mask``: the source padding mask ``(B, 1, S)`` or None.
    """

    self_kv: tuple[SelfState, ...]
    cross_kv: tuple[KVCache, ...] | None = None
    memory_mask: Tensor | None = None

    @property
    def length(self) -> int:
        """Number of positions decoded so far (P)."""
        return self.self_kv[0].length


class DecoderOutput(NamedTuple):
    """What :class:`Decoder` returns; attention lists only when ``need_weights=True``."""

    hidden: Tensor  # (B, T, d)
    cache: DecoderCache | None  # updated cache, when one was passed in
    self_attention: list[Tensor] | None  # per layer (B, h, T, P + T)
    cross_attention: list[Tensor] | None  # per layer (B, h, T, S)


class Decoder(nn.Module):
    """Stack of N decoder blocks over embedded target tokens (§3.1).

    ``cross_attention=False`` gives the decoder-only stack of a language model. The output is
    the final hidden state; the projection to the vocabulary belongs to the model.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        num_layers: int,
        d_ff: int,
        dropout: float = 0.0,
        max_len: int = 1024,
        norm: Norm = "post",
        positions: Positional = "sinusoidal",
        cross_attention: bool = True,
        *,
        attention_dropout: float | None = None,
        attention: AttentionKind = "softmax",
    ):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.max_len = max_len
        self.has_cross_attention = cross_attention
        self.attention = attention
        if attention == "linear" and not position_spec(positions).linear_attention:
            raise ValueError(
                f"positions: {positions} acts on attention logits, which linear attention has "
                "not; use sinusoidal, learned or none"
            )
        self.embed = _Embedding(vocab_size, d_model, max_len, dropout, positions)
        self.relative = relative_positions_for(positions, num_heads, d_model, causal=True)
        self.blocks = nn.ModuleList(
            DecoderBlock(
                d_model,
                num_heads,
                d_ff,
                dropout,
                norm,
                cross_attention,
                attention_dropout=attention_dropout,
                attention=attention,
            )
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()

    def _memory(self, memory: Tensor | None) -> tuple[KVCache, ...] | None:
        if not self.has_cross_attention:
            if memory is not None:
                raise ValueError("this decoder has no cross-attention; do not pass memory")
            return None
        if memory is None:
            raise ValueError("this decoder has cross-attention: pass the encoder output (memory)")
        return tuple(block.cross_attn.project_kv(memory, memory) for block in self.blocks)

    def init_cache(
        self,
        batch_size: int,
        memory: Tensor | None = None,
        memory_lengths: Tensor | None = None,
    ) -> DecoderCache:
        """An empty cache; projects the encoder output once per layer for cross-attention.

        Shape:
            memory ``(B, S, d)``, memory_lengths ``(B,)``.
        """
        mask = None
        if memory is not None and memory_lengths is not None:
            mask = padding_mask(memory_lengths, memory.shape[1])  # (B, 1, S)
        return DecoderCache(
            self_kv=self.empty_self_state(batch_size, self.embed.token.weight),
            cross_kv=self._memory(memory),
            memory_mask=mask,
        )

    def empty_self_state(self, batch_size: int, like: Tensor) -> tuple[SelfState, ...]:
        """Per layer, the self-attention's state before any position: an empty key/value
        cache ``(B, h, 0, d_k)``, or linear attention's zero sums (on ``like``'s device)."""
        if self.attention == "linear":
            return tuple(
                LinearAttentionState.empty(batch_size, self.num_heads, self.head_dim, like)
                for _ in self.blocks
            )
        empty = like.new_zeros(batch_size, self.num_heads, 0, self.head_dim)  # (B, h, 0, d_k)
        return tuple(KVCache(empty, empty) for _ in self.blocks)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor | None = None,
        memory_lengths: Tensor | None = None,
        *,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> DecoderOutput:
        """Decode a whole target (training) or, with ``cache``, the next T tokens.

        Without a cache, self-attention uses the fused causal kernel and no cache is built.
        With one (from :meth:`init_cache`), ``memory`` must not be passed again: the cache holds
        the projected encoder output, and the new tokens are at positions P .. P + T - 1.

        Shape:
            tgt ``(B, T)``, memory ``(B, S, d)``, memory_lengths ``(B,)``
            -> hidden ``(B, T, d)`` (see :class:`DecoderOutput`).
        """
        if cache is None:
            start, past = 0, [None] * len(self.blocks)
            cross_kv = self._memory(memory)
            memory_mask = None
            if memory is not None and memory_lengths is not None:
                memory_mask = padding_mask(memory_lengths, memory.shape[1])  # (B, 1, S)
        else:
            if memory is not None or memory_lengths is not None:
                raise ValueError("with a cache, memory was projected by init_cache; pass only tgt")
            start, past = cache.length, cache.self_kv
            cross_kv, memory_mask = cache.cross_kv, cache.memory_mask
        x = self.embed(tgt, start)  # (B, T, d)
        pos = None
        if self.relative is not None:
            pos = self.relative(x.shape[1], start, x.dtype, x.device)
        self_ws = [] if need_weights else None
        cross_ws = [] if need_weights and self.has_cross_attention else None
        new_kv = []
        for i, block in enumerate(self.blocks):
            x, kv, self_w, cross_w = block(
                x,
                None if cross_kv is None else cross_kv[i],
                memory_mask,
                past_kv=past[i],
                need_weights=need_weights,
                positions=pos,
            )  # (B, T, d)
            new_kv.append(kv)
            if self_ws is not None:
                self_ws.append(self_w)
            if cross_ws is not None:
                cross_ws.append(cross_w)
        new_cache = None
        if cache is not None:
            new_cache = DecoderCache(tuple(new_kv), cross_kv, memory_mask)
        return DecoderOutput(self.final_norm(x), new_cache, self_ws, cross_ws)  # (B, T, d)
