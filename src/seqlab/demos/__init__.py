"""Self-contained demonstrations behind ``seqlab demo NAME``; :data:`DEMOS` says which claim of
the notes (``../shared/seeds``) each reproduces. Each writes PNG figures and a JSON of numbers."""

from __future__ import annotations

from typing import NamedTuple


class Demo(NamedTuple):
    seeds: str  # which source documents
    section: str  # where in them
    shows: str  # the claim or figure reproduced


DEMOS: dict[str, Demo] = {
    "dates": Demo(
        "004, 000", "RNNsearch; Bahdanau attention", "attentive RNN and Transformer translate dates"
    ),
    "kernel-regression": Demo(
        "000", "attention cues: Nadaraya–Watson", "non-parametric vs learned-width kernel pooling"
    ),
    "forecasting": Demo(
        "000", "sequence models: autoregressive models", "1-step vs k-step prediction of a sine"
    ),
    "positional-encoding": Demo(
        "001, 002, 003",
        "positional encoding",
        "P as a heatmap, its columns, binary counting; cos(p_t, p_t+k) depends on k only",
    ),
    "attention-scaling": Demo(
        "001, 003", "why scale by √d_k", "score variance, softmax saturation, gradient vs d"
    ),
    "self-attention-example": Demo(
        "001", "self-attention in six steps", "'Thinking Machines' step by step, the ÷8 of d_k = 64"
    ),
    "positions": Demo(
        "001",
        "learned vs fixed positional encoding",
        "char LM trained on 64 characters, evaluated on 64, 128, 256",
    ),
    "norm-placement": Demo(
        "001, 000", "residual + LayerNorm (AddNorm)", "post-norm vs pre-norm, same budget"
    ),
    "training-choices": Demo(
        "000",
        "random sampling vs sequential partitioning; gradient clipping",
        "tanh RNN LM trained four ways, loss curves",
    ),
    "layer-paths": Demo(
        "002, 000",
        "CNN vs RNN vs self-attention",
        "sequential operations and maximum path length measured from the layers' graphs",
    ),
    "vit-vs-cnn": Demo(
        "003", "Vision Transformers", "ViT vs CNN test accuracy as the training set grows"
    ),
}
