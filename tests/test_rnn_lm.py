"""RNN language model: shapes, carried state, cached generation, batch independence, tying."""

import pytest
import torch

from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.config import RNNLMConfig, config_from_dict
from seqlab.errors import ConfigError
from seqlab.models.language_model import generate
from seqlab.models.rnn_lm import RNNLanguageModel

V = 11
ATOL = 1e-5
# (cell, backend): every cell on scratch, the fused ones on fused too
CELL_BACKENDS = [(c, "scratch") for c in ("rnn", "gru", "lstm", "peephole_lstm")] + [
    (c, "fused") for c in ("rnn", "gru", "lstm")
]


def make_model(cell="lstm", embed_dim=6, backend="fused", dropout=0.0, tie_weights=False):
    cfg = RNNLMConfig(
        cell=cell,
        embed_dim=embed_dim,
        hidden_size=8,
        num_layers=2,
        backend=backend,
        dropout=dropout,
        tie_weights=tie_weights,
    )
    return RNNLanguageModel(V, cfg).eval()


def as_tuple(state):
    return state if isinstance(state, tuple) else (state,)


def uncached_greedy(model, prefix, num_tokens):
    """Reference decoder: re-read the whole sequence for every new token."""
    seq = list(prefix)
    for _ in range(num_tokens):
        logits, _ = model(torch.tensor([seq]))
        seq.append(int(logits[0, -1].argmax()))
    return seq[len(prefix) :]


@pytest.mark.parametrize("embed_dim", [0, 6])
@pytest.mark.parametrize(("cell", "backend"), CELL_BACKENDS)
def test_shapes_and_state_carried_over_two_halves(cell, backend, embed_dim):
    model = make_model(cell, embed_dim, backend)
    tokens = torch.randint(0, V, (3, 10))
    logits, state = model(tokens)
    assert logits.shape == (3, 10, V)
    begin = model.begin_state(3, "cpu")
    for s, b in zip(as_tuple(state), as_tuple(begin), strict=True):
        assert s.shape == b.shape == (2, 3, 8)  # (L, B, H)
        assert torch.all(b == 0)
    first, middle = model(tokens[:, :4])
    second, end = model(tokens[:, 4:], middle)
    torch.testing.assert_close(torch.cat([first, second], dim=1), logits, atol=ATOL, rtol=0)
    for a, b in zip(as_tuple(end), as_tuple(state), strict=True):
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_one_hot_input_feeds_the_vocabulary_size_to_the_rnn():
    model = make_model("gru", embed_dim=0)
    assert model.embedding is None and model.rnn.input_size == V
    tokens = torch.randint(0, V, (2, 5))
    # one-hot vectors are what an identity embedding table (E = V) produces
    embedded = make_model("gru", embed_dim=V)
    embedded.rnn.load_state_dict(model.rnn.state_dict())
    embedded.output.load_state_dict(model.output.state_dict())
    with torch.no_grad():
        embedded.embedding.weight.copy_(torch.eye(V))
    torch.testing.assert_close(embedded(tokens)[0], model(tokens)[0], atol=ATOL, rtol=0)


@pytest.mark.parametrize("backend", ["scratch", "fused"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_batch_of_one_equals_batch_of_n(backend, precision):
    model = make_model("lstm", backend=backend)
    tokens = torch.randint(0, V, (4, 9))
    with computing_in(precision):
        full, _ = model(tokens)
        for b in range(4):
            alone, _ = model(tokens[b : b + 1])
            assert_close_in(precision, alone[0], full[b], atol=ATOL)


@pytest.mark.parametrize("embed_dim", [0, 6])
@pytest.mark.parametrize(("cell", "backend"), CELL_BACKENDS)
def test_cached_greedy_generation_equals_recomputing(cell, backend, embed_dim):
    model = make_model(cell, embed_dim, backend)
    prefix = [1, 5, 7]
    out = generate(model, prefix, 12)
    assert len(out) == 12
    assert out == uncached_greedy(model, prefix, 12)
    assert generate(model, prefix, 12) == out  # deterministic


def test_generation_runs_in_eval_mode_and_restores_the_mode():
    model = make_model("lstm", dropout=0.5).train()
    out = generate(model, [3, 4], 10)
    assert model.training
    assert out == uncached_greedy(model.eval(), [3, 4], 10)  # dropout was off while generating


def test_sampling_is_seeded_top1_is_greedy_and_top_k_restricts():
    model = make_model()

    def sample(top_k=0, seed=1, temperature=1.5):
        gen = torch.Generator().manual_seed(seed)
        return generate(
            model, [2], 30, strategy="sample", temperature=temperature, top_k=top_k, generator=gen
        )

    assert sample() == sample()
    assert sample(seed=1) != sample(seed=2)  # 30 draws from 11 tokens: a collision is ~impossible
    assert sample(top_k=1) == generate(model, [2], 30)
    out = sample(top_k=3, temperature=5.0)  # flat distribution: without top-k, outsiders appear
    seq = [2]
    for token in out:  # each draw is among the 3 most likely tokens given what came before
        logits, _ = model(torch.tensor([seq]))
        assert token in logits[0, -1].topk(3).indices.tolist()
        seq.append(token)


def test_tied_weights_share_the_embedding_and_mismatches_are_config_errors():
    model = make_model("gru", embed_dim=8, tie_weights=True)
    assert model.output.weight is model.embedding.weight
    assert (
        sum(p.numel() for p in model.parameters())
        == sum(p.numel() for p in make_model("gru", embed_dim=8).parameters()) - V * 8
    )
    # rejected when the config is loaded ...
    for bad, match in [
        ({"cell": "gru", "embed_dim": 4, "tie_weights": True}, "tie_weights"),
        ({"cell": "peephole_lstm", "backend": "fused"}, "peephole"),
    ]:
        with pytest.raises(ConfigError, match=match):
            config_from_dict({"model": {"arch": "rnn_lm", **bad}})
    # ... and by the model itself, for configs built without validation
    unchecked = {
        "cell": "gru",
        "hidden_size": 8,
        "num_layers": 1,
        "backend": "fused",
        "dropout": 0.0,
    }
    with pytest.raises(ConfigError, match="tie_weights"):
        RNNLanguageModel(V, RNNLMConfig.model_construct(**unchecked, embed_dim=4, tie_weights=True))
    with pytest.raises(ConfigError, match="one-hot"):
        RNNLanguageModel(V, RNNLMConfig.model_construct(**unchecked, embed_dim=0, tie_weights=True))
    with pytest.raises(ConfigError, match="peephole"):
        RNNLanguageModel(
            V,
            RNNLMConfig.model_construct(
                **{**unchecked, "cell": "peephole_lstm"}, embed_dim=4, tie_weights=False
            ),
        )


def test_bad_generation_arguments_are_reported():
    model = make_model()
    with pytest.raises(ValueError, match="prefix_ids is empty"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match="strategy"):
        generate(model, [1], 3, strategy="beam")
    with pytest.raises(ValueError, match="temperature"):
        generate(model, [1], 3, strategy="sample", temperature=0.0)
