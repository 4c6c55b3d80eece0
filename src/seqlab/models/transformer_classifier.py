"""Transformer encoder classifier: the encoder of Vaswani et al. 2017, pooled, and a linear head.

The sentence is encoded by the encoder stack of Vaswani et al. (2017) and pooled into one vector:
either the output at a prepended ``[CLS]`` position (Devlin et al. 2019; seqlab uses the reserved
``<bos>`` token for it), or the mean or the element-wise maximum over the real (non-padding)
positions. A linear layer maps it to the class logits. Padded keys are masked in every layer, so
padding never changes a sentence's logits.

With ``input_dim`` the classifier reads float frames ``(B, T, input_dim)`` in place of tokens
(the audio classifier, :mod:`seqlab.models.audio`): a linear projection replaces the embedding
table, and the ``[CLS]`` position reads a learned frame, projected like the others.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.catalog import ModelSpec, register_model
from seqlab.config.models import TransformerClassifierConfig
from seqlab.nn.pooling import masked_max, masked_mean
from seqlab.nn.transformer import Encoder
from seqlab.tokens import BOS


class TransformerClassifier(nn.Module):
    """Tokens ``(B, T)`` with lengths ``(B,)`` → class logits ``(B, C)``."""

    def __init__(
        self,
        vocab_size: int | None,
        num_classes: int,
        cfg: TransformerClassifierConfig,
        *,
        input_dim: int | None = None,
    ):
        super().__init__()
        self.pooling = cfg.pooling
        self.input_dim = input_dim
        if input_dim is not None and cfg.pooling == "cls":  # the [CLS] position's frame
            self.cls_frame = nn.Parameter(torch.zeros(input_dim))
        self.encoder = Encoder(
            vocab_size or 0,
            cfg.d_model,
            cfg.num_heads,
            cfg.num_layers,
            cfg.d_ff,
            cfg.dropout,
            cfg.max_len + 1,  # + the [CLS] position
            cfg.norm,
            cfg.positions,
            attention_dropout=cfg.attention_dropout,
            input_dim=input_dim,
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, num_classes)

    def _inputs(self, tokens: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        if self.pooling != "cls":
            return tokens, lengths
        if self.input_dim is not None:  # frames (B, T, D): a learned first frame
            cls = self.cls_frame.to(tokens.dtype).expand(tokens.shape[0], 1, -1)  # (B, 1, D)
        else:
            cls = torch.full((tokens.shape[0], 1), BOS, dtype=tokens.dtype, device=tokens.device)
        return torch.cat([cls, tokens], dim=1), lengths + 1  # (B, 1 + T), (B,)

    def forward(self, tokens: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: tokens ``(B, T)`` (frames ``(B, T, input_dim)``), lengths ``(B,)`` -> logits
        ``(B, C)``."""
        if lengths is None:
            lengths = torch.full((tokens.shape[0],), tokens.shape[1], device=tokens.device)
        x, lens = self._inputs(tokens, lengths)
        h, _ = self.encoder(x, lens)  # (B, T', d)
        if self.pooling == "cls":
            pooled = h[:, 0]  # (B, d)
        else:
            pooled = (masked_mean if self.pooling == "mean" else masked_max)(h, lens)  # (B, d)
        return self.head(self.dropout(pooled))  # (B, C)

    @torch.no_grad()
    def attention(self, tokens: Tensor, lengths: Tensor) -> list[Tensor]:
        """Each layer's self-attention weights, ``(B, h, T', T')`` (T' = T + 1 with ``[CLS]``)."""
        x, lens = self._inputs(tokens, lengths)
        _, weights = self.encoder(x, lens, need_weights=True)
        return weights or []


register_model(
    ModelSpec(
        TransformerClassifierConfig,
        lambda cfg, sizes: TransformerClassifier(
            sizes.vocab_size if sizes.input_dim else sizes.need("vocab_size"),
            sizes.need("num_classes"),
            cfg,
            input_dim=sizes.input_dim,
        ),
    )
)
