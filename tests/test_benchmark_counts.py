"""The FLOP count behind the training benchmark's share of the matmul peak, by hand."""

import importlib.util
from pathlib import Path

import torch

from seqlab.config import TransformerConfig
from seqlab.data.translation_batching import Batch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
_spec = importlib.util.spec_from_file_location(
    "translation_training", BENCH / "translation_training.py"
)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_training_flops_by_hand():
    m = TransformerConfig(d_model=4, num_heads=2, encoder_layers=1, decoder_layers=2, d_ff=8)
    # one sentence: 3 source positions, 2 target positions; a second row is padding-only work
    batch = Batch(
        src=torch.zeros(2, 3, dtype=torch.long),
        src_lengths=torch.tensor([3, 1]),
        tgt_in=torch.zeros(2, 2, dtype=torch.long),
        tgt_out=torch.zeros(2, 2, dtype=torch.long),
        tgt_lengths=torch.tensor([2, 1]),
        indices=torch.arange(2),
    )
    # d = 4, d_ff = 8, V = 10. Sentence (S=3, T=2):
    #   encoder: 2·3·(4·16 + 2·4·8) + 4·3²·4 = 768 + 144 = 912
    #   decoder layer: 2·2·128 + 4·3·4 (causal: 3 pairs) + 4·2·16 + 4·3·16 + 4·2·3·4 = 976, × 2
    #   output: 2·2·4·10 = 160  ->  3024
    # Sentence (S=1, T=1): 272 + 2·416 + 80 = 1184.  Training = 3 × (3024 + 1184).
    assert bench.training_flops(batch, m, 10) == 3 * (3024 + 1184)
