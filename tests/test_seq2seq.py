"""RNN encoder–decoder: shapes, teacher forcing vs step-by-step, padding, batching, loss."""

import pytest
import torch
import torch.nn.functional as F

from seqlab.config import Seq2SeqConfig
from seqlab.data.translation_batching import PAD
from seqlab.models.seq2seq import Seq2Seq
from seqlab.nn.losses import masked_cross_entropy
from translation_helpers import check_loss_ignores_padding, random_translation_batch

SRC_V, TGT_V, E, H = 13, 11, 8, 12


def make_model(cell="gru", layers=2, dropout=0.0):
    cfg = Seq2SeqConfig(cell=cell, embed_dim=E, hidden_size=H, num_layers=layers, dropout=dropout)
    return Seq2Seq(SRC_V, TGT_V, cfg).eval()


def make_batch(b=4, s=7, t=6, seed=0):
    return random_translation_batch(SRC_V, TGT_V, b, s, t, seed)


CELLS = pytest.mark.parametrize("cell,layers", [("gru", 1), ("gru", 2), ("lstm", 2)])


@CELLS
def test_shapes(cell, layers):
    model, batch = make_model(cell, layers), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    assert memory.context.shape == (4, H)
    logits, attention = model.decode(memory, batch.tgt_in)
    assert logits.shape == (4, 6, TGT_V) and attention is None
    assert model(batch.src, batch.src_len, batch.tgt_in).shape == (4, 6, TGT_V)
    state = model.init_state(memory)
    step_logits, state, attention = model.decode_step(memory, state, batch.tgt_in[:, 0])
    assert step_logits.shape == (4, TGT_V) and attention is None
    h = state[0] if cell == "lstm" else state
    assert h.shape == (layers, 4, H)


@CELLS
def test_teacher_forcing_equals_step_by_step(cell, layers):
    model, batch = make_model(cell, layers), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    full, _ = model.decode(memory, batch.tgt_in)
    state, steps = model.init_state(memory), []
    for t in range(batch.tgt_in.shape[1]):
        logits, state, _ = model.decode_step(memory, state, batch.tgt_in[:, t : t + 1])
        steps.append(logits)
    torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=0)


@CELLS
def test_padding_and_batch_do_not_change_a_sentence(cell, layers):
    model, batch = make_model(cell, layers), make_batch()
    logits = model(batch.src, batch.src_len, batch.tgt_in)
    extra = torch.cat([batch.src, torch.full((4, 3), PAD)], dim=1)  # more source padding
    torch.testing.assert_close(model(extra, batch.src_len, batch.tgt_in), logits, atol=1e-6, rtol=0)
    for i in range(4):
        n = int(batch.src_len[i])
        alone = model(batch.src[i : i + 1, :n], batch.src_len[i : i + 1], batch.tgt_in[i : i + 1])
        torch.testing.assert_close(alone[0], logits[i], atol=1e-6, rtol=0)


def test_context_is_encoder_top_final_state_after_last_real_token():
    model, batch = make_model("gru", 2), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    n = int(batch.src_len[1])
    _, h = model.encoder(model.src_embed(batch.src[1:2, :n]))  # unpadded, no packing
    torch.testing.assert_close(memory.context[1], h[-1, 0], atol=1e-6, rtol=0)
    torch.testing.assert_close(model.init_state(memory)[:, 1], h[:, 0], atol=1e-6, rtol=0)


def test_reorder_selects_rows():
    model, batch = make_model("lstm", 2), make_batch()
    memory = model.encode(batch.src, batch.src_len)
    state = model.init_state(memory)
    idx = torch.tensor([2, 2, 0])
    logits, _, _ = model.decode_step(memory, state, batch.tgt_in[:, 0])
    picked, _, _ = model.decode_step(
        model.reorder_memory(memory, idx), model.reorder_state(state, idx), batch.tgt_in[idx, 0]
    )
    torch.testing.assert_close(picked, logits[idx])


def test_loss_ignores_padding_and_counts_real_tokens():
    model, batch = make_model(), make_batch()
    check_loss_ignores_padding(model, batch)


def test_masked_cross_entropy_ignores_logits_after_length():
    logits, targets = torch.randn(3, 5, 7), torch.randint(4, 7, (3, 5))  # no <pad> labels
    lengths = torch.tensor([5, 2, 3])
    loss, n = masked_cross_entropy(logits, targets, lengths)
    changed = logits.clone()
    changed[1, 2:], changed[2, 3:] = 100.0, -100.0
    torch.testing.assert_close(masked_cross_entropy(changed, targets, lengths)[0], loss)
    rows = [(b, t) for b in range(3) for t in range(int(lengths[b]))]
    expected = torch.stack([F.cross_entropy(logits[b, t], targets[b, t]) for b, t in rows]).mean()
    torch.testing.assert_close(loss, expected)
    assert n == 10


def test_label_smoothing_mixes_in_the_uniform_distribution():
    logits, targets = torch.randn(2, 4, 9), torch.randint(4, 9, (2, 4))  # no <pad> labels
    lengths = torch.tensor([4, 3])
    eps = 0.1
    smoothed, _ = masked_cross_entropy(logits, targets, lengths, eps)
    nll, _ = masked_cross_entropy(logits, targets, lengths)
    logp = logits.log_softmax(-1)
    valid = torch.arange(4)[None, :] < lengths[:, None]
    uniform = -logp.mean(-1)[valid].mean()  # cross-entropy against the uniform distribution
    torch.testing.assert_close(smoothed, (1 - eps) * nll + eps * uniform)


def test_model_loss_with_label_smoothing():
    model, batch = make_model(), make_batch()
    loss, _ = model.loss(batch)
    logp = model(batch.src, batch.src_len, batch.tgt_in).log_softmax(-1)
    valid = torch.arange(6)[None, :] < batch.tgt_len[:, None]
    uniform = -logp.mean(-1)[valid].mean()
    torch.testing.assert_close(model.loss(batch, 0.1)[0], 0.9 * loss + 0.1 * uniform)


def test_every_parameter_gets_a_gradient():
    model = make_model("lstm", 2, dropout=0.1).train()
    loss, _ = model.loss(make_batch())
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
