"""The server's per-request limits and queue settings, each a named setting (``seqlab serve
--max-chars …``); a request over one is answered 413 or 422 with the limit's name.

As Hugging Face's text-generation-inference and LibreTranslate do, every limit is a setting
with a name, and the answer to a request over it says which one: ``{"error": "...", "limit":
"max_chars"}``. Sizes (characters, texts, bytes, values) answer 413 *Payload Too Large*;
parameters (beam, n-best, tokens, steps) answer 422 *Unprocessable Content*.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, PositiveInt

from seqlab.audio_limits import SERVER_LIMITS
from seqlab.errors import SeqlabError


class Limits(BaseModel):
    """What one request may ask for, and how requests wait and are batched."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_chars: PositiveInt = Field(1000, description="characters per text (413)")
    max_texts: PositiveInt = Field(64, description="texts or images per request (413)")
    max_beam: PositiveInt = Field(10, description="beam size (422)")
    max_nbest: PositiveInt = Field(10, description="hypotheses returned per text (422)")
    max_tokens: PositiveInt = Field(
        1000,
        le=100_000,
        description="tokens to generate (422); at most 100,000, generate's own cap",
    )
    max_steps: PositiveInt = Field(1000, description="values to forecast (422)")
    max_history: PositiveInt = Field(100_000, description="past values of a forecast (413)")
    max_upload_bytes: PositiveInt = Field(
        1 << 20, description="bytes of one uploaded image, recording or CSV (413)"
    )
    max_image_pixels: PositiveInt = Field(
        4096 * 4096, description="pixels of one uploaded image, before resizing (413)"
    )
    max_audio_seconds: PositiveFloat = Field(
        SERVER_LIMITS.max_seconds,
        description="seconds of one uploaded recording, read from its header (413); lower than "
        "seqlab classify's 600 s: a shared server bounds the work one request may cost "
        "(seqlab.audio_limits)",
    )
    max_sample_rate: PositiveInt = Field(
        SERVER_LIMITS.max_sample_rate,
        description="sample rate of one uploaded recording, in Hz (422)",
    )
    max_channels: PositiveInt = Field(
        SERVER_LIMITS.max_channels or 8, description="channels of one uploaded recording (422)"
    )
    max_body_bytes: PositiveInt = Field(16 << 20, description="bytes of a request body (413)")
    body_timeout_s: PositiveFloat = Field(
        10.0,
        description="seconds a request's body may take to arrive, from its first read (408): "
        "a client that declares a body and stalls holds no connection longer",
    )
    max_connections: PositiveInt = Field(
        256,
        description="connections and requests the server holds at once (seqlab serve; "
        "beyond them 503)",
    )
    timeout_s: PositiveFloat = Field(
        60.0, description="seconds a request may wait and run before it is answered 504"
    )
    max_queue: PositiveInt = Field(
        256, description="requests waiting per model; beyond it 503 with Retry-After"
    )
    max_batch: PositiveInt = Field(64, description="texts decoded together in one batch")
    batch_wait_ms: NonNegativeFloat = Field(
        5.0, description="how long a batch waits for more requests, when some are queued"
    )


class LimitExceeded(SeqlabError):
    """A request over one of the :class:`Limits` (its ``limit`` names it)."""

    def __init__(self, message: str, limit: str, status: int) -> None:
        super().__init__(message)
        self.limit, self.status = limit, status


def check(value: int, limits: Limits, name: str, what: str, status: int = 422) -> None:
    """Raise :class:`LimitExceeded` when ``value`` exceeds the limit ``name``."""
    bound = getattr(limits, name)
    if value > bound:
        raise LimitExceeded(
            f"{what} is {value}, over the server's limit {name}={bound}", name, status
        )
