"""Convolutional sentence classifier (Kim 2014): convolutions of several widths over the word
embeddings, ReLU, max-over-time pooling, dropout, a linear layer.

A filter of width w has ``n - w + 1`` positions over a sentence of n tokens. Sentences shorter
than the widest filter are padded (with the zero ``<pad>`` embedding) to its width, and positions
whose window reaches past a sentence's end are left out of the maximum, so a sentence gets the
same logits alone and in a padded batch.

With ``input_dim`` the classifier reads float frames ``(B, T, input_dim)`` in place of tokens
(the audio classifier, :mod:`seqlab.models.audio`): a linear projection replaces the embedding
table, and positions past each clip's length (the short ones padded to the widest filter too)
are zero vectors, as the ``<pad>`` embedding is.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import CNNTextConfig
from seqlab.tokens import PAD


class CNNTextClassifier(nn.Module):
    """Tokens ``(B, T)`` with lengths ``(B,)`` → class logits ``(B, C)``."""

    def __init__(
        self,
        vocab_size: int | None,
        num_classes: int,
        cfg: CNNTextConfig,
        *,
        input_dim: int | None = None,
    ):
        super().__init__()
        self.widths = list(cfg.widths)
        self.embed: nn.Embedding | nn.Linear
        if input_dim is None:
            self.embed = nn.Embedding(vocab_size or 0, cfg.embed_dim, padding_idx=PAD)
        else:
            self.embed = nn.Linear(input_dim, cfg.embed_dim)
        #: the layers below Kim's: (B, E or K, T) -> (B, K, T), same padding
        self.stack = nn.ModuleList(
            nn.Conv1d(cfg.embed_dim if i == 0 else cfg.channels, cfg.channels, 3, padding=1)
            for i in range(cfg.depth - 1)
        )
        top = cfg.channels if self.stack else cfg.embed_dim
        self.convs = nn.ModuleList(nn.Conv1d(top, cfg.channels, w) for w in self.widths)
        self.dropout = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.channels * len(self.widths), num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: tokens ``(B, T)`` (frames ``(B, T, input_dim)``), lengths ``(B,)`` -> logits
        ``(B, C)``."""
        b, t = tokens.shape[:2]
        if lengths is None:
            lengths = torch.full((b,), t, device=tokens.device)
        wide = max(self.widths)
        if t < wide:
            pad = (b, wide - t, *tokens.shape[2:])  # PAD ids, or zero frames
            tokens = torch.cat([tokens, tokens.new_full(pad, PAD if tokens.dim() == 2 else 0)], 1)
        span = lengths.clamp(min=wide)  # (B,): each sentence's length, at least the widest filter
        x = self.embed(tokens)  # (B, T, E)
        real = torch.arange(x.shape[1], device=x.device)[None, :] < lengths.to(x.device)[:, None]
        if tokens.dim() == 3:  # frames: past each clip's end, zeros (as the <pad> embedding)
            x = x.masked_fill(~real[..., None], 0.0)
        x = x.transpose(1, 2)  # (B, E, T)
        for conv in self.stack:  # zeros past each end again, so padding never leaks in
            x = torch.relu(conv(x)).masked_fill(~real[:, None, :], 0.0)  # (B, K, T)
        pooled = []
        for w, conv in zip(self.widths, self.convs, strict=True):
            y = torch.relu(conv(x))  # (B, K, T - w + 1)
            keep = torch.arange(y.shape[2], device=y.device)[None, :] <= (span - w)[:, None]
            pooled.append(y.masked_fill(~keep[:, None, :], float("-inf")).amax(2))  # (B, K)
        return self.head(self.dropout(torch.cat(pooled, dim=1)))  # (B, K · widths)


register_model(
    ModelSpec(
        CNNTextConfig,
        lambda cfg, sizes: CNNTextClassifier(
            sizes.vocab_size if sizes.input_dim else sizes.need("vocab_size"),
            sizes.need("num_classes"),
            cfg,
            input_dim=sizes.input_dim,
        ),
    )
)
