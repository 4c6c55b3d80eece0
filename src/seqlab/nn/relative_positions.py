"""Relative position schemes for attention, as functions of the queries' and keys' positions:
rotary embeddings (RoPE), ALiBi's linear biases and T5's bucketed relative positions.

- **RoPE** (Su et al. 2021, "RoFormer", eq. 34): each pair of dimensions ``(2i, 2i+1)`` of a query
  or key at position ``m`` is rotated by the angle ``m·θ_i``, ``θ_i = base^(−2i/d)`` (the
  sinusoidal table's frequencies, Vaswani et al. 2017 §3.5). A rotation by ``mθ`` then one by
  ``−nθ`` is one by ``(m − n)θ``, so ``q_m · k_n`` depends on ``m − n`` only (:func:`rotate`).
  Applied to q and k before ``scaled_dot_product_attention``, it keeps the fused kernels.
- **ALiBi** (Press et al. 2022, "Train Short, Test Long", §3): no position embedding; head ``h`` of
  ``H`` adds ``−m_h·(i − j)`` to the logit of query ``i`` and key ``j ≤ i``, with slopes the
  geometric sequence starting at ``2^(−8/H)`` (:func:`alibi_slopes`, :func:`alibi_bias`).
- **T5 relative bias** (Raffel et al. 2020, §2.1): a learned scalar per head and bucket of the
  distance ``j − i``; half the buckets count exact small distances, the other half grow
  logarithmically up to ``max_distance``, beyond which all share the last bucket
  (:func:`t5_buckets`, the function of the T5 code).

Shapes are batch-first: ``(B, h, T, d_head)`` for queries and keys, ``(h, T_q, T_k)`` for a bias.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def rotary_angles(positions: Tensor, dim: int, base: float = 10_000.0) -> tuple[Tensor, Tensor]:
    """Cosines and sines ``(T, dim // 2)`` of the angles ``positions[t]·θ_i``, ``θ_i =
    base^(−2i/dim)`` (RoPE), computed in float64: at position 10⁴ a float32 angle is already
    off by 10⁻³ rad, which would break the relative property the rotation exists for."""
    if dim % 2:
        raise ValueError(f"rotary embeddings rotate pairs of dimensions: dim={dim} is odd")
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim
    angles = positions.to(torch.float64)[:, None] * base ** -exponents[None, :]  # (T, dim / 2)
    return angles.cos(), angles.sin()


def rotate(x: Tensor, offset: int = 0, base: float = 10_000.0) -> Tensor:
    """Queries or keys ``(..., T, d)`` at positions ``offset, …, offset + T − 1``, each pair of
    dimensions ``(2i, 2i + 1)`` rotated by ``position·θ_i`` (RoPE). ``offset`` is the absolute
    position of the first row: an incremental decoder passes how many tokens it has cached."""
    t, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(offset, offset + t, device=x.device)
    cos, sin = rotary_angles(positions, d, base)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d / 2)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return out.flatten(-2)  # (..., T, d), the pairs back in place


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's head slopes ``(H,)``: ``2^(−8/H), 2^(−16/H), …, 2^(−8)`` for ``H`` a power of 2;
    otherwise those of the nearest lower power of 2, then every other slope of the next one up
    (Press et al. 2022, their released code)."""
    if num_heads < 1:
        raise ValueError(f"num_heads must be positive, got {num_heads}")

    def powers(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    lower = 2 ** math.floor(math.log2(num_heads))
    slopes = powers(lower)
    if lower < num_heads:
        slopes += powers(2 * lower)[0::2][: num_heads - lower]
    return torch.tensor(slopes)


def alibi_bias(
    num_heads: int, queries: int, keys: int, offset: int = 0, device: torch.device | None = None
) -> Tensor:
    """The additive bias ``(H, T_q, T_k)``: ``−m_h·(i − j)`` for query ``i`` (at position
    ``offset + i``, the keys at ``0 … T_k − 1``) and key ``j``; future keys get the same formula
    (a causal mask removes them). Built on ``device`` (default: the CPU)."""
    # built on the device asked for: a CPU bias added to CUDA logits fails
    i = torch.arange(offset, offset + queries, device=device)[:, None]
    j = torch.arange(keys, device=device)[None, :]
    slopes = alibi_slopes(num_heads).to(device)
    return -slopes[:, None, None] * (i - j).abs()[None].to(torch.float32)


def t5_buckets(
    relative: Tensor, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
) -> Tensor:
    """T5's bucket of each relative position ``relative = key − query`` (integer tensor).

    Bidirectional: half the buckets for keys after the query, half before. Of each half, the
    first half counts exact distances ``0 … n/2 − 1``; larger ones share buckets that grow
    logarithmically up to ``max_distance``; farther ones all take the last bucket. Causal
    (``bidirectional=False``): keys after the query fall in bucket 0.
    """
    buckets = torch.zeros_like(relative)
    n = num_buckets
    if bidirectional:
        n //= 2
        buckets = buckets + (relative > 0).long() * n
        distance = relative.abs()
    else:
        distance = (-relative).clamp(min=0)
    exact = n // 2
    small = distance < exact
    scaled = torch.log(distance.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    large = exact + (scaled * (n - exact)).long()
    large = large.clamp(max=n - 1)
    return buckets + torch.where(small, distance, large)
