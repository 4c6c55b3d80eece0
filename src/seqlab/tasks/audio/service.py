"""The audio task served: ``POST /classify-audio`` (labels and probabilities of recordings sent
as WAV files, and on request the log-mel frames the model read with its attention over time),
declared once as :data:`SERVICE`.

A recording passes the check every surface calls (:mod:`seqlab.data.audio`), header first:
its header is checked against the file, once (:func:`seqlab.data.wav.checked_wav`: not a WAV, a
sample rate outside 1–768 kHz, a ``data`` size that disagrees with the file are each a 422
naming the recording, in the words ``seqlab classify`` uses), then against the server's limits
before anything is decoded: its size in bytes (``max_upload_bytes``, 413), its length in seconds
(``max_audio_seconds``, 413), its sample rate (``max_sample_rate``, 422) and channels
(``max_channels``, 422). The server's defaults are lower than the command line's, and why, is
said once: :mod:`seqlab.audio_limits`. Then it is read as the command line reads a
file (:func:`seqlab.data.audio.load_clip`, its header not read again), and heard by the
no-speech detector: a result with no speech has ``label: null``, ``speech: false`` and the
``reason``; a recording below the model's rate has its warning in ``warnings``.

**One pass per request.** Whatever a request asks beside the labels (the frames, the attention),
each recording is heard once and each one with speech read by the model once: its log-mel
computed once, the body run once, every answer taken from that pass
(:class:`~seqlab.tasks.audio.reader.ClipReader`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from seqlab.data.audio import AudioError, Clip
from seqlab.data.wav import CheckedWav, checked_wav
from seqlab.serving.limits import LimitExceeded, Limits, check
from seqlab.serving.service import (
    InputError,
    OptionsHandler,
    Request,
    Service,
    answer_each,
    read_base64,
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
    label: str | None = Field(description="the most probable label; null: no speech")
    probability: float = Field(description="its probability (0 when no speech)")
    probabilities: dict[str, float] = Field(description="every label's (all 0 when no speech)")
    speech: bool = Field(
        description="whether the no-speech detector heard anything: false for silence, "
        "near-silence (no 25 ms frame at or above -60 dBFS) or a clip shorter than one "
        "analysis window; the model is then not asked"
    )
    reason: str | None = Field(None, description="why no speech (null when speech)")
    warnings: list[str] = Field(
        default_factory=list,
        description="what the answer should be read beside: a sample rate below the model's "
        "(upsampling cannot restore what the recording lacks), channels that cancel out",
    )
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
    """One recording sent: its bytes with the header checked, once."""

    wav: CheckedWav

    @property
    def name(self) -> str:
        return self.wav.name

    @property
    def seconds(self) -> float:
        return self.wav.info.seconds

    @property
    def rate(self) -> int:
        return self.wav.info.rate


def _header(data: bytes, where: str, limits: Limits) -> Recording:
    """The recording's header, checked (as every surface checks it) and held against the
    server's limits before anything is decoded."""
    try:
        wav = checked_wav(data, where)
    except AudioError as exc:
        raise InputError(str(exc)) from None
    info = wav.info
    if info.rate > limits.max_sample_rate:
        raise LimitExceeded(
            f"{where}'s sample rate is {info.rate} Hz, over the server's limit "
            f"max_sample_rate={limits.max_sample_rate}",
            "max_sample_rate",
            422,
        )
    check(info.channels, limits, "max_channels", f"{where}'s channels")
    if info.seconds > limits.max_audio_seconds:
        raise LimitExceeded(
            f"{where} is {info.seconds:.1f} s long, over the server's limit "
            f"max_audio_seconds={limits.max_audio_seconds:g}",
            "max_audio_seconds",
            413,
        )
    return Recording(wav)


@dataclass(frozen=True)
class Recordings:
    """One request's inputs, read: its recordings (headers checked) and what it asks for beside
    the labels (request fields, not options of ``seqlab classify``)."""

    recordings: list[Recording]
    attention: bool
    features: bool


class AudioHandler(OptionsHandler):
    """``POST /classify-audio`` for one audio classifier. The generic handler: the recordings
    are its inputs, checked before queuing; the command takes no options model, so the jobs
    form one group, each job answered on its own (one may hold a recording that cannot be
    read)."""

    def details(self) -> dict[str, Any]:
        p = self.predictor
        return {
            "labels": list(p.labels),
            "input": "audio",
            "sample_rate": p.rate,
            "attention": p.attention_kinds,
            # the softmax temperature chosen on validation (calibration.json; 1: uncalibrated)
            "temperature": round(float(getattr(p.model, "temperature", 1.0)), 4),
        }

    def inputs(self, request: AudioRequest) -> tuple[Recordings, int]:
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
        return Recordings(recordings, request.attention, request.features), len(recordings)

    def answer(self, inputs: list[Recordings], options: None) -> list[Any]:
        return answer_each(inputs, self._answer)

    def _answer(self, work: Recordings) -> AudioResponse:
        recordings, attention, features = work.recordings, work.attention, work.features
        p = self.predictor
        clips: list[Clip] = []
        for r in recordings:
            try:
                clips.append(p.read_clip(r.wav, r.name, self.limits.max_audio_seconds))
            except AudioError as exc:
                raise InputError(str(exc)) from None
        reader = p.reader  # one pass: what was asked for, from it
        readings = reader.read(
            [c.samples for c in clips], self.limits.max_batch, feats=features, attention=attention
        )
        results = []
        for r, clip, reading in zip(recordings, clips, readings, strict=True):
            row, heard, feats = reading.probs, reading.speech, reading.feats
            best = int(row.argmax())
            received = reader.over_time(reading) if attention and heard.heard else None
            results.append(
                Heard(
                    label=p.labels[best] if heard.heard else None,
                    probability=float(row[best]),
                    probabilities={lab: float(q) for lab, q in zip(p.labels, row, strict=True)},
                    speech=heard.heard,
                    reason=heard.reason,
                    warnings=[str(w) for w in clip.warnings],
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
