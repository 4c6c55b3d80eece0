"""The encoder–decoder contract, checked on every translation model variant.

Every model derives ``decode``, ``decode_step``, ``forward`` and ``loss`` from the same base class
(:class:`seqlab.models.encoder_decoder.EncoderDecoder`); these tests pin down what search and
training rely on: shapes, teacher forcing = step by step, padding and batching invariance,
row reordering, a padding-free loss with label smoothing, gradients everywhere.
"""

import pytest
import torch

from conftest import (
    ENCODER_DECODERS,
    SRC_V,
    TGT_V,
    make_encoder_decoder,
    random_translation_batch,
)
from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.data.translation_batching import Batch
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.tokens import PAD

VARIANTS = pytest.mark.parametrize("name", list(ENCODER_DECODERS))
B, S, T = 4, 7, 6


@VARIANTS
def test_shapes_and_attention(name):
    model, batch = make_encoder_decoder(name), random_translation_batch()
    assert isinstance(model, EncoderDecoder)
    memory = model.encode(batch.src, batch.src_lengths)
    logits, weights = model.decode(memory, batch.tgt_in, need_weights=True)
    assert logits.shape == (B, T, TGT_V)
    assert model(batch.src, batch.src_lengths, batch.tgt_in).shape == (B, T, TGT_V)
    step, _, step_weights = model.decode_step(
        memory, model.init_state(memory), batch.tgt_in[:, 0], need_weights=True
    )
    assert step.shape == (B, TGT_V)
    if not model.has_attention:
        assert weights is None and step_weights is None
        return
    assert weights.shape == (B, T, S) and step_weights.shape == (B, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, T))  # a distribution ...
    pad = torch.arange(S)[None, None, :] >= batch.src_lengths[:, None, None]
    assert pad.any() and (weights[pad.expand_as(weights)] == 0).all()  # ... over real positions
    assert model.decode(memory, batch.tgt_in)[1] is None  # only when asked for


@pytest.mark.parametrize("precision", PRECISIONS)
@VARIANTS
def test_teacher_forcing_equals_step_by_step(name, precision):
    model, batch = make_encoder_decoder(name), random_translation_batch()
    with computing_in(precision):
        memory = model.encode(batch.src, batch.src_lengths)
        full, full_weights = model.decode(memory, batch.tgt_in, need_weights=True)
        state, steps, weights = model.init_state(memory), [], []
        for t in range(T):
            logits, state, w = model.decode_step(
                memory, state, batch.tgt_in[:, t], need_weights=True
            )
            steps.append(logits)
            weights.append(w)
    assert_close_in(precision, torch.stack(steps, dim=1), full)
    if model.has_attention:
        assert_close_in(precision, torch.stack(weights, dim=1), full_weights, atol=1e-6)


@pytest.mark.parametrize("precision", PRECISIONS)
@VARIANTS
def test_padding_and_batch_do_not_change_a_sentence(name, precision):
    model, batch = make_encoder_decoder(name), random_translation_batch()
    with computing_in(precision):
        logits = model(batch.src, batch.src_lengths, batch.tgt_in)
        extra = torch.cat([batch.src, torch.full((B, 3), PAD)], dim=1)  # more source padding
        assert_close_in(precision, model(extra, batch.src_lengths, batch.tgt_in), logits)
        for i in range(B):
            n = int(batch.src_lengths[i])
            src, src_lengths = batch.src[i : i + 1, :n], batch.src_lengths[i : i + 1]
            alone = model(src, src_lengths, batch.tgt_in[i : i + 1])
            assert_close_in(precision, alone[0], logits[i])


@VARIANTS
def test_attention_maps_are_the_teacher_forced_pass_with_every_weight(name):
    model, batch = make_encoder_decoder(name), random_translation_batch()
    maps = model.attention_maps(batch.src, batch.src_lengths, batch.tgt_in)
    memory = model.encode(batch.src, batch.src_lengths)
    logits, alignment = model.decode(memory, batch.tgt_in, need_weights=True)
    torch.testing.assert_close(maps.logits, logits, atol=1e-5, rtol=0)
    if alignment is None:
        assert maps.alignment is None
    else:
        torch.testing.assert_close(maps.alignment, alignment, atol=1e-6, rtol=0)
    assert tuple(maps.layers) == model.attention_layers
    for kind, (rows, cols) in {"encoder": (S, S), "decoder": (T, T), "cross": (T, S)}.items():
        for w in maps.layers.get(kind, []):
            assert w.shape == (B, model.cfg.num_heads, rows, cols)
            torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    if "cross" in maps.layers:  # the alignment is one layer's cross-attention, heads averaged
        cross = maps.layers["cross"][model.attention_layer].mean(1)
        torch.testing.assert_close(maps.alignment, cross)
        assert len(maps.layers["encoder"]) == model.cfg.encoder_layers
        causal = maps.layers["decoder"][0].triu(diagonal=1)
        assert causal.abs().max() == 0


@VARIANTS
def test_reorder_selects_rows(name):
    model, batch = make_encoder_decoder(name), random_translation_batch()
    memory = model.encode(batch.src, batch.src_lengths)
    _, state, _ = model.decode_step(memory, model.init_state(memory), batch.tgt_in[:, 0])
    idx = torch.tensor([3, 0, 0, 2])  # select, repeat, permute
    logits, _, _ = model.decode_step(memory, state, batch.tgt_in[:, 1])
    picked, _, _ = model.decode_step(
        model.reorder_memory(memory, idx), model.reorder_state(state, idx), batch.tgt_in[idx, 1]
    )
    torch.testing.assert_close(picked, logits[idx], atol=1e-6, rtol=0)


@VARIANTS
def test_loss_ignores_padding_and_smooths_labels(name):
    """``loss`` counts the real target tokens, ignores whatever follows each target's end
    (decoder inputs and labels), and with label smoothing ε equals (1 - ε) · cross-entropy +
    ε · mean over the vocabulary of -log p."""
    model, batch = make_encoder_decoder(name), random_translation_batch()
    loss, num_tokens = model.loss(batch)
    assert num_tokens == int(batch.tgt_lengths.sum())
    pad = torch.arange(T)[None, :] >= batch.tgt_lengths[:, None]  # (B, T)
    assert pad.any()
    noisy = Batch(
        batch.src,
        batch.src_lengths,
        batch.tgt_in.masked_fill(pad, 7),  # decoder inputs after the end
        batch.tgt_out.masked_fill(pad, 5),  # labels after the end
        batch.tgt_lengths,
        batch.indices,
    )
    torch.testing.assert_close(model.loss(noisy)[0], loss)
    logp = model(batch.src, batch.src_lengths, batch.tgt_in).log_softmax(-1)  # (B, T, V)
    nll = -logp.gather(-1, batch.tgt_out.clamp(max=TGT_V - 1)[..., None])[..., 0][~pad].mean()
    torch.testing.assert_close(loss, nll)
    uniform = -logp.mean(-1)[~pad].mean()
    eps = 0.1
    torch.testing.assert_close(model.loss(batch, eps)[0], (1 - eps) * loss + eps * uniform)


@VARIANTS
def test_every_parameter_gets_a_gradient(name):
    model = make_encoder_decoder(name, dropout=0.1).train()
    loss, _ = model.loss(random_translation_batch(SRC_V, TGT_V))
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    assert not missing
