"""Typed, validated experiment configuration.

An experiment is one YAML file with four sections, ``data``, ``model``, ``train`` and ``decode``,
loaded into the pydantic models below. Every model forbids unknown keys, so a typo fails loudly,
naming the key, the offending value and what is allowed. Command-line overrides use dotted paths
(``train.lr=3e-4``) and go through exactly the same validation.

``configs/reference.yaml`` lists every key with its default and its choices.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from seqlab.deprecation import renamed_value
from seqlab.errors import ConfigError

Positive = Annotated[int, Field(gt=0)]
NonNegative = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]
#: an exponential-moving-average coefficient (Adam's β₁, β₂)
Decay = Annotated[float, Field(ge=0.0, lt=1.0)]
#: the largest learning rate accepted (SGD on recurrent LMs uses up to ~20; beyond 100 is a typo)
MAX_LR = 100.0


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors, values are never coerced
    (``true`` is not the number 1, ``"3"`` is not 3), assignments are validated, and every
    number is finite (``.inf``, ``.nan`` and ``1e309``, which YAML reads as infinity, are
    refused); each float field also states the range that makes sense for it."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, strict=True, allow_inf_nan=False
    )


# ----------------------------------------------------------------------------------------- data
DatasetName = Literal[
    "timemachine",
    "tinyshakespeare",
    "text",
    "fra-eng",
    "multi30k",
    "dates",
    "sst2",
    "ag_news",
    "text-classification",
    "mnist",
    "sine",
    "sunspots",
    "series",
]
#: the task each dataset is for; a model's config names its task too (``task``), and they must agree
DATASET_TASKS: dict[str, str] = {
    "timemachine": "language_modeling",
    "tinyshakespeare": "language_modeling",
    "text": "language_modeling",
    "fra-eng": "translation",
    "multi30k": "translation",
    "dates": "translation",
    "sst2": "classification",
    "ag_news": "classification",
    "text-classification": "classification",
    "mnist": "classification",
    "sine": "forecasting",
    "sunspots": "forecasting",
    "series": "forecasting",
}
#: classification datasets whose examples are images (the others are text)
IMAGE_DATASETS = ("mnist",)
Language = Literal["en", "de", "fr"]


class SubwordConfig(Strict):
    """SentencePiece settings, used when ``data.tokenizer`` is ``subword``."""

    model_type: Literal["bpe", "unigram"] = "bpe"
    vocab_size: Positive = 8000
    character_coverage: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    joint: bool = Field(True, description="one model for source and target (translation)")


class DataConfig(Strict):
    """Where the text comes from and how it becomes batches."""

    dataset: DatasetName = "timemachine"
    path: str | None = Field(
        None,
        description="a UTF-8 text file (dataset 'text'), or labelled examples (dataset "
        "'text-classification': TSV text<TAB>label, or CSV with a header naming text_column and "
        "label_column)",
    )
    text_column: str = Field("text", description="text-classification CSV: the text's column")
    label_column: str = Field("label", description="text-classification CSV: the label's column")
    # forecasting
    column: str | None = Field(None, description="series CSV: the values' column (default last)")
    missing: Literal["error", "interpolate", "drop"] = "error"
    window: Positive = Field(4, description="τ: past values an autoregressive model reads")
    length: Positive = Field(1000, description="sine: number of steps generated")
    test_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        0.15, description="forecasting: last share of the series kept for testing"
    )
    season: Positive | None = Field(
        None, description="forecasting: period of the seasonal-persistence baseline (steps)"
    )
    tokenizer: Literal["char", "word", "subword"] = "char"
    normalize: Literal["none", "nmt", "letters"] = Field(
        "none", description="letters: d2l Time Machine cleaning; nmt: d2l fra-eng preprocessing"
    )
    subword: SubwordConfig = SubwordConfig()
    min_freq: NonNegative = 0
    max_vocab: Annotated[int, Field(ge=4)] | None = Field(
        None, description="at most this many tokens, the 4 reserved ones included"
    )
    # language modelling
    num_steps: Positive = 35
    batch_size: Positive = 32
    sampling: Literal["random", "sequential"] = "sequential"
    val_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.1
    # translation
    src_lang: Language = "en"
    tgt_lang: Language = "de"
    max_len: Annotated[int, Field(ge=2)] = Field(
        100, description="longest sentence in positions, <bos>/<eos> included"
    )
    batch_tokens: Positive = 4096
    num_examples: Positive | None = Field(None, description="use only the first N pairs")
    val_examples: Positive = Field(1000, description="held-out pairs when the dataset has no split")

    @model_validator(mode="after")
    def _languages_differ(self) -> DataConfig:
        with_path = self.dataset in ("text", "text-classification", "series")
        if with_path != (self.path is not None):
            raise ValueError(
                "data.path is required with dataset 'text', 'text-classification' or 'series' and "
                "only allowed with them"
            )
        if self.src_lang == self.tgt_lang:
            raise ValueError(
                f"src_lang and tgt_lang are both {self.src_lang!r}; pick two languages"
            )
        return self


# ---------------------------------------------------------------------------------------- model
def check_heads(d_model: int | None, num_heads: int | None) -> None:
    """Multi-head attention splits the width into equal heads."""
    if d_model is not None and num_heads and d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


CellName = Literal[
    "rnn", "rnn_relu", "gru", "gru_reset_before", "output_gated_rnn", "lstm", "peephole_lstm"
]
#: cells only the scratch backend has (PyTorch has no fused layer for them)
SCRATCH_ONLY_CELLS = ("peephole_lstm", "gru_reset_before", "output_gated_rnn")


class RNNLMConfig(Strict):
    """Recurrent language model: embedding (or one-hot) → stacked RNN → linear to vocabulary."""

    arch: Literal["rnn_lm"] = "rnn_lm"
    task: ClassVar[str] = "language_modeling"
    cell: CellName = "lstm"
    backend: Literal["scratch", "fused"] = "fused"
    embed_dim: NonNegative = Field(0, description="0 feeds one-hot vectors, as in d2l")
    hidden_size: Positive = 256
    num_layers: Positive = 2
    dropout: Probability = 0.0
    tie_weights: bool = False
    truncation: Literal["regular", "randomized"] = Field(
        "regular", description="randomized: truncated BPTT of random length (d2l.ai §9.7.1)"
    )
    truncation_keep: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        0.9, description="randomized truncation: π, the chance the gradient passes a step"
    )

    @field_validator("cell", mode="before")
    @classmethod
    def _renamed_cell(cls, value: object) -> object:
        return renamed_value("model.cell", value)

    @model_validator(mode="after")
    def _consistent(self) -> RNNLMConfig:
        if self.truncation == "randomized" and self.backend != "scratch":
            raise ValueError(
                "truncation: randomized acts between time steps, inside the recurrent loop; "
                "set backend: scratch"
            )
        if self.cell in SCRATCH_ONLY_CELLS and self.backend == "fused":
            raise ValueError(
                f"cell {self.cell} has no fused backend (PyTorch has no such layer); "
                "set backend: scratch"
            )
        if self.tie_weights and self.embed_dim != self.hidden_size:
            raise ValueError(
                f"tie_weights needs embed_dim == hidden_size (> 0), got embed_dim={self.embed_dim}, "
                f"hidden_size={self.hidden_size}"
            )
        return self


class TransformerLMConfig(Strict):
    """Decoder-only Transformer language model (causal self-attention)."""

    arch: Literal["transformer_lm"] = "transformer_lm"
    task: ClassVar[str] = "language_modeling"
    d_model: Positive = 128
    num_heads: Positive = 4
    num_layers: Positive = 4
    d_ff: Positive = 512
    dropout: Probability = 0.0
    max_len: Positive = 1024
    positional: Literal["sinusoidal", "learned"] = "learned"
    norm: Literal["post", "pre"] = "pre"
    tie_weights: bool = True

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerLMConfig:
        check_heads(self.d_model, self.num_heads)
        return self


class Seq2SeqConfig(Strict):
    """RNN encoder–decoder (Sutskever et al. 2014 / Cho et al. 2014)."""

    arch: Literal["seq2seq"] = "seq2seq"
    task: ClassVar[str] = "translation"
    cell: Literal["gru", "lstm"] = "gru"
    embed_dim: Positive = 256
    hidden_size: Positive = 512
    num_layers: Positive = 2
    dropout: Probability = 0.2


class BahdanauConfig(Strict):
    """Attentive RNN encoder–decoder (Bahdanau et al. 2014).

    ``decoder: maxout`` (the default), the paper's RNNsearch (§3 and appendix A): a bidirectional
    GRU encoder, s_0 = tanh(W_s ←h_1), the previous decoder state scored against the 2H-wide
    annotations, a maxout output layer. ``decoder: linear``, d2l.ai §11.4 (The Bahdanau Attention
    Mechanism): a unidirectional L-layer GRU encoder whose final states start the decoder, the
    previous top-layer decoder state as the query, a linear output layer. ``attention`` picks the
    scoring function (d2l.ai §11.3): additive (Bahdanau's), dot, general and location (Luong et
    al. 2015, §3.1) or scaled_dot (Vaswani et al. 2017, §3.2.1)."""

    arch: Literal["bahdanau"] = "bahdanau"
    task: ClassVar[str] = "translation"
    embed_dim: Positive = 256
    hidden_size: Positive = 512
    num_layers: Positive = 1
    dropout: Probability = 0.2
    decoder: Literal["maxout", "linear"] = "maxout"
    attention: Literal["additive", "dot", "scaled_dot", "general", "location"] = "additive"
    max_len: Positive = Field(256, description="location attention: most source positions")

    @field_validator("decoder", mode="before")
    @classmethod
    def _renamed_decoder(cls, value: object) -> object:
        return renamed_value("model.decoder", value)

    @model_validator(mode="after")
    def _score_fits(self) -> BahdanauConfig:
        if self.attention in ("dot", "scaled_dot") and self.decoder == "maxout":
            raise ValueError(
                f"attention {self.attention} needs queries and keys of one size, but decoder: "
                f"maxout scores its {self.hidden_size}-wide state against "
                f"{2 * self.hidden_size}-wide bidirectional annotations; use decoder: linear "
                "(unidirectional encoder) or attention additive | general | location"
            )
        return self


class TransformerConfig(Strict):
    """Encoder–decoder Transformer (Vaswani et al. 2017)."""

    arch: Literal["transformer"] = "transformer"
    task: ClassVar[str] = "translation"
    d_model: Positive = 256
    num_heads: Positive = 4
    encoder_layers: Positive = 4
    decoder_layers: Positive = 4
    d_ff: Positive = 1024
    dropout: Probability = 0.1
    max_len: Positive = 512
    norm: Literal["post", "pre"] = "post"
    share_embeddings: bool = False
    tie_output: bool = True

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerConfig:
        check_heads(self.d_model, self.num_heads)
        return self


class TransformerClassifierConfig(Strict):
    """Transformer encoder over tokens, pooled (a [CLS] token or the mean of the real positions),
    then a linear classification head."""

    arch: Literal["transformer_classifier"] = "transformer_classifier"
    task: ClassVar[str] = "classification"
    d_model: Positive = 128
    num_heads: Positive = 4
    num_layers: Positive = 2
    d_ff: Positive = 512
    dropout: Probability = 0.1
    max_len: Positive = 512
    positional: Literal["sinusoidal", "learned"] = "learned"
    norm: Literal["post", "pre"] = "pre"
    pooling: Literal["cls", "mean", "max"] = "mean"

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerClassifierConfig:
        check_heads(self.d_model, self.num_heads)
        return self


class RNNClassifierConfig(Strict):
    """GRU/LSTM (optionally bidirectional) over tokens; the final states or pooled outputs feed a
    linear head."""

    arch: Literal["rnn_classifier"] = "rnn_classifier"
    task: ClassVar[str] = "classification"
    cell: Literal["gru", "lstm"] = "lstm"
    embed_dim: Positive = 128
    hidden_size: Positive = 128
    num_layers: Positive = 1
    bidirectional: bool = True
    pooling: Literal["last", "mean", "max"] = "max"
    dropout: Probability = 0.3


class CNNTextConfig(Strict):
    """Convolutions of several widths over word embeddings, max-over-time pooling (Kim 2014)."""

    arch: Literal["cnn_text"] = "cnn_text"
    task: ClassVar[str] = "classification"
    embed_dim: Positive = 128
    widths: Annotated[list[Positive], Field(min_length=1)] = [3, 4, 5]
    channels: Positive = 100
    dropout: Probability = 0.5


#: ViT sizes of Dosovitskiy et al. 2021, Table 1: layers, width, MLP width, heads
VIT_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 6, "d_model": 64, "d_ff": 256, "num_heads": 4},
    "base": {"num_layers": 12, "d_model": 768, "d_ff": 3072, "num_heads": 12},
    "large": {"num_layers": 24, "d_model": 1024, "d_ff": 4096, "num_heads": 16},
    "huge": {"num_layers": 32, "d_model": 1280, "d_ff": 5120, "num_heads": 16},
}


class ViTConfig(Strict):
    """Vision Transformer (Dosovitskiy et al. 2021): patches as tokens, a class token, learned
    positions, a pre-norm encoder and an MLP head. ``preset`` fills the four size keys (an
    explicit key wins)."""

    arch: Literal["vit"] = "vit"
    task: ClassVar[str] = "classification"
    preset: Literal["tiny", "base", "large", "huge"] | None = None
    image_size: Positive = 28
    patch_size: Positive = 4
    channels: Positive = 1
    num_layers: Positive | None = None
    d_model: Positive | None = None
    d_ff: Positive | None = None
    num_heads: Positive | None = None
    dropout: Probability = 0.0

    @model_validator(mode="after")
    def _sizes(self) -> ViTConfig:
        preset = VIT_PRESETS.get(self.preset or "", {})
        for key in ("num_layers", "d_model", "d_ff", "num_heads"):
            if getattr(self, key) is None:
                if key not in preset:
                    raise ValueError(f"model.{key} is needed (or a model.preset)")
                object.__setattr__(self, key, preset[key])
        check_heads(self.d_model, self.num_heads)
        if self.image_size % self.patch_size:
            raise ValueError(
                f"image_size={self.image_size} is not a multiple of patch_size={self.patch_size}"
            )
        return self


class ImageCNNConfig(Strict):
    """A small convolutional network for images: blocks of two 3×3 convolutions and 2×2
    max-pooling, then a hidden layer and the head."""

    arch: Literal["cnn_image"] = "cnn_image"
    task: ClassVar[str] = "classification"
    image_size: Positive = 28
    channels: Positive = 1
    widths: Annotated[list[Positive], Field(min_length=1)] = [32, 64]
    hidden: Positive = 128
    dropout: Probability = 0.25


class ARConfig(Strict):
    """Autoregressive model AR(τ): x̂_t = f(x_{t-1}, …, x_{t-τ}); linear (``hidden: 0``) or an MLP
    with one hidden ReLU layer (d2l's 10 units)."""

    arch: Literal["ar"] = "ar"
    task: ClassVar[str] = "forecasting"
    linear_skip: bool = Field(False, description="add a linear AR(τ) term to the output")
    hidden: NonNegative = 10


class RNNForecasterConfig(Strict):
    """Latent autoregressive model h_t = g(h_{t-1}, x_{t-1}), x̂_t from h_t: a GRU/LSTM over the
    window, a linear read-out of the last state."""

    arch: Literal["rnn_forecaster"] = "rnn_forecaster"
    task: ClassVar[str] = "forecasting"
    linear_skip: bool = Field(False, description="add a linear AR(τ) term to the output")
    cell: Literal["gru", "lstm"] = "gru"
    hidden_size: Positive = 32
    num_layers: Positive = 1
    dropout: Probability = 0.0


class TransformerForecasterConfig(Strict):
    """Causal Transformer over the window (values projected to d_model, learned positions); the
    last position's output predicts the next value."""

    arch: Literal["transformer_forecaster"] = "transformer_forecaster"
    task: ClassVar[str] = "forecasting"
    linear_skip: bool = Field(False, description="add a linear AR(τ) term to the output")
    d_model: Positive = 32
    num_heads: Positive = 4
    num_layers: Positive = 2
    d_ff: Positive = 64
    dropout: Probability = 0.0

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerForecasterConfig:
        check_heads(self.d_model, self.num_heads)
        return self


ModelConfig = Annotated[
    Union[  # noqa: UP007
        ARConfig,
        RNNForecasterConfig,
        TransformerForecasterConfig,
        RNNLMConfig,
        TransformerLMConfig,
        Seq2SeqConfig,
        BahdanauConfig,
        TransformerConfig,
        TransformerClassifierConfig,
        RNNClassifierConfig,
        CNNTextConfig,
        ViTConfig,
        ImageCNNConfig,
    ],
    Field(discriminator="arch"),
]


# ---------------------------------------------------------------------------------------- train
class TrainConfig(Strict):
    """Optimisation, schedule, checkpointing; nothing here depends on the architecture."""

    seed: NonNegative = 0
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    lr: Annotated[float, Field(gt=0.0, le=MAX_LR)] = 1e-3
    weight_decay: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    betas: Annotated[tuple[Decay, Decay], Field(strict=False)] = (0.9, 0.999)
    momentum: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.0
    schedule: Literal["constant", "cosine", "inverse_sqrt", "plateau"] = "constant"
    warmup_steps: NonNegative = 0
    warmup_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(
        None,
        description="warm-up as a share of the training budget (steps, or time when max_minutes runs out first); instead of warmup_steps",
    )
    min_lr_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1
    epochs: Positive = 10
    max_steps: Positive | None = Field(None, description="stop after this many optimizer steps")
    max_minutes: Annotated[float, Field(gt=0.0, le=525_600.0)] | None = Field(  # a year
        None,
        description="wall-time budget of the run (a resumed run counts time already spent); a cosine schedule decays over it",
    )
    grad_clip: Annotated[float, Field(gt=0.0, le=1e6)] | None = 1.0
    label_smoothing: Probability = 0.0
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto",
        description="auto: bf16 where the hardware runs it natively (feature flags, no timing), "
        "else fp32; the resolved precision is recorded in the run and kept on --resume",
    )
    accumulate: Positive = Field(
        1, description="minibatches per optimizer step (gradient accumulation), per process"
    )
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    threads: NonNegative = Field(0, description="torch threads; 0 leaves PyTorch's default")
    log_every: Positive = 50
    eval_every: Positive | None = Field(
        None, description="steps between validations; None = each epoch"
    )
    keep_last: Positive = 2
    early_stopping_patience: NonNegative = Field(
        0, description="evaluations without improvement; 0 = off"
    )
    average_last: NonNegative = Field(0, description="average the last N checkpoints at the end")

    @model_validator(mode="after")
    def _warmup(self) -> TrainConfig:
        if self.warmup_fraction is not None and self.warmup_steps:
            raise ValueError(
                f"set train.warmup_steps ({self.warmup_steps}) or train.warmup_fraction "
                f"({self.warmup_fraction}), not both"
            )
        if self.warmup_fraction is not None and self.schedule == "inverse_sqrt":
            raise ValueError(
                "schedule inverse_sqrt is defined by train.warmup_steps; warmup_fraction does not apply"
            )
        return self


class DecodeConfig(Strict):
    """Decoding for generation and translation.

    Translation decodes with ``greedy`` or ``beam`` search (``nbest`` ≤ ``beam_size``; greedy gives
    one hypothesis); language models generate with ``greedy`` or ``sample`` (``temperature``,
    ``top_k``).
    """

    strategy: Literal["greedy", "beam", "sample"] = "greedy"
    beam_size: Positive = 5
    nbest: Positive = 1
    length_penalty: Annotated[float, Field(ge=0.0, le=10.0)] = 1.0
    max_len_a: Annotated[float, Field(ge=0.0, le=100.0)] = 1.5
    max_len_b: Annotated[int, Field(ge=0, le=100_000)] = 10
    temperature: Annotated[float, Field(gt=0.0, le=100.0)] = 1.0
    top_k: NonNegative = 0
    precision: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="evaluation and decoding (validation during training too): fp32, or bf16 "
        "as a faster option whose outputs agree with fp32 up to near-tied tokens; auto, from "
        "older runs, means fp32",
    )

    @field_validator("precision", mode="before")
    @classmethod
    def _auto_is_fp32(cls, value: object) -> object:
        # inference never switches precision by machine: a sentence's output must not depend
        # on the CPU it is decoded on (older configs say auto, which meant that)
        return "fp32" if value == "auto" else value

    @model_validator(mode="after")
    def _nbest(self) -> DecodeConfig:
        width = self.beam_size if self.strategy == "beam" else 1
        if self.nbest > width:
            raise ValueError(
                f"decode.nbest={self.nbest} needs a beam at least that wide, but the search is "
                + (f"beam with beam_size={self.beam_size}" if width > 1 else f"{self.strategy}")
            )
        return self


class ExperimentConfig(Strict):
    """One experiment: the four sections of a YAML config file, checked against each other."""

    name: str = "experiment"
    data: DataConfig = DataConfig()
    model: ModelConfig = RNNLMConfig()
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()

    @property
    def task(self) -> str:
        """``language_modeling``, ``translation``, …: what the model is for."""
        return self.model.task

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        data, model = self.data, self.model
        wanted = DATASET_TASKS[data.dataset]
        if wanted != model.task:
            raise ValueError(
                f"data.dataset={data.dataset} is a {wanted.replace('_', ' ')} dataset, but "
                f"model.arch={model.arch} is a {model.task.replace('_', ' ')} model"
            )
        if model.task == "translation":
            if self.decode.strategy == "sample":
                raise ValueError(
                    "decode.strategy=sample is for language models; translation decodes with "
                    "greedy or beam"
                )
            if getattr(model, "share_embeddings", False) and not (
                data.tokenizer == "subword" and data.subword.joint
            ):
                raise ValueError(
                    "model.share_embeddings needs one vocabulary for both sides: "
                    "data.tokenizer: subword with data.subword.joint: true (or set "
                    "model.share_embeddings: false)"
                )
            model_len = getattr(model, "max_len", None)
            if model_len is not None and model_len < data.max_len:
                raise ValueError(
                    f"model.max_len={model_len} is smaller than data.max_len={data.max_len}: "
                    "the model could not read the longest sentences; raise model.max_len"
                )
        if model.arch == "transformer_lm" and model.max_len < data.num_steps:
            raise ValueError(
                f"model.max_len={model.max_len} is smaller than data.num_steps={data.num_steps}: "
                "training windows would not fit; raise model.max_len"
            )
        if model.task == "classification":
            images = data.dataset in IMAGE_DATASETS
            if images != (model.arch in ("vit", "cnn_image")):
                kind = "an image" if images else "a text"
                raise ValueError(
                    f"data.dataset={data.dataset} is {kind} dataset, but model.arch={model.arch} "
                    f"classifies {'text' if images else 'images'}"
                )
            if model.arch == "transformer_classifier" and model.max_len < data.max_len:
                raise ValueError(
                    f"model.max_len={model.max_len} is smaller than data.max_len={data.max_len}; "
                    "raise model.max_len"
                )
        if model.task == "language_modeling" and data.tokenizer == "subword":
            raise ValueError("language models take data.tokenizer char or word, not subword")
        return self


# ------------------------------------------------------------------------------ loading, errors
def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """Field names of the (nested) model that holds the key at ``loc[-1]``, if it can be found."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(current, type) and issubclass(current, BaseModel):
            if part in current.model_fields:
                current = current.model_fields[part].annotation
            else:
                return None
        else:  # a discriminated union: ``part`` is the tag (e.g. 'rnn_lm')
            found = None
            for option in _union_members(current):
                arch = option.model_fields.get("arch")
                if arch is not None and arch.default == part:
                    found = option
            if found is None:
                return None
            current = found
        current = _strip_optional(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


_ARCH_TAGS = {
    "rnn_lm",
    "transformer_lm",
    "seq2seq",
    "bahdanau",
    "transformer",
    "transformer_classifier",
    "rnn_classifier",
    "cnn_text",
    "vit",
    "cnn_image",
    "ar",
    "rnn_forecaster",
    "transformer_forecaster",
}


def _union_members(tp: Any) -> list[type[BaseModel]]:
    tp = _strip_annotated(tp)
    members = typing.get_args(tp) if typing.get_origin(tp) in (Union, types.UnionType) else (tp,)
    return [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _strip_optional(tp: Any) -> Any:
    tp = _strip_annotated(tp)
    if typing.get_origin(tp) in (Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return _strip_annotated(members[0])
    return tp


def format_validation_error(err: ValidationError, source: str) -> str:
    """Turn pydantic's report into lines of ``source: key: problem (got value; allowed ...)``."""
    lines = [f"invalid configuration in {short(source, 300)}:"]
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        # the discriminated union puts its tag ('rnn_lm', ...) into the path: not a key the user wrote
        key = ".".join(str(p) for p in loc if p not in _ARCH_TAGS) or "<top level>"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            allowed = _allowed_keys(ExperimentConfig, loc)
            hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            lines.append(f"  {key}: unknown key (value {short(e['input'])}){hint}")
        elif e["type"] == "union_tag_invalid" or isinstance(e["input"], dict):
            lines.append(f"  {key}: {msg}")  # a cross-field rule: its message names the keys
        else:
            lines.append(f"  {key}: {msg} (got {short(e['input'])})")
    return "\n".join(lines)


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: error messages stay readable."""
    text = value if isinstance(value, str) and limit > 80 else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(
            f"override {short(item)} is not of the form section.key=value (e.g. train.lr=3e-4)"
        )
    key, raw = item.split("=", 1)
    path = key.strip().split(".")
    if not all(path):
        raise ConfigError(f"override {short(item)}: empty key segment in {key!r}")
    try:
        value = parse_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"override {short(item)}: value {short(raw)} is not valid YAML: {exc}"
        ) from exc
    return path, value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set dotted ``key=value`` overrides into a raw config dict (validation happens after)."""
    out = copy.deepcopy(raw)
    for item in overrides:
        path, value = _parse_override(item)
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"override {short(item)}: {part!r} is a value, not a section")
            node = child
        node[path[-1]] = value
    return out


def config_from_dict(raw: dict[str, Any], source: str = "<dict>") -> ExperimentConfig:
    """Validate a raw mapping into an :class:`ExperimentConfig` or raise :class:`ConfigError`."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections at the top level, got {type(raw).__name__}"
        )
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{self.name}:{line}: key {key!r} appears twice in one section "
                    f"(first on line {seen[key]}); keep one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 floats: PyYAML (YAML 1.1) reads "3e-4" and "1e5" as strings, the way people write rates
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def parse_yaml(text: str, name: str = "<string>") -> Any:
    """YAML with unique keys and YAML 1.2 floats (see :class:`_UniqueKeyLoader`)."""
    loader = _UniqueKeyLoader(text)
    loader.name = name
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, naming the file and line of any problem (duplicate keys included)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config path is a directory, not a YAML file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return parse_yaml(text, str(path))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


PACKAGED_CONFIGS = Path(__file__).resolve().parent / "configs"


def find_config(name: str | Path) -> Path:
    """A config file path, or the name of a config shipped with seqlab (``dates-bahdanau``)."""
    path = Path(name)
    if path.exists() or len(path.parts) > 1:
        return path
    packaged = PACKAGED_CONFIGS / (path.name if path.suffix else f"{path.name}.yaml")
    if packaged.is_file():
        return packaged
    shipped = ", ".join(sorted(p.stem for p in PACKAGED_CONFIGS.glob("*.yaml")))
    raise ConfigError(f"config file not found: {path} (configs shipped with seqlab: {shipped})")


#: keys a config file must set itself (here or by an override): a run never trains a built-in
#: default dataset or model because a section was left out
REQUIRED_KEYS = ("data.dataset", "model.arch")
_EXAMPLES = {
    "data.dataset": "data: {dataset: text, path: my.txt}",
    "model.arch": "model: {arch: rnn_lm}",
}


def _missing_keys(raw: dict[str, Any]) -> list[str]:
    missing = []
    for key in REQUIRED_KEYS:
        node: Any = raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            missing.append(key)
    return missing


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML experiment file (or a shipped config by name), apply overrides, validate.

    The file (with its overrides) must name its dataset and model (:data:`REQUIRED_KEYS`); the
    other keys may be left to their defaults.
    """
    path = find_config(path)
    raw = read_yaml(path)
    if raw is None:
        raise ConfigError(
            f"{path} is empty; an experiment needs at least its data and model sections "
            "(see configs/reference.yaml)"
        )
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}: expected a mapping of sections (data, model, train, decode) at the top "
            f"level, got {type(raw).__name__}"
        )
    source = str(path)
    if overrides:
        raw = apply_overrides(raw, overrides)
        source += " with overrides " + " ".join(overrides)
    missing = [
        f"  {key}: missing; a config file names its {key.split('.')[0]} itself (e.g. "
        f"{_EXAMPLES[key]}): seqlab never trains a built-in default"
        for key in _missing_keys(raw)
    ]
    try:
        cfg = config_from_dict(raw, source)
    except ConfigError as exc:
        if missing:
            raise ConfigError("\n".join([str(exc), *missing])) from None
        raise
    if missing:
        raise ConfigError("\n".join([f"invalid configuration in {short(source, 300)}:", *missing]))
    return cfg


def config_to_dict(cfg: ExperimentConfig) -> dict[str, Any]:
    """Plain JSON/YAML-safe mapping (tuples become lists) that :func:`config_from_dict` accepts."""
    return cfg.model_dump(mode="json")


def save_config(cfg: ExperimentConfig, path: str | Path) -> None:
    """Write the resolved config as YAML, atomically."""
    from seqlab.io import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
