"""Audio clips: reading WAV files of any common kind into mono float samples at a chosen rate.

A clip comes from a path, the bytes of a file, or a raw ``(samples, rate)`` array. WAV files are
decoded with libsndfile (the ``soundfile`` package): 8-bit unsigned, 16/24/32-bit PCM, 32/64-bit
float, any number of channels (averaged to mono), any rate. Samples come out as float32 in
[-1, 1] (PCM is scaled by its full range; float WAVs are taken as written) and are resampled to
the rate asked for with a polyphase filter, ``scipy.signal.resample_poly`` with the exact
up/down factors ``to / g`` and ``from / g``, ``g = gcd(from, to)`` (its default Kaiser-window
anti-aliasing filter, β = 5).

Everything that would make a clip silently wrong is an :class:`AudioError` naming the file, and
nothing is decoded past the header for most of them: a file that is not a WAV (or that
libsndfile cannot read), a truncated WAV (libsndfile reads what is there without complaint, so
the ``data`` chunk's declared size is compared with the bytes that follow it), a zero or absurd
sample rate (outside :data:`MIN_RATE`–:data:`MAX_RATE`), an empty clip, one longer than the
caller's ``max_seconds``, and NaN or infinite samples (float WAVs can hold them).
"""

from __future__ import annotations

import io
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np
import torch
from torch import Tensor

from seqlab.errors import DataError

__all__ = ["AudioError", "Clip", "load_clip", "read_audio", "resample"]

#: the lowest and highest sample rates accepted (Hz): below, no speech survives; above, the
#: header is corrupt (768 kHz is the highest rate audio interfaces record at)
MIN_RATE, MAX_RATE = 1_000, 768_000
#: libsndfile's names of the WAV containers (WAVE_FORMAT_EXTENSIBLE, and RF64 past 4 GiB)
WAV_FORMATS = ("WAV", "WAVEX", "RF64")
#: ``data`` chunk sizes that streaming writers leave in the header (the length is unknown)
_UNKNOWN_SIZES = (0, 0xFFFFFFFF)

#: what a clip can be read from: a path, a file's bytes, or ``(samples, rate)`` with samples
#: ``(N,)`` or channels last ``(N, C)`` (integer samples are scaled by their type's range)
AudioSource = str | os.PathLike[str] | bytes | tuple[Any, int]


class AudioError(DataError):
    """An audio file or array that cannot be a clip; the message names it and says why."""


@dataclass(frozen=True)
class Clip:
    """One recording: mono ``samples`` (float32, ``(N,)``) at ``rate`` Hz, where it came from
    (``source``, a file name) and who speaks (``speaker``, when the dataset says)."""

    samples: Tensor
    rate: int
    source: str
    speaker: str | None = None

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


def _check_rate(rate: int, name: str) -> None:
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(
            f"{name}: sample rate {rate:,} Hz; expected {MIN_RATE:,} to {MAX_RATE:,} Hz "
            "(the header is corrupt or this is not audio)"
        )


def _check_length(frames: int, rate: int, max_seconds: float | None, name: str) -> None:
    if frames == 0:
        raise AudioError(f"{name}: empty clip (0 samples); expected some audio")
    if max_seconds is not None and frames > max_seconds * rate:
        raise AudioError(
            f"{name}: {frames / rate:.2f} s long ({frames:,} samples at {rate:,} Hz), over the "
            f"limit of {max_seconds:g} s; nothing was decoded (cut the recording first)"
        )


def _check_finite(samples: np.ndarray, rate: int, name: str) -> None:
    bad = ~np.isfinite(samples)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        nan, inf = int(np.isnan(samples).sum()), int(np.isinf(samples).sum())
        raise AudioError(
            f"{name}: {nan} NaN and {inf} infinite sample(s), the first at sample {first:,} "
            f"({first / rate:.3f} s); expected finite samples"
        )


def _riff_header(fh: IO[bytes]) -> tuple[int | None, int | None, int | None]:
    """From a RIFF/WAVE file: the ``fmt`` chunk's sample rate, the ``data`` chunk's declared
    size and the bytes that follow its header (each None where the file does not say: not
    RIFF, or no such chunk). Reads chunk headers only."""
    fh.seek(0, io.SEEK_END)
    size = fh.tell()
    fh.seek(0)
    head = fh.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None, None, None
    rate = None
    pos = 12
    while pos + 8 <= size:
        fh.seek(pos)
        chunk, length = struct.unpack("<4sI", fh.read(8))
        body = fh.read(8) if chunk == b"fmt " and length >= 8 else b""
        if len(body) == 8:  # format tag, channels, then the sample rate
            rate = struct.unpack("<I", body[4:8])[0]
        if chunk == b"data":
            return rate, length, size - pos - 8
        pos += 8 + length + (length & 1)  # chunks are padded to an even size
    return rate, None, None


def _read_wav(fh: BinaryIO, name: str, max_seconds: float | None) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the rate of a WAV file object (see the module's checks)."""
    import soundfile as sf

    header_rate, declared, available = _riff_header(fh)
    if header_rate is not None:
        _check_rate(header_rate, name)
    fh.seek(0)
    try:
        with sf.SoundFile(fh) as f:
            if f.format not in WAV_FORMATS:
                raise AudioError(
                    f"{name}: a {f.format} file, not a WAV; expected a .wav (RIFF/WAVE) file"
                )
            rate, frames, channels = f.samplerate, f.frames, f.channels
            _check_rate(rate, name)
            known = declared is not None and declared not in _UNKNOWN_SIZES
            if known and available is not None and declared > available:
                raise AudioError(
                    f"{name}: truncated WAV: its header promises {declared:,} bytes of "
                    f"samples, the file holds {available:,} (it was cut short; nothing was "
                    "decoded)"
                )
            _check_length(frames, rate, max_seconds, name)
            data = f.read(frames, dtype="float32", always_2d=True)  # (N, C)
    except sf.LibsndfileError as exc:
        reason = str(exc).rsplit(": ", 1)[-1]  # libsndfile names the file object: drop it
        raise AudioError(f"{name}: not a WAV file libsndfile can read ({reason})") from None
    if len(data) != frames:
        raise AudioError(f"{name}: truncated WAV: read {len(data):,} of {frames:,} frames")
    samples = data[:, 0] if channels == 1 else data.mean(axis=1, dtype=np.float32)
    return samples, rate


def _from_array(
    samples: Any, rate: int, name: str, max_seconds: float | None
) -> tuple[np.ndarray, int]:
    """Mono float32 samples from ``(N,)`` or ``(N, C)`` values (integers scaled to [-1, 1])."""
    x = samples.detach().cpu().numpy() if isinstance(samples, Tensor) else np.asarray(samples)
    if not isinstance(rate, int | np.integer) or isinstance(rate, bool):
        raise AudioError(f"{name}: sample rate {rate!r}; expected an integer number of Hz")
    _check_rate(int(rate), name)
    if x.ndim not in (1, 2):
        raise AudioError(f"{name}: samples of shape {x.shape}; expected (N,) or (N, channels)")
    if np.issubdtype(x.dtype, np.unsignedinteger):
        half = float(np.iinfo(x.dtype).max // 2 + 1)
        x = (x.astype(np.float64) - half) / half
    elif np.issubdtype(x.dtype, np.signedinteger):
        x = x.astype(np.float64) / -float(np.iinfo(x.dtype).min)
    elif not np.issubdtype(x.dtype, np.floating):
        raise AudioError(f"{name}: samples of type {x.dtype}; expected numbers")
    _check_length(len(x), int(rate), max_seconds, name)
    x = x.astype(np.float32, copy=False)
    return (x if x.ndim == 1 else x.mean(axis=1, dtype=np.float32)), int(rate)


def read_audio(
    source: AudioSource,
    *,
    rate: int | None = None,
    max_seconds: float | None = None,
    name: str | None = None,
) -> tuple[np.ndarray, int]:
    """A clip's mono float32 samples ``(N,)`` and their rate: ``rate`` if given (resampled,
    :func:`resample`), else the file's own.

    Args:
        source: a path, the bytes of a WAV file, or ``(samples, rate)``.
        rate: the rate wanted (Hz), or None to keep the source's.
        max_seconds: longer clips are refused before they are decoded (None: no limit).
        name: what error messages call the source (default: the path, ``<bytes>`` or
            ``<array>``).

    Raises:
        AudioError: not a readable WAV, truncated, empty, too long, non-finite samples, or a
            sample rate outside :data:`MIN_RATE`–:data:`MAX_RATE` (the source's or ``rate``).
    """
    if rate is not None:
        _check_rate(rate, "the rate asked for")
    if isinstance(source, tuple):
        samples, own = _from_array(source[0], source[1], name or "<array>", max_seconds)
        where = name or "<array>"
    elif isinstance(source, bytes | bytearray):
        where = name or "<bytes>"
        samples, own = _read_wav(io.BytesIO(source), where, max_seconds)
    else:
        where = name or str(source)
        try:
            with open(Path(source), "rb") as fh:
                samples, own = _read_wav(fh, where, max_seconds)
        except FileNotFoundError:
            raise AudioError(f"{where}: no such file") from None
        except IsADirectoryError:
            raise AudioError(f"{where}: a folder, not a WAV file") from None
    _check_finite(samples, own, where)
    if rate is None or rate == own:
        return samples, own
    return resample(samples, own, rate), rate


def load_clip(
    source: AudioSource,
    *,
    rate: int | None = None,
    max_seconds: float | None = None,
    name: str | None = None,
    speaker: str | None = None,
) -> Clip:
    """:func:`read_audio` as a :class:`Clip` (``source`` named by ``name``, else the path)."""
    samples, own = read_audio(source, rate=rate, max_seconds=max_seconds, name=name)
    if name is None:
        name = "<array>" if isinstance(source, tuple) else "<bytes>"
        if not isinstance(source, tuple | bytes | bytearray):
            name = str(source)
    return Clip(torch.from_numpy(samples), own, name, speaker)
