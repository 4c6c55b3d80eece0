"""Choosing the next token from a language model's logits: greedy, temperature, top-k."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor


def next_token(
    logits: Tensor,
    strategy: Literal["greedy", "sample"],
    temperature: float,
    top_k: int,
    generator: torch.Generator | None,
    never: Sequence[int] = (),
) -> Tensor:
    """Pick one token per row from last-position logits ``(B, V)`` -> ``(B,)``.

    ``never``: ids that are never picked (e.g. the reserved ``<unk>``, ``<pad>``, ``<bos>``): their
    logits are set to -inf first, so greedy takes the best other token and sampling (top-k
    included) renormalises over the rest, as beam search does (:mod:`seqlab.models.search`).
    """
    if never:
        logits = logits.float().index_fill(
            -1, torch.tensor(list(never), device=logits.device), -math.inf
        )
    if strategy == "greedy":
        return logits.argmax(dim=-1)  # (B,)
    # the best logit moved to 0 first, in float64 (where 1e-300 is not 0): a tiny temperature
    # then gives 0 and -inf (the argmax), never inf - inf or 0 / 0 = nan
    logits = logits.double()
    logits = (logits - logits.max(dim=-1, keepdim=True).values) / temperature  # (B, V)
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))  # (B, V)
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    if generator is not None and generator.device != probs.device:
        # a generator draws on its own device only (a CPU one for CUDA logits): draw there
        picked = torch.multinomial(probs.to(generator.device), 1, generator=generator)
        return picked.squeeze(-1).to(probs.device)  # (B,)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
