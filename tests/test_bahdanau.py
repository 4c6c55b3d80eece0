"""Bahdanau attention model: the paper's equations (the shared contract is in
test_encoder_decoder.py)."""

import pytest
import torch
from torch import nn

from conftest import random_translation_batch
from seqlab.config import BahdanauConfig
from seqlab.models import build_model
from seqlab.models.bahdanau import Bahdanau
from seqlab.nn.attention import masked_softmax

SRC_V, TGT_V, E, H = 13, 11, 8, 12


def make_model(layers=1, dropout=0.0):
    cfg = BahdanauConfig(embed_dim=E, hidden_size=H, num_layers=layers, dropout=dropout)
    return Bahdanau(SRC_V, TGT_V, cfg).eval()


def make_batch(b=4, s=7, t=6, seed=0):
    return random_translation_batch(SRC_V, TGT_V, b, s, t, seed)


LAYERS = pytest.mark.parametrize("layers", [1, 2])


def test_annotations_are_both_directions_and_s0_is_tanh_ws_backward_h1():
    """h_j = [→h_j; ←h_j] (§3.2), s_0 = tanh(W_s ←h_1) (appendix A.2.2), keys = U h_j."""
    model, batch = make_model(), make_batch()
    memory = model.encode(batch.src, batch.src_lengths)
    i, n = 1, int(batch.src_lengths[1])
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
    memory = model.encode(batch.src, batch.src_lengths)
    s0 = model.init_state(memory)[0]
    _, _, alpha = model.decode_step(
        memory, model.init_state(memory), batch.tgt_in[:, 0], need_weights=True
    )
    h = memory.annotations  # (B, S, 2H)
    att = model.attention
    scores = att.w_v(torch.tanh(att.w_q(s0)[:, None] + att.w_k(h))).squeeze(-1)  # (B, S)
    expected = masked_softmax(scores, memory.mask)
    torch.testing.assert_close(alpha, expected)


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


def test_linear_decoder_starts_from_the_encoder_and_queries_with_the_previous_top_state():
    """d2l.ai §11.4: s_0 = the encoder's final states; the query of step i is the
    previous top-layer decoder state s_{i-1}^{(L)}; keys = values = encoder outputs."""
    from seqlab.nn.attention_scores import attention_pool

    cfg = BahdanauConfig(embed_dim=6, hidden_size=8, num_layers=2, decoder="linear", dropout=0.0)
    model = build_model(cfg, src_vocab_size=11, tgt_vocab_size=9).eval()
    src = torch.randint(4, 11, (3, 5))
    src_lengths = torch.tensor([5, 3, 4])
    tokens = torch.randint(4, 9, (3, 4))
    with torch.no_grad():
        memory = model.encode(src, src_lengths)
        _, final = model.encoder(model.src_embed(src[:1, :5]))
        torch.testing.assert_close(memory.final[:, :1], final)  # unpadded row: plain GRU
        state = model.init_state(memory)
        torch.testing.assert_close(state, memory.final)
        _, _, weights = model.run_decoder(memory, tokens, state, need_weights=True)
        expected = []
        s = state
        for i in range(tokens.shape[1]):
            _, alpha = attention_pool(
                model.attention, s[-1], memory.keys, memory.annotations, memory.mask
            )
            expected.append(alpha)
            _, s, _ = model.run_decoder(memory, tokens[:, i : i + 1], s, need_weights=False)
        torch.testing.assert_close(weights, torch.stack(expected, dim=1))
    assert memory.annotations.shape == (3, 5, 8)  # one direction: keys of size H


def test_linear_decoder_scores_additively_by_default_as_d2l():
    """d2l.ai §11.4's decoder uses §11.3's additive attention, w_vᵀ tanh(W_q q + W_k k) with
    W_q, W_k of size H × H and no biases: the default of ``decoder: linear`` (page 7's
    "d2l.ai §11.4" model), adding 2H² + H weights to the attention-free decoder's."""
    from seqlab.nn.attention_scores import AdditiveScore

    cfg = BahdanauConfig(embed_dim=E, hidden_size=H, decoder="linear", dropout=0.0)
    assert cfg.attention == "additive"
    model = build_model(cfg, src_vocab_size=SRC_V, tgt_vocab_size=TGT_V).eval()
    score = model.attention
    assert isinstance(score, AdditiveScore)
    shapes = {name: tuple(p.shape) for name, p in score.named_parameters()}
    assert shapes == {"w_q.weight": (H, H), "w_k.weight": (H, H), "w_v.weight": (1, H)}
    batch = make_batch()
    with torch.no_grad():
        memory = model.encode(batch.src, batch.src_lengths)
        state = model.init_state(memory)
        _, _, weights = model.run_decoder(memory, batch.tgt_in[:, :1], state, need_weights=True)
        q, k = state[-1], memory.annotations  # (B, H), (B, S, H)
        scores = (torch.tanh(q[:, None] @ score.w_q.weight.T + k @ score.w_k.weight.T)) @ (
            score.w_v.weight[0]
        )  # (B, S)
    expected = masked_softmax(scores[:, None], memory.mask[:, None])[:, 0]  # (B, S)
    torch.testing.assert_close(weights[:, 0], expected, atol=1e-6, rtol=0)
