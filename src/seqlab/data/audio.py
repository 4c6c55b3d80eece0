"""Audio input, read right or refused: every recording seqlab is given (by ``seqlab classify``,
the Python API or the server) passes :func:`load_clip`, which reads it as mono float32 samples
at the rate asked for, or refuses it with one line naming it and saying what was expected.

**Sources.** A recording is one of

- a WAV file: a path, its bytes (``bytes``, ``bytearray``, ``memoryview``), or a file object
  opened in binary mode (read from where it stands; a text-mode file is refused). Decoding and
  the header's checks: :mod:`seqlab.data.wav`; its bytes with the header checked already
  (:class:`~seqlab.data.wav.CheckedWav`, the server's) are decoded without reading it again.
- ``(samples, rate)``: a NumPy array, a tensor or a list, and the rate in Hz as an ``int``, a
  NumPy integer or a whole ``float`` (``8000.0``; ``8000.5`` is refused). A bare array or
  tensor has no rate and is refused, saying to pass ``(samples, rate)``.

**Layout of an array.** ``(N,)`` is mono. A 2-D array is read as channels last, ``(N, C)``,
or channels first, ``(C, N)`` (torchaudio's), only where that is unambiguous: the channel side
holds at most :data:`MAX_ARRAY_CHANNELS` and the other side at least :data:`LAYOUT_RATIO`
times as many. Any other 2-D shape (``(300, 20)``, ``(50, 2)``) and any other rank is refused.

**Values of an array.** Floats must lie in [-1, 1]; outside it the message names the
conversion (``divide by 32768`` for 16-bit values written as floats). Integers are PCM, scaled
by their type's full range: ``int8``, ``int16``, ``int32`` (by 2³¹) and ``uint8`` (8-bit
WAV's offset binary). An ``int32`` or ``int64`` array whose values all fit int16 (largest
magnitude ≤ 32768, not all zero) holds 16-bit samples in a wider type: scaled by its own range
it would be near-silence, so it is refused with "cast to int16"; ``int64`` is never a PCM type
and is refused with the type its values fit. Other unsigned types, booleans and complex
numbers are refused. NaN and infinite values are refused in arrays and float WAVs alike, and a
float WAV holding values outside [-1, 1] is refused as an array is.

**Channels** are averaged. A clip whose channels cancel when averaged (the mix 30 dB or more
below its loudest channel, e.g. L = −R) carries an :class:`AudioWarning`; the mix is what the
model reads (the no-speech detector, :mod:`seqlab.data.speech`, then calls it silence).

**Rates.** The clip is resampled to the rate asked for with a polyphase filter,
``scipy.signal.resample_poly`` with the exact up/down factors (its Kaiser window, β = 5). A
recording below that rate carries a :class:`LowRateWarning` naming both rates: upsampling
cannot restore the frequencies the recording lacks. :func:`read_audio` warns
(``warnings.warn``); :func:`load_clip` returns the warnings with the clip
(:attr:`Clip.warnings`), for a server to send back.

**Limits.** Each surface's limits, and why they differ, are named once:
:mod:`seqlab.audio_limits`.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from torch import Tensor

from seqlab.audio_limits import LOCAL_LIMITS, MAX_RATE, MIN_RATE, SERVER_LIMITS, AudioLimits
from seqlab.data.wav import AudioError, CheckedWav, WavInfo, check_rate, decode_wav, wav_info

__all__ = [
    "LOCAL_LIMITS",
    "MAX_RATE",
    "MIN_RATE",
    "SERVER_LIMITS",
    "AudioError",
    "AudioLimits",
    "AudioWarning",
    "Clip",
    "LowRateWarning",
    "load_clip",
    "read_audio",
    "resample",
]

#: an array's channel side holds at most this many; its sample side at least LAYOUT_RATIO ×
MAX_ARRAY_CHANNELS, LAYOUT_RATIO = 8, 100
#: channels whose average is this many dB below the loudest channel cancel each other out
CANCEL_DB = 30.0

#: what a clip can be read from (see the module): a WAV file, or (samples, rate)
_WavSource = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes] | CheckedWav
AudioSource = _WavSource | tuple[Any, Any]


class AudioWarning(UserWarning):
    """A recording read, with something its answer should be read beside."""


class LowRateWarning(AudioWarning):
    """A recording below the model's rate: upsampled, it still lacks the high frequencies."""


@dataclass(frozen=True)
class Clip:
    """One recording: mono ``samples`` (float32, ``(N,)``) at ``rate`` Hz, where it came from
    (``source``), who speaks (``speaker``, when the dataset says), the rate it was recorded at
    (``original_rate``) and what was noticed reading it (``warnings``)."""

    samples: Tensor
    rate: int
    source: str
    speaker: str | None = None
    original_rate: int | None = None
    warnings: tuple[AudioWarning, ...] = ()

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """``samples`` (``(N,)``) from ``from_rate`` to ``to_rate`` Hz by polyphase filtering with
    the exact ratio (``scipy.signal.resample_poly``); float32 out, the input itself when the
    rates are equal. The output has ``ceil(N * to / from)`` samples."""
    if from_rate == to_rate:
        return samples.astype(np.float32, copy=False)
    from scipy.signal import resample_poly

    g = math.gcd(from_rate, to_rate)
    out = resample_poly(samples.astype(np.float64), to_rate // g, from_rate // g)
    return out.astype(np.float32)


# ------------------------------------------------------------------------------------ checks
def _check_length(frames: int, rate: int, max_seconds: float | None, name: str) -> None:
    if frames == 0:
        raise AudioError(f"{name}: empty clip (0 samples); expected some audio")
    if max_seconds is not None and frames > max_seconds * rate:
        raise AudioError(
            f"{name}: {frames / rate:.2f} s long ({frames:,} samples at {rate:,} Hz), over the "
            f"limit of {max_seconds:g} s; nothing was decoded (cut the recording first)"
        )


def _check_finite(x: np.ndarray, rate: int, name: str) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        first = int(np.flatnonzero(bad.any(axis=1) if x.ndim == 2 else bad)[0])
        nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
        raise AudioError(
            f"{name}: {nan} NaN and {inf} infinite sample(s), the first at sample {first:,} "
            f"({first / rate:.3f} s); expected finite samples"
        )


def _float_fix(peak: float) -> str:
    """The conversion that brings float samples whose largest magnitude is ``peak`` > 1 into
    [-1, 1]."""
    if peak <= 2.0:
        return f"clip them (np.clip(x, -1, 1)) or scale them (x / {peak:.4g})"
    if peak <= 32768.0:
        return "they look like 16-bit PCM values: divide by 32768"
    if peak <= 2.0**31:
        return "they look like 32-bit PCM values: divide by 2**31"
    return f"scale them into [-1, 1] (x / {peak:.4g})"


def _check_float_range(x: np.ndarray, name: str) -> None:
    peak = float(np.abs(x).max()) if x.size else 0.0
    if peak > 1.0:
        raise AudioError(
            f"{name}: float samples reach {peak:.6g}, outside [-1, 1]; {_float_fix(peak)}"
        )


def _scaled(x: np.ndarray, name: str) -> np.ndarray:
    """Array values as float samples in [-1, 1] (see the module's rules)."""
    kind, dtype = x.dtype.kind, x.dtype
    if kind == "f":
        _check_float_range(x, name)
        return x.astype(np.float32, copy=False)
    if kind not in "iu":
        raise AudioError(
            f"{name}: samples of type {dtype}; expected float in [-1, 1] or integer PCM "
            "(int16, int32, int8, uint8)"
        )
    if kind == "u" and dtype != np.uint8:
        raise AudioError(
            f"{name}: samples of type {dtype}, which no WAV holds; expected uint8 (8-bit PCM), "
            "int16, int32 or float in [-1, 1]"
        )
    if dtype == np.uint8:
        return ((x.astype(np.float64) - 128.0) / 128.0).astype(np.float32)
    peak = int(np.abs(x.astype(np.int64)).max()) if x.size else 0  # int64: |min| overflows
    if dtype in (np.int32, np.int64) and 0 < peak <= 32768:
        raise AudioError(
            f"{name}: {dtype} samples whose largest magnitude is {peak:,}, within int16's "
            f"range: 16-bit PCM in a wider type, which scaled by {dtype}'s range would be "
            "near-silence; cast to int16 (x.astype(np.int16)) or give floats (x / 32768)"
        )
    if dtype == np.int64 and peak > 0:
        fits = "cast to int32 (x.astype(np.int32))" if peak <= 2**31 else "scale them"
        raise AudioError(
            f"{name}: int64 samples (largest magnitude {peak:,}); int64 is no PCM type: "
            f"{fits}, or give floats in [-1, 1]"
        )
    full = 2.0 ** (8 * dtype.itemsize - 1)
    return (x.astype(np.float64) / full).astype(np.float32)


def _as_numpy(samples: Any, name: str) -> np.ndarray:
    if isinstance(samples, Tensor):
        t = samples.detach().cpu()
        return (t.float() if t.is_floating_point() else t).numpy()
    try:
        return np.asarray(samples)
    except (TypeError, ValueError):
        raise AudioError(f"{name}: samples that are not an array of numbers") from None


def _channels_last(x: np.ndarray, name: str) -> np.ndarray:
    """``(N,)`` or ``(N, C)`` from ``(N,)``, ``(N, C)`` or ``(C, N)`` (the module's rule)."""
    if x.ndim == 1:
        return x
    if x.ndim == 2:
        rows, cols = x.shape
        if cols <= MAX_ARRAY_CHANNELS and rows >= LAYOUT_RATIO * cols:
            return x
        if rows <= MAX_ARRAY_CHANNELS and cols >= LAYOUT_RATIO * rows:
            return x.T
    raise AudioError(
        f"{name}: samples of shape {tuple(x.shape)}; expected (N,), or (N, C) or (C, N) with "
        f"C ≤ {MAX_ARRAY_CHANNELS} channels and N ≥ {LAYOUT_RATIO}·C samples (one recording; "
        "average the channels yourself where the shape cannot tell them from the samples)"
    )


def _rate_of(rate: Any, name: str) -> int:
    """A rate in Hz: an int, a NumPy integer or a whole float (8000.0)."""
    if isinstance(rate, Tensor) and rate.ndim == 0:
        rate = rate.item()
    whole = isinstance(rate, int | np.integer) and not isinstance(rate, bool | np.bool_)
    if isinstance(rate, float | np.floating) and math.isfinite(rate) and rate == int(rate):
        whole, rate = True, int(rate)
    if not whole:
        raise AudioError(f"{name}: sample rate {rate!r}; expected a whole number of Hz (8000)")
    check_rate(int(rate), name)
    return int(rate)


def _downmix(x: np.ndarray, name: str) -> tuple[np.ndarray, list[AudioWarning]]:
    """Mono ``(N,)`` from ``(N,)`` or ``(N, C)``, and a warning where the channels cancel."""
    if x.ndim == 1:
        return x, []
    mono = x.mean(axis=1, dtype=np.float32) if x.shape[1] > 1 else x[:, 0]
    loudest = float(np.sqrt(np.mean(np.square(x, dtype=np.float64), axis=0)).max())
    level = float(np.sqrt(np.mean(np.square(mono, dtype=np.float64))))
    if x.shape[1] > 1 and loudest > 0 and level < loudest * 10 ** (-CANCEL_DB / 20):
        below = "silent" if level == 0 else f"{20 * math.log10(loudest / level):.0f} dB below it"
        note = (
            f"{name}: its {x.shape[1]} channels cancel out when averaged to mono (the mix is "
            f"{below}, the loudest channel at {20 * math.log10(loudest):.1f} dBFS RMS): "
            "channels in antiphase; give one channel (x[:, 0])"
        )
        return mono, [AudioWarning(note)]
    return mono, []


# ----------------------------------------------------------------------------------- sources
def _from_array(
    pair: tuple[Any, ...], name: str, max_seconds: float | None
) -> tuple[np.ndarray, int]:
    """``(N,)`` or ``(N, C)`` float32 samples and their rate from ``(samples, rate)``."""
    if len(pair) != 2:
        raise AudioError(f"{name}: a tuple of {len(pair)}; expected (samples, rate)")
    x, rate = _as_numpy(pair[0], name), _rate_of(pair[1], name)
    x = _channels_last(x, name)
    if x.dtype.kind == "f":
        _check_finite(x, rate, name)
    _check_length(len(x), rate, max_seconds, name)
    return _scaled(x, name), rate


def _from_wav(
    fh: IO[bytes], name: str, max_seconds: float | None, info: WavInfo | None = None
) -> tuple[np.ndarray, int]:
    """``(N, C)`` float32 samples and their rate from a WAV file object (seekable, binary);
    ``info``: its header, checked already (else it is read and checked here)."""
    info = info or wav_info(fh, name)
    _check_length(info.frames, info.rate, max_seconds, name)
    data = decode_wav(fh, info, name)
    _check_finite(data, info.rate, name)
    if info.subtype in ("FLOAT", "DOUBLE"):
        _check_float_range(data, name)
    return data, info.rate


def _file_bytes(fh: Any, name: str) -> bytes:
    """The rest of a file object opened in binary mode."""
    if isinstance(fh, io.TextIOBase):
        raise AudioError(f"{name}: a file opened in text mode; open it in binary mode ('rb')")
    try:
        data = fh.read()
    except UnicodeDecodeError:
        raise AudioError(
            f"{name}: a file opened in text mode; open it in binary mode ('rb')"
        ) from None
    if not isinstance(data, bytes | bytearray):
        raise AudioError(
            f"{name}: a file object that gives {type(data).__name__}, not bytes; open the file "
            "in binary mode ('rb')"
        )
    return bytes(data)


def source_name(source: Any) -> str:
    """What messages call a recording given without a name: a path, a file object's name,
    ``<bytes>``, ``<array>`` or ``<file>``."""
    if isinstance(source, str | os.PathLike):
        return str(source)
    if isinstance(source, bytes | bytearray | memoryview):
        return "<bytes>"
    if isinstance(source, tuple):
        return "<array>"
    named = getattr(source, "name", None)
    return named if isinstance(named, str) else "<file>"


def _samples_of(source: Any, name: str, max_seconds: float | None) -> tuple[np.ndarray, int]:
    """The source's samples ``(N,)`` or ``(N, C)`` float32 and its own rate."""
    if isinstance(source, tuple):
        return _from_array(source, name, max_seconds)
    if isinstance(source, bytes | bytearray | memoryview):
        return _from_wav(io.BytesIO(bytes(source)), name, max_seconds)
    if isinstance(source, CheckedWav):
        return _from_wav(io.BytesIO(source.data), name, max_seconds, source.info)
    if isinstance(source, str | os.PathLike):
        try:
            with open(Path(source), "rb") as fh:
                return _from_wav(fh, name, max_seconds)
        except FileNotFoundError:
            raise AudioError(f"{name}: no such file") from None
        except IsADirectoryError:
            raise AudioError(f"{name}: a folder, not a WAV file") from None
    if isinstance(source, np.ndarray | Tensor):
        raise AudioError(
            f"{name}: an array of shape {tuple(source.shape)} without a sample rate; pass "
            "(samples, rate), e.g. (x, 8000)"
        )
    if callable(getattr(source, "read", None)):
        return _from_wav(io.BytesIO(_file_bytes(source, name)), name, max_seconds)
    what = "None" if source is None else f"a {type(source).__name__}"
    raise AudioError(
        f"{name}: {what}; expected a WAV file (a path, its bytes or a file "
        "object opened 'rb') or (samples, rate)"
    )


def load_clip(
    source: AudioSource,
    *,
    rate: int | None = None,
    max_seconds: float | None = None,
    name: str | None = None,
    speaker: str | None = None,
) -> Clip:
    """A recording read as a mono :class:`Clip` at ``rate`` Hz (resampled; None: its own), with
    the warnings reading it gave (:attr:`Clip.warnings`: channels that cancel, a rate below
    ``rate``); the one check every surface calls (see the module for the rules).

    Args:
        source: a path, a WAV file's bytes (or a :class:`~seqlab.data.wav.CheckedWav`) or
            binary file object, or ``(samples, rate)``.
        rate: the rate wanted (Hz), or None to keep the source's.
        max_seconds: longer clips are refused before they are decoded (None: no limit).
        name: what messages call the source (default: :func:`source_name`).
        speaker: who speaks, when known.

    Raises:
        AudioError: one line naming the source and what was expected.
    """
    if rate is not None:
        check_rate(rate, "the rate asked for")
    where = name or source_name(source)
    samples, own = _samples_of(source, where, max_seconds)
    mono, notes = _downmix(samples, where)
    if rate is not None and rate != own:
        if own < rate:
            notes.append(
                LowRateWarning(
                    f"{where}: recorded at {own:,} Hz, below the {rate:,} Hz the model reads: "
                    f"it is upsampled, but upsampling cannot restore the sounds above "
                    f"{own // 2:,} Hz that the recording lacks; read its answer with care"
                )
            )
        mono = resample(mono, own, rate)
    return Clip(
        torch.from_numpy(np.ascontiguousarray(mono, dtype=np.float32)),
        rate or own,
        where,
        speaker,
        own,
        tuple(notes),
    )


def warn_about(clip: Clip, stacklevel: int = 2) -> None:
    """Each of ``clip``'s warnings as a Python warning (``warnings.warn``, its category)."""
    for note in clip.warnings:
        warnings.warn(note, stacklevel=stacklevel + 1)


def read_audio(
    source: AudioSource,
    *,
    rate: int | None = None,
    max_seconds: float | None = None,
    name: str | None = None,
) -> tuple[np.ndarray, int]:
    """A clip's mono float32 samples ``(N,)`` and their rate: ``rate`` if given (resampled,
    :func:`resample`), else the source's own. :func:`load_clip`'s checks; its warnings are
    issued (``warnings.warn``: :class:`LowRateWarning`, :class:`AudioWarning`).

    Raises:
        AudioError: see :func:`load_clip`.
    """
    clip = load_clip(source, rate=rate, max_seconds=max_seconds, name=name)
    warn_about(clip)
    return clip.samples.numpy(), clip.rate
