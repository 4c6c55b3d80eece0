"""Pooling a padded sequence into one vector, over its real positions only.

Both take the outputs ``(B, T, d)`` of a sequence encoder and each row's length ``(B,)``;
positions at or past a row's length (padding) never contribute, so a sentence pools to the same
vector alone and in a padded batch. Max-over-time pooling is Collobert et al. (2011) and Kim
(2014); over a BiLSTM's states, Conneau et al. (2017, InferSent).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _real(x: Tensor, lengths: Tensor) -> Tensor:
    """``(B, T)`` mask, True at each row's first ``lengths`` positions."""
    return torch.arange(x.shape[1], device=x.device)[None, :] < lengths.to(x.device)[:, None]


def masked_mean(x: Tensor, lengths: Tensor) -> Tensor:
    """Mean of ``x`` over the first ``lengths`` positions. Shape: ``(B, T, d), (B,) -> (B, d)``."""
    summed = (x * _real(x, lengths)[..., None].to(x.dtype)).sum(1)  # (B, d)
    return summed / lengths.to(x.device).clamp(min=1)[:, None].to(x.dtype)


def masked_max(x: Tensor, lengths: Tensor) -> Tensor:
    """Element-wise maximum of ``x`` over the first ``lengths`` positions (each at least 1).

    Shape: ``(B, T, d), (B,) -> (B, d)``.
    """
    return x.masked_fill(~_real(x, lengths)[..., None], float("-inf")).amax(1)  # (B, d)
