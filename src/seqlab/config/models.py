"""The config class of each of seqlab's own architectures (the ``model`` section,
:class:`seqlab.config.ModelConfigBase`) but the audio classifier's (:mod:`seqlab.config.audio`);
found by ``model.arch`` with :func:`seqlab.config.archs.model_config`.

They live with the config, not beside their models (:mod:`seqlab.models`), so that a config
validates without importing a model (or PyTorch); each model's module imports its class from
here and registers it with its builder (:class:`seqlab.catalog.ModelSpec`). An architecture
defined outside seqlab keeps its config class beside its model and registers both.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from seqlab import catalog
from seqlab.config.sections import (
    AttentionName,
    CellName,
    ModelConfigBase,
    PositionsName,
    check_heads,
    check_positions,
)
from seqlab.config.strict import NonNegative, Positive, Probability
from seqlab.deprecation import renamed_value


# ----------------------------------------------------------------------------- language models
class RNNLMConfig(ModelConfigBase):
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
        cell = catalog.cells()[self.cell]
        if not cell.fusable and self.backend == "fused":
            raise ValueError(
                f"cell {self.cell} has no fused backend ({cell.why_not_fused}); "
                "set backend: scratch"
            )
        if self.tie_weights and self.embed_dim != self.hidden_size:
            raise ValueError(
                f"tie_weights needs embed_dim == hidden_size (> 0), got embed_dim={self.embed_dim}, "
                f"hidden_size={self.hidden_size}"
            )
        return self


class TransformerLMConfig(ModelConfigBase):
    """Decoder-only Transformer language model (causal self-attention)."""

    arch: Literal["transformer_lm"] = "transformer_lm"
    task: ClassVar[str] = "language_modeling"
    d_model: Positive = 128
    num_heads: Positive = 4
    num_layers: Positive = 4
    d_ff: Positive = 512
    dropout: Probability = 0.0
    attention_dropout: Probability | None = None  # None: as dropout
    max_len: Positive = 1024
    positions: PositionsName = "learned"
    attention: AttentionName = "softmax"
    norm: Literal["post", "pre"] = "pre"
    tie_weights: bool = True

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerLMConfig:
        check_heads(self.d_model, self.num_heads)
        check_positions(self.positions, self.attention, True, self.d_model, self.num_heads)
        return self


# --------------------------------------------------------------------------------- translation
class Seq2SeqConfig(ModelConfigBase):
    """RNN encoder–decoder (Sutskever et al. 2014 / Cho et al. 2014)."""

    arch: Literal["seq2seq"] = "seq2seq"
    task: ClassVar[str] = "translation"
    cell: CellName = "gru"
    embed_dim: Positive = 256
    hidden_size: Positive = 512
    num_layers: Positive = 2
    dropout: Probability = 0.2


class BahdanauConfig(ModelConfigBase):
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
    cell: CellName = Field("gru", description="the recurrent cell of encoder and decoder")
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


class TransformerConfig(ModelConfigBase):
    """Encoder–decoder Transformer (Vaswani et al. 2017).

    ``dropout`` applies to each sub-layer's output before the residual sum and to the embeddings
    plus positions (§5.4); ``attention_dropout`` to the attention weights. Unset, it follows
    ``dropout`` (d2l.ai §11.3's and tensor2tensor's choice); 0 is the paper's and fairseq's.
    ``positions`` applies to the encoder's and the decoder's self-attention (sinusoidal: §3.5);
    ``attention: linear`` makes the decoder's self-attention causal linear attention.
    """

    arch: Literal["transformer"] = "transformer"
    task: ClassVar[str] = "translation"
    d_model: Positive = 256
    num_heads: Positive = 4
    encoder_layers: Positive = 4
    decoder_layers: Positive = 4
    d_ff: Positive = 1024
    dropout: Probability = 0.1
    attention_dropout: Probability | None = None
    max_len: Positive = 512
    norm: Literal["post", "pre"] = "post"
    share_embeddings: bool = False
    tie_output: bool = True
    positions: PositionsName = "sinusoidal"
    attention: AttentionName = "softmax"

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerConfig:
        check_heads(self.d_model, self.num_heads)
        check_positions(self.positions, self.attention, False, self.d_model, self.num_heads)
        return self


# -------------------------------------------------------------- classifiers of text and images
class RNNClassifierConfig(ModelConfigBase):
    """An RNN (optionally bidirectional) over tokens; the final states or pooled outputs feed a
    linear head."""

    arch: Literal["rnn_classifier"] = "rnn_classifier"
    task: ClassVar[str] = "classification"
    cell: CellName = "lstm"
    embed_dim: Positive = 128
    hidden_size: Positive = 128
    num_layers: Positive = 1
    bidirectional: bool = True
    pooling: Literal["last", "mean", "max"] = "max"
    dropout: Probability = 0.3


class CNNTextConfig(ModelConfigBase):
    """Convolutions of several widths over word embeddings, max-over-time pooling (Kim 2014)."""

    arch: Literal["cnn_text"] = "cnn_text"
    task: ClassVar[str] = "classification"
    embed_dim: Positive = 128
    widths: Annotated[list[Positive], Field(min_length=1)] = [3, 4, 5]
    channels: Positive = 100
    dropout: Probability = 0.5
    depth: Annotated[int, Field(ge=1, le=8)] = Field(
        1,
        description="convolution layers: depth - 1 layers of width 3 (same padding, ReLU, "
        "zeros past each sequence's end) before the layer of several widths; 1 is Kim's CNN",
    )


class TransformerClassifierConfig(ModelConfigBase):
    """Transformer encoder over tokens, pooled (a [CLS] token or the mean of the real positions),
    then a linear classification head."""

    arch: Literal["transformer_classifier"] = "transformer_classifier"
    task: ClassVar[str] = "classification"
    d_model: Positive = 128
    num_heads: Positive = 4
    num_layers: Positive = 2
    d_ff: Positive = 512
    dropout: Probability = 0.1
    attention_dropout: Probability | None = None  # None: as dropout
    max_len: Positive = 512
    positions: PositionsName = "learned"
    norm: Literal["post", "pre"] = "pre"
    pooling: Literal["cls", "mean", "max"] = "mean"

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerClassifierConfig:
        check_heads(self.d_model, self.num_heads)
        check_positions(self.positions, "softmax", False, self.d_model, self.num_heads)
        return self


VIT_PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"num_layers": 6, "d_model": 64, "d_ff": 256, "num_heads": 4},
    "base": {"num_layers": 12, "d_model": 768, "d_ff": 3072, "num_heads": 12},
    "large": {"num_layers": 24, "d_model": 1024, "d_ff": 4096, "num_heads": 16},
    "huge": {"num_layers": 32, "d_model": 1280, "d_ff": 5120, "num_heads": 16},
}


class ViTConfig(ModelConfigBase):
    """Vision Transformer (Dosovitskiy et al. 2021): patches as tokens, a class token, learned
    positions (or another ``positions`` scheme, 1-D over the raster order), a pre-norm encoder
    and an MLP head. ``preset`` fills the four size keys (an explicit key wins)."""

    arch: Literal["vit"] = "vit"
    task: ClassVar[str] = "classification"
    inputs: ClassVar[str] = "image"
    preset: Literal["tiny", "base", "large", "huge"] | None = None
    image_size: Positive = 28
    patch_size: Positive = 4
    channels: Positive = 1
    num_layers: Positive | None = None
    d_model: Positive | None = None
    d_ff: Positive | None = None
    num_heads: Positive | None = None
    dropout: Probability = 0.0
    attention_dropout: Probability | None = None  # None: as dropout
    positions: PositionsName = "learned"

    @model_validator(mode="after")
    def _sizes(self) -> ViTConfig:
        preset = VIT_PRESETS.get(self.preset or "", {})
        for key in ("num_layers", "d_model", "d_ff", "num_heads"):
            if getattr(self, key) is None:
                if key not in preset:
                    raise ValueError(f"model.{key} is needed (or a model.preset)")
                object.__setattr__(self, key, preset[key])
        check_heads(self.d_model, self.num_heads)
        check_positions(self.positions, "softmax", False, self.d_model, self.num_heads)
        if self.image_size % self.patch_size:
            raise ValueError(
                f"image_size={self.image_size} is not a multiple of patch_size={self.patch_size}"
            )
        return self


class ImageCNNConfig(ModelConfigBase):
    """A small convolutional network for images: blocks of two 3×3 convolutions and 2×2
    max-pooling, then a hidden layer and the head."""

    arch: Literal["cnn_image"] = "cnn_image"
    task: ClassVar[str] = "classification"
    inputs: ClassVar[str] = "image"
    image_size: Positive = 28
    channels: Positive = 1
    widths: Annotated[list[Positive], Field(min_length=1)] = [32, 64]
    hidden: Positive = 128
    dropout: Probability = 0.25


# --------------------------------------------------------------------------------- forecasters
class ARConfig(ModelConfigBase):
    """Autoregressive model AR(τ): x̂_t = f(x_{t-1}, …, x_{t-τ}); linear (``hidden: 0``) or an MLP
    with one hidden ReLU layer (d2l's 10 units)."""

    arch: Literal["ar"] = "ar"
    task: ClassVar[str] = "forecasting"
    inputs: ClassVar[str] = "series"
    linear_skip: bool = Field(False, description="add a linear AR(τ) term to the output")
    hidden: NonNegative = 10


class RNNForecasterConfig(ModelConfigBase):
    """Latent autoregressive model h_t = g(h_{t-1}, x_{t-1}), x̂_t from h_t: an RNN (``cell``) over
    the window, a linear read-out of the last state."""

    arch: Literal["rnn_forecaster"] = "rnn_forecaster"
    task: ClassVar[str] = "forecasting"
    inputs: ClassVar[str] = "series"
    linear_skip: bool = Field(False, description="add a linear AR(τ) term to the output")
    cell: CellName = "gru"
    hidden_size: Positive = 32
    num_layers: Positive = 1
    dropout: Probability = 0.0


class TransformerForecasterConfig(ModelConfigBase):
    """Causal Transformer over the window (values projected to d_model, learned positions or
    another ``positions`` scheme); the last position's output predicts the next value."""

    arch: Literal["transformer_forecaster"] = "transformer_forecaster"
    task: ClassVar[str] = "forecasting"
    inputs: ClassVar[str] = "series"
    linear_skip: bool = Field(False, description="add a linear AR(τ) term to the output")
    d_model: Positive = 32
    num_heads: Positive = 4
    num_layers: Positive = 2
    d_ff: Positive = 64
    dropout: Probability = 0.0
    positions: PositionsName = "learned"

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerForecasterConfig:
        check_heads(self.d_model, self.num_heads)
        check_positions(self.positions, "softmax", True, self.d_model, self.num_heads)
        return self
