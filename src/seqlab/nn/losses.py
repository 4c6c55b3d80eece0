"""Losses over padded sequences."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

_IGNORE = -100  # F.cross_entropy's default ignore_index


def masked_cross_entropy(
    logits: Tensor, targets: Tensor, lengths: Tensor, label_smoothing: float = 0.0
) -> tuple[Tensor, int]:
    """Mean token cross-entropy over the first ``lengths[b]`` positions of each row.

    Positions at or after a row's length are ignored, so neither their logits nor their targets
    affect the loss. With ``label_smoothing`` ε the target distribution is (1 - ε) one-hot +
    ε uniform over V (Szegedy et al. 2016), as in ``F.cross_entropy``.

    Shape:
        logits ``(B, T, V)``, targets ``(B, T)``, lengths ``(B,)`` -> scalar loss, and the number of
        tokens it averages over.
    """
    steps = torch.arange(targets.shape[1], device=targets.device)  # (T,)
    valid = steps[None, :] < lengths[:, None].to(targets.device)  # (B, T)
    targets = targets.masked_fill(~valid, _IGNORE)  # (B, T)
    loss = F.cross_entropy(
        logits.flatten(0, 1).float(),
        targets.flatten(),
        ignore_index=_IGNORE,
        label_smoothing=label_smoothing,
    )
    return loss, int(valid.sum())


def perplexity(loss: float) -> float:
    """exp(loss) of a mean per-token cross-entropy in nats (d2l.ai §9.3.2), in double precision:
    ``inf`` once the loss passes ~709.78 nats (the largest double), never a capped value."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf
