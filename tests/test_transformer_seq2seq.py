"""Transformer encoder–decoder specifics: fused vs cached decoding, attention layers, sharing and
tying (the shared contract is in test_encoder_decoder.py)."""

import pytest
import torch

from conftest import random_translation_batch
from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.config import TransformerConfig
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.dropout import Dropout

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
    memory = model.encode(batch.src, batch.src_lengths)
    assert len(memory.cross_kv) == 2 and memory.cross_kv[0].key.shape == (4, HEADS, 7, D // HEADS)
    assert memory.mask.shape == (4, 1, 7)
    logits, weights = model.decode(memory, batch.tgt_in, need_weights=True)
    assert logits.shape == (4, 6, TGT_V) and weights.shape == (4, 6, 7)
    assert model.decode(memory, batch.tgt_in)[1] is None
    state = model.init_state(memory)
    assert state.length == 0
    step, state, weights = model.decode_step(memory, state, batch.tgt_in[:, 0], need_weights=True)
    assert step.shape == (4, TGT_V) and weights.shape == (4, 7) and state.length == 1
    assert model.max_decode_len == 32


@NORMS
@pytest.mark.parametrize("precision", PRECISIONS)
def test_fused_teacher_forcing_equals_explicit_and_cached(norm, precision):
    model, batch = make_model(norm), make_batch()
    with computing_in(precision):
        memory = model.encode(batch.src, batch.src_lengths)
        full, full_weights = model.decode(memory, batch.tgt_in, need_weights=True)
        fused, _ = model.decode(memory, batch.tgt_in)  # fused attention kernels
        state, steps, weights = model.init_state(memory), [], []
        for t in range(batch.tgt_in.shape[1]):
            logits, state, w = model.decode_step(
                memory, state, batch.tgt_in[:, t], need_weights=True
            )
            steps.append(logits)
            weights.append(w)
    assert_close_in(precision, torch.stack(steps, dim=1), full)
    assert_close_in(precision, fused, full)
    assert_close_in(precision, torch.stack(weights, dim=1), full_weights, atol=1e-6)
    assert state.length == 6


def test_attention_layer_picks_a_layer():
    cfg = make_model().cfg
    batch = make_batch()
    first = TransformerSeq2Seq(SRC_V, TGT_V, cfg, attention_layer=0).eval()
    last = TransformerSeq2Seq(SRC_V, TGT_V, cfg).eval()
    last.load_state_dict(first.state_dict())
    memory = first.encode(batch.src, batch.src_lengths)
    w0 = first.decode(memory, batch.tgt_in, need_weights=True)[1]
    w1 = last.decode(memory, batch.tgt_in, need_weights=True)[1]
    assert not torch.allclose(w0, w1)
    with pytest.raises(ValueError, match="attention_layer"):
        TransformerSeq2Seq(SRC_V, TGT_V, cfg, attention_layer=2)


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


def _train_logits(model, batch, seed):
    torch.manual_seed(seed)
    memory = model.encode(batch.src, batch.src_lengths)
    return model.decode(memory, batch.tgt_in)[0]  # (B, T, V)


def test_attention_dropout_is_separate_from_the_residual_dropout():
    """``attention_dropout`` drops attention weights only; unset, it follows ``dropout``."""
    batch = make_batch()
    cfg = dict(d_model=D, num_heads=HEADS, encoder_layers=2, decoder_layers=2, d_ff=32)
    following = TransformerSeq2Seq(SRC_V, TGT_V, TransformerConfig(**cfg, dropout=0.3))
    attentions = [b.self_attn for b in following.encoder.blocks] + [
        a for b in following.decoder.blocks for a in (b.self_attn, b.cross_attn)
    ]
    assert [a.dropout for a in attentions] == [0.3] * 6
    literature = TransformerSeq2Seq(
        SRC_V, TGT_V, TransformerConfig(**cfg, dropout=0.3, attention_dropout=0.0)
    )
    blocks = [*literature.encoder.blocks, *literature.decoder.blocks]
    assert {b.self_attn.dropout for b in blocks} == {0.0}
    assert {b.cross_attn.dropout for b in literature.decoder.blocks} == {0.0}
    assert {b.addnorm1.dropout.p for b in blocks} == {0.3}

    # behaviour in training mode: only the attention weights are dropped, so with no residual
    # dropout the forward pass is random exactly when attention_dropout > 0
    torch.manual_seed(0)
    none = TransformerSeq2Seq(
        SRC_V, TGT_V, TransformerConfig(**cfg, dropout=0.0, attention_dropout=0.0)
    ).train()
    with torch.no_grad():
        first, second = _train_logits(none, batch, 1), _train_logits(none, batch, 2)
        torch.testing.assert_close(first, second, rtol=0, atol=0)
        torch.testing.assert_close(first, _train_logits(none.eval(), batch, 3))
        attn_only = TransformerSeq2Seq(
            SRC_V, TGT_V, TransformerConfig(**cfg, dropout=0.0, attention_dropout=0.5)
        )
        attn_only.load_state_dict(none.state_dict())
        attn_only.train()
        assert not torch.allclose(_train_logits(attn_only, batch, 1), first)
        torch.testing.assert_close(_train_logits(attn_only.eval(), batch, 1), first)


def test_attention_dropout_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="attention_dropout"):
        TransformerConfig(attention_dropout=1.0)


def test_every_transformer_model_passes_attention_dropout_to_its_attention_only():
    from seqlab.models.transformer_classifier import (
        TransformerClassifier,
        TransformerClassifierConfig,
    )
    from seqlab.models.transformer_lm import TransformerLanguageModel, TransformerLMConfig
    from seqlab.models.vit import VisionTransformer, ViTConfig

    small = dict(d_model=16, num_heads=2, d_ff=32, dropout=0.2, attention_dropout=0.05)
    models = [
        TransformerLanguageModel(20, TransformerLMConfig(num_layers=1, **small)),
        TransformerClassifier(20, 3, TransformerClassifierConfig(num_layers=1, **small)),
        VisionTransformer(10, ViTConfig(num_layers=1, image_size=8, patch_size=4, **small)),
    ]
    for model in models:
        attention = [m.dropout for m in model.modules() if isinstance(m, MultiHeadAttention)]
        residual = [m.p for m in model.modules() if isinstance(m, Dropout)]
        assert attention and set(attention) == {0.05}, type(model).__name__
        assert residual and set(residual) == {0.2}, type(model).__name__
