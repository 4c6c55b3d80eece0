"""Convolutional sentence classifier (Kim 2014): convolutions of several widths over the word
embeddings, ReLU, max-over-time pooling, dropout, a linear layer.

A filter of width w has ``n - w + 1`` positions over a sentence of n tokens. Sentences shorter
than the widest filter are padded (with the zero ``<pad>`` embedding) to its width, and positions
whose window reaches past a sentence's end are left out of the maximum, so a sentence gets the
same logits alone and in a padded batch.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config import ModelConfigBase, Positive, Probability
from seqlab.tokens import PAD


class CNNTextConfig(ModelConfigBase):
    """Convolutions of several widths over word embeddings, max-over-time pooling (Kim 2014)."""

    arch: Literal["cnn_text"] = "cnn_text"
    task: ClassVar[str] = "classification"
    embed_dim: Positive = 128
    widths: Annotated[list[Positive], Field(min_length=1)] = [3, 4, 5]
    channels: Positive = 100
    dropout: Probability = 0.5


class CNNTextClassifier(nn.Module):
    """Tokens ``(B, T)`` with lengths ``(B,)`` → class logits ``(B, C)``."""

    def __init__(self, vocab_size: int, num_classes: int, cfg: CNNTextConfig):
        super().__init__()
        self.widths = list(cfg.widths)
        self.embed = nn.Embedding(vocab_size, cfg.embed_dim, padding_idx=PAD)
        self.convs = nn.ModuleList(nn.Conv1d(cfg.embed_dim, cfg.channels, w) for w in self.widths)
        self.dropout = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.channels * len(self.widths), num_classes)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: tokens ``(B, T)``, lengths ``(B,)`` -> logits ``(B, C)``."""
        b, t = tokens.shape
        if lengths is None:
            lengths = torch.full((b,), t, device=tokens.device)
        wide = max(self.widths)
        if t < wide:
            tokens = torch.cat([tokens, tokens.new_full((b, wide - t), PAD)], dim=1)
        span = lengths.clamp(min=wide)  # (B,): each sentence's length, at least the widest filter
        x = self.embed(tokens).transpose(1, 2)  # (B, E, T)
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
            sizes.need("vocab_size"), sizes.need("num_classes"), cfg
        ),
    )
)
