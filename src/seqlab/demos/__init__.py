"""Self-contained demonstrations behind ``seqlab demo NAME``; :data:`DEMOS` says which published
claim or figure each reproduces and where it is published (d2l.ai section, paper). Each writes PNG
figures and a JSON of numbers.

:data:`DEMOS` is the one list of demos: ``seqlab demo --list``, the ``seqlab demo`` subcommands,
their help and their output folders derive from it (the command line adds each demo's own options
and the function it calls, :data:`seqlab.cli.demo.DEMO_COMMANDS`)."""

from __future__ import annotations

from typing import NamedTuple


class Demo(NamedTuple):
    source: str  # where the claim is published: a d2l.ai section or a paper
    section: str  # what the source calls it
    shows: str  # the claim or figure reproduced
    out: str = ""  # the default output folder, when not runs/<name>


DEMOS: dict[str, Demo] = {
    "dates": Demo(
        "Bahdanau 2014; d2l §11.4",
        "RNNsearch; The Bahdanau Attention Mechanism",
        "attentive RNN and Transformer translate dates",
        out="runs/demo",
    ),
    "kernel-regression": Demo(
        "d2l §11.2",
        "Attention Pooling by Similarity (Nadaraya–Watson)",
        "non-parametric vs learned-width kernel pooling",
    ),
    "forecasting": Demo(
        "d2l §9.1",
        "Working with Sequences: autoregressive models, prediction",
        "1-step vs k-step prediction of a sine",
    ),
    "positional-encoding": Demo(
        "Vaswani §3.5; d2l §11.6.3",
        "Positional Encoding",
        "P as a heatmap, its columns, binary counting; cos(p_t, p_t+k) depends on k only",
    ),
    "attention-scaling": Demo(
        "Vaswani §3.2.1",
        "Scaled Dot-Product Attention (footnote 4)",
        "score variance, softmax saturation, gradient vs d",
    ),
    "self-attention-example": Demo(
        "Alammar 2018",
        "The Illustrated Transformer: self-attention in detail",
        "'Thinking Machines' step by step, the ÷8 of d_k = 64",
    ),
    "positions": Demo(
        "Vaswani §3.5",
        "learned vs sinusoidal positions (Table 3, row E)",
        "char LM trained on 64 characters, evaluated on 64, 128, 256",
    ),
    "norm-placement": Demo(
        "Vaswani §3.1; d2l §11.7.3",
        "Residual Connection and Layer Normalization",
        "post-norm vs pre-norm, same budget",
    ),
    "training-choices": Demo(
        "d2l 0.17 §8.3.4; d2l §9.5.3",
        "random sampling vs sequential partitioning; Gradient Clipping",
        "tanh RNN LM trained four ways, loss curves",
    ),
    "layer-paths": Demo(
        "d2l §11.6.2; Vaswani Table 1",
        "Comparing CNNs, RNNs, and Self-Attention",
        "sequential operations and maximum path length measured from the layers' graphs",
    ),
    "spoken-digits": Demo(
        "Jackson et al., FSDD; Park et al. 2019; Gong et al. 2021",
        "an audio sequence of length n -> a category",
        "waveform -> spectrogram -> log-mel; a Transformer's attention over time; the confusion "
        "matrix",
    ),
    "length-extrapolation": Demo(
        "Press et al. 2022, Table 2; Su et al. 2021; Katharopoulos et al. 2020",
        "Train Short, Test Long; RoPE; Transformers are RNNs",
        "char LM with each position scheme and linear attention, trained on 64 characters, "
        "evaluated at 1x to 16x that, non-overlapping and sliding",
    ),
    "vit-vs-cnn": Demo(
        "Dosovitskiy §4.3",
        "Pre-training Data Requirements",
        "ViT vs CNN test accuracy as the training set grows",
    ),
}
