"""Decoder-only Transformer language model (GPT-style), with a key/value cache for generation.

Notation (shapes in comments): B batch, T new tokens, P tokens already in the cache,
L = cfg.max_len, d model width, V vocabulary.

The training forward (no cache) is one fused causal SDPA call per layer with a packed q/k/v
projection: the same work as a nanoGPT block. Generation
(:func:`seqlab.models.language_model.generate`) keeps a :class:`DecoderCache`.
"""

from __future__ import annotations

from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import TransformerLMConfig
from seqlab.models.language_model import CausalLM
from seqlab.nn.transformer import Decoder, DecoderCache


class TransformerLanguageModel(CausalLM):
    """Token embedding (× √d) + positional encoding, N causal blocks, vocabulary head.

    ``cfg.norm = "pre"`` adds a final LayerNorm before the head; ``cfg.tie_weights`` shares the
    head's weight with the token embedding (Press & Wolf 2017). ``cfg.positions`` picks the
    position scheme (:mod:`seqlab.nn.attention_positions`); ``cfg.attention = "linear"`` makes
    every layer causal linear attention (:mod:`seqlab.nn.linear_attention`): generation then
    carries a fixed-size state instead of a growing cache, and (unless positions are a learned
    table) reads on past ``max_len`` without re-reading a window.
    """

    def __init__(self, vocab_size: int, cfg: TransformerLMConfig):
        super().__init__()
        self.cfg = cfg
        self.max_len = cfg.max_len
        recurrent = cfg.attention == "linear" and cfg.positions != "learned"
        self.context_size = None if recurrent else cfg.max_len
        self.decoder = Decoder(
            vocab_size,
            cfg.d_model,
            cfg.num_heads,
            cfg.num_layers,
            cfg.d_ff,
            cfg.dropout,
            cfg.max_len,
            cfg.norm,
            cfg.positions,
            cross_attention=False,
            attention_dropout=cfg.attention_dropout,
            attention=cfg.attention,
        )
        self.head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tie_weights:
            self.head.weight = self.decoder.embed.token.weight

    def init_cache(self, batch_size: int) -> DecoderCache:
        """An empty cache; pass it to :meth:`forward` to decode incrementally."""
        return self.decoder.init_cache(batch_size)

    def init_state(self, batch_size: int) -> DecoderCache:
        """Incremental decoding starts from an empty cache (:meth:`init_cache`)."""
        return self.init_cache(batch_size)

    def forward(
        self, tokens: Tensor, cache: DecoderCache | None = None
    ) -> tuple[Tensor, DecoderCache | None]:
        """Next-token logits for every position.

        Without a cache (training, scoring) this is the fused causal path and the returned cache
        is None. With one, ``tokens`` continue the cached prefix at positions P .. P + T - 1
        (P + T <= L) and the updated cache is returned.

        Shape:
            tokens ``(B, T)`` -> logits ``(B, T, V)``.
        """
        out = self.decoder(tokens, cache=cache)
        return self.head(out.hidden), out.cache  # (B, T, V)


register_model(
    ModelSpec(
        TransformerLMConfig,
        lambda cfg, sizes: TransformerLanguageModel(sizes.need("vocab_size"), cfg),
    )
)
