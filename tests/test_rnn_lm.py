"""RNN language model: shapes, carried state, cached generation, batch independence."""

import pytest
import torch

from seqlab.config import RNNLMConfig
from seqlab.errors import ConfigError
from seqlab.rnn_lm import RNNLanguageModel, generate

V = 11


def model(cell="lstm", embed_dim=6, backend="fused", **kw):
    return RNNLanguageModel(
        V,
        RNNLMConfig(
            cell=cell, embed_dim=embed_dim, hidden_size=8, num_layers=2, backend=backend, **kw
        ),
    ).eval()


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm", "peephole_lstm"])
@pytest.mark.parametrize("embed_dim", [0, 6])
def test_shapes_and_state_carry(cell, embed_dim):
    m = model(cell, embed_dim, backend="scratch" if cell == "peephole_lstm" else "fused")
    tokens = torch.randint(0, V, (3, 10))
    logits, state = m(tokens)
    assert logits.shape == (3, 10, V)
    first, mid = m(tokens[:, :4])
    second, _ = m(tokens[:, 4:], mid)  # carrying the state across halves == one pass
    torch.testing.assert_close(torch.cat([first, second], dim=1), logits, atol=1e-5, rtol=1e-5)


def test_batch_of_one_equals_batch_of_n():
    m = model()
    tokens = torch.randint(0, V, (4, 9))
    full, _ = m(tokens)
    for b in range(4):
        alone, _ = m(tokens[b : b + 1])
        torch.testing.assert_close(alone[0], full[b], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_cached_greedy_generation_equals_recomputing(cell):
    m = model(cell)
    prefix = [1, 5, 7]
    out = generate(m, prefix, 12)
    seq = list(prefix)
    for _ in range(12):  # uncached: rerun the whole sequence each step
        logits, _ = m(torch.tensor([seq]))
        seq.append(int(logits[0, -1].argmax()))
    assert out == seq[len(prefix) :]


def test_sampling_is_seeded_and_top1_is_greedy():
    m = model()
    a = generate(
        m, [2], 20, strategy="sample", temperature=1.5, generator=torch.Generator().manual_seed(1)
    )
    b = generate(
        m, [2], 20, strategy="sample", temperature=1.5, generator=torch.Generator().manual_seed(1)
    )
    assert a == b
    assert generate(m, [2], 15, strategy="sample", top_k=1) == generate(m, [2], 15)


def test_tied_weights_and_config_errors():
    m = RNNLanguageModel(V, RNNLMConfig(cell="gru", embed_dim=8, hidden_size=8, tie_weights=True))
    assert m.output.weight is m.embedding.weight
    with pytest.raises(ConfigError, match="tie_weights"):
        RNNLanguageModel(V, RNNLMConfig(cell="gru", embed_dim=4, hidden_size=8, tie_weights=True))
    with pytest.raises(ConfigError, match="peephole"):
        RNNLanguageModel(V, RNNLMConfig(cell="peephole_lstm", backend="fused"))
    with pytest.raises(ValueError, match="prefix_ids is empty"):
        generate(model(), [], 3)
