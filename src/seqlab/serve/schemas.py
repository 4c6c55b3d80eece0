"""The bodies every server shares, as pydantic models (also the OpenAPI schema at ``/docs``):
errors, ``/models`` and ``/health``. Each task's request and response bodies are declared by the
task's package with its route (:class:`seqlab.serving.service.Service`).

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

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ErrorBody(BaseModel):
    """Every error: a message, and the limit's name when a limit was exceeded."""

    error: str
    limit: str | None = None


# ---------------------------------------------------------------------------------- /models
class ModelInfo(BaseModel):
    """One served model: the fields below, then what its task says of it (labels, languages,
    input, image size, window, decoding settings, the attention it returns)."""

    model_config = ConfigDict(extra="allow")

    name: str
    task: str = Field(description="its task, as its model config names it")
    route: str = Field(description="where to send its requests: POST route")
    panel: str | None = Field(
        None, description="the page's script for its task (none: a form from the route's schema)"
    )
    arch: str
    dataset: str
    engine: str = Field(description="what runs the model: seqlab, or ctranslate2 (+ quantization)")
    workers: int = Field(description="batches of this model decoded at once")
    parameters: int
    checkpoint_step: int | None
    metrics: dict[str, float] = Field(description="validation metrics of the loaded checkpoint")
    attention: list[str] = Field(
        default_factory=list,
        description="the attention maps the model can return, as its task names them (encoder, "
        "decoder, cross, alignment, self, rollout)",
    )


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    models: int
    queued: dict[str, int] = Field(description="requests waiting, per model")
    batches: dict[str, int] = Field(description="batches run so far, per model")
    texts: dict[str, int] = Field(description="texts (sentences, images, series) run so far")
