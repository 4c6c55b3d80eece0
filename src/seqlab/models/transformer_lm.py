"""Decoder-only Transformer language model (GPT-style) and cached generation.

Notation (shapes in comments): B batch, T new tokens, P tokens already in the cache,
L = cfg.max_len, d model width, V vocabulary.

The training forward (no cache) is one fused causal SDPA call per layer with a packed q/k/v
projection: the same work as a nanoGPT block. Generation keeps a :class:`DecoderCache`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

from seqlab.config import TransformerLMConfig
from seqlab.nn.sampling import next_token
from seqlab.nn.transformer import Decoder, DecoderCache


class TransformerLanguageModel(nn.Module):
    """Token embedding (× √d) + positional encoding, N causal blocks, vocabulary head.

    ``cfg.norm = "pre"`` adds a final LayerNorm before the head; ``cfg.tie_weights`` shares the
    head's weight with the token embedding (Press & Wolf 2017).
    """

    def __init__(self, vocab_size: int, cfg: TransformerLMConfig):
        super().__init__()
        self.cfg = cfg
        self.max_len = cfg.max_len
        self.decoder = Decoder(
            vocab_size,
            cfg.d_model,
            cfg.num_heads,
            cfg.num_layers,
            cfg.d_ff,
            cfg.dropout,
            cfg.max_len,
            cfg.norm,
            cfg.positional,
            cross_attention=False,
        )
        self.head = nn.Linear(cfg.d_model, vocab_size, bias=False)
        if cfg.tie_weights:
            self.head.weight = self.decoder.embed.token.weight

    def init_cache(self, batch_size: int) -> DecoderCache:
        """An empty cache; pass it to :meth:`forward` to decode incrementally."""
        return self.decoder.init_cache(batch_size)

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


@torch.no_grad()
def generate(
    model: TransformerLanguageModel,
    prefix_ids: list[int] | Tensor,
    num_tokens: int,
    strategy: Literal["greedy", "sample"] = "greedy",
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    never: Sequence[int] = (),
) -> list[int] | Tensor:
    """Continue ``prefix_ids`` by ``num_tokens`` tokens with the cache; return the new ones only.

    Same interface as :func:`seqlab.models.rnn_lm.generate` (list in, list out), plus batches as
    tensors.

    Each token is predicted from the last ``min(length, L)`` tokens, exactly as a loop that
    re-runs the model on ``tokens[:, -L:]`` at every step (nanoGPT). While the sequence fits in
    L the cache makes each step cost one position. Once it exceeds L (sliding window), the
    absolute positions of the kept tokens shift and every cached key/value is stale, so each
    further step re-encodes the last L tokens (the cost of the uncached loop, no worse).
    The model is in eval mode while generating (its previous mode is restored).

    Args:
        prefix_ids: one prefix as a list of ids, or a batch as a tensor; at least one token.
        strategy: ``"greedy"`` (argmax) or ``"sample"`` from softmax(logits / temperature),
            restricted to the ``top_k`` most likely tokens when ``top_k > 0``.
        generator: random source for sampling (reproducible generation).
        never: token ids never generated (see :func:`seqlab.nn.sampling.next_token`).

    Shape:
        prefix_ids ``(B, P)`` -> ``(B, num_tokens)``; a list of P ids -> a list of num_tokens.
    """
    if strategy not in ("greedy", "sample"):
        raise ValueError(f"strategy must be 'greedy' or 'sample', got {strategy!r}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if top_k < 0 or num_tokens < 0:
        raise ValueError(f"top_k and num_tokens must be >= 0, got {top_k} and {num_tokens}")
    device = model.head.weight.device
    as_list = not isinstance(prefix_ids, Tensor)
    tokens = torch.tensor([list(prefix_ids)], dtype=torch.long) if as_list else prefix_ids
    tokens = tokens.to(device)  # (B, P)
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(f"generate needs a non-empty prefix, got shape {tuple(tokens.shape)}")
    prefix_len, window = tokens.shape[1], model.max_len
    was_training = model.training
    model.eval()
    try:
        logits, cache = model(tokens[:, -window:], model.init_cache(tokens.shape[0]))  # (B, P, V)
        for step in range(num_tokens):
            nxt = next_token(logits[:, -1], strategy, temperature, top_k, generator, never)  # (B,)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (B, P + step + 1)
            if step == num_tokens - 1:
                break
            if cache.length < window:
                logits, cache = model(nxt[:, None], cache)  # (B, 1, V)
            else:  # window full: re-encode the last L tokens from position 0
                logits, cache = model(tokens[:, -window:], model.init_cache(tokens.shape[0]))
    finally:
        model.train(was_training)
    new = tokens[:, prefix_len:]  # (B, num_tokens)
    return new[0].tolist() if as_list else new
