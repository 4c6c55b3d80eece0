"""Transformer blocks and stacks: equivalence with PyTorch, masks, cached incremental decoding."""

import pytest
import torch
from torch import nn

from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.nn.attention import causal_mask, padding_mask
from seqlab.nn.transformer import (
    AddNorm,
    Decoder,
    DecoderBlock,
    Encoder,
    EncoderBlock,
    PositionWiseFFN,
)

D, H, FF, V, LAYERS = 16, 4, 32, 11, 2


def test_ffn_is_two_linears_with_relu():
    ffn = PositionWiseFFN(D, FF)
    x = torch.randn(2, 3, D)
    expected = torch.relu(x @ ffn.linear1.weight.T + ffn.linear1.bias) @ ffn.linear2.weight.T
    torch.testing.assert_close(ffn(x), expected + ffn.linear2.bias)
    torch.testing.assert_close(ffn(x)[:, 1], ffn(x[:, 1:2])[:, 0])  # position-wise


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_addnorm_formulas(norm):
    addnorm = AddNorm(D, dropout=0.0, norm=norm)
    x = torch.randn(2, 3, D)
    sublayer = nn.Linear(D, D)
    out = addnorm(x, sublayer(addnorm.sublayer_input(x)))
    ln = addnorm.ln
    expected = ln(x + sublayer(x)) if norm == "post" else x + sublayer(ln(x))
    torch.testing.assert_close(out, expected)


# ------------------------------------------------------------------- equivalence with PyTorch
def _copy_ffn_norms(ours, ref, norms):
    ours.ffn.linear1.load_state_dict(ref.linear1.state_dict())
    ours.ffn.linear2.load_state_dict(ref.linear2.state_dict())
    for i, addnorm in enumerate(norms, start=1):
        addnorm.ln.load_state_dict(getattr(ref, f"norm{i}").state_dict())


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_encoder_block_matches_torch_layer(norm):
    ref = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm == "pre"
    ).eval()
    ours = EncoderBlock(D, H, FF, norm=norm).eval()
    ours.self_attn.load_torch_weights(ref.self_attn)
    _copy_ffn_norms(ours, ref, [ours.addnorm1, ours.addnorm2])
    x, lens = torch.randn(3, 7, D), torch.tensor([7, 3, 5])
    ref_out = ref(x, src_key_padding_mask=~padding_mask(lens, 7)[:, 0])
    out, _ = ours(x, padding_mask(lens, 7))
    for b, n in enumerate(lens.tolist()):
        torch.testing.assert_close(out[b, :n], ref_out[b, :n], atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_decoder_block_matches_torch_layer(norm):
    ref = nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm == "pre"
    ).eval()
    ours = DecoderBlock(D, H, FF, norm=norm).eval()
    ours.self_attn.load_torch_weights(ref.self_attn)
    ours.cross_attn.load_torch_weights(ref.multihead_attn)
    _copy_ffn_norms(ours, ref, [ours.addnorm1, ours.addnorm2, ours.addnorm3])
    x, memory, lens = torch.randn(3, 5, D), torch.randn(3, 6, D), torch.tensor([6, 2, 4])
    ref_out = ref(
        x, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=~padding_mask(lens, 6)[:, 0]
    )
    out, kv, _, _ = ours(x, ours.cross_attn.project_kv(memory, memory), padding_mask(lens, 6))
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    assert kv.length == 5


# ---------------------------------------------------------------------------- stacks and caches
def _stacks(norm="post", positions="sinusoidal", cross=True):
    enc = Encoder(V, D, H, LAYERS, FF, max_len=32, norm=norm, positions=positions).eval()
    dec = Decoder(
        V, D, H, LAYERS, FF, max_len=32, norm=norm, positions=positions, cross_attention=cross
    ).eval()
    return enc, dec


def _decode_incrementally(dec, tgt, chunks, memory=None, lens=None):
    cache = dec.init_cache(tgt.shape[0], memory, lens)
    outs, start = [], 0
    for size in chunks:
        out = dec(tgt[:, start : start + size], cache=cache)
        outs.append(out.hidden)
        cache, start = out.cache, start + size
    assert cache.length == tgt.shape[1]
    return torch.cat(outs, 1)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope", "alibi", "t5_bias"])
@pytest.mark.parametrize("chunks", [[1] * 7, [3, 1, 1, 2]])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_encoder_decoder_cached_decoding_matches_full_pass(norm, positions, chunks, precision):
    enc, dec = _stacks(norm, positions)
    src, lens = torch.randint(V, (2, 6)), torch.tensor([6, 4])
    tgt = torch.randint(V, (2, 7))
    with computing_in(precision):
        memory, _ = enc(src, lens)
        full = dec(tgt, memory, lens)
        incremental = _decode_incrementally(dec, tgt, chunks, memory, lens)
    assert full.cache is None and full.hidden.shape == (2, 7, D)
    assert_close_in(precision, incremental, full.hidden)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("chunks", [[1] * 6, [4, 2]])
def test_decoder_only_cached_decoding_matches_full_pass(norm, chunks):
    _, dec = _stacks(norm, cross=False)
    tgt = torch.randint(V, (3, 6))
    full = dec(tgt).hidden
    torch.testing.assert_close(_decode_incrementally(dec, tgt, chunks), full, atol=1e-5, rtol=0)
    assert not any(isinstance(m, nn.MultiheadAttention) for m in dec.modules())
    assert all(block.cross_attn is None for block in dec.blocks)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_padding_and_batching_do_not_change_real_positions(norm, precision):
    """Each padded row of a batch decodes exactly as the same sentence alone, unpadded."""
    enc, dec = _stacks(norm)
    lens = torch.tensor([5, 2, 4])
    src = torch.randint(1, V, (3, 5))
    src[1, 2:] = 0
    src[2, 4:] = 0  # padding
    tgt = torch.randint(V, (3, 4))
    with computing_in(precision):
        memory, _ = enc(src, lens)
        batch_out = dec(tgt, memory, lens).hidden
        for b, n in enumerate(lens.tolist()):
            memory_b, _ = enc(src[b : b + 1, :n])  # no padding, no mask, batch of 1
            assert_close_in(precision, memory[b, :n], memory_b[0])
            alone = dec(tgt[b : b + 1], memory_b).hidden
            assert_close_in(precision, batch_out[b], alone[0])


def test_padding_changes_outputs_without_a_mask():
    """Guards the test above: without valid lengths the padding does leak in."""
    enc, dec = _stacks()
    src = torch.randint(1, V, (1, 5))
    masked, _ = enc(src, torch.tensor([3]))
    unmasked, _ = enc(src)
    assert not torch.allclose(masked[0, :3], unmasked[0, :3], atol=1e-3)


def test_attention_weights_per_layer_and_head():
    enc, dec = _stacks()
    src, lens = torch.randint(V, (2, 6)), torch.tensor([6, 3])
    tgt = torch.randint(V, (2, 5))
    memory, enc_w = enc(src, lens, need_weights=True)
    out = dec(tgt, memory, lens, need_weights=True)
    assert len(enc_w) == len(out.self_attention) == len(out.cross_attention) == LAYERS
    for w in enc_w:
        assert w.shape == (2, H, 6, 6)
        assert (w[1, :, :, 3:] == 0).all()
    for self_w, cross_w in zip(out.self_attention, out.cross_attention, strict=True):
        assert self_w.shape == (2, H, 5, 5) and cross_w.shape == (2, H, 5, 6)
        assert (self_w.masked_select(~causal_mask(5)) == 0).all()
        assert (cross_w[1, :, :, 3:] == 0).all()
        torch.testing.assert_close(cross_w.sum(-1), torch.ones(2, H, 5))
    plain = dec(tgt, memory, lens)
    assert plain.self_attention is None and plain.cross_attention is None
    torch.testing.assert_close(plain.hidden, out.hidden, atol=1e-5, rtol=0)


def test_cached_weights_cover_all_positions_so_far():
    _, dec = _stacks(cross=False)
    tgt = torch.randint(V, (1, 4))
    out = dec(tgt[:, :3], cache=dec.init_cache(1))
    step = dec(tgt[:, 3:], cache=out.cache, need_weights=True)
    assert step.self_attention[0].shape == (1, H, 1, 4)
    full = dec(tgt, need_weights=True)
    torch.testing.assert_close(
        step.self_attention[1][:, :, 0], full.self_attention[1][:, :, 3], atol=1e-5, rtol=0
    )


def test_misuse_is_reported():
    enc, dec = _stacks()
    memory, _ = enc(torch.randint(V, (1, 3)))
    with pytest.raises(ValueError, match="memory"):
        dec(torch.randint(V, (1, 2)))
    cache = dec.init_cache(1, memory)
    with pytest.raises(ValueError, match="init_cache"):
        dec(torch.randint(V, (1, 2)), memory, cache=cache)


def test_dropout_is_active_in_training_mode_only():
    dec = Decoder(V, D, H, LAYERS, FF, dropout=0.3, max_len=16, cross_attention=False)
    tgt = torch.randint(V, (2, 6))
    assert not torch.allclose(dec(tgt).hidden, dec(tgt).hidden)
    dec.eval()
    torch.testing.assert_close(dec(tgt).hidden, dec(tgt).hidden)
