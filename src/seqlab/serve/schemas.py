"""Request and response bodies of every route, as pydantic models (they are also the OpenAPI
schema at ``/docs``).

A request names a model by the name the server gave it (never a path); ``model`` may be left
out when the server holds exactly one model of the route's task. Unknown fields are refused
(422), so a misspelt option never passes silently, and so is a field of the wrong JSON type
(pydantic's strict mode: ``"beam": "5"``, ``"nbest": 2.0``, ``"text": 5`` or ``true`` for a
number are 422s naming the field, never converted; a whole number is taken for a float).

A response that read text carries ``warnings``: each text holding tokens that the model's
vocabulary lacks, named (``text 2``, ``prefix``) with those tokens, which the model read as
``<unk>``.

Attention weights are nested lists: ``layers × heads × queries × keys``; each row (one query)
sums to 1 over the keys.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

Matrix = list[list[float]]
#: layers × heads × queries × keys
LayerHeads = list[list[Matrix]]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(
        None,
        description="the model's name (see /models); may be left out when the server holds one "
        "model of this task",
        max_length=200,
    )


class ErrorBody(BaseModel):
    """Every error: a message, and the limit's name when a limit was exceeded."""

    error: str
    limit: str | None = None


# ---------------------------------------------------------------------------------- /models
class ModelInfo(BaseModel):
    name: str
    task: Literal["translation", "classification", "language_modeling", "forecasting"]
    arch: str
    dataset: str
    engine: str = Field(description="what runs the model: seqlab, or ctranslate2 (+ quantization)")
    workers: int = Field(description="batches of this model decoded at once")
    parameters: int
    checkpoint_step: int | None
    metrics: dict[str, float] = Field(description="validation metrics of the loaded checkpoint")
    languages: dict[str, str] | None = None
    labels: list[str] | None = None
    input: Literal["text", "image", "series"] = "text"
    image_size: int | None = None
    window: int | None = None
    attention: list[str] = Field(
        default_factory=list,
        description="the attention the model can return: encoder, decoder, cross (Transformer), "
        "alignment (RNN attention), self (classifiers), rollout (ViT)",
    )
    decoding: dict[str, float | int | str] | None = None


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    models: int
    queued: dict[str, int] = Field(description="requests waiting, per model")
    batches: dict[str, int] = Field(description="batches run so far, per model")
    texts: dict[str, int] = Field(description="texts (sentences, images, series) run so far")


# ------------------------------------------------------------------------------- /translate
class TranslateRequest(_Request):
    text: str | list[str] = Field(description="one text or a list")
    beam: PositiveInt | None = Field(
        None, description="beam size; 1 = greedy (default: the run's decode section)"
    )
    nbest: PositiveInt | None = Field(None, description="hypotheses per text (needs beam >= nbest)")
    length_penalty: float | None = Field(
        None,
        ge=0.0,
        le=10.0,
        description="beam search ranks by log_prob / length^length_penalty (needs beam > 1; "
        "default: the run's decode section)",
    )
    attention: bool = Field(
        False,
        description="also return, for the best output, its tokens with their log-probabilities "
        "and the attention weights (runs seqlab's own model)",
    )


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="what the search ranked by (length-normalised for beams)")
    log_prob: float | None = Field(None, description="log p(output, <eos> | source)")


class AttentionDetail(BaseModel):
    """The best output of one text, token by token, and where the model attended."""

    source_tokens: list[str] = Field(description="what the encoder read, <eos> included")
    target_tokens: list[str] = Field(description="the output tokens and the final <eos>")
    target_inputs: list[str] = Field(description="what the decoder read: <bos> and the outputs")
    log_probs: list[float] = Field(description="log-probability of each target token")
    alignment: Matrix | None = Field(
        None,
        description="targets × sources: an RNN's attention, or the Transformer's last-layer "
        "cross-attention averaged over heads",
    )
    cross: LayerHeads | None = Field(None, description="decoder layers × heads × targets × sources")
    encoder: LayerHeads | None = Field(
        None, description="encoder layers × heads × sources × sources"
    )
    decoder: LayerHeads | None = Field(
        None, description="decoder layers × heads × targets × decoder inputs (causal)"
    )


class Translation(BaseModel):
    text: str = Field(description="the best translation")
    hypotheses: list[Hypothesis]
    detail: AttentionDetail | None = None


def _warnings() -> Any:
    """The ``warnings`` field of a response that read text."""
    return Field(
        default_factory=list,
        description="texts holding tokens that the model's vocabulary lacks (read as <unk>), "
        "each named with its tokens: \"text 2: 1 token not in the model's vocabulary, read as "
        "<unk>: 'zzz'\"",
    )


class TranslateResponse(BaseModel):
    model: str
    engine: str
    translations: list[Translation]
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = _warnings()


# -------------------------------------------------------------------------------- /classify
class ClassifyRequest(_Request):
    text: str | list[str] | None = Field(None, description="text classifiers: one text or a list")
    image: str | list[str] | None = Field(
        None,
        description="image classifiers: base64 image files (PNG, JPEG, …), or data: URLs",
    )
    attention: bool = Field(False, description="also return self-attention (and ViT's rollout)")


class ClassAttention(BaseModel):
    tokens: list[str] = Field(description="tokens or patches ([CLS] first when the model has it)")
    layers: LayerHeads = Field(description="layers × heads × tokens × tokens")
    rollout: Matrix | None = Field(
        None, description="ViT: attention rollout over the patch grid (rows × columns)"
    )


class Classification(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]
    notes: list[str] = Field(default_factory=list)
    attention: ClassAttention | None = None


class ClassifyResponse(BaseModel):
    model: str
    results: list[Classification]
    warnings: list[str] = _warnings()


# -------------------------------------------------------------------------------- /generate
class GenerateRequest(_Request):
    prefix: str = Field("", description="text to continue")
    tokens: NonNegativeInt = Field(100, description="tokens to generate")
    temperature: NonNegativeFloat | None = Field(
        None, description="0 = greedy; > 0 samples (default: the run's decode section)"
    )
    top_k: NonNegativeInt | None = Field(None, description="sample among the k most likely")
    seed: int = Field(0, description="sampling seed (the same seed gives the same text)")
    stream: bool = Field(False, description="send tokens as server-sent events as they come")


class GenerateResponse(BaseModel):
    model: str
    text: str = Field(description="the prefix and its continuation")
    tokens: list[str] = Field(description="the generated tokens")
    warnings: list[str] = _warnings()


# -------------------------------------------------------------------------------- /forecast
class ForecastRequest(_Request):
    history: list[float] | None = Field(None, description="past values, oldest first")
    csv: str | None = Field(None, description="or a CSV file's text: a header, one row per step")
    column: str | None = Field(None, description="the CSV column (default: the last)")
    missing: Literal["error", "interpolate", "drop"] = Field(
        "error", description="empty or NaN CSV cells"
    )
    steps: PositiveInt = Field(description="values to predict")


class ForecastResponse(BaseModel):
    model: str
    window: int
    history: list[float] = Field(description="the values read (from history or the CSV)")
    forecast: list[float]
