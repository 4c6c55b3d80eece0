"""Transformer encoder–decoder: shapes, cached vs full decoding, padding, sharing and tying, loss."""

import pytest
import torch

from seqlab.config import TransformerConfig
from seqlab.data.translation_batching import PAD
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
from translation_helpers import check_loss_ignores_padding, random_translation_batch

SRC_V, TGT_V, D, HEADS = 13, 11, 16, 4


def make_model(norm="post", share=False, tie=True, dropout=0.0, src_v=SRC_V, tgt_v=TGT_V):
    cfg = TransformerConfig(
        d_model=D,
        num_heads=HEADS,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=32,
        dropout=dropout,
        max_len=32,
        norm=norm,
        share_embeddings=share,
        tie_output=tie,
    )
    return TransformerSeq2Seq(src_v, tgt_v, cfg).eval()


def make_batch(b=4, s=7, t=6, seed=0):
    return random_translation_batch(SRC_V, TGT_V, b, s, t, seed)


NORMS = pytest.mark.parametrize("norm", ["post", "pre"])


def test_shapes():
    model, batch = make_model(), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    assert len(memory.cross_kv) == 2 and memory.cross_kv[0].key.shape == (4, HEADS, 7, D // HEADS)
    assert memory.mask.shape == (4, 1, 7)
    logits, weights = model.decode(memory, batch.tgt_in, need_attention=True)
    assert logits.shape == (4, 6, TGT_V) and weights.shape == (4, 6, 7)
    assert model.decode(memory, batch.tgt_in)[1] is None
    state = model.init_state(memory)
    assert state.length == 0
    step, state, weights = model.decode_step(memory, state, batch.tgt_in[:, 0], need_attention=True)
    assert step.shape == (4, TGT_V) and weights.shape == (4, 7) and state.length == 1
    assert model.max_decode_len == 32


@NORMS
def test_teacher_forcing_equals_step_by_step(norm):
    model, batch = make_model(norm), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    full, full_weights = model.decode(memory, batch.tgt_in, need_attention=True)
    fused, _ = model.decode(memory, batch.tgt_in)  # fused attention kernels
    state, steps, weights = model.init_state(memory), [], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, w = model.decode_step(memory, state, batch.tgt_in[:, t], need_attention=True)
        steps.append(logits)
        weights.append(w)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused, full, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.stack(weights, dim=1), full_weights, atol=1e-6, rtol=0)
    assert state.length == 6


def test_cross_attention_is_a_distribution_over_the_real_source():
    model, batch = make_model(), make_batch()
    _, weights = model.decode(
        model.encode(batch.src, batch.src_len), batch.tgt_in, need_attention=True
    )
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 6))
    pad = (torch.arange(7)[None, None, :] >= batch.src_len[:, None, None]).expand_as(weights)
    assert pad.any() and (weights[pad] == 0).all()


def test_attention_layer_picks_a_layer():
    cfg = make_model().cfg
    batch = make_batch()
    first = TransformerSeq2Seq(SRC_V, TGT_V, cfg, attention_layer=0).eval()
    last = TransformerSeq2Seq(SRC_V, TGT_V, cfg).eval()
    last.load_state_dict(first.state_dict())
    memory = first.encode(batch.src, batch.src_len)
    w0 = first.decode(memory, batch.tgt_in, need_attention=True)[1]
    w1 = last.decode(memory, batch.tgt_in, need_attention=True)[1]
    assert not torch.allclose(w0, w1)
    with pytest.raises(ValueError, match="attention_layer"):
        TransformerSeq2Seq(SRC_V, TGT_V, cfg, attention_layer=2)


@NORMS
def test_padding_and_batch_do_not_change_a_sentence(norm):
    model, batch = make_model(norm), make_batch()
    logits = model(batch.src, batch.src_len, batch.tgt_in)
    extra = torch.cat([batch.src, torch.full((4, 3), PAD)], dim=1)
    torch.testing.assert_close(model(extra, batch.src_len, batch.tgt_in), logits, atol=1e-5, rtol=0)
    for i in range(4):
        n = int(batch.src_len[i])
        alone = model(batch.src[i : i + 1, :n], batch.src_len[i : i + 1], batch.tgt_in[i : i + 1])
        torch.testing.assert_close(alone[0], logits[i], atol=1e-5, rtol=0)


def test_reorder_selects_rows():
    model, batch = make_model(), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    _, state, _ = model.decode_step(memory, model.init_state(memory), batch.tgt_in[:, 0])
    idx = torch.tensor([3, 0, 0, 2])
    logits, _, _ = model.decode_step(memory, state, batch.tgt_in[:, 1])
    picked, _, _ = model.decode_step(
        model.reorder_memory(memory, idx), model.reorder_state(state, idx), batch.tgt_in[idx, 1]
    )
    torch.testing.assert_close(picked, logits[idx], atol=1e-6, rtol=0)


def test_shared_embeddings_and_tied_output():
    model = make_model(share=True, tie=True, src_v=TGT_V)
    token = model.encoder.embed.token.weight
    assert model.decoder.embed.token.weight is token and model.output.weight is token
    untied = make_model(tie=False)
    assert untied.output.weight is not untied.decoder.embed.token.weight
    assert untied.decoder.embed.token.weight is not untied.encoder.embed.token.weight
    shared_params = sum(p.numel() for p in model.parameters())
    separate = make_model(tie=False, src_v=TGT_V)
    assert sum(p.numel() for p in separate.parameters()) == shared_params + 2 * TGT_V * D
    with pytest.raises(ValueError, match="joint vocabulary"):
        make_model(share=True)


def test_loss_ignores_padding_and_label_smoothing_changes_it():
    model, batch = make_model(), make_batch()
    check_loss_ignores_padding(model, batch, label_smoothing=0.1)


def test_every_parameter_gets_a_gradient():
    model = make_model(tie=False, dropout=0.1).train()
    loss, _ = model.loss(make_batch())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
