"""benchmarks/translation_speed.py: its no-cache adapters decode like the cache, and its FLOP
counter adds up."""

import importlib.util
from pathlib import Path

import pytest
import torch

from conftest import random_translation_batch
from seqlab.config import TransformerConfig
from seqlab.models.search import greedy_search
from seqlab.models.transformer_seq2seq import TransformerSeq2Seq

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "translation_speed.py"
_spec = importlib.util.spec_from_file_location("translation_speed", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

SIZES = dict(d=32, d_ff=64, vocab=20, encoder_layers=2, decoder_layers=2)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = TransformerConfig(
        d_model=32, num_heads=2, encoder_layers=2, decoder_layers=2, d_ff=64, dropout=0.0
    )
    return TransformerSeq2Seq(20, 20, cfg).eval()


def test_every_variant_decodes_like_the_cache_and_the_trace_counts_its_steps(model):
    batch = random_translation_batch(20, 20, b=6, s=9)
    traced = bench.TracedDecoding(model)
    cached = greedy_search(traced, batch.src, batch.src_len, max_len_b=6)
    for variant in (
        bench.UncachedDecoding(model),
        bench.UncachedDecoding(model, last_position_only=True),
    ):
        found = greedy_search(variant, batch.src, batch.src_len, max_len_b=6, use_cache=False)
        assert [h.tokens for h in found] == [h.tokens for h in cached]
        assert [h.score for h in found] == pytest.approx([h.score for h in cached], abs=1e-5)
    assert traced.batches == [tuple(batch.src.shape)]
    rows, done, source = zip(*traced.steps, strict=True)
    assert list(done) == list(range(len(traced.steps)))  # one position more per step
    assert rows[0] == 6 and set(source) == {9}
    assert max(len(h.tokens) for h in cached) + 1 == len(traced.steps)  # the last step: <eos>


def test_flops_of_one_step_agree_and_the_gap_grows_with_the_prefix():
    d, ff, v, layers = SIZES["d"], SIZES["d_ff"], SIZES["vocab"], SIZES["decoder_layers"]
    one = bench.decoding_flops([(3, 0, 5)], [(3, 5)], **SIZES)
    # a first step recomputes nothing: the prefix is the one new position, and projecting
    # the encoder output at that step costs what projecting it once does
    encoder = one.pop("encoder")
    assert len(set(one.values())) == 1
    # by hand: encoder, cross-attention keys/values, then per row layer projections + FFN,
    # attention over 1 + 5 keys, output layer
    assert encoder == 15 * SIZES["encoder_layers"] * (2 * (4 * d * d + 2 * d * ff) + 4 * 5 * d)
    step = 3 * (layers * (2 * (6 * d * d + 2 * d * ff) + 4 * d * 6) + 2 * d * v)
    assert one["cached"] == encoder + 15 * layers * 4 * d * d + step

    ten = bench.decoding_flops([(3, p, 5) for p in range(10)], [(3, 5)], **SIZES)
    # no cache projects the encoder output again at each of the 10 steps, not once
    assert ten["no_cache"] - ten["prefix_recomputed"] == (10 - 1) * 15 * layers * 4 * d * d
    five = bench.decoding_flops([(3, p, 5) for p in range(5)], [(3, 5)], **SIZES)
    for name in ("prefix_recomputed", "no_cache", "no_cache_last_position"):
        assert ten[name] / ten["cached"] > five[name] / five["cached"] > 1
    assert ten["no_cache_last_position"] < ten["no_cache"]
