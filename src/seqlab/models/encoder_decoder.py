"""The encoder–decoder interface shared by every translation model, written once.

Notation (shapes in comments): B batch, S source length, T target length, V target vocabulary.

A model (:class:`~seqlab.models.seq2seq.Seq2Seq`, :class:`~seqlab.models.bahdanau.Bahdanau`,
:class:`~seqlab.models.transformer_seq2seq.TransformerSeq2Seq`) subclasses
:class:`EncoderDecoder` and writes five methods:

- ``encode(src, src_lengths) -> memory``: everything the decoder needs from the source, computed
  once; padding after ``src_lengths`` must not change it.
- ``init_state(memory) -> state``: the decoder state before the first target token.
- ``run_decoder(memory, tokens, state, need_weights) -> (logits, state, attention)``: feed
  ``T`` consecutive target tokens from ``state``; ``attention`` is ``(B, T, S)`` when asked for
  and the model has any, else None.
- ``reorder_memory(memory, indices)``, ``reorder_state(state, indices)``: select, repeat or permute
  batch rows (beam search, dropping finished sentences).

A model may also override :meth:`~EncoderDecoder.expand_memory`, which gives each sentence's
memory to K consecutive rows (the K beams of beam search): by default it repeats every row K
times; the Transformer keeps one copy per sentence and lets the K beams' queries share it.

The base class derives the rest from them: teacher-forced :meth:`~EncoderDecoder.decode`, one-token
:meth:`~EncoderDecoder.decode_step`, ``forward``, the padding-aware :meth:`~EncoderDecoder.loss` and
:meth:`~EncoderDecoder.attention_maps` (a model with attention layers adds each layer's and head's
weights to it).
Nothing is stored on the module between calls: memory and state are passed in and returned, so
greedy, beam search and sampling (:mod:`seqlab.models.search`) drive any model the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor, nn

from seqlab.nn.losses import masked_cross_entropy


class TranslationBatch(Protocol):
    """What :meth:`EncoderDecoder.loss` reads from a batch (the data layer provides one).

    Shape:
        src ``(B, S)``, src_lengths ``(B,)``, tgt_in ``(B, T)`` (``<bos> y``), tgt_out ``(B, T)``
        (``y <eos>``), tgt_lengths ``(B,)``.
    """

    src: Tensor
    src_lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    tgt_lengths: Tensor


@dataclass
class AttentionMaps:
    """A teacher-forced pass with every attention weight of the model, for drawing
    (:meth:`EncoderDecoder.attention_maps`).

    Attributes:
        logits: ``(B, T, V)``, as ``forward`` gives them.
        alignment: ``(B, T, S)``: the weights over the source that ``decode`` returns with
            ``need_weights`` (None for a model without attention).
        layers: by kind (:attr:`EncoderDecoder.attention_layers`: ``encoder`` ``(B, h, S, S)``,
            ``decoder`` ``(B, h, T, T)``, ``cross`` ``(B, h, T, S)``), one tensor per layer.
    """

    logits: Tensor
    alignment: Tensor | None
    layers: dict[str, list[Tensor]] = field(default_factory=dict)


class EncoderDecoder(nn.Module):
    """Base class of the translation models (see the module docstring).

    Attributes:
        max_decode_len: the most decoder positions the model supports (positional tables), or
            None when unbounded.
        has_attention: whether the model attends to the source (attention can be drawn).
    """

    max_decode_len: int | None = None
    #: whether ``need_weights=True`` returns weights over the source (else always None)
    has_attention: bool = False
    #: the kinds of per-layer, per-head weights :meth:`attention_maps` gives (none: only the
    #: alignment)
    attention_layers: ClassVar[tuple[str, ...]] = ()

    # ---------------------------------------------------------------- written by each model
    def encode(self, src: Tensor, src_lengths: Tensor) -> Any:
        raise NotImplementedError

    def init_state(self, memory: Any) -> Any:
        raise NotImplementedError

    def run_decoder(
        self, memory: Any, tokens: Tensor, state: Any, need_weights: bool
    ) -> tuple[Tensor, Any, Tensor | None]:
        raise NotImplementedError

    def reorder_memory(self, memory: Any, indices: Tensor) -> Any:
        raise NotImplementedError

    def reorder_state(self, state: Any, indices: Tensor) -> Any:
        raise NotImplementedError

    # --------------------------------------------------------------------- derived, shared
    def expand_memory(self, memory: Any, sentences: int, beams: int) -> Any:
        """The memory of ``sentences`` sentences for ``beams`` rows each, K = ``beams``: rows
        ``b·K .. b·K + K - 1`` read sentence b's (beam search). Here every row is repeated K
        times (:meth:`reorder_memory`); a model whose decoder can let the K rows share one copy
        overrides this (the Transformer does). Afterwards :meth:`reorder_memory` is given whole
        blocks of K rows.

        Shape:
            B sentences -> B·K rows.
        """
        device = next((w.device for w in self.parameters()), torch.device("cpu"))
        rows = torch.arange(sentences, device=device).repeat_interleave(beams)  # (B·K,)
        return self.reorder_memory(memory, rows)

    def decode(
        self, memory: Any, tgt_in: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits for every position of ``tgt_in`` (``<bos> y``).

        Shape:
            tgt_in ``(B, T)`` -> logits ``(B, T, V)``, attention ``(B, T, S)`` or None.
        """
        logits, _, weights = self.run_decoder(memory, tgt_in, self.init_state(memory), need_weights)
        return logits, weights

    def decode_step(
        self, memory: Any, state: Any, tokens: Tensor, *, need_weights: bool = False
    ) -> tuple[Tensor, Any, Tensor | None]:
        """Feed one token per row: next-token logits, the new state, attention on request.

        Shape:
            tokens ``(B,)`` or ``(B, 1)`` -> logits ``(B, V)``, state, attention ``(B, S)`` or None.
        """
        logits, state, weights = self.run_decoder(
            memory, tokens.reshape(-1, 1), state, need_weights
        )  # (B, 1, V)
        return logits[:, 0], state, (None if weights is None else weights[:, 0])  # (B, V)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits. Shape: ``(B, S), (B,), (B, T) -> (B, T, V)``."""
        return self.decode(self.encode(src, src_lengths), tgt_in)[0]  # (B, T, V)

    def loss(self, batch: TranslationBatch, label_smoothing: float = 0.0) -> tuple[Tensor, int]:
        """Mean cross-entropy over the real target tokens of ``batch``, and their number."""
        logits = self(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, V)
        return masked_cross_entropy(logits, batch.tgt_out, batch.tgt_lengths, label_smoothing)

    def attention_maps(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> AttentionMaps:
        """Teacher forcing with every attention weight the model has: here the alignment that
        ``decode`` returns (Bahdanau et al. 2014, §3.1); a model with attention layers
        (:attr:`attention_layers`) overrides it to add each layer's and head's weights.

        Shape:
            src ``(B, S)``, src_lengths ``(B,)``, tgt_in ``(B, T)`` -> see :class:`AttentionMaps`.
        """
        logits, alignment = self.decode(self.encode(src, src_lengths), tgt_in, need_weights=True)
        return AttentionMaps(logits, alignment)  # (B, T, V), (B, T, S)
