"""Masks, masked softmax, scoring functions and multi-head attention."""

import itertools
import math

import pytest
import torch
from torch import nn

from devices import DEVICES
from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.nn.attention import (
    AdditiveAttention,
    KVCache,
    MultiHeadAttention,
    causal_mask,
    masked_softmax,
    padding_mask,
    scaled_dot_product_attention,
)
from seqlab.nn.positional_encoding import SinusoidalPositionalEncoding

B, H, TQ, TK, D = 3, 2, 4, 6, 8


# ----------------------------------------------------------------------------------------- masks
def test_padding_mask_per_row_and_per_query():
    m = padding_mask(torch.tensor([2, 0, 3]), 4)
    assert m.shape == (3, 1, 4) and m.dtype == torch.bool
    assert m[:, 0].tolist() == [[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 0]]
    m2 = padding_mask(torch.tensor([[1, 2], [3, 0]]), 3)
    assert m2.shape == (2, 2, 3)
    assert m2.tolist() == [[[1, 0, 0], [1, 1, 0]], [[1, 1, 1], [0, 0, 0]]]


@pytest.mark.parametrize("tq,tk", [(4, 4), (1, 5), (3, 7)])
def test_causal_mask_is_bottom_right_aligned(tq, tk):
    m = causal_mask(tq, tk)
    assert m.shape == (tq, tk)
    for i in range(tq):
        absolute = tk - tq + i
        assert m[i].tolist() == [j <= absolute for j in range(tk)]
    if tq == tk:
        assert torch.equal(m, torch.ones(tq, tq, dtype=torch.bool).tril())


# ------------------------------------------------------------------------------ masked softmax
def test_masked_softmax_matches_softmax_over_valid_prefix():
    scores = torch.randn(B, TQ, TK)
    lens = torch.tensor([1, 4, 6])
    w = masked_softmax(scores, lengths=lens)
    for b, n in enumerate(lens.tolist()):
        torch.testing.assert_close(w[b, :, :n], torch.softmax(scores[b, :, :n], -1))
        assert (w[b, :, n:] == 0).all()
    assert torch.equal(w, masked_softmax(scores, padding_mask(lens, TK)))


def test_masked_softmax_fully_masked_row_is_zero_without_nan_in_grad():
    scores = torch.randn(2, 3, 5, requires_grad=True)
    lens = torch.tensor([[0, 2, 5], [3, 0, 1]])  # per query, two rows fully masked
    w = masked_softmax(scores, lengths=lens)
    assert torch.isfinite(w).all()
    assert (w[0, 0] == 0).all() and (w[1, 1] == 0).all()
    sums = w.sum(-1)
    torch.testing.assert_close(sums, (lens > 0).float())
    (w * torch.randn_like(w)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[0, 0] == 0).all()


def test_masks_must_be_bool():
    with pytest.raises(TypeError, match="bool"):
        masked_softmax(torch.randn(2, 3), torch.ones(2, 3))


# --------------------------------------------------------------------------- dot-product attention
def _mask(kind: str) -> tuple[torch.Tensor | None, bool]:
    """(mask broadcastable to (B, H, TQ, TK), is_causal) for one kind of masking."""
    if kind == "none":
        return None, False
    if kind == "padding":
        return padding_mask(torch.tensor([2, 6, 5]), TK)[:, None], False  # (B, 1, 1, TK)
    if kind == "per_query":
        return padding_mask(torch.tensor([[1, 2, 3, 4], [6, 6, 1, 1], [3, 3, 3, 3]]), TK)[
            :, None
        ], False
    if kind == "fully_masked_row":
        return padding_mask(torch.tensor([[0, 2, 3, 4], [6, 0, 1, 1], [3, 3, 3, 0]]), TK)[
            :, None
        ], False
    if kind == "causal":
        return None, True
    if kind == "causal_padding":
        return padding_mask(torch.tensor([3, 6, 1]), TK)[:, None], True
    raise AssertionError(kind)


def _reference_attention(q, k, v, mask):
    """Textbook softmax(QKᵀ/√d)V, one query at a time over its allowed keys."""
    out = torch.zeros(*q.shape[:-1], v.shape[-1], device=q.device)
    mask = mask.expand(*q.shape[:-1], k.shape[-2])
    for idx in itertools.product(*map(range, q.shape[:-1])):
        keys = mask[idx].nonzero().flatten()
        if len(keys) == 0:
            continue
        b_h = idx[:-1]
        s = k[b_h][keys] @ q[idx] / math.sqrt(q.shape[-1])
        out[idx] = torch.softmax(s, 0) @ v[b_h][keys]
    return out


def _on(device, *tensors):
    """``tensors`` (None stays None) moved to ``device``."""
    return [None if t is None else t.to(device) for t in tensors]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "kind", ["none", "padding", "per_query", "fully_masked_row", "causal", "causal_padding"]
)
def test_fused_and_explicit_dot_product_attention_agree(kind, device):
    q, k, v = _on(
        device, torch.randn(B, H, TQ, D), torch.randn(B, H, TK, D), torch.randn(B, H, TK, 5)
    )
    mask, is_causal = _mask(kind)
    (mask,) = _on(device, mask)
    fused, none = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    explicit, w = scaled_dot_product_attention(
        q, k, v, mask, is_causal=is_causal, need_weights=True
    )
    assert none is None and w.shape == (B, H, TQ, TK)
    assert torch.isfinite(fused).all()
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)
    full = mask if mask is not None else torch.ones(1, 1, 1, TK, dtype=torch.bool, device=device)
    if is_causal:
        full = full & causal_mask(TQ, TK, device=device)
    torch.testing.assert_close(explicit, _reference_attention(q, k, v, full), atol=1e-5, rtol=0)
    assert (w.masked_select(~full.expand_as(w)) == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["none", "padding", "causal_padding"])
def test_single_query_decoding_path_matches_the_reference(kind, device):
    """One query (a decoding step) takes the explicit path (q Kᵀ, then the weights times V) on
    CPU (PyTorch's fused kernel on CUDA); outputs as the textbook."""
    q, k, v = _on(
        device, torch.randn(B, H, 1, D), torch.randn(B, H, TK, D), torch.randn(B, H, TK, 5)
    )
    mask, is_causal = _mask(kind)
    (mask,) = _on(device, mask)
    out, none = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    assert none is None and out.shape == (B, H, 1, 5)
    full = mask if mask is not None else torch.ones(1, 1, 1, TK, dtype=torch.bool, device=device)
    torch.testing.assert_close(out, _reference_attention(q, k, v, full), atol=1e-5, rtol=0)
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, fused, atol=1e-5, rtol=0)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("cached", [6, 20])
def test_single_query_over_the_decoders_cache_matches_the_reference(precision, cached):
    """A decoding step as the search runs it: one query per row and head against the cache's
    time-major storage viewed as ``(B, h, Tk, d_k)`` (past the 16 positions where PyTorch's
    batched products change kernels on some CPUs), q, k, v in the step's precision (bf16 forced
    too): the textbook's output, to bf16's rounding."""
    storage = torch.randn(2, cached, B, H, D)  # (K|V, Tk, B, h, d_k), as seqlab.nn.kv_cache
    k, v = storage.permute(0, 2, 3, 1, 4).unbind(0)  # (B, h, Tk, d_k) views, not contiguous
    q = torch.randn(B, H, 1, D)
    mask = padding_mask(torch.tensor([cached, cached - 3, 1]), cached)[:, None]  # (B, 1, 1, Tk)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    out, _ = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask)
    assert out.dtype == dtype and out.shape == (B, H, 1, D)
    expected = _reference_attention(*(x.to(dtype).float() for x in (q, k, v)), mask)
    assert_close_in(precision, out, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_path_gradient_is_finite_with_fully_masked_rows(device):
    q = torch.randn(B, H, TQ, D, device=device, requires_grad=True)
    k, v = _on(device, torch.randn(B, H, TK, D), torch.randn(B, H, TK, D))
    mask, _ = _mask("fully_masked_row")
    (mask,) = _on(device, mask)
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    assert (out[0, :, 0] == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["none", "padding", "fully_masked_row", "causal"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_training_path_matches_the_fused_kernel(kind, dtype, device):
    """Training in bf16/fp16 on CPU takes the math kernel: the same output and gradients as the
    kernel PyTorch chooses by itself (flash attention), within the precision's rounding."""
    mask, is_causal = _mask(kind)
    (mask,) = _on(device, mask)
    g = torch.Generator().manual_seed(0)
    shapes = [(B, H, TQ, D), (B, H, TK, D), (B, H, TK, D)]
    base = [torch.randn(shape, generator=g).to(device, dtype) for shape in shapes]
    ours = [t.clone().requires_grad_() for t in base]
    theirs = [t.clone().requires_grad_() for t in base]
    out, _ = scaled_dot_product_attention(*ours, mask, is_causal=is_causal)
    q, k, v = theirs  # PyTorch's own kernel choice, as seqlab called it before
    full = mask if mask is not None else torch.ones(1, 1, 1, TK, dtype=torch.bool, device=device)
    if is_causal:
        full = full & causal_mask(TQ, TK, device=device)  # bottom-right, as seqlab's is_causal
    any_key = full.any(dim=-1, keepdim=True)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=full | ~any_key
    ).masked_fill(~any_key, 0.0)
    upstream = torch.randn(out.shape, generator=g).to(device, dtype)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    tol = dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(out, expected, **tol)
    for mine, pytorch in zip(ours, theirs, strict=True):
        torch.testing.assert_close(mine.grad, pytorch.grad, **tol)


def test_kernel_choice_changes_only_reduced_precision_training_on_cpu():
    from seqlab.nn.attention import _fused_backend

    def flash_allowed(t):
        with _fused_backend(t):
            return torch.backends.cuda.flash_sdp_enabled()  # the flag CPU kernels obey too

    bf16 = torch.ones(1, dtype=torch.bfloat16)
    assert not flash_allowed(bf16.clone().requires_grad_())  # training in bf16: math kernel
    assert not flash_allowed(torch.ones(1, dtype=torch.float16, requires_grad=True))
    assert flash_allowed(bf16)  # inference
    assert flash_allowed(torch.ones(1, requires_grad=True))  # training in fp32
    with torch.no_grad():
        assert flash_allowed(bf16.clone().requires_grad_())
    assert torch.backends.cuda.flash_sdp_enabled()  # restored afterwards


# ------------------------------------------------------------------------------------ additive
@pytest.mark.parametrize("device", DEVICES)
def test_additive_attention_matches_the_formula_with_different_sizes(device):
    att = AdditiveAttention(query_size=5, key_size=3, num_hiddens=7).eval().to(device)
    q, k, v = _on(device, torch.randn(2, 4, 5), torch.randn(2, 6, 3), torch.randn(2, 6, 2))
    mask = padding_mask(torch.tensor([6, 2], device=device), 6)
    out, w = att(q, k, v, mask, need_weights=True)
    scores = torch.empty(2, 4, 6, device=device)
    for b, i, j in itertools.product(range(2), range(4), range(6)):
        hidden = torch.tanh(att.w_q.weight @ q[b, i] + att.w_k.weight @ k[b, j])
        scores[b, i, j] = att.w_v.weight[0] @ hidden
    expected = masked_softmax(scores, mask)
    torch.testing.assert_close(w, expected)
    torch.testing.assert_close(out, expected @ v)
    assert (w[1, :, 2:] == 0).all()
    assert att(q, k, v, mask)[1] is None


# ---------------------------------------------------------------------------------- multi-head
def _pair(d=D, h=H, bias=True, device="cpu"):
    ref = nn.MultiheadAttention(d, h, bias=bias, batch_first=True).eval()
    ours = MultiHeadAttention(d, h, bias=bias).eval()
    ours.load_torch_weights(ref)
    return ours.to(device), ref.to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("masking", ["none", "key_padding", "causal", "both"])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_multihead_matches_torch_self_attention(masking, need_weights, bias, device):
    ours, ref = _pair(bias=bias, device=device)
    x = torch.randn(B, TK, D).to(device)
    lens = torch.tensor([TK, 2, 4], device=device)
    kpm = ~padding_mask(lens, TK)[:, 0]  # (B, TK) True = ignore (PyTorch)
    causal = ~causal_mask(TK, device=device)  # (TK, TK) True = ignore (PyTorch)
    use_kpm, use_causal = masking in ("key_padding", "both"), masking in ("causal", "both")
    ref_out, ref_w = ref(
        x, x, x,
        key_padding_mask=kpm if use_kpm else None,
        attn_mask=causal if use_causal else None,
        need_weights=True,
    )  # fmt: skip
    mask = ~kpm[:, None, :] if use_kpm else None  # (B, 1, TK) True = attend
    out, w = ours(x, x, x, mask, is_causal=use_causal, need_weights=need_weights)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    if need_weights:
        assert w.shape == (B, H, TK, TK)
        torch.testing.assert_close(w.mean(1), ref_w, atol=1e-5, rtol=0)
    else:
        assert w is None
    out2, _, kv = ours.self_attention(x, mask, is_causal=use_causal)
    torch.testing.assert_close(out2, out, atol=1e-6, rtol=0)
    assert kv.key.shape == (B, H, TK, D // H)


@pytest.mark.parametrize("device", DEVICES)
def test_multihead_matches_torch_cross_attention_and_reuses_projected_memory(device):
    ours, ref = _pair(device=device)
    q, memory = _on(device, torch.randn(B, TQ, D), torch.randn(B, TK, D))
    kpm = ~padding_mask(torch.tensor([1, 6, 3], device=device), TK)[:, 0]
    ref_out, ref_w = ref(q, memory, memory, key_padding_mask=kpm)
    out, w = ours(q, memory, memory, ~kpm[:, None], need_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(w.mean(1), ref_w, atol=1e-5, rtol=0)
    kv = ours.project_kv(memory, memory)
    for t in range(TQ):  # one query at a time against the memory projected once
        step, _ = ours.attend(q[:, t : t + 1], kv, ~kpm[:, None])
        torch.testing.assert_close(step[:, 0], ref_out[:, t], atol=1e-5, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_incremental_self_attention_with_cache_matches_causal_pass(device):
    ours, _ = _pair(device=device)
    x = torch.randn(B, TK, D).to(device)
    full, _, _ = ours.self_attention(x, is_causal=True)
    empty = torch.zeros(B, H, 0, D // H, device=device)
    cache = KVCache(empty, empty)
    out, _, cache = ours.self_attention(x[:, :2], cache=cache, is_causal=True)  # prefill 2
    steps = [out]
    for t in range(2, TK - 2):  # then one token at a time
        out, _, cache = ours.self_attention(x[:, t : t + 1], cache=cache, is_causal=True)
        steps.append(out)
    out, w, cache = ours.self_attention(
        x[:, TK - 2 :], cache=cache, is_causal=True, need_weights=True
    )
    steps.append(out)  # and a final chunk of 2 after a non-empty cache
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
    assert cache.length == TK
    assert (w[:, :, 0, -1] == 0).all()  # the chunk's first query cannot see its successor


def test_weights_are_never_stored_on_the_module():
    ours, _ = _pair()
    x = torch.randn(B, TK, D)
    before = set(vars(ours))
    ours(x, x, x, need_weights=True)
    assert set(vars(ours)) == before
    assert not any(isinstance(v, torch.Tensor) for v in vars(ours).values())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_self_attention_is_blind_to_order_until_positions_are_added(precision, device):
    """Self-attention is permutation-equivariant (d2l.ai §11.6.3; Vaswani et al. 2017, §3.5):
    shuffling the inputs shuffles the outputs and changes nothing else, so order must come from
    positional encodings; once they are added, a shuffled input gives other outputs."""
    torch.manual_seed(0)
    ours, _ = _pair(device=device)
    x = torch.randn(B, TK, D).to(device)  # (B, TK, D)
    order = torch.tensor([3, 0, 5, 1, 4, 2], device=device)
    add_positions = SinusoidalPositionalEncoding(D).to(device)
    with computing_in(precision, device):
        out, _ = ours(x, x, x)  # (B, TK, D)
        shuffled, _ = ours(x[:, order], x[:, order], x[:, order])
        p, p_shuffled = add_positions(x), add_positions(x[:, order])
        with_positions, _ = ours(p, p, p)
        with_positions_shuffled, _ = ours(p_shuffled, p_shuffled, p_shuffled)
    assert_close_in(precision, shuffled, out[:, order])
    gap = (with_positions_shuffled - with_positions[:, order]).float().abs().max()
    assert gap > 0.1  # far beyond bf16 rounding: the order now shows


# --------------------------------------------------------------------- scoring functions
def _score(kind, q_size=6, k_size=6, hidden=5, max_len=9):
    from seqlab.nn.attention_scores import make_score

    return make_score(kind, q_size, k_size, hidden, max_len).eval()


def test_each_score_against_its_formula():
    torch.manual_seed(0)
    b, s, d = 3, 7, 6
    q, k = torch.randn(b, d), torch.randn(b, s, d)

    def direct(kind, score):
        out = torch.empty(b, s)
        for i in range(b):
            for j in range(s):
                qi, kj = q[i], k[i, j]
                if kind == "additive":  # w_vᵀ tanh(W_q q + W_k k)
                    val = score.w_v.weight[0] @ torch.tanh(
                        score.w_q.weight @ qi + score.w_k.weight @ kj
                    )
                elif kind == "dot":  # qᵀ k
                    val = qi @ kj
                elif kind == "scaled_dot":  # qᵀ k / √d
                    val = qi @ kj / d**0.5
                elif kind == "general":  # qᵀ W k
                    val = qi @ score.w.weight @ kj
                else:  # location: (W_a q + b)_j, whatever the key
                    val = score.w_a.weight[j] @ qi + score.w_a.bias[j]
                out[i, j] = val
        return out

    for kind in ("additive", "dot", "scaled_dot", "general", "location"):
        score = _score(kind)
        with torch.no_grad():
            got = score(q, score.prepare(k))
            torch.testing.assert_close(got, direct(kind, score), msg=kind)


def test_location_score_ignores_keys_and_refuses_long_sources():
    score = _score("location", max_len=4)
    q = torch.randn(2, 6)
    with torch.no_grad():
        a = score(q, score.prepare(torch.randn(2, 3, 6)))
        b = score(q, score.prepare(torch.randn(2, 3, 6)))
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="at most 4 source positions.*got a source of 5"):
        score(q, torch.randn(2, 5, 6))


def test_attention_pool_weights_sum_to_one_over_real_positions():
    from seqlab.nn.attention_scores import attention_pool

    score = _score("general", q_size=4, k_size=6)
    q, k = torch.randn(2, 4), torch.randn(2, 5, 6)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    with torch.no_grad():
        context, alpha = attention_pool(score, q, score.prepare(k), k, mask)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(2))
    assert (alpha[1, 2:] == 0).all()
    torch.testing.assert_close(context, (alpha[:, :, None] * k).sum(1))


def test_dot_scores_need_equal_sizes_and_unknown_kind():
    with pytest.raises(ValueError, match="dot attention needs queries and keys of one size"):
        _score("dot", q_size=4, k_size=6)
    with pytest.raises(ValueError, match="unknown attention score 'cosine'"):
        _score("cosine")


def test_config_refuses_dot_with_the_papers_bidirectional_decoder():
    from seqlab.config import config_from_dict
    from seqlab.errors import ConfigError

    with pytest.raises(ConfigError, match="use decoder: linear"):
        config_from_dict(
            {"data": {"dataset": "fra-eng"}, "model": {"arch": "bahdanau", "attention": "dot"}}
        )
    cfg = config_from_dict(
        {
            "data": {"dataset": "fra-eng"},
            "model": {"arch": "bahdanau", "attention": "dot", "decoder": "linear"},
        }
    )
    assert cfg.model.decoder == "linear"
