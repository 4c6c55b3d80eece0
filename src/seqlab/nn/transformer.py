"""The Transformer (Vaswani et al. 2017): FFN, AddNorm, encoder/decoder blocks and stacks.

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
from typing import Literal, NamedTuple

from torch import Tensor, nn

from seqlab.deprecation import renamed_kwargs
from seqlab.nn.attention import MultiHeadAttention, padding_mask
from seqlab.nn.attention_positions import AttentionPositions, position_spec, relative_positions_for
from seqlab.nn.dropout import Dropout
from seqlab.nn.kv_cache import KVCache
from seqlab.nn.linear_attention import LinearAttentionState, LinearSelfAttention
from seqlab.nn.positional_encoding import LearnedPositionalEncoding, SinusoidalPositionalEncoding

Norm = Literal["post", "pre"]
#: ``model.positions``: a name of :func:`seqlab.catalog.positions`
Positional = str
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

    @renamed_kwargs(positional="positions")
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

    @renamed_kwargs(valid_lens="lengths", return_attention="need_weights")
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

    @renamed_kwargs(positional="positions")
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

    @renamed_kwargs(memory_valid_lens="memory_lengths")
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

    @renamed_kwargs(memory_valid_lens="memory_lengths", return_attention="need_weights")
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
