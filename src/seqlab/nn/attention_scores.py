"""Attention scoring functions for one query against S keys (d2l.ai §11.3; Luong et al. 2015,
§3.1): additive, dot (plain or scaled), general and location-based scores, built by name
(:func:`make_score`, one of :data:`SCORES`) and pooled into a context vector
(:func:`attention_pool`), as the Bahdanau decoder uses them.

Masks follow :mod:`seqlab.nn.attention`'s convention (bool, ``True`` = *may attend*) and are
applied by its :func:`~seqlab.nn.attention.masked_softmax`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from seqlab.nn.attention import masked_softmax


# ------------------------------------------------------------------------ scoring functions
class AttentionScore(nn.Module):
    """A scoring function a(q, k_j) of one query against S keys (d2l.ai §11.3; Luong et al.
    2015, §3.1).

    The keys' share of the work is done once per source by :meth:`prepare` (a decoder scores the
    same keys at every step), then :meth:`forward` scores each step's queries:
    α = masked_softmax(a(q, ·)), c = Σ_j α_j v_j (see :func:`attention_pool`).

    Shape:
        prepare: keys ``(B, S, d_kv)`` -> prepared ``(B, S, ·)``;
        forward: query ``(B, d_q)``, prepared ``(B, S, ·)`` -> scores ``(B, S)``.
    """

    def prepare(self, keys: Tensor) -> Tensor:
        return keys

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        raise NotImplementedError


class AdditiveScore(AttentionScore):
    """a(q, k) = w_vᵀ tanh(W_q q + W_k k) (Bahdanau et al. 2014, eq. 6: "concat" in Luong et al.
    2015). Queries and keys may have different sizes."""

    def __init__(self, query_size: int, key_size: int, num_hiddens: int) -> None:
        super().__init__()
        self.w_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)

    def prepare(self, keys: Tensor) -> Tensor:
        return self.w_k(keys)  # (B, S, H)

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        features = torch.tanh(self.w_q(query)[:, None, :] + prepared)  # (B, S, H)
        return self.w_v(features).squeeze(-1)  # (B, S)


class DotScore(AttentionScore):
    """a(q, k) = qᵀ k (Luong et al. 2015, "dot"); ``scaled``: qᵀ k / √d (Vaswani et al. 2017,
    eq. 1). Queries and keys must have the same size."""

    def __init__(self, size: int, scaled: bool = False) -> None:
        super().__init__()
        self.size, self.scale = size, 1.0 / math.sqrt(size) if scaled else 1.0

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return torch.bmm(prepared, query[:, :, None]).squeeze(-1) * self.scale  # (B, S)

    def extra_repr(self) -> str:
        return f"size={self.size}, scale={self.scale:.4g}"


class GeneralScore(AttentionScore):
    """a(q, k) = qᵀ W k (Luong et al. 2015, "general"): a learned bilinear form, for any sizes."""

    def __init__(self, query_size: int, key_size: int) -> None:
        super().__init__()
        self.w = nn.Linear(key_size, query_size, bias=False)  # W k

    def prepare(self, keys: Tensor) -> Tensor:
        return self.w(keys)  # (B, S, d_q)

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        return torch.bmm(prepared, query[:, :, None]).squeeze(-1)  # (B, S)


class LocationScore(AttentionScore):
    """a(q)_j = (W_a q)_j (Luong et al. 2015, "location"): scores from the query alone, one row
    of W_a per source *position*; the keys only fix how many positions there are (≤ max_len)."""

    def __init__(self, query_size: int, max_len: int) -> None:
        super().__init__()
        self.max_len = max_len
        self.w_a = nn.Linear(query_size, max_len)

    def forward(self, query: Tensor, prepared: Tensor) -> Tensor:
        num_keys = prepared.shape[1]
        if num_keys > self.max_len:
            raise ValueError(
                f"location-based attention scores at most {self.max_len} source positions "
                f"(model.max_len), got a source of {num_keys}"
            )
        return self.w_a(query)[:, :num_keys]  # (B, S)


SCORES = ("additive", "dot", "scaled_dot", "general", "location")


def make_score(
    kind: str, query_size: int, key_size: int, num_hiddens: int, max_len: int
) -> AttentionScore:
    """The scoring function ``kind`` (one of :data:`SCORES`) for the given sizes."""
    if kind == "additive":
        return AdditiveScore(query_size, key_size, num_hiddens)
    if kind in ("dot", "scaled_dot"):
        if query_size != key_size:
            raise ValueError(
                f"{kind} attention needs queries and keys of one size, got {query_size} and "
                f"{key_size}"
            )
        return DotScore(key_size, scaled=kind == "scaled_dot")
    if kind == "general":
        return GeneralScore(query_size, key_size)
    if kind == "location":
        return LocationScore(query_size, max_len)
    raise ValueError(f"unknown attention score {kind!r}; expected one of {', '.join(SCORES)}")


def attention_pool(
    score: AttentionScore, query: Tensor, prepared: Tensor, values: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """α_j = softmax_j a(q, k_j) over the positions ``mask`` allows, c = Σ_j α_j v_j.

    Shape:
        query ``(B, d_q)``, prepared ``(B, S, ·)``, values ``(B, S, d_v)``, mask ``(B, S)`` bool
        -> context ``(B, d_v)``, weights ``(B, S)``.
    """
    alpha = masked_softmax(score(query, prepared), mask)  # (B, S)
    return torch.bmm(alpha[:, None, :], values).squeeze(1), alpha  # (B, d_v), (B, S)
