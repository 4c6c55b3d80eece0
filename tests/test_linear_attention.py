"""Causal linear attention (Katharopoulos et al. 2020): the chunked parallel form, the recurrence
and the definition agree; the state has a fixed size; mixed precision keeps float32 sums."""

import pytest
import torch

from devices import DEVICES
from seqlab.config import TransformerLMConfig
from seqlab.models.transformer_lm import TransformerLanguageModel
from seqlab.nn.attention import KVCache
from seqlab.nn.linear_attention import (
    LinearAttentionState,
    LinearSelfAttention,
    causal_linear_attention,
    linear_attention_step,
    linear_attention_weights,
)

B, H, D = 2, 3, 4


def _qkv(t, dtype=torch.float64, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(B, H, t, D, generator=g, dtype=torch.float64).to(device, dtype)
        for _ in range(3)
    ]


def _by_definition(q, k, v):
    """out_i = φ(q_i)·Σ_{j≤i} φ(k_j) v_jᵀ / φ(q_i)·Σ_{j≤i} φ(k_j), one query at a time (O(T²))."""
    fq, fk = (torch.nn.functional.elu(x) + 1 for x in (q, k))  # φ (§3.2.1)
    rows = []
    for i in range(q.shape[2]):
        s = torch.einsum("bhjd,bhje->bhde", fk[:, :, : i + 1], v[:, :, : i + 1])  # (B, h, d, d)
        z = fk[:, :, : i + 1].sum(2)  # (B, h, d)
        num = torch.einsum("bhd,bhde->bhe", fq[:, :, i], s)
        den = (fq[:, :, i] * z).sum(-1, keepdim=True)
        rows.append(num / den)
    return torch.stack(rows, 2)  # (B, h, T, d)


def _step_by_step(q, k, v, state=None):
    state = state or LinearAttentionState.empty(B, H, D, q)
    outs = []
    for t in range(q.shape[2]):
        out, state = linear_attention_step(
            q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state
        )
        outs.append(out)
    return torch.cat(outs, 2), state


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", [1, 3, 64])
@pytest.mark.parametrize("length", [10, 1])
def test_parallel_form_equals_the_recurrence(chunk, length, device):
    """10 positions in chunks of 1, 3 (10 = 3·3 + 1: a padded last chunk) and 64 (one chunk)."""
    q, k, v = _qkv(length, device=device)
    parallel, after = causal_linear_attention(q, k, v, chunk=chunk)
    recurrent, state = _step_by_step(q, k, v)
    torch.testing.assert_close(parallel, recurrent, atol=1e-6, rtol=0)
    torch.testing.assert_close(after.s, state.s, atol=1e-6, rtol=0)
    torch.testing.assert_close(after.z, state.z, atol=1e-6, rtol=0)
    assert after.length == state.length == length


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_parallel_form_equals_the_definition(chunk, device):
    q, k, v = _qkv(11, device=device)
    out, _ = causal_linear_attention(q, k, v, chunk=chunk)
    torch.testing.assert_close(out, _by_definition(q, k, v), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("chunk", [3, 64])
def test_continuing_a_state_equals_one_pass_over_the_concatenation(chunk, device):
    q, k, v = _qkv(13, device=device)
    whole, end = causal_linear_attention(q, k, v, chunk=chunk)
    first, mid = causal_linear_attention(q[:, :, :6], k[:, :, :6], v[:, :, :6], chunk=chunk)
    rest, after = causal_linear_attention(q[:, :, 6:], k[:, :, 6:], v[:, :, 6:], mid, chunk=chunk)
    torch.testing.assert_close(torch.cat([first, rest], 2), whole, atol=1e-6, rtol=0)
    torch.testing.assert_close(after.s, end.s, atol=1e-6, rtol=0)
    torch.testing.assert_close(after.z, end.z, atol=1e-6, rtol=0)
    assert (mid.length, after.length) == (6, 13)
    # and the recurrence continues the parallel form's state
    stepped, _ = _step_by_step(q[:, :, 6:], k[:, :, 6:], v[:, :, 6:], mid)
    torch.testing.assert_close(stepped, rest, atol=1e-6, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_equal_those_of_the_definition(device):
    q, k, v = (t.requires_grad_() for t in _qkv(7, device=device))
    out, _ = causal_linear_attention(q, k, v, chunk=3)
    ramp = torch.linspace(-1, 1, D, dtype=out.dtype, device=device)
    grads = torch.autograd.grad((out * ramp).sum(), (q, k, v))
    ref = _by_definition(q, k, v)
    expected = torch.autograd.grad((ref * ramp).sum(), (q, k, v))
    for g, e in zip(grads, expected, strict=True):
        assert torch.isfinite(g).all() and g.abs().sum() > 0
        torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_inputs_keep_float32_sums(device):
    q, k, v = _qkv(20, torch.float32, device=device)
    exact, exact_state = causal_linear_attention(q, k, v, chunk=8)
    low = [t.to(torch.bfloat16) for t in (q, k, v)]
    out, state = causal_linear_attention(*low, chunk=8)
    assert out.dtype == torch.bfloat16
    assert state.s.dtype == state.z.dtype == torch.float32
    torch.testing.assert_close(out.float(), exact, atol=0.05, rtol=0.02)
    torch.testing.assert_close(state.s, exact_state.s, atol=0.05, rtol=0.02)
    step_out, stepped = linear_attention_step(*(t[:, :, :1] for t in low), state)
    assert step_out.dtype == torch.bfloat16 and stepped.s.dtype == torch.float32
    assert stepped.z.dtype == torch.float32


H_LM, D_LM = 2, 8  # _lm's heads and head width


def _lm(attention):
    torch.manual_seed(0)
    cfg = TransformerLMConfig(
        d_model=16, num_heads=2, num_layers=2, d_ff=32, positions="none", attention=attention
    )
    return TransformerLanguageModel(13, cfg).eval()


def _state_sizes(cache):
    sizes = []
    for layer in cache.self_kv:
        if isinstance(layer, LinearAttentionState):
            sizes.append(layer.s.numel() + layer.z.numel())
        else:
            assert isinstance(layer, KVCache)
            sizes.append(layer.key.numel() + layer.value.numel())
    return sizes


@torch.no_grad()
def test_the_state_does_not_grow_with_the_sequence_while_a_kv_cache_does():
    """After 10 and after 1000 tokens (the last 5 fed one at a time, as generation does)."""
    tokens = torch.randint(13, (1, 1000))
    sizes = {}
    for attention in ("linear", "softmax"):
        model = _lm(attention)
        for n in (10, 1000):
            _, cache = model(tokens[:, : n - 5], model.init_state(1))
            for t in range(n - 5, n):
                _, cache = model(tokens[:, t : t + 1], cache)
            assert cache.length == n
            sizes[attention, n] = _state_sizes(cache)
    assert sizes["linear", 10] == sizes["linear", 1000] == [H_LM * D_LM * (D_LM + 1)] * 2
    assert [100 * s for s in sizes["softmax", 10]] == sizes["softmax", 1000]


@pytest.mark.parametrize("device", DEVICES)
def test_weights_sum_to_one_over_the_past_and_reproduce_the_output(device):
    """Three new queries after five cached positions: the weights of the keys up to each query
    sum to 1, later keys get 0, and weights @ v is what the parallel form continues with."""
    q, k, v = _qkv(8, device=device)
    _, past = causal_linear_attention(q[:, :, :5], k[:, :, :5], v[:, :, :5])
    out, _ = causal_linear_attention(q[:, :, 5:], k[:, :, 5:], v[:, :, 5:], past)
    w = linear_attention_weights(q[:, :, 5:], k)  # (B, h, 3, 8)
    assert w.shape == (B, H, 3, 8) and (w >= 0).all()
    ones = torch.ones(B, H, 3, dtype=w.dtype, device=device)
    torch.testing.assert_close(w.sum(-1), ones, atol=1e-6, rtol=0)
    assert (w[..., 0, 6:] == 0).all() and (w[..., 1, 7:] == 0).all() and (w[..., 2, :] > 0).all()
    torch.testing.assert_close(w @ v, out, atol=1e-10, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_linear_self_attention_weights_and_its_refusals(device):
    torch.manual_seed(0)
    att = LinearSelfAttention(12, 3).eval()
    x = torch.randn(2, 6, 12, dtype=torch.float64).to(device)
    att.to(device, torch.float64)
    out, w, state = att.self_attention(x, need_weights=True)
    assert w.shape == (2, 3, 6, 6) and state.length == 6
    torch.testing.assert_close(w.tril(), w, atol=0, rtol=0)  # causal: no weight on the future
    # the same output in one pass and token by token through the state
    state = LinearAttentionState.empty(2, 3, 4, x)
    steps = []
    for t in range(6):
        y, _, state = att.self_attention(x[:, t : t + 1], cache=state)
        steps.append(y)
    torch.testing.assert_close(torch.cat(steps, 1), out, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="linear attention takes no mask"):
        att.self_attention(x, torch.ones(2, 1, 6, dtype=torch.bool, device=device))
    with pytest.raises(ValueError, match="causal self-attention only"):
        att.self_attention(x, is_causal=False)
    empty = torch.zeros(2, 3, 0, 4, dtype=x.dtype, device=device)
    with pytest.raises(TypeError, match="LinearAttentionState"):
        att.self_attention(x, cache=KVCache(empty, empty))
