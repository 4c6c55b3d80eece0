"""Decoder-only Transformer language model and cached generation."""

import pytest
import torch

from seqlab.config import TransformerLMConfig
from seqlab.models.language_model import generate
from seqlab.models.transformer_lm import TransformerLanguageModel

V = 13


def _model(**overrides) -> TransformerLanguageModel:
    cfg = TransformerLMConfig(
        d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=24, **overrides
    )
    return TransformerLanguageModel(V, cfg).eval()


def _generate_by_recomputing(model, prefix, num_tokens):
    """The uncached reference: re-run the model on the last max_len tokens at every step."""
    tokens = prefix
    for _ in range(num_tokens):
        logits, cache = model(tokens[:, -model.max_len :])
        assert cache is None
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


CONFIGS = [
    {"norm": "pre", "positions": "learned", "tie_weights": True},
    {"norm": "post", "positions": "sinusoidal", "tie_weights": False},
    {"norm": "pre", "positions": "sinusoidal", "tie_weights": False},
]


@pytest.mark.parametrize("overrides", CONFIGS)
def test_shapes_and_weight_tying(overrides):
    model = _model(**overrides)
    logits, cache = model(torch.randint(V, (3, 7)))
    assert logits.shape == (3, 7, V) and cache is None
    tied = model.head.weight is model.decoder.embed.token.weight
    assert tied == overrides["tie_weights"]
    has_final_norm = isinstance(model.decoder.final_norm, torch.nn.LayerNorm)
    assert has_final_norm == (overrides["norm"] == "pre")


@pytest.mark.parametrize("overrides", CONFIGS)
def test_cached_forward_matches_full_forward(overrides):
    model = _model(**overrides)
    tokens = torch.randint(V, (2, 9))
    full, _ = model(tokens)
    logits, cache = model(tokens[:, :4], model.init_cache(2))
    steps = [logits]
    for t in range(4, 9):
        logits, cache = model(tokens[:, t : t + 1], cache)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)
    assert cache.length == 9


@pytest.mark.parametrize("overrides", CONFIGS)
@pytest.mark.parametrize("prefix_len,num_tokens", [(5, 12), (20, 15)])
def test_greedy_generation_with_cache_equals_recomputing(overrides, prefix_len, num_tokens):
    """Also past max_len = 24 (sliding window): 20 + 15 tokens."""
    model = _model(**overrides)
    prefix = torch.randint(V, (2, prefix_len))
    cached = generate(model, prefix, num_tokens)
    assert cached.shape == (2, num_tokens)
    expected = _generate_by_recomputing(model, prefix, num_tokens)
    assert torch.equal(torch.cat([prefix, cached], 1), expected)
    assert generate(model, prefix[1].tolist(), num_tokens) == expected[1, prefix_len:].tolist()


@pytest.mark.parametrize("position", [0, 3, 7])
def test_causality_future_tokens_do_not_change_earlier_logits(position):
    model = _model()
    tokens = torch.randint(V, (2, 8))
    changed = tokens.clone()
    changed[:, position] = (changed[:, position] + 1) % V
    before, _ = model(tokens)
    after, _ = model(changed)
    torch.testing.assert_close(after[:, :position], before[:, :position], atol=0, rtol=0)
    assert not torch.allclose(after[:, position:], before[:, position:])


def test_sampling_is_reproducible_and_top_k_one_is_greedy():
    model = _model()
    prefix = torch.randint(V, (7,)).tolist()

    def sample(seed):
        gen = torch.Generator().manual_seed(seed)
        return generate(model, prefix, 10, "sample", temperature=1.5, generator=gen)

    assert len(sample(1)) == 10 and all(0 <= t < V for t in sample(1))
    assert sample(1) == sample(1)
    assert any(sample(1) != sample(s) for s in range(2, 6))
    top1 = generate(model, prefix, 10, "sample", top_k=1, generator=torch.Generator())
    assert top1 == generate(model, prefix, 10)


def test_top_k_restricts_samples():
    model = _model()
    prefix = torch.randint(V, (1, 5))
    logits, _ = model(prefix)
    allowed = set(logits[0, -1].topk(3).indices.tolist())
    gen = torch.Generator().manual_seed(0)
    firsts = {
        generate(model, prefix, 1, "sample", temperature=5.0, top_k=3, generator=gen)[0, 0].item()
        for _ in range(40)
    }
    assert firsts <= allowed and len(firsts) > 1


def test_generate_restores_training_mode_and_rejects_bad_arguments():
    model = _model(dropout=0.1).train()
    generate(model, torch.randint(V, (1, 3)), 2)
    assert model.training
    with pytest.raises(ValueError, match="strategy"):
        generate(model, torch.randint(V, (1, 3)), 2, strategy="beam")
    with pytest.raises(ValueError, match="prefix"):
        generate(model, [], 2)
    assert generate(model, [1, 2], 0) == []


def test_training_step_reduces_loss():
    model = _model(dropout=0.0).train()
    tokens = torch.arange(20).remainder(V)[None].repeat(4, 1)  # a periodic sequence
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        logits, _ = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
