"""Recurrent sentence classifier: a (bidirectional) RNN of any registered cell (``model.cell``,
:func:`seqlab.catalog.cells`; LSTM by default) over word embeddings.

The sentence vector is the final hidden state of each direction (``last``: the forward direction's
state after the last real token, the backward direction's after the first), or the mean or maximum
of the outputs over real positions. Sequences are packed (the fused layers) or masked (the
scratch ones), so padding never reaches the recurrence.

With ``input_dim`` the classifier reads float frames ``(B, T, input_dim)`` in place of tokens
(the audio classifier, :mod:`seqlab.models.audio`): a linear projection replaces the embedding
table.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import RNNClassifierConfig
from seqlab.nn.pooling import masked_max, masked_mean
from seqlab.nn.rnn import recurrent_layer, run_layer
from seqlab.tokens import PAD


class RNNClassifier(nn.Module):
    """Tokens ``(B, T)`` with lengths ``(B,)`` → class logits ``(B, C)``."""

    def __init__(
        self,
        vocab_size: int | None,
        num_classes: int,
        cfg: RNNClassifierConfig,
        *,
        input_dim: int | None = None,
    ):
        super().__init__()
        self.pooling = cfg.pooling
        self.embed: nn.Embedding | nn.Linear
        if input_dim is None:
            self.embed = nn.Embedding(vocab_size or 0, cfg.embed_dim, padding_idx=PAD)
        else:
            self.embed = nn.Linear(input_dim, cfg.embed_dim)
        self.rnn = recurrent_layer(
            cfg.cell, cfg.embed_dim, cfg.hidden_size, cfg.num_layers, cfg.dropout, cfg.bidirectional
        )
        self.dropout = nn.Dropout(cfg.dropout)
        width = cfg.hidden_size * (2 if cfg.bidirectional else 1)
        self.head = nn.Linear(width, num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: tokens ``(B, T)`` (frames ``(B, T, input_dim)``), lengths ``(B,)`` -> logits
        ``(B, C)``."""
        if lengths is None:
            lengths = torch.full((tokens.shape[0],), tokens.shape[1], device=tokens.device)
        x = self.dropout(self.embed(tokens))  # (B, T, E)
        y, state = run_layer(self.rnn, x, None, lengths)  # (B, T, D·H)
        if self.pooling == "last":
            h = state[0] if isinstance(state, tuple) else state  # (L·D, B, H)
            dirs = 2 if self.rnn.bidirectional else 1
            pooled = torch.cat(list(h[-dirs:]), dim=-1)  # (B, D·H): last layer, each direction
        else:
            pool = masked_mean if self.pooling == "mean" else masked_max
            pooled = pool(y, lengths)  # (B, D·H)
        return self.head(self.dropout(pooled))  # (B, C)


register_model(
    ModelSpec(
        RNNClassifierConfig,
        lambda cfg, sizes: RNNClassifier(
            sizes.vocab_size if sizes.input_dim else sizes.need("vocab_size"),
            sizes.need("num_classes"),
            cfg,
            input_dim=sizes.input_dim,
        ),
    )
)
