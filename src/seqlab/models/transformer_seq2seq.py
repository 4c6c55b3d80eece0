"""Encoder–decoder Transformer for translation (Vaswani et al. 2017).

Notation (shapes in comments): B batch, S source length, T target length (new positions),
P target positions already decoded, d model width, h heads, d_k = d / h, V vocabulary.

Built from :class:`seqlab.nn.transformer.Encoder` and :class:`~seqlab.nn.transformer.Decoder`
with sinusoidal positions (§3.5) and a linear output layer over the decoder's last hidden state:

- ``share_embeddings``: source and target use one embedding matrix (needs one joint vocabulary,
  ``src_vocab_size == tgt_vocab_size``), as in §3.4 with a shared BPE vocabulary.
- ``tie_output``: the output layer's weight is the target embedding (§3.4; Press & Wolf 2017).
  Embeddings start as N(0, 1/d) and are multiplied by √d on input, so tied logits start at
  unit scale.

:meth:`TransformerSeq2Seq.encode` runs the encoder and projects its output to every decoder
layer's cross-attention keys and values once; the memory holds those (and the source mask), so
neither teacher-forced decoding nor a decoding step projects the source again. The decoder state
holds only the self-attention keys/values of the positions decoded so far. Teacher forcing is one
causal pass (fused attention kernel); decoding step by step with the state gives the same logits.

Cross-attention weights for plotting come from the last decoder layer, averaged over heads
(``attention_layer`` picks another layer). The interface is :class:`~seqlab.models.encoder_decoder.EncoderDecoder`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import TransformerConfig
from seqlab.models.encoder_decoder import AttentionMaps, EncoderDecoder
from seqlab.nn.kv_cache import KVCache
from seqlab.nn.transformer import Decoder, DecoderCache, Encoder
from seqlab.nn.transformer_layers import SelfState


@dataclass(frozen=True)
class TransformerMemory:
    """The source as the decoder sees it: per decoder layer, the projected encoder output.

    ``beams`` (K) decoder rows read each sentence's memory: rows b·K .. b·K + K - 1 read
    sentence b's (:meth:`TransformerSeq2Seq.expand_memory`), their queries sharing one copy of its
    keys and values (:meth:`~seqlab.nn.attention.MultiHeadAttention.attend`), never one per beam.
    """

    cross_kv: tuple[KVCache, ...]  # per decoder layer, key and value (B, h, S, d_k)
    mask: Tensor  # (B, 1, S) bool, True = real source position
    beams: int = 1  # K decoder rows per sentence

    @property
    def rows(self) -> int:
        """How many decoder rows read this memory: B·K."""
        return self.mask.shape[0] * self.beams


@dataclass(frozen=True)
class TransformerState:
    """Per decoder layer, the self-attention keys/values of the P positions decoded so far (with
    linear attention, the layer's fixed-size state after them)."""

    self_kv: tuple[SelfState, ...]  # (B, h, P, d_k) each

    @property
    def length(self) -> int:
        """P, the number of target positions decoded so far."""
        return self.self_kv[0].length


class TransformerSeq2Seq(EncoderDecoder):
    """Transformer encoder–decoder with optional shared embeddings and tied output layer.

    Args:
        attention_layer: which decoder layer's cross-attention (averaged over heads) ``decode``
            and ``decode_step`` return when asked for weights; -1 = the last.
    """

    has_attention = True
    attention_layers: ClassVar[tuple[str, ...]] = ("cross", "encoder", "decoder")

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        cfg: TransformerConfig,
        attention_layer: int = -1,
    ):
        super().__init__()
        if cfg.share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one joint vocabulary, got src_vocab_size={src_vocab_size} "
                f"and tgt_vocab_size={tgt_vocab_size}; use a joint subword model "
                "(data.subword.joint: true) or set model.share_embeddings: false"
            )
        if not -cfg.decoder_layers <= attention_layer < cfg.decoder_layers:
            raise ValueError(
                f"attention_layer={attention_layer} is out of range for "
                f"{cfg.decoder_layers} decoder layers"
            )
        self.cfg = cfg
        self.attention_layer = attention_layer
        self.max_decode_len: int | None = cfg.max_len
        self.encoder = Encoder(
            src_vocab_size,
            cfg.d_model,
            cfg.num_heads,
            cfg.encoder_layers,
            cfg.d_ff,
            cfg.dropout,
            cfg.max_len,
            cfg.norm,
            cfg.positions,
            attention_dropout=cfg.attention_dropout,
        )
        self.decoder = Decoder(
            tgt_vocab_size,
            cfg.d_model,
            cfg.num_heads,
            cfg.decoder_layers,
            cfg.d_ff,
            cfg.dropout,
            cfg.max_len,
            cfg.norm,
            cfg.positions,
            cross_attention=True,
            attention_dropout=cfg.attention_dropout,
            attention=cfg.attention,
        )
        if cfg.share_embeddings:
            self.decoder.embed.token.weight = self.encoder.embed.token.weight
        self.output = nn.Linear(cfg.d_model, tgt_vocab_size, bias=False)
        if cfg.tie_output:
            self.output.weight = self.decoder.embed.token.weight

    def encode(self, src: Tensor, src_lengths: Tensor) -> TransformerMemory:
        """Encode the source and project it for every decoder layer's cross-attention.

        Shape:
            src ``(B, S)``, src_lengths ``(B,)`` -> cross_kv of ``(B, h, S, d_k)``,
            mask ``(B, 1, S)``.
        """
        src_lengths = src_lengths.to(src.device)
        hidden, _ = self.encoder(src, src_lengths)  # (B, S, d)
        cache = self.decoder.init_cache(src.shape[0], hidden, src_lengths)  # projects hidden once
        return TransformerMemory(cross_kv=cache.cross_kv, mask=cache.memory_mask)

    def init_state(self, memory: TransformerMemory) -> TransformerState:
        """No target position decoded yet: empty self-attention caches ``(B, h, 0, d_k)``."""
        ref = memory.cross_kv[0].key  # (B, h, S, d_k)
        return TransformerState(self.decoder.empty_self_state(memory.rows, ref))  # B·K rows

    def run_decoder(
        self,
        memory: TransformerMemory,
        tokens: Tensor,
        state: TransformerState,
        need_weights: bool,
    ) -> tuple[Tensor, TransformerState, Tensor | None]:
        """Decode ``tokens`` at positions P .. P + T - 1 after the P cached ones.

        Shape:
            tokens ``(B, T)`` -> logits ``(B, T, V)``, state of ``(B, h, P + T, d_k)``,
            weights ``(B, T, S)`` or None.
        """
        cache = DecoderCache(state.self_kv, memory.cross_kv, memory.mask)
        out = self.decoder(tokens, cache=cache, need_weights=need_weights)
        logits = self.output(out.hidden)  # (B, T, V)
        weights = None
        if need_weights:
            weights = out.cross_attention[self.attention_layer].mean(dim=1)  # (B, T, S)
        return logits, TransformerState(out.cache.self_kv), weights

    def attention_maps(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> AttentionMaps:
        """Teacher forcing with each layer's and head's weights (Vaswani et al. 2017, §3.2.2):
        encoder self-attention, decoder (causal) self-attention and encoder–decoder attention;
        the alignment is what ``decode`` returns (layer ``attention_layer`` averaged over heads).

        Shape:
            src ``(B, S)``, tgt_in ``(B, T)`` -> logits ``(B, T, V)``, alignment ``(B, T, S)``,
            per layer encoder ``(B, h, S, S)``, decoder ``(B, h, T, T)``, cross ``(B, h, T, S)``.
        """
        src_lengths = src_lengths.to(src.device)
        hidden, encoder = self.encoder(src, src_lengths, need_weights=True)  # (B, S, d)
        out = self.decoder(tgt_in, hidden, src_lengths, need_weights=True)
        logits = self.output(out.hidden)  # (B, T, V)
        assert encoder is not None and out.self_attention and out.cross_attention
        cross = list(out.cross_attention)
        return AttentionMaps(
            logits,
            cross[self.attention_layer].mean(dim=1),  # (B, T, S)
            {"cross": cross, "encoder": list(encoder), "decoder": list(out.self_attention)},
        )

    def expand_memory(
        self, memory: TransformerMemory, sentences: int, beams: int
    ) -> TransformerMemory:
        """K = ``beams`` decoder rows per sentence, sharing its one copy (nothing is copied)."""
        if memory.beams != 1 or memory.mask.shape[0] != sentences:
            return super().expand_memory(memory, sentences, beams)
        return TransformerMemory(memory.cross_kv, memory.mask, beams)

    def reorder_memory(self, memory: TransformerMemory, indices: Tensor) -> TransformerMemory:
        """Rows ``indices`` of the memory (select, repeat or permute sentences). With K rows per
        sentence, whole blocks of K select sentences (the copies stay shared); other rows give
        each row its own copy."""
        k = memory.beams
        if k > 1:
            if indices.numel() % k == 0:
                block = indices.view(-1, k)  # (B', K)
                offsets = torch.arange(k, device=indices.device)  # (K,)
                if bool(((block[:, :1] % k == 0) & (block - block[:, :1] == offsets)).all()):
                    sentences = block[:, 0] // k  # (B',) whole blocks: sentences selected
                    return TransformerMemory(
                        tuple(kv.index_select(sentences) for kv in memory.cross_kv),
                        memory.mask.index_select(0, sentences),
                        k,
                    )
            indices = indices // k  # (R',) the sentence of each row: one copy per row
        return TransformerMemory(
            cross_kv=tuple(kv.index_select(indices) for kv in memory.cross_kv),
            mask=memory.mask.index_select(0, indices),
        )

    def reorder_state(self, state: TransformerState, indices: Tensor) -> TransformerState:
        """Rows ``indices`` of the self-attention caches."""
        return TransformerState(tuple(kv.index_select(indices) for kv in state.self_kv))


register_model(
    ModelSpec(
        TransformerConfig,
        lambda cfg, sizes: TransformerSeq2Seq(
            sizes.need("src_vocab_size"), sizes.need("tgt_vocab_size"), cfg
        ),
    )
)
