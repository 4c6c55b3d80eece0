"""Causal linear attention: a Transformer layer that runs as an RNN (Katharopoulos et al. 2020,
"Transformers are RNNs").

Notation (shapes in comments): B batch, h heads, T new positions, d_k head width, C chunk.

Softmax attention weighs key j for query i by exp(q_i·k_j). Replace that by the kernel
φ(q_i)·φ(k_j) with the feature map φ(x) = elu(x) + 1 (positive, so the weights are; §3.2.1) and
the causal output becomes (eq. 8–10)

    out_i = φ(q_i)ᵀ S_i / φ(q_i)ᵀ z_i,   S_i = S_{i−1} + φ(k_i) v_iᵀ,   z_i = z_{i−1} + φ(k_i):

a recurrence whose state ``(S, z)``, ``(B, h, d_k, d_k)`` and ``(B, h, d_k)``, does not grow with
the sequence (:func:`linear_attention_step`, :class:`LinearAttentionState`): generation costs the
same per token at position 10 and at 10,000, where softmax attention reads a cache of every key.

Training computes all positions at once (:func:`causal_linear_attention`) in chunks of ``C``:
inside a chunk, the masked ``C × C`` products; across chunks, the state summed over the earlier
ones. Time and memory grow linearly with the length (``T·C`` for the chunks' products, ``T/C``
states), not with its square. Both forms give the same outputs (``tests/test_linear_attention.py``
checks 1e-6 in float64). Sums run in float32 (or float64) even when the model trains in bf16: a
bf16 running sum over thousands of positions would lose the early ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.kv_cache import KVCache

#: the denominator's guard (the paper's code uses the same)
EPS = 1e-6


def feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1 > 0 (Katharopoulos et al. 2020, eq. 7)."""
    return F.elu(x) + 1.0


@dataclass(frozen=True)
class LinearAttentionState:
    """The recurrent state of one causal linear-attention layer after ``length`` positions:
    ``S = Σ φ(k_j) v_jᵀ`` and ``z = Σ φ(k_j)``. Its size does not depend on ``length``."""

    s: Tensor  # (B, h, d_k, d_k)
    z: Tensor  # (B, h, d_k)
    length: int

    def index_select(self, indices: Tensor) -> LinearAttentionState:
        """Rows ``indices`` of the batch (beam search)."""
        return LinearAttentionState(
            self.s.index_select(0, indices), self.z.index_select(0, indices), self.length
        )

    @staticmethod
    def empty(batch: int, heads: int, head_dim: int, like: Tensor) -> LinearAttentionState:
        dtype = torch.float64 if like.dtype == torch.float64 else torch.float32
        s = torch.zeros(batch, heads, head_dim, head_dim, dtype=dtype, device=like.device)
        z = torch.zeros(batch, heads, head_dim, dtype=dtype, device=like.device)
        return LinearAttentionState(s, z, 0)


def _accumulating(x: Tensor) -> Tensor:
    return x if x.dtype == torch.float64 else x.float()


def _exclusive_cumsum(x: Tensor) -> Tensor:
    """Along dimension 2: the sum of the entries before each one (0 for the first)."""
    return torch.cat([torch.zeros_like(x[:, :, :1]), torch.cumsum(x[:, :, :-1], 2)], 2)


def linear_attention_step(
    q: Tensor, k: Tensor, v: Tensor, state: LinearAttentionState
) -> tuple[Tensor, LinearAttentionState]:
    """One position, as the recurrence reads (module docstring): add φ(k)vᵀ and φ(k) to the
    state, then read it with φ(q).

    Shape: q, k, v ``(B, h, 1, d_k)`` -> output ``(B, h, 1, d_k)``, state of the same size.
    """
    out_dtype = q.dtype
    q, k, v = (_accumulating(t)[:, :, 0] for t in (q, k, v))  # (B, h, d_k)
    fq, fk = feature_map(q), feature_map(k)
    s = state.s + fk[..., :, None] * v[..., None, :]  # (B, h, d_k, d_k)
    z = state.z + fk  # (B, h, d_k)
    num = (fq[..., None, :] @ s)[..., 0, :]  # (B, h, d_k)
    den = (fq * z).sum(-1, keepdim=True) + EPS  # (B, h, 1)
    out = (num / den)[:, :, None].to(out_dtype)  # (B, h, 1, d_k)
    return out, LinearAttentionState(s, z, state.length + 1)


def causal_linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    state: LinearAttentionState | None = None,
    chunk: int = 64,
) -> tuple[Tensor, LinearAttentionState]:
    """All ``T`` positions at once (the parallel form), continuing ``state`` when given.

    Shape: q, k, v ``(B, h, T, d_k)`` -> output ``(B, h, T, d_k)``, the state after them.
    """
    b, h, t, d = q.shape
    out_dtype = q.dtype
    q, k, v = (_accumulating(x) for x in (q, k, v))
    if state is None:
        state = LinearAttentionState.empty(b, h, d, q)
    fq, fk = feature_map(q), feature_map(k)
    c = min(chunk, t)
    pad = -t % c
    if pad:  # zero keys and values add nothing to the sums; the padded queries are dropped
        fq, fk, v = (F.pad(x, (0, 0, 0, pad)) for x in (fq, fk, v))
    n = (t + pad) // c
    fq, fk, v = (x.view(b, h, n, c, d) for x in (fq, fk, v))  # (B, h, N, C, d_k)
    kv = fk.transpose(-1, -2) @ v  # (B, h, N, d_k, d_k): each chunk's Σ φ(k) vᵀ
    ks = fk.sum(3)  # (B, h, N, d_k)
    # the state before each chunk: the given one plus every earlier chunk's sums
    s_before = state.s[:, :, None] + _exclusive_cumsum(kv)  # (B, h, N, d_k, d_k)
    z_before = state.z[:, :, None] + _exclusive_cumsum(ks)  # (B, h, N, d_k)
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    inner = (fq @ fk.transpose(-1, -2)).masked_fill(~causal, 0.0)  # (B, h, N, C, C)
    num = inner @ v + fq @ s_before  # (B, h, N, C, d_k)
    den = inner.sum(-1) + (fq * z_before[:, :, :, None, :]).sum(-1) + EPS  # (B, h, N, C)
    out = (num / den[..., None]).view(b, h, n * c, d)[:, :, :t]  # (B, h, T, d_k)
    after = LinearAttentionState(
        state.s + kv.sum(2), state.z + ks.sum(2), state.length + t
    )  # (B, h, d_k, d_k), (B, h, d_k)
    return out.to(out_dtype), after


def linear_attention_weights(q: Tensor, k: Tensor) -> Tensor:
    """The weights the parallel form applies, made explicit for plotting: row i is
    φ(q_i)·φ(k_j) / Σ_{j' ≤ i} φ(q_i)·φ(k_j') over the keys j ≤ i.

    Shape: q ``(B, h, T, d_k)``, k ``(B, h, P + T, d_k)`` -> ``(B, h, T, P + T)``.
    """
    fq, fk = feature_map(_accumulating(q)), feature_map(_accumulating(k))
    t, total = q.shape[-2], k.shape[-2]
    scores = fq @ fk.transpose(-1, -2)  # (B, h, T, P + T)
    future = torch.ones(t, total, dtype=torch.bool, device=q.device).triu(total - t + 1)
    scores = scores.masked_fill(future, 0.0)
    return scores / (scores.sum(-1, keepdim=True) + EPS)


class LinearSelfAttention(MultiHeadAttention):
    """Causal multi-head self-attention with the kernel φ(q)·φ(k) in place of softmax: the same
    projections as :class:`~seqlab.nn.attention.MultiHeadAttention` (the same parameters),
    a :class:`LinearAttentionState` in place of the key/value cache. Attention dropout does not
    apply (there are no weights to drop)."""

    def self_attention(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        cache: KVCache | LinearAttentionState | None = None,
        is_causal: bool = True,
        need_weights: bool = False,
        positions: object = None,
    ) -> tuple[Tensor, Tensor | None, LinearAttentionState]:
        """Shape: x ``(B, T, d)`` -> output ``(B, T, d)``, weights ``(B, h, T, T)`` (only
        without a state) or None, the state after the T positions.

        Padding after the real positions (a decoder's targets) needs no mask: causal attention
        never reads it; a mask is refused.
        """
        if mask is not None:
            raise ValueError("linear attention takes no mask: it is causal, padding comes last")
        if not is_causal:
            raise ValueError("linear attention here is causal self-attention only")
        if positions is not None:
            raise ValueError("linear attention takes absolute positions or none")
        if cache is not None and not isinstance(cache, LinearAttentionState):
            raise TypeError(f"linear attention continues a LinearAttentionState, not {cache!r}")
        b, t, _ = x.shape
        qkv = self.in_proj(x).view(b, t, 3, self.num_heads, self.head_dim)  # (B, T, 3, h, d_k)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, T, d_k)
        if cache is not None and t == 1:
            out, state = linear_attention_step(q, k, v, cache)  # (B, h, 1, d_k)
        else:
            out, state = causal_linear_attention(q, k, v, cache)  # (B, h, T, d_k)
        weights = None
        if need_weights and cache is None:
            weights = linear_attention_weights(q, k).to(q.dtype)  # (B, h, T, T)
        out = out.transpose(1, 2).reshape(b, t, self.d_model)  # (B, T, d)
        return self.out_proj(out), weights, state
