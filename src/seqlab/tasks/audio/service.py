"""The audio task served: ``POST /classify-audio`` (labels and probabilities of recordings sent
as WAV files, and on request the log-mel frames the model read with its attention over time),
declared once as :data:`SERVICE`.

A recording is checked against the server's limits from its header, before anything is
decoded: its size in bytes (``max_upload_bytes``, 413), its length in seconds
(``max_audio_seconds``, 413), its sample rate (``max_sample_rate``, 422) and channels
(``max_channels``, 422); then it is read as the command line reads a file
(:func:`seqlab.data.audio.read_audio`: not a WAV, truncated, empty, NaN or infinite samples are
each a 422 naming the recording).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile
from pydantic import BaseModel, Field
from torch import Tensor

from seqlab.data.audio import AudioError
from seqlab.serve.limits import LimitExceeded, Limits, check
from seqlab.serve.service import (
    Handler,
    InputError,
    Job,
    Request,
    Service,
    read_base64,
    run_each,
    weights,
)


class AudioRequest(Request):
    audio: str | list[str] = Field(
        description="WAV files, base64 (or data: URLs): any rate, PCM or float, mono or more "
        "channels (averaged)"
    )
    attention: bool = Field(
        False,
        description="also return the log-mel frames the model read and the attention each "
        "frame received (models with self-attention)",
    )
    features: bool = Field(False, description="also return the log-mel frames the model read")


class Heard(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]
    seconds: float = Field(description="the recording's length")
    sample_rate: int = Field(description="the recording's own rate (it is resampled)")
    features: list[list[float]] | None = Field(
        None, description="frames × mel channels: the normalised log-mel the model read"
    )
    attention: list[float] | None = Field(
        None, description="per frame, its share of the last layer's attention (sums to 1)"
    )
    hop_seconds: float = Field(description="seconds between two frames")


class AudioResponse(BaseModel):
    model: str
    results: list[Heard]


@dataclass
class Recording:
    data: bytes
    name: str
    seconds: float
    rate: int


def _header(data: bytes, where: str, limits: Limits) -> Recording:
    """The recording's header, checked against the limits before it is decoded."""
    try:
        info = soundfile.info(io.BytesIO(data))
    except (RuntimeError, soundfile.LibsndfileError):
        raise InputError(f"{where}: not a WAV file (libsndfile cannot read it)") from None
    if info.samplerate > limits.max_sample_rate:
        raise LimitExceeded(
            f"{where}'s sample rate is {info.samplerate} Hz, over the server's limit "
            f"max_sample_rate={limits.max_sample_rate}",
            "max_sample_rate",
            422,
        )
    check(info.channels, limits, "max_channels", f"{where}'s channels")
    seconds = info.frames / info.samplerate if info.samplerate else 0.0
    if seconds > limits.max_audio_seconds:
        raise LimitExceeded(
            f"{where} is {seconds:.1f} s long, over the server's limit "
            f"max_audio_seconds={limits.max_audio_seconds:g}",
            "max_audio_seconds",
            413,
        )
    return Recording(data, where, seconds, int(info.samplerate))


class AudioHandler(Handler):
    """``POST /classify-audio`` for one audio classifier."""

    def details(self) -> dict[str, Any]:
        p = self.predictor
        return {
            "labels": list(p.labels),
            "input": "audio",
            "sample_rate": p.rate,
            "attention": p.attention_kinds,
        }

    def prepare(self, request: AudioRequest) -> tuple[Any, int]:
        if request.attention and not self.predictor.has_attention:
            raise InputError(
                f"model {self.name!r} (model.arch={self.cfg.model.arch}) has no self-attention "
                "over its frames"
            )
        single = isinstance(request.audio, str)
        values = [request.audio] if single else list(request.audio)
        if not values:
            raise InputError("audio is an empty list; give at least one WAV file")
        check(len(values), self.limits, "max_texts", "the number of recordings", 413)
        recordings = [
            _header(
                read_base64(
                    v, "audio" if single else f"audio {i}", self.limits, "data:audio/wav;base64,..."
                ),
                where,
                self.limits,
            )
            for i, v in enumerate(values, start=1)
            for where in ["audio" if single else f"audio {i}"]
        ]
        return (recordings, request.attention, request.features), len(recordings)

    def run(self, jobs: Sequence[Job]) -> list[Any]:
        return run_each(jobs, self._answer)

    def _answer(self, work: tuple[list[Recording], bool, bool]) -> AudioResponse:
        recordings, attention, features = work
        p = self.predictor
        waves: list[Tensor] = []
        for r in recordings:
            try:
                waves.append(p.read(r.data, r.name, self.limits.max_audio_seconds))
            except AudioError as exc:
                raise InputError(str(exc)) from None
        probs = p.probabilities_of(waves, self.limits.max_batch)
        results = []
        for r, wave, row in zip(recordings, waves, probs, strict=True):
            best = int(row.argmax())
            feats = received = None
            if attention:
                feats, received = p.over_time(wave)
            elif features:
                feats, _ = p.frames(wave)
            results.append(
                Heard(
                    label=p.labels[best],
                    probability=float(row[best]),
                    probabilities={lab: float(q) for lab, q in zip(p.labels, row, strict=True)},
                    seconds=r.seconds,
                    sample_rate=r.rate,
                    features=None if feats is None else weights(feats),
                    attention=None if received is None else weights(received),
                    hop_seconds=p.hop_seconds,
                )
            )
        return AudioResponse(model=self.name, results=results)


SERVICE = Service(
    route="/classify-audio",
    request=AudioRequest,
    response=AudioResponse,
    handler=AudioHandler,
    summary="Classify recordings",
    panel=Path(__file__).with_name("panel.js"),
)
