"""Attention: masks, masked softmax, scaled dot-product, additive and multi-head attention (the
scoring functions of one query against S keys are in :mod:`seqlab.nn.attention_scores`).

Notation (shapes in comments): B batch, h heads, Tq queries, Tk keys/values, d model width,
d_k = d / h head width, d_q / d_kv feature sizes of raw queries / keys, d_v value width.

Mask convention, used everywhere in seqlab: a **bool** tensor, ``True`` = *may attend*,
broadcastable to the scores ``(..., Tq, Tk)``. (PyTorch's ``nn.MultiheadAttention`` masks mean the
opposite, ``True`` = ignore; negate them with ``~``.) :func:`padding_mask` and :func:`causal_mask`
build masks; combine them with ``&``. Masks are applied only inside
:func:`scaled_dot_product_attention` / :func:`masked_softmax`. A query whose row is fully masked
gets all-zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from seqlab.nn.attention_positions import AttentionPositions
from seqlab.nn.kv_cache import KVCache


# ----------------------------------------------------------------------------------------- masks
def padding_mask(lengths: Tensor, num_keys: int) -> Tensor:
    """Bool mask that lets each query see only the first ``lengths`` keys.

    Args:
        lengths: number of real (non-padding) keys, per batch row ``(B,)`` or per query
            ``(B, Tq)``.
        num_keys: Tk, the padded key length.

    Shape:
        ``(B,) -> (B, 1, Tk)``; ``(B, Tq) -> (B, Tq, Tk)``, True where ``key index < length``.
    """
    if lengths.dim() not in (1, 2):
        raise ValueError(f"lengths must be (B,) or (B, Tq), got shape {tuple(lengths.shape)}")
    positions = torch.arange(num_keys, device=lengths.device)  # (Tk,)
    lens = lengths[:, None, None] if lengths.dim() == 1 else lengths[:, :, None]
    return positions < lens  # (B, 1, Tk) or (B, Tq, Tk)


def causal_mask(num_queries: int, num_keys: int | None = None, device=None) -> Tensor:
    """Bool mask that hides future keys (the "sequence mask" of Vaswani et al. 2017 §3.2.3).

    Queries are the *last* ``Tq`` positions of the ``Tk`` keys (bottom-right aligned), so query
    ``i`` may attend key ``j`` iff ``j <= i + (Tk - Tq)``. With a cache of ``Tk - Tq`` past
    positions this is the right mask for decoding ``Tq`` new tokens.

    Shape:
        ``(Tq, Tk)``.
    """
    num_keys = num_queries if num_keys is None else num_keys
    if num_keys < num_queries:
        raise ValueError(
            f"causal mask needs num_keys >= num_queries, got {num_keys} < {num_queries}"
        )
    q = torch.arange(num_queries, device=device)[:, None] + (num_keys - num_queries)  # (Tq, 1)
    return torch.arange(num_keys, device=device)[None, :] <= q  # (Tq, Tk)


def _check_mask(mask: Tensor) -> None:
    if mask.dtype != torch.bool:
        raise TypeError(
            f"attention masks are bool with True = may attend, got dtype {mask.dtype}; "
            "build one with padding_mask(lengths, Tk) or causal_mask(Tq, Tk)"
        )


# ---------------------------------------------------------------------------------- softmax
def masked_softmax(
    scores: Tensor, mask: Tensor | None = None, lengths: Tensor | None = None
) -> Tensor:
    """Softmax over the last axis that gives zero weight to masked keys.

    Masked scores are replaced by the most negative finite value (not ``-inf``), and masked
    weights are set to exactly 0 afterwards, so a fully masked row yields all zeros and neither
    the forward nor the backward pass can produce NaN.

    Args:
        scores: attention scores.
        mask: bool, True = may attend, broadcastable to ``scores``.
        lengths: alternative to ``mask`` for 3-d scores: ``(B,)`` or ``(B, Tq)``.

    Shape:
        scores ``(..., Tq, Tk)`` -> weights ``(..., Tq, Tk)``.
    """
    if lengths is not None:
        if mask is not None:
            raise ValueError("pass either mask or lengths, not both")
        mask = padding_mask(lengths, scores.shape[-1])  # (B, 1|Tq, Tk)
    if mask is None:
        return torch.softmax(scores, dim=-1)
    _check_mask(mask)
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (..., Tq, Tk)
    return torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0)  # (..., Tq, Tk)


# ------------------------------------------------------------------------------- scoring
#: up to this many queries, inference computes attention explicitly (two products)
_FEW_QUERIES = 8


def _fused_backend(query: Tensor) -> AbstractContextManager[object]:
    """The kernel choice for ``F.scaled_dot_product_attention`` when training in bf16/fp16 on CPU.

    PyTorch's CPU flash-attention kernel, which it picks whenever no dropout is asked for, has a
    reduced-precision backward several times slower than the plain (math) kernel; with dropout it
    already takes the math kernel. So a reduced-precision forward that will be differentiated on
    CPU runs the math kernel; everything else keeps PyTorch's choice (fp32, inference, CUDA).
    Timings: ``benchmarks/attention_backends.py``.
    """
    reduced = query.dtype in (torch.bfloat16, torch.float16)
    if query.device.type == "cpu" and reduced and query.requires_grad and torch.is_grad_enabled():
        return sdpa_kernel(SDPBackend.MATH)
    return nullcontext()


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    *,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q Kᵀ / √d_k + bias) V (Vaswani et al. 2017, §3.2.1, eq. 1; the bias of ALiBi or
    T5, :mod:`seqlab.nn.attention_positions`).

    Without ``need_weights`` this calls the fused ``F.scaled_dot_product_attention``, except on
    CPU for one query, or a few without gradients (decoding), where two explicit products are
    faster; with ``need_weights`` the explicit path computes and returns the weights. Both give
    the same output, including zero outputs for fully masked query rows: the fused call sees such
    rows unmasked and their output is zeroed afterwards, since some fused kernels (older PyTorch,
    some CUDA backends) give NaN there. (PyTorch 2.13's CPU kernels already return zeros.)

    Args:
        mask: bool, True = may attend, broadcastable to ``(..., Tq, Tk)``.
        is_causal: also hide future keys; queries are the last Tq of the Tk positions
            (see :func:`causal_mask`).
        dropout_p: dropout on the attention weights (pass 0.0 in eval mode).
        need_weights: also return the (pre-dropout) attention weights.
        bias: float, added to the scaled logits, broadcastable to ``(..., Tq, Tk)``; −∞ hides
            a key (then it is a mask too).

    Shape:
        query ``(..., Tq, d_k)``, key ``(..., Tk, d_k)``, value ``(..., Tk, d_v)``
        -> output ``(..., Tq, d_v)``, weights ``(..., Tq, Tk)`` or None.
    """
    num_q, num_k = query.shape[-2], key.shape[-2]
    if mask is not None:
        _check_mask(mask)
    # one query (a decoding step), or a few without gradients (the K beams of a sentence sharing
    # its keys): the fused kernel's setup costs more than the products themselves
    few = num_q == 1 or (num_q <= _FEW_QUERIES and not torch.is_grad_enabled())
    # a CPU timing: on CUDA PyTorch's own kernel (flash / memory-efficient) takes every query
    few = few and query.device.type == "cpu"
    explicit = need_weights or (few and dropout_p == 0.0)
    if is_causal and (explicit or mask is not None or num_q != num_k or bias is not None):
        # F.scaled_dot_product_attention's is_causal is top-left aligned, ours bottom-right
        # (queries are the last Tq positions): build the mask; one query may see every key
        if num_q > 1:
            causal = causal_mask(num_q, num_k, device=query.device)  # (Tq, Tk)
            mask = causal if mask is None else mask & causal
        is_causal = False
    if bias is not None:
        bias = bias.to(query.dtype)
    if not explicit:
        with _fused_backend(query):
            if mask is None:
                out = F.scaled_dot_product_attention(
                    query, key, value, attn_mask=bias, dropout_p=dropout_p, is_causal=is_causal
                )  # (..., Tq, d_v)
                return out, None
            any_key = mask.any(dim=-1, keepdim=True)  # (..., Tq, 1)
            # the usual case (padding): every query sees a key; checked on CPU only, where
            # reading the flag costs no device synchronisation
            if query.device.type == "cpu" and bool(any_key.all()):
                out = F.scaled_dot_product_attention(
                    query, key, value, attn_mask=_with_bias(mask, bias), dropout_p=dropout_p
                )  # (..., Tq, d_v)
                return out, None
            out = F.scaled_dot_product_attention(
                query, key, value, attn_mask=_with_bias(mask | ~any_key, bias), dropout_p=dropout_p
            )  # (..., Tq, d_v)
        return out.masked_fill(~any_key, 0.0), None
    # q Kᵀ also for one query: PyTorch's batched K qᵀ (Tk × 1 results) became 7× slower from
    # Tk = 16 on a 2-core Intel Xeon (MKL), q Kᵀ did not (benchmarks/decode_attention.py)
    scores = query @ key.transpose(-2, -1)  # (..., Tq, Tk)
    scores = scores / math.sqrt(query.shape[-1])
    if bias is not None:
        scores = scores + bias  # (..., Tq, Tk)
    weights = masked_softmax(scores, mask)  # (..., Tq, Tk)
    out = F.dropout(weights, dropout_p) @ value  # (..., Tq, d_v)
    return out, (weights if need_weights else None)


def _with_bias(mask: Tensor, bias: Tensor | None) -> Tensor:
    """A bool mask as the fused kernel's float mask with ``bias`` added; the mask alone when
    there is no bias."""
    if bias is None:
        return mask
    return bias.masked_fill(~mask, float("-inf"))  # (..., Tq, Tk)


class AdditiveAttention(nn.Module):
    """Additive attention a(q, k) = w_vᵀ tanh(W_q q + W_k k) (Bahdanau et al. 2014, §3.1).

    Queries and keys may have different sizes. Always computes weights explicitly.
    """

    def __init__(self, query_size: int, key_size: int, num_hiddens: int, dropout: float = 0.0):
        super().__init__()
        self.w_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        *,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention pooling of ``values`` with additive scores.

        Args:
            mask: bool, True = may attend, broadcastable to ``(B, Tq, Tk)``.

        Shape:
            queries ``(B, Tq, d_q)``, keys ``(B, Tk, d_kv)``, values ``(B, Tk, d_v)``
            -> output ``(B, Tq, d_v)``, weights ``(B, Tq, Tk)`` or None.
        """
        q = self.w_q(queries)  # (B, Tq, H)
        k = self.w_k(keys)  # (B, Tk, H)
        features = torch.tanh(q[:, :, None, :] + k[:, None, :, :])  # (B, Tq, Tk, H)
        scores = self.w_v(features).squeeze(-1)  # (B, Tq, Tk)
        weights = masked_softmax(scores, mask)  # (B, Tq, Tk)
        out = self.dropout(weights) @ values  # (B, Tq, d_v)
        return out, (weights if need_weights else None)


# ---------------------------------------------------------------------------------- multi-head
class MultiHeadAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, §3.2.2).

    MultiHead(Q, K, V) = Concat(head_1..head_h) W_O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).
    The h heads are computed at once by reshaping d into (h, d_k). ``in_proj`` packs
    [W_Q; W_K; W_V] as rows of one ``(3d, d)`` Linear, the layout of
    ``nn.MultiheadAttention.in_proj_weight`` (see :meth:`load_torch_weights`): self-attention
    projects q, k and v with one matrix product, cross-attention uses the row blocks.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.dropout = dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        nn.init.xavier_uniform_(self.in_proj.weight)  # as nn.MultiheadAttention
        if bias:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    @torch.no_grad()
    def load_torch_weights(self, mha: nn.MultiheadAttention) -> None:
        """Copy the weights of an ``nn.MultiheadAttention`` with packed q/k/v projections."""
        if not mha._qkv_same_embed_dim or mha.embed_dim != self.d_model:
            raise ValueError("need an nn.MultiheadAttention with kdim = vdim = embed_dim = d_model")
        if mha.num_heads != self.num_heads:
            raise ValueError(f"num_heads differ: {mha.num_heads} vs {self.num_heads}")
        self.in_proj.weight.copy_(mha.in_proj_weight)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        if self.in_proj.bias is not None:
            self.in_proj.bias.copy_(mha.in_proj_bias)
            self.out_proj.bias.copy_(mha.out_proj.bias)

    def _split(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)  # (B, h, T, d_k)

    def _block(self, i: int) -> tuple[Tensor, Tensor | None]:
        """Rows of the packed projection: 0 = W_Q, 1 = W_K, 2 = W_V (and their biases)."""
        rows = slice(i * self.d_model, (i + 1) * self.d_model)
        bias = self.in_proj.bias
        return self.in_proj.weight[rows], (None if bias is None else bias[rows])

    def project_kv(self, key: Tensor, value: Tensor) -> KVCache:
        """Project keys and values once (e.g. the encoder output for cross-attention).

        Shape:
            key ``(B, Tk, d)``, value ``(B, Tk, d)`` -> KVCache of ``(B, h, Tk, d_k)``.
        """
        w_k, b_k = self._block(1)
        w_v, b_v = self._block(2)
        k = self._split(F.linear(key, w_k, b_k)).contiguous()  # (B, h, Tk, d_k)
        v = self._split(F.linear(value, w_v, b_v)).contiguous()  # (B, h, Tk, d_k)
        return KVCache(k, v)

    def attend(
        self,
        query: Tensor,
        kv: KVCache,
        mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from raw queries to already projected keys/values.

        ``kv`` and ``mask`` may hold fewer rows than ``query``: B rows for B·K query rows, where
        query rows b·K .. b·K + K - 1 attend to row b (the K beams of one sentence share its
        projected source). Their K·Tq queries then go through one product with the shared keys,
        so the keys are neither copied per beam nor read K times.

        Shape:
            query ``(B·K, Tq, d)``, kv ``(B, h, Tk, d_k)``, mask ``(B, 1|Tq, Tk)``
            -> output ``(B·K, Tq, d)``, weights ``(B·K, h, Tq, Tk)`` or None (K = 1: plain).
        """
        w_q, b_q = self._block(0)
        rows, t, _ = query.shape
        shared = kv.key.shape[0]
        if rows == shared:
            q = self._split(F.linear(query, w_q, b_q))  # (B, h, Tq, d_k)
            return self._heads(q, kv, mask, is_causal, need_weights)
        if rows % shared or is_causal or (mask is not None and mask.shape[-2] != 1):
            raise ValueError(
                f"{rows} query rows cannot share the keys of {shared} rows"
                + (" (a causal or per-query mask)" if rows % shared == 0 else "")
            )
        k = rows // shared
        grouped = F.linear(query, w_q, b_q).view(shared, k * t, self.d_model)  # (B, K·Tq, d)
        out, weights = self._heads(self._split(grouped), kv, mask, False, need_weights)
        if weights is not None:  # (B, h, K·Tq, Tk) -> (B·K, h, Tq, Tk)
            weights = weights.view(shared, self.num_heads, k, t, -1).transpose(1, 2)
            weights = weights.reshape(rows, self.num_heads, t, -1)
        return out.view(rows, t, self.d_model), weights  # (B·K, Tq, d)

    def self_attention(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        cache: KVCache | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        positions: AttentionPositions | None = None,
    ) -> tuple[Tensor, Tensor | None, KVCache]:
        """Self-attention with one packed q/k/v projection and an optional key/value cache.

        The new positions' keys/values are appended to ``cache`` (if given) and the queries
        attend to all of them; the returned cache holds every position so far (past + new).
        ``positions`` (RoPE's rotation, an ALiBi or T5 bias) act on the new queries and keys
        before they are cached, and on the logits.

        Shape:
            x ``(B, T, d)`` -> output ``(B, T, d)``, weights ``(B, h, T, Tk)`` or None, cache
            of ``(B, h, Tk, d_k)`` with ``Tk = past + T``.
        """
        b, t, _ = x.shape
        qkv = self.in_proj(x).view(b, t, 3, self.num_heads, self.head_dim)  # (B, T, 3, h, d_k)
        bias = None
        if positions is not None:
            qkv = positions.rotate_packed(qkv)  # RoPE: q and k rotated (B, T, 3, h, d_k)
            bias = positions.bias  # (h, T, P + T) or None
            is_causal = is_causal and not positions.hides_future
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, T, d_k)
        kv = KVCache(k, v) if cache is None else cache.append(k, v)
        out, weights = self._heads(q, kv, mask, is_causal, need_weights, bias)
        return out, weights, kv

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """General attention of ``query`` over ``key``/``value`` (as ``nn.MultiheadAttention``).

        Args:
            mask: bool, True = may attend, broadcastable to ``(B, Tq, Tk)`` (or to
                ``(B, h, Tq, Tk)`` if 4-d).
            is_causal: hide future keys (bottom-right aligned, see :func:`causal_mask`).
            need_weights: return per-head weights.

        Shape:
            query ``(B, Tq, d)``, key ``(B, Tk, d)``, value ``(B, Tk, d)``
            -> output ``(B, Tq, d)``, weights ``(B, h, Tq, Tk)`` or None.
        """
        kv = self.project_kv(key, value)  # (B, h, Tk, d_k) each
        return self.attend(query, kv, mask, is_causal=is_causal, need_weights=need_weights)

    def _heads(
        self,
        q: Tensor,
        kv: KVCache,
        mask: Tensor | None,
        is_causal: bool,
        need_weights: bool,
        bias: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        if mask is not None and mask.dim() == 3:
            mask = mask[:, None]  # (B, 1, Tq|1, Tk): same mask for every head
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q,
            kv.key,
            kv.value,
            mask,
            is_causal=is_causal,
            dropout_p=p,
            need_weights=need_weights,
            bias=bias,
        )  # (B, h, Tq, d_k), (B, h, Tq, Tk)
        b, _, t, _ = out.shape
        out = out.transpose(1, 2).reshape(b, t, self.d_model)  # (B, Tq, d)
        return self.out_proj(out), weights  # (B, Tq, d)
