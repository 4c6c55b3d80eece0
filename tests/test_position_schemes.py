"""Every ``model.positions`` scheme (and linear attention) in the three Transformer models:
incremental decoding equals the full pass, search equals recomputing, padding changes nothing;
the relative schemes' rotation and biases; the configuration's refusals.

The functions of :mod:`seqlab.nn.relative_positions` are tested in test_relative_positions.py.
"""

import pytest
import torch

from devices import DEVICES
from precision_helpers import (
    PRECISIONS,
    SCORE_TOL,
    assert_close_in,
    assert_same_outputs,
    computing_in,
)
from seqlab import catalog, deprecation
from seqlab.config import (
    TransformerClassifierConfig,
    TransformerConfig,
    TransformerLMConfig,
    config_from_dict,
)
from seqlab.data.translation_batching import pad_sequences
from seqlab.deprecation import SeqlabDeprecationWarning
from seqlab.errors import ConfigError
from seqlab.models.language_model import generate
from seqlab.models.search import beam_search, greedy_search
from seqlab.models.transformer_classifier import TransformerClassifier
from seqlab.models.transformer_lm import TransformerLanguageModel
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq
from seqlab.nn.attention import MultiHeadAttention, padding_mask, scaled_dot_product_attention
from seqlab.nn.attention_positions import RelativePositions
from seqlab.nn.linear_attention import LinearAttentionState
from seqlab.nn.relative_positions import rotate, t5_buckets
from seqlab.tokens import BOS, EOS

V = 13
SCHEMES = list(catalog.positions())
#: (positions, attention) of a decoder: every scheme with softmax, the allowed ones with linear
LM_CASES = [(p, "softmax") for p in SCHEMES] + [
    (p, "linear") for p, spec in catalog.positions().items() if spec.linear_attention
]
#: an encoder–decoder or an encoder refuses ``none`` (bidirectional attention)
ENCODER_SCHEMES = [p for p, spec in catalog.positions().items() if not spec.causal_only]
SEQ2SEQ_CASES = [(p, "softmax") for p in ENCODER_SCHEMES] + [
    (p, "linear") for p in ENCODER_SCHEMES if catalog.positions()[p].linear_attention
]


def _ids(cases):
    return [f"{p}-{a}" for p, a in cases]


def test_the_cases_cover_every_scheme():
    assert set(SCHEMES) == {"sinusoidal", "learned", "rope", "alibi", "t5_bias", "none"}
    assert ("none", "linear") in LM_CASES and ("sinusoidal", "linear") in LM_CASES
    assert "none" not in ENCODER_SCHEMES and ("rope", "linear") not in SEQ2SEQ_CASES


def _nonzero_t5_tables(model):
    """T5's tables start at zero (no bias): random entries, or a bug would hide."""
    g = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, RelativePositions) and module.kind == "t5_bias":
            with torch.no_grad():
                module.bias_table.weight.copy_(
                    torch.randn(module.bias_table.weight.shape, generator=g)
                )


# ------------------------------------------------------------------------------ language model
def _lm(positions, attention, max_len=24):
    torch.manual_seed(0)
    cfg = TransformerLMConfig(
        d_model=16,
        num_heads=2,
        num_layers=2,
        d_ff=32,
        max_len=max_len,
        positions=positions,
        attention=attention,
    )
    model = TransformerLanguageModel(V, cfg).eval()
    _nonzero_t5_tables(model)
    return model


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions,attention", LM_CASES, ids=_ids(LM_CASES))
def test_lm_cached_decoding_equals_the_full_pass(positions, attention, precision, device):
    """A prefix then token by token, and chunks of 3 and 4: the logits of one causal pass."""
    model = _lm(positions, attention).to(device)
    tokens = torch.randint(V, (2, 11), generator=torch.Generator().manual_seed(2)).to(device)
    with computing_in(precision, device):
        full, none = model(tokens)
        assert none is None
        for cuts in ([0, 4, *range(5, 12)], [0, 3, 7, 11]):
            cache, pieces = model.init_cache(2), []
            for a, b in zip(cuts, cuts[1:], strict=False):
                logits, cache = model(tokens[:, a:b], cache)
                pieces.append(logits)
            assert cache.length == 11
            assert_close_in(precision, torch.cat(pieces, 1), full)
    linear = all(isinstance(s, LinearAttentionState) for s in cache.self_kv)
    assert linear == (attention == "linear")


def _generate_by_recomputing(model, prefix, num_tokens):
    """The uncached reference: the model re-run at every step on the last ``context_size``
    tokens (all of them when the context is unbounded)."""
    window = model.context_size
    tokens = prefix
    for _ in range(num_tokens):
        logits, _ = model(tokens if window is None else tokens[:, -window:])
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("positions,attention", LM_CASES, ids=_ids(LM_CASES))
def test_lm_greedy_generation_with_the_cache_equals_recomputing(positions, attention, device):
    """Also past max_len = 24 (20 + 15 tokens): a window is re-read, except with linear
    attention without a learned table, whose context is unbounded."""
    model = _lm(positions, attention).to(device)
    unbounded = attention == "linear" and positions != "learned"
    assert model.context_size == (None if unbounded else 24)
    g = torch.Generator().manual_seed(3)
    for prefix_len, num_tokens in ((5, 12), (20, 15)):
        prefix = torch.randint(V, (2, prefix_len), generator=g).to(device)
        cached = generate(model, prefix, num_tokens)
        expected = _generate_by_recomputing(model, prefix, num_tokens)
        assert torch.equal(torch.cat([prefix, cached], 1), expected)


def test_linear_attention_reads_on_past_max_len_with_a_fixed_state():
    """Unbounded context: generation past max_len continues the state (each token sees the
    whole sequence), where a softmax model re-reads its last window."""
    prefix = torch.randint(V, (1, 20), generator=torch.Generator().manual_seed(4))
    linear, softmax = _lm("none", "linear"), _lm("none", "softmax")
    out = generate(linear, prefix, 15)
    with torch.no_grad():
        whole = linear(torch.cat([prefix, out[:, :-1]], 1))[0][:, -1]  # 34 tokens at once
        window = linear(torch.cat([prefix, out[:, :-1]], 1)[:, -24:])[0][:, -1]
    assert whole.argmax(-1).item() == out[0, -1].item()
    assert not torch.allclose(whole, window)  # the first 10 tokens still count
    assert softmax.context_size == 24


# -------------------------------------------------------------------------- encoder–decoder
def _seq2seq(positions, attention):
    torch.manual_seed(0)
    cfg = TransformerConfig(
        d_model=16,
        num_heads=2,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=32,
        positions=positions,
        attention=attention,
    )
    model = TransformerSeq2Seq(V, V, cfg).eval()
    _nonzero_t5_tables(model)
    return model


def _sources(n=3, seed=5, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    lengths = [7, 4, 2, 6, 5][:n]
    ids = [torch.randint(4, V, (k - 1,), generator=g).tolist() + [EOS] for k in lengths]
    src, src_lengths = pad_sequences(ids)
    return ids, src.to(device), src_lengths.to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions,attention", SEQ2SEQ_CASES, ids=_ids(SEQ2SEQ_CASES))
def test_seq2seq_cached_decoding_equals_teacher_forcing(positions, attention, precision, device):
    """Step by step through the state = one teacher-forced pass = the decoder without a cache
    (the fused causal path), for padded sources of different lengths."""
    model = _seq2seq(positions, attention).to(device)
    _, src, src_lengths = _sources(device=device)
    tgt_in = torch.cat(
        [torch.full((3, 1), BOS), torch.randint(4, V, (3, 6), generator=torch.Generator())], 1
    ).to(device)
    with computing_in(precision, device):
        forced = model(src, src_lengths, tgt_in)  # (B, T, V)
        hidden, _ = model.encoder(src, src_lengths)
        uncached = model.output(model.decoder(tgt_in, hidden, src_lengths).hidden)
        memory = model.encode(src, src_lengths)
        state, steps = model.init_state(memory), []
        for t in range(tgt_in.shape[1]):
            logits, state, _ = model.decode_step(memory, state, tgt_in[:, t])
            steps.append(logits)
        assert state.length == tgt_in.shape[1]
        assert_close_in(precision, torch.stack(steps, 1), forced)
        assert_close_in(precision, uncached, forced)


LIMITS = {"max_len_a": 0.0, "max_len_b": 8}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions,attention", SEQ2SEQ_CASES, ids=_ids(SEQ2SEQ_CASES))
def test_seq2seq_greedy_equals_beam_one_and_recomputing(positions, attention, precision, device):
    model = _seq2seq(positions, attention).to(device)
    _, src, src_lengths = _sources(device=device)
    with computing_in(precision, device):
        greedy = greedy_search(model, src, src_lengths, **LIMITS)
        beam = beam_search(model, src, src_lengths, beam_size=1, length_penalty=0.0, **LIMITS)
        recomputed = greedy_search(model, src, src_lengths, use_cache=False, **LIMITS)
    for g, (b,), r in zip(greedy, beam, recomputed, strict=True):
        assert g.tokens == b.tokens
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-5)
        if precision == "fp32":  # the recomputing path has other shapes: bf16 may round apart
            assert g.tokens == r.tokens
            assert g.log_prob == pytest.approx(r.log_prob, abs=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("positions,attention", SEQ2SEQ_CASES, ids=_ids(SEQ2SEQ_CASES))
def test_seq2seq_beam_reorders_the_states(positions, attention, device):
    """Beam 3 reorders the states (``index_select``) at every step: it equals beam 3 that
    recomputes each prefix, and a model built the same way decodes the same."""
    model = _seq2seq(positions, attention).to(device)
    again = _seq2seq(positions, attention).to(device)
    _, src, src_lengths = _sources(device=device)
    kwargs = {"beam_size": 3, "nbest": 3, **LIMITS}
    cached = beam_search(model, src, src_lengths, **kwargs)
    recomputed = beam_search(model, src, src_lengths, use_cache=False, **kwargs)
    rebuilt = beam_search(again, src, src_lengths, **kwargs)
    for a, b, c in zip(cached, recomputed, rebuilt, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b] == [h.tokens for h in c]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
        assert [h.score for h in a] == [h.score for h in c]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions,attention", SEQ2SEQ_CASES, ids=_ids(SEQ2SEQ_CASES))
def test_seq2seq_a_batch_of_two_decodes_as_each_sentence_alone(
    positions, attention, precision, device
):
    model = _seq2seq(positions, attention).to(device)
    ids, src, src_lengths = _sources(2, device=device)
    kwargs = {"beam_size": 3, "nbest": 3, **LIMITS}
    with computing_in(precision, device):
        together = beam_search(model, src, src_lengths, **kwargs)
        alone = [
            beam_search(
                model,
                torch.tensor([s], device=device),
                torch.tensor([len(s)], device=device),
                **kwargs,
            )[0]
            for s in ids
        ]
    if precision == "fp32":
        assert [[h.tokens for h in x] for x in together] == [[h.tokens for h in x] for x in alone]
    best = [x[0].tokens for x in together]
    alone_best = [x[0].tokens for x in alone]
    assert_same_outputs(model, ids, best, alone_best, precision, alpha=1.0, device=device)
    for a, b in zip(together, alone, strict=True):
        if a[0].tokens == b[0].tokens:
            assert a[0].score == pytest.approx(b[0].score, abs=SCORE_TOL[precision])


# ------------------------------------------------------------------------------- classifier
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("positions", ENCODER_SCHEMES)
def test_classifier_padding_changes_nothing(positions, pooling, precision, device):
    """A padded batch (the padding filled with real tokens: only the lengths hide it) gives each
    sequence's logits alone."""
    torch.manual_seed(0)
    cfg = TransformerClassifierConfig(
        d_model=16,
        num_heads=2,
        num_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=16,
        positions=positions,
        pooling=pooling,
    )
    model = TransformerClassifier(V, 3, cfg).eval()
    _nonzero_t5_tables(model)
    model = model.to(device)
    tokens = torch.randint(4, V, (3, 9), generator=torch.Generator().manual_seed(6)).to(device)
    lengths = torch.tensor([9, 5, 2], device=device)
    with computing_in(precision, device):
        batch = model(tokens, lengths)
        alone = torch.cat(
            [model(tokens[i : i + 1, :n], lengths[i : i + 1]) for i, n in enumerate([9, 5, 2])]
        )
        shorter = model(tokens[:, :8], torch.tensor([8, 5, 2], device=device))  # first row: -1
    assert_close_in(precision, batch, alone)
    assert not torch.allclose(shorter[0], batch[0], atol=1e-3)
    assert_close_in(precision, shorter[1:], batch[1:])


# ------------------------------------------------------------------ the schemes, one by one
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [True, False])
def test_rope_logits_depend_only_on_the_distance(causal, device):
    """The same queries and keys at positions 0..7 and at 5..12: the same q·k and the same
    attention output; at other relative offsets the logits differ."""
    rope = RelativePositions("rope", 2, 8, causal).to(device)
    g = torch.Generator().manual_seed(7)
    q = torch.randn(2, 2, 8, 8, generator=g).to(device)
    k = torch.randn(2, 2, 8, 8, generator=g).to(device)

    def logits(pos_q, pos_k):
        return pos_q.rotate(q) @ pos_k.rotate(k).transpose(-1, -2)

    at0, at5 = rope(8, 0, torch.float32, q.device), rope(8, 5, torch.float32, q.device)
    torch.testing.assert_close(logits(at5, at5), logits(at0, at0), atol=1e-5, rtol=0)
    assert not torch.allclose(logits(at0, at5), logits(at0, at0), atol=1e-2)  # shifted keys
    assert not torch.allclose(logits(at0, at0), q @ k.transpose(-1, -2), atol=1e-2)
    torch.testing.assert_close(at5.rotate(q).norm(dim=-1), q.norm(dim=-1))  # a rotation
    assert at0.bias is None and not at0.hides_future

    att = MultiHeadAttention(16, 2).eval().to(device)
    x = torch.randn(2, 8, 16, generator=g).to(device)
    with torch.no_grad():
        out0, _, _ = att.self_attention(x, is_causal=causal, positions=at0)
        out5, _, _ = att.self_attention(x, is_causal=causal, positions=at5)
        plain, _, _ = att.self_attention(x, is_causal=causal)
    torch.testing.assert_close(out5, out0, atol=1e-5, rtol=0)
    assert not torch.allclose(out0, plain, atol=1e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_alibi_bias_slopes_and_the_causal_mask(device):
    alibi = RelativePositions("alibi", 8, 4, causal=True).to(device)
    pos = alibi(5, 0, torch.float32, torch.device(device))
    bias = pos.bias
    assert bias.shape == (8, 5, 5) and pos.hides_future
    slopes = torch.tensor([2.0**-h for h in range(1, 9)], device=device)
    torch.testing.assert_close(-bias[:, 1, 0], slopes)  # one position back: −m_h
    torch.testing.assert_close(-bias[:, 4, 0], 4 * slopes)
    future = torch.ones(5, 5, dtype=torch.bool, device=device).triu(1)
    assert torch.isneginf(bias[:, future]).all() and torch.isfinite(bias[:, ~future]).all()
    assert (bias[:, ~future] <= 0).all() and (bias.diagonal(dim1=1, dim2=2) == 0).all()
    # two new positions after three cached: the last two rows of the full bias
    later = alibi(2, 3, torch.float32, torch.device(device)).bias
    torch.testing.assert_close(later, bias[:, 3:], atol=0, rtol=0)
    # bidirectional (an encoder): −m_h·|i − j| both ways, nothing hidden
    both = RelativePositions("alibi", 8, 4, causal=False).to(device)
    both = both(5, 0, torch.float32, torch.device(device))
    assert not both.hides_future and torch.isfinite(both.bias).all()
    torch.testing.assert_close(both.bias, both.bias.transpose(1, 2))
    torch.testing.assert_close(-both.bias[:, 0, 3], 3 * slopes)


@pytest.mark.parametrize("device", DEVICES)
def test_t5_encoder_counts_both_ways_and_the_decoder_only_the_past(device):
    encoder = RelativePositions("t5_bias", 2, 4, causal=False)
    decoder = RelativePositions("t5_bias", 2, 4, causal=True)
    _nonzero_t5_tables(encoder)
    decoder.load_state_dict(encoder.state_dict())
    encoder, decoder = encoder.to(device), decoder.to(device)
    on = torch.device(device)  # where the biases are built
    enc, dec = encoder(20, 0, torch.float32, on), decoder(20, 0, torch.float32, on)
    steps = torch.arange(20, device=device)
    relative = steps[None, :] - steps[:, None]  # key − query
    table = encoder.bias_table.weight  # (buckets, h)
    expected_enc = table[t5_buckets(relative, 32, 128, bidirectional=True)].permute(2, 0, 1)
    torch.testing.assert_close(enc.bias, expected_enc, atol=0, rtol=0)
    assert not enc.hides_future and enc.bias[:, 2, 3].ne(enc.bias[:, 3, 2]).any()  # after ≠ before
    past = relative <= 0
    expected_dec = table[t5_buckets(relative, 32, 128, bidirectional=False)].permute(2, 0, 1)
    torch.testing.assert_close(dec.bias[:, past], expected_dec[:, past], atol=0, rtol=0)
    assert dec.hides_future and torch.isneginf(dec.bias[:, ~past]).all()
    # up to 7 back the same exact buckets; farther, the encoder's 16 buckets a side are coarser
    near = past & (relative > -8)
    torch.testing.assert_close(dec.bias[:, near], enc.bias[:, near], atol=0, rtol=0)
    assert not torch.equal(dec.bias[:, past & ~near], enc.bias[:, past & ~near])
    # after 17 cached positions: the rows of positions 17..19
    later = decoder(3, 17, torch.float32, on).bias
    torch.testing.assert_close(later, dec.bias[:, 17:], atol=0, rtol=0)


def test_absolute_schemes_and_none_act_outside_attention():
    for kind in ("sinusoidal", "learned", "none"):
        rel = RelativePositions(kind, 2, 4, causal=True)
        assert rel(3, 2, torch.float32, torch.device("cpu")) is None
    with pytest.raises(ValueError, match="bidirectional encoder blind"):
        RelativePositions("none", 2, 4, causal=False)
    with pytest.raises(ValueError, match="unknown positions 'foo'.*rope"):
        RelativePositions("foo", 2, 4, causal=True)


# ------------------------------------------------------------------ scaled dot product + bias
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "empty_row"])
def test_fused_and_explicit_attention_agree_with_a_bias(masking, device):
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g).to(device) for _ in range(3))
    bias = torch.randn(2, 5, 5, generator=g).to(device)  # (h, Tq, Tk), as RelativePositions
    mask, is_causal = None, masking == "causal"
    if masking == "padding":
        mask = padding_mask(torch.tensor([5, 3], device=device), 5)[:, None]  # (B, 1, 1, Tk)
    if masking == "empty_row":
        mask = torch.ones(2, 1, 5, 5, dtype=torch.bool, device=device)
        mask[1, 0, 2] = False  # query 2 of sentence 1 may attend to nothing
    fused, none = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, bias=bias)
    explicit, w = scaled_dot_product_attention(
        q, k, v, mask, is_causal=is_causal, need_weights=True, bias=bias
    )
    assert none is None and torch.isfinite(fused).all() and torch.isfinite(w).all()
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)
    unbiased, _ = scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal)
    assert not torch.allclose(fused, unbiased, atol=1e-3)  # the bias is used
    if masking == "empty_row":
        assert (fused[1, :, 2] == 0).all() and (w[1, :, 2] == 0).all()
    if masking == "padding":
        assert (w[1, ..., 3:] == 0).all()
    if masking == "causal":
        assert (w.triu(1) == 0).all()
    # the explicit weights are softmax(q·k/√d + bias) over the allowed keys
    scores = q @ k.transpose(-1, -2) / 2 + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if is_causal:
        future = torch.ones(5, 5, dtype=torch.bool, device=device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    expected = torch.nan_to_num(scores.softmax(-1), nan=0.0)
    torch.testing.assert_close(w, expected, atol=1e-6, rtol=0)


# ------------------------------------------------------------------------------- the config
def _model_error(model, dataset="dates"):
    with pytest.raises(ConfigError) as exc:
        config_from_dict({"data": {"dataset": dataset}, "model": model})
    message = str(exc.value)
    assert len(message.splitlines()) == 2  # the file, then one line for the key
    return message


def test_config_refuses_a_relative_scheme_with_linear_attention():
    for positions in ("rope", "alibi", "t5_bias"):
        for arch, dataset in (("transformer_lm", "timemachine"), ("transformer", "dates")):
            message = _model_error(
                {"arch": arch, "positions": positions, "attention": "linear"}, dataset
            )
            assert f"positions: {positions}" in message and "linear attention" in message
            assert "sinusoidal, learned, none" in message


def test_config_refuses_no_positions_in_a_bidirectional_encoder():
    for arch, dataset in (("transformer", "dates"), ("transformer_classifier", "sst2")):
        message = _model_error({"arch": arch, "positions": "none"}, dataset)
        assert "positions: none" in message and "bidirectional encoder" in message
    cfg = config_from_dict(
        {
            "data": {"dataset": "timemachine"},
            "model": {"arch": "transformer_lm", "positions": "none"},
        }
    )
    assert cfg.model.positions == "none"


#: every Transformer that takes model.positions: a shipped config, and the keys of its width
ROPE_ODD = {
    "translation": ("dates-transformer", "model."),
    "language model": ("timemachine-char-transformer", "model."),
    "classification": ("sst2-transformer", "model."),
    "audio": ("fsdd-transformer", "model.body."),
    "forecasting": ("sunspots-transformer", "model."),
    "vit": ("mnist-vit", "model."),
}


@pytest.mark.parametrize("kind", ROPE_ODD)
def test_rope_with_an_odd_head_size_is_one_config_error(kind, tmp_path, capsys):
    """A 46-line traceback from the model's constructor before: now refused when the config is
    validated (seqlab.config.check_positions), by load_config and by ``seqlab train``, naming
    d_model, num_heads and their quotient, and a width that works."""
    from seqlab.cli import main
    from seqlab.config import load_config

    name, at = ROPE_ODD[kind]
    overrides = [f"{at}positions=rope", f"{at}d_model=12", f"{at}num_heads=4"]
    with pytest.raises(ConfigError) as caught:
        load_config(name, overrides)
    message = str(caught.value).splitlines()[-1]
    assert "model.positions=rope needs an even head size" in message, message
    assert "d_model=12 / num_heads=4 = 3 is odd" in message and "d_model=16" in message
    assert "num_heads=3" in message  # or as many heads as make it even
    load_config(name, [f"{at}positions=rope", f"{at}d_model=16", f"{at}num_heads=4"])
    out = tmp_path / "run"
    assert main(["train", name, "--out", str(out), *overrides]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("seqlab: error:")
    assert "is odd" in err.strip().splitlines()[-1] and not out.exists()


def test_config_lists_the_schemes_for_an_unknown_one():
    message = _model_error({"arch": "transformer_lm", "positions": "foo"}, "timemachine")
    assert "model.positions" in message and "'foo'" in message
    for name in SCHEMES:
        assert repr(name) in message


def test_the_old_key_positional_still_loads_and_both_keys_are_refused(monkeypatch):
    monkeypatch.setattr(deprecation, "_warned", set())
    raw = {"data": {"dataset": "timemachine"}}
    with pytest.warns(
        SeqlabDeprecationWarning, match="model.positional is deprecated; use model.positions"
    ):
        cfg = config_from_dict(
            {**raw, "model": {"arch": "transformer_lm", "positional": "sinusoidal"}}
        )
    assert cfg.model.positions == "sinusoidal"
    message = _model_error(
        {"arch": "transformer_lm", "positional": "sinusoidal", "positions": "learned"},
        "timemachine",
    )
    assert (
        "model.positional is the old name of model.positions: give only model.positions" in message
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_rope_rotation_is_the_same_in_every_layout_and_its_backward_is_the_inverse(dtype, device):
    """The complex product (pairs read in place, or written into a packed output), the float32
    detour of bf16 and a layout whose pairs cannot be read as complex numbers rotate alike, and
    the gradient is the inverse rotation (float64 gradcheck)."""
    from seqlab.nn.attention_positions import _Rotation, _turn

    p = RelativePositions("rope", 2, 8, causal=True)(6, 3, dtype, torch.device(device))
    assert p.turn.dtype == (torch.complex128 if dtype == torch.float64 else torch.complex64)
    wide = torch.randn(2, 2, 6, 9, dtype=torch.float64).to(device)
    odd = wide[..., :8]  # row stride 9: pairs not readable as complex numbers
    assert odd.stride()[-2] % 2
    expected = rotate(odd.contiguous(), offset=3)
    tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 3e-2}[dtype]
    for x in (odd, odd.contiguous()):
        packed = torch.empty(2, 2, 6, 9, dtype=dtype, device=device)[..., :8]
        for out in (None, packed, torch.empty_like(x)):
            got = _turn(x.to(dtype), p.turn, out=None if out is None else out.to(dtype))
            assert got.dtype == dtype
            torch.testing.assert_close(got.double(), expected, atol=tol, rtol=0)
    turn = RelativePositions("rope", 2, 8, causal=True)(6, 3, torch.float64, x.device).turn
    x = odd.contiguous().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: _Rotation.apply(t, turn), (x,))
