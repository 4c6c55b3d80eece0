"""The WAV container: its header checked against the file before anything is decoded
(:func:`wav_info`; held with the file's bytes, :func:`checked_wav`, it is not read again), then
its samples decoded by libsndfile (:func:`decode_wav`).

libsndfile (the ``soundfile`` package) reads 8-bit unsigned, 16/24/32-bit PCM and 32/64-bit
float WAVs, any number of channels, any rate, but trusts the header: it reads a file cut short
without complaint, and stops where the header says the samples end even when the file holds
more. So the RIFF chunks are walked first and the ``data`` chunk's declared size compared with
the file: a size larger than the bytes that follow (a truncated file) or smaller (bytes after
the samples that are not a RIFF chunk: a header that hides part of the recording, so that a
35 s file would be read as 5 s) is an :class:`~seqlab.data.audio.AudioError`. The sizes that
streaming writers leave when the length is unknown (0 and 0xFFFFFFFF) are accepted, the
samples read to the end of the file (libsndfile reads a size of 0 as no samples: it is read from
a copy whose size says 0xFFFFFFFF), and so is a missing pad byte after an odd-sized chunk. A sample rate outside ``MIN_RATE``–``MAX_RATE`` is
refused from the ``fmt`` chunk, before libsndfile reads it.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import IO

import numpy as np

from seqlab.audio_limits import MAX_RATE, MIN_RATE
from seqlab.errors import DataError

#: libsndfile's names of the WAV containers (WAVE_FORMAT_EXTENSIBLE, and RF64 past 4 GiB)
WAV_FORMATS = ("WAV", "WAVEX", "RF64")
#: ``data`` chunk sizes that streaming writers leave in the header (the length is unknown)
UNKNOWN_SIZES = (0, 0xFFFFFFFF)


class AudioError(DataError):
    """An audio file or array that cannot be a clip; the message names it and says why."""


@dataclass(frozen=True)
class WavInfo:
    """What a WAV file's header says, once checked: ``rate`` (Hz), ``frames`` (samples per
    channel), ``channels`` and libsndfile's ``subtype`` (``PCM_16``, ``FLOAT``, ...)."""

    rate: int
    frames: int
    channels: int
    subtype: str
    unknown_size_at: int | None = None  # where a data size of 0 stands, read as 0xFFFFFFFF

    @property
    def seconds(self) -> float:
        return self.frames / self.rate


def check_rate(rate: int, name: str) -> None:
    """``rate`` within :data:`MIN_RATE`–:data:`MAX_RATE`, else an :class:`AudioError`."""
    if not MIN_RATE <= rate <= MAX_RATE:
        raise AudioError(
            f"{name}: sample rate {rate:,} Hz; expected {MIN_RATE:,} to {MAX_RATE:,} Hz "
            "(the header is corrupt or this is not audio)"
        )


def _is_chunk_id(raw: bytes) -> bool:
    return len(raw) == 4 and all(0x20 <= b <= 0x7E for b in raw)


def _check_data_size(fh: IO[bytes], size: int, start: int, declared: int, name: str) -> None:
    """The ``data`` chunk (samples from byte ``start``, ``declared`` bytes) fits the file: no
    fewer bytes follow it, and what follows its end is RIFF chunks only."""
    if declared in UNKNOWN_SIZES:
        return
    available = size - start
    if declared > available:
        raise AudioError(
            f"{name}: truncated WAV: its header promises {declared:,} bytes of samples, the "
            f"file holds {available:,} (it was cut short; nothing was decoded)"
        )
    pos = start + declared + (declared & 1)  # chunks are padded to an even size
    while pos < size:  # a missing pad byte at the very end leaves pos == size + 1: accepted
        fh.seek(pos)
        head = fh.read(8)
        length = struct.unpack("<I", head[4:])[0] if len(head) == 8 else 0
        if len(head) < 8 or not _is_chunk_id(head[:4]) or pos + 8 + length > size:
            raise AudioError(
                f"{name}: the header disagrees with the file: its data chunk declares "
                f"{declared:,} bytes of samples, and {size - pos:,} bytes that are no RIFF "
                f"chunk follow them (the file holds {available:,} bytes from the samples on); "
                "nothing was decoded (write the file again with a correct header)"
            )
        pos += 8 + length + (length & 1)


def _check_riff(fh: IO[bytes], name: str) -> int | None:
    """Walk a RIFF/WAVE file's chunk headers: the ``fmt`` chunk's rate and the ``data``
    chunk's size checked (nothing for another container: libsndfile judges it). Returns where
    a ``data`` size of 0 stands (None if it is not 0)."""
    fh.seek(0, io.SEEK_END)
    size = fh.tell()
    fh.seek(0)
    head = fh.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos = 12
    while pos + 8 <= size:
        fh.seek(pos)
        chunk, length = struct.unpack("<4sI", fh.read(8))
        body = fh.read(8) if chunk == b"fmt " and length >= 8 else b""
        if len(body) == 8:  # format tag, channels, then the sample rate
            check_rate(struct.unpack("<I", body[4:8])[0], name)
        if chunk == b"data":
            _check_data_size(fh, size, pos + 8, length, name)
            return pos + 4 if length == 0 else None
        pos += 8 + length + (length & 1)
    return None


def _readable(fh: IO[bytes], unknown_size_at: int | None) -> IO[bytes]:
    """``fh``, or a copy whose ``data`` size of 0 says 0xFFFFFFFF (read to the end)."""
    fh.seek(0)
    if unknown_size_at is None:
        return fh
    raw = bytearray(fh.read())
    raw[unknown_size_at : unknown_size_at + 4] = struct.pack("<I", 0xFFFFFFFF)
    return io.BytesIO(bytes(raw))


def _libsndfile_reason(exc: Exception) -> str:
    return str(exc).rsplit(": ", 1)[-1]  # libsndfile names the file object: dropped


def wav_info(fh: IO[bytes], name: str) -> WavInfo:
    """The checked header of a WAV file object (seekable, binary); nothing is decoded.

    Raises:
        AudioError: not a WAV libsndfile can read, another container, a sample rate outside
            :data:`MIN_RATE`–:data:`MAX_RATE`, or a ``data`` size that disagrees with the file.
    """
    import soundfile as sf

    at = _check_riff(fh, name)
    try:
        with sf.SoundFile(_readable(fh, at)) as f:
            if f.format not in WAV_FORMATS:
                raise AudioError(
                    f"{name}: a {f.format} file, not a WAV; expected a .wav (RIFF/WAVE) file"
                )
            info = WavInfo(int(f.samplerate), int(f.frames), int(f.channels), str(f.subtype), at)
    except sf.LibsndfileError as exc:
        raise AudioError(
            f"{name}: not a WAV file libsndfile can read ({_libsndfile_reason(exc)})"
        ) from None
    check_rate(info.rate, name)
    return info


@dataclass(frozen=True)
class CheckedWav:
    """A WAV file's bytes with the header :func:`wav_info` checked (:func:`checked_wav`): what
    the server holds against its limits, then gives :func:`seqlab.data.audio.load_clip`, which
    decodes it without reading the header again. ``name`` is what messages call it."""

    data: bytes
    info: WavInfo
    name: str


def checked_wav(data: bytes, name: str) -> CheckedWav:
    """``data`` with its header checked (:func:`wav_info`, and its errors); nothing decoded."""
    return CheckedWav(data, wav_info(io.BytesIO(data), name), name)


def decode_wav(fh: IO[bytes], info: WavInfo, name: str) -> np.ndarray:
    """The samples ``(N, C)`` float32 of a WAV file whose header :func:`wav_info` passed: PCM
    scaled by its full range into [-1, 1], float as written."""
    import soundfile as sf

    try:
        with sf.SoundFile(_readable(fh, info.unknown_size_at)) as f:
            data = f.read(info.frames, dtype="float32", always_2d=True)  # (N, C)
    except sf.LibsndfileError as exc:
        raise AudioError(
            f"{name}: not a WAV file libsndfile can read ({_libsndfile_reason(exc)})"
        ) from None
    if len(data) != info.frames:
        raise AudioError(f"{name}: truncated WAV: read {len(data):,} of {info.frames:,} frames")
    return data
