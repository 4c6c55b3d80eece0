"""Bahdanau attention model: the paper's equations, alignments, cached vs full decoding, padding."""

import pytest
import torch
from torch import nn

from seqlab.config import BahdanauConfig
from seqlab.data.translation_batching import PAD
from seqlab.models.bahdanau import Bahdanau
from translation_helpers import check_loss_ignores_padding, random_translation_batch

SRC_V, TGT_V, E, H = 13, 11, 8, 12


def make_model(layers=1, dropout=0.0):
    cfg = BahdanauConfig(embed_dim=E, hidden_size=H, num_layers=layers, dropout=dropout)
    return Bahdanau(SRC_V, TGT_V, cfg).eval()


def make_batch(b=4, s=7, t=6, seed=0):
    return random_translation_batch(SRC_V, TGT_V, b, s, t, seed)


LAYERS = pytest.mark.parametrize("layers", [1, 2])


@LAYERS
def test_shapes(layers):
    model, batch = make_model(layers), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    assert memory.annotations.shape == (4, 7, 2 * H)
    assert memory.keys.shape == (4, 7, H) and memory.mask.shape == (4, 7)
    assert memory.backward_final.shape == (layers, 4, H)
    logits, weights = model.decode(memory, batch.tgt_in, need_attention=True)
    assert logits.shape == (4, 6, TGT_V) and weights.shape == (4, 6, 7)
    assert model.decode(memory, batch.tgt_in)[1] is None
    state = model.init_state(memory)
    assert state.shape == (layers, 4, H)
    step, state, alpha = model.decode_step(memory, state, batch.tgt_in[:, 0], need_attention=True)
    assert step.shape == (4, TGT_V) and state.shape == (layers, 4, H) and alpha.shape == (4, 7)


@LAYERS
def test_teacher_forcing_equals_step_by_step(layers):
    model, batch = make_model(layers), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    full, full_alpha = model.decode(memory, batch.tgt_in, need_attention=True)
    state, steps, alphas = model.init_state(memory), [], []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, alpha = model.decode_step(
            memory, state, batch.tgt_in[:, t], need_attention=True
        )
        steps.append(logits)
        alphas.append(alpha)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.stack(alphas, dim=1), full_alpha, atol=1e-6, rtol=0)


def test_alignments_sum_to_one_and_are_zero_on_padding():
    model, batch = make_model(), make_batch()
    _, alpha = model.decode(
        model.encode(batch.src, batch.src_len), batch.tgt_in, need_attention=True
    )
    torch.testing.assert_close(alpha.sum(-1), torch.ones(4, 6))
    pad = torch.arange(7)[None, None, :] >= batch.src_len[:, None, None]  # (B, 1, S)
    assert pad.any() and (alpha.masked_select(pad.expand_as(alpha)) == 0).all()
    assert (alpha.masked_select(~pad.expand_as(alpha)) > 0).all()


def test_annotations_are_both_directions_and_s0_is_tanh_ws_backward_h1():
    """h_j = [→h_j; ←h_j] (§3.2), s_0 = tanh(W_s ←h_1) (appendix A.2.2), keys = U h_j."""
    model, batch = make_model(), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    i, n = 1, int(batch.src_len[1])
    out, h_n = model.encoder(model.src_embed(batch.src[i : i + 1, :n]))  # unpadded
    torch.testing.assert_close(memory.annotations[i, :n], out[0], atol=1e-6, rtol=0)
    assert (memory.annotations[i, n:] == 0).all()
    backward_h1 = out[0, 0, H:]
    torch.testing.assert_close(h_n[1, 0], backward_h1)
    s0 = torch.tanh(model.init_proj[0](backward_h1))
    torch.testing.assert_close(model.init_state(memory)[0, i], s0, atol=1e-6, rtol=0)
    torch.testing.assert_close(memory.keys, model.attention.w_k(memory.annotations))


def test_alignment_scores_the_previous_state():
    """e_1j = vᵀ tanh(W s_0 + U h_j): the first alignment uses the initial state (eq. 6)."""
    model, batch = make_model(), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    s0 = model.init_state(memory)[0]
    _, _, alpha = model.decode_step(
        memory, model.init_state(memory), batch.tgt_in[:, 0], need_attention=True
    )
    h = memory.annotations
    _, expected = model.attention(s0[:, None], h, h, memory.mask[:, None], need_weights=True)
    torch.testing.assert_close(alpha, expected[:, 0])


def test_decoder_step_is_a_gru_cell_on_embedding_and_context():
    """s_i = GRU([E y_{i-1}; c_i], s_{i-1}) with nn.GRUCell's equations."""
    model = make_model()
    cell = nn.GRUCell(E + 2 * H, H)
    with torch.no_grad():
        cell.weight_ih.copy_(torch.cat([model.gru_y.weight, model.gru_c.weight], dim=1))
        cell.bias_ih.copy_(model.gru_y.bias)
        cell.weight_hh.copy_(model.gru_s.weight)
        cell.bias_hh.copy_(model.gru_s.bias)
    y, c, s = torch.randn(3, E), torch.randn(3, 2 * H), torch.randn(3, H)
    ours = model._gru_step(model.gru_y(y) + model.gru_c(c), s)
    torch.testing.assert_close(ours, cell(torch.cat([y, c], dim=1), s))


@LAYERS
def test_padding_and_batch_do_not_change_a_sentence(layers):
    model, batch = make_model(layers), make_batch()
    logits = model(batch.src, batch.src_len, batch.tgt_in)
    extra = torch.cat([batch.src, torch.full((4, 3), PAD)], dim=1)
    torch.testing.assert_close(model(extra, batch.src_len, batch.tgt_in), logits, atol=1e-6, rtol=0)
    for i in range(4):
        n = int(batch.src_len[i])
        alone = model(batch.src[i : i + 1, :n], batch.src_len[i : i + 1], batch.tgt_in[i : i + 1])
        torch.testing.assert_close(alone[0], logits[i], atol=1e-6, rtol=0)


def test_reorder_selects_rows():
    model, batch = make_model(2), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    state = model.init_state(memory)
    idx = torch.tensor([3, 1, 1])
    logits, _, alpha = model.decode_step(memory, state, batch.tgt_in[:, 0], need_attention=True)
    picked, _, picked_alpha = model.decode_step(
        model.reorder_memory(memory, idx),
        model.reorder_state(state, idx),
        batch.tgt_in[idx, 0],
        need_attention=True,
    )
    torch.testing.assert_close(picked, logits[idx])
    torch.testing.assert_close(picked_alpha, alpha[idx])


def test_loss_ignores_padding_and_label_smoothing_changes_it():
    model, batch = make_model(), make_batch()
    check_loss_ignores_padding(model, batch, label_smoothing=0.2)


@LAYERS
def test_every_parameter_gets_a_gradient(layers):
    model = make_model(layers, dropout=0.1).train()
    loss, _ = model.loss(make_batch())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
