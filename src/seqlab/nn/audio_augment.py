"""Training-time augmentations that model what differs between speakers, microphones and rooms.

Every function takes a padded batch of waveforms ``(B, N)`` (or, for VTLP, a spectrogram) with
each clip's length ``(B,)`` in samples and returns the same layout; the draws come from torch's
global generator (seeded by the trainer), one per clip:

- :func:`vtlp_warp` — vocal tract length perturbation (Jaitly & Hinton 2013, eq. 1): the
  frequency axis is scaled by a factor ``α`` up to a boundary frequency and linearly joined to
  the Nyquist frequency above it, as a longer or shorter vocal tract moves every formant by the
  same factor. :class:`seqlab.nn.audio.LogMel` applies it to its mel filters, per clip.
- :func:`speed_perturb` — the clip resampled to play ``f`` times faster (Ko et al. 2015): its
  length changes by ``1 / f``, its pitch and formants by ``f``.
- :func:`stretch` — the clip spoken ``r`` times as fast with its pitch kept (a phase-vocoder
  time stretch): a faster or slower talker.
- :func:`pitch_shift` — the pitch and the whole spectrum moved by ``s`` semitones with the
  length kept: a phase-vocoder time stretch by ``2^{s/12}`` (Flanagan & Golden 1966; the
  algorithm of librosa's ``phase_vocoder``) followed by a resampling back to the clip's length.
- :func:`channel_gains` — a random microphone and preamplifier: a gain, a smooth colouring of
  the spectrum (a random sum of slow cosines over log-frequency, at most ``eq`` dB either way)
  and, for some clips, a low-pass at a random cutoff (a band-limited microphone or line), as
  power gains per frequency bin that :class:`seqlab.nn.audio.LogMel` multiplies into the power
  spectrogram. The recordings of FSDD's six speakers differ by 20 dB in level, by a factor of 25
  in their share of energy above 3 kHz and by 25 dB in their noise floor.
- :func:`add_noise` — white, pink or brown noise (power ∝ ``1 / f^β``, β = 0, 1, 2) at a signal
  to noise ratio drawn in ``[snr_min, snr_max]`` dB, measured over each clip's own samples.
- :func:`reverberate` — a simulated room: the clip convolved with an impulse response of
  exponentially decaying Gaussian noise whose energy falls by 60 dB in ``RT60`` seconds, drawn
  in ``[rt60_min, rt60_max]`` (Schroeder's statistical model of late reverberation), the direct
  path first; the result keeps the clip's RMS.

None of them needs a file or a download: the noises and rooms are generated. This module
imports torch only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "add_noise",
    "channel_gains",
    "coloured_noise",
    "pitch_shift",
    "resample_rows",
    "reverberate",
    "room_response",
    "speed_perturb",
    "stretch",
    "uniform",
    "vtlp_warp",
]


def uniform(n: int, low: float, high: float) -> Tensor:
    """``(n,)`` float64 draws uniform in ``[low, high]`` from torch's global generator."""
    return low + (high - low) * torch.rand(n, dtype=torch.float64)


def _real(size: int, lengths: Tensor) -> Tensor:
    """``(B, size)`` mask, True at each row's first ``lengths`` positions."""
    return torch.arange(size, device=lengths.device)[None, :] < lengths[:, None]


def resample_rows(waves: Tensor, lengths: Tensor, sizes: Tensor) -> Tensor:
    """Each row's first ``lengths[i]`` samples linearly interpolated to ``sizes[i]`` samples
    (``F.interpolate(mode="linear")``'s sample positions, row by row), zero past them.
    Shape: ``(B, N)``, ``(B,)``, ``(B,)`` -> ``(B, max(sizes))``."""
    n = lengths.clamp(min=1).double()[:, None]  # (B, 1)
    m = sizes.clamp(min=1).double()[:, None]
    j = torch.arange(int(sizes.max()), dtype=torch.float64, device=waves.device)[None, :]
    x = ((j + 0.5) * n / m - 0.5).clamp(min=0.0)  # (B, M): where output j reads the input
    x = torch.minimum(x, n - 1)
    i0 = x.floor().long()
    i1 = torch.minimum(i0 + 1, (n - 1).long())
    frac = (x - i0).to(waves.dtype)
    out = waves.gather(1, i0) * (1 - frac) + waves.gather(1, i1) * frac
    return out.masked_fill(~_real(out.shape[1], sizes), 0.0)


# ------------------------------------------------------------------------------------- VTLP
def vtlp_warp(hz: Tensor, alpha: Tensor, nyquist: float, boundary: float = 0.6) -> Tensor:
    """Jaitly & Hinton's (2013) piecewise-linear warp of frequencies ``hz`` by ``alpha``.

    ``f' = α f`` below ``f_hi · min(α, 1) / α``, then the straight line to ``(nyquist,
    nyquist)``, with ``f_hi = boundary · nyquist`` (the paper's 4.8 kHz at 8 kHz). ``α = 1`` is
    the identity; the warp is monotone and keeps 0 and the Nyquist frequency.

    Shape: hz ``(F,)``, alpha ``(B,)`` -> ``(B, F)``.
    """
    a = alpha.to(hz.dtype)[:, None]  # (B, 1)
    f_hi = boundary * nyquist
    knee = f_hi * torch.clamp(a, max=1.0) / a  # (B, 1): where the slope changes
    low = hz[None, :] * a
    top = nyquist - (nyquist - f_hi * torch.clamp(a, max=1.0)) / (nyquist - knee) * (
        nyquist - hz[None, :]
    )
    return torch.where(hz[None, :] <= knee, low, top)


# ------------------------------------------------------------------------------ channel
def channel_gains(
    hz: Tensor, gain_db: Tensor, eq_db: Tensor, cutoff_hz: Tensor | None = None
) -> Tensor:
    """Power gains ``(B, F)`` of random microphones at frequencies ``hz`` ``(F,)``: a flat
    ``gain_db`` ``(B,)``, plus a smooth colouring of at most ``eq_db`` ``(B,)`` dB either way
    (three cosines over ``log2`` frequency from 100 Hz, random periods of 1–4 octaves and
    phases, their sum scaled to peak at ``eq_db``), times a 4th-order Butterworth low-pass
    magnitude ``1 / (1 + (f / f_c)^8)`` where ``cutoff_hz`` ``(B,)`` is given (``inf``: none).
    All gains 1 for ``gain_db = eq_db = 0`` and no cutoff."""
    b = len(gain_db)
    octave = torch.log2(hz.double().clamp(min=100.0) / 100.0)[None, None, :]  # (1, 1, F)
    period = uniform(3 * b, 1.0, 4.0).view(b, 3, 1)
    phase = uniform(3 * b, 0.0, 2 * math.pi).view(b, 3, 1)
    curve = torch.cos(2 * math.pi * octave / period + phase).sum(1)  # (B, F)
    curve = curve / curve.abs().amax(1, keepdim=True).clamp(min=1e-9)
    db = gain_db.double()[:, None] + eq_db.double()[:, None] * curve
    power = 10.0 ** (db / 10)
    if cutoff_hz is not None:
        ratio = hz.double()[None, :] / cutoff_hz.double()[:, None]
        power = power / (1 + ratio**8)
    return power.to(hz.dtype if hz.is_floating_point() else torch.float32)


# -------------------------------------------------------------------------------- speed
def speed_perturb(waves: Tensor, lengths: Tensor, factors: Tensor) -> tuple[Tensor, Tensor]:
    """Each clip played ``factors[i]`` times as fast (linear-interpolation resampling):
    ``round(n / f)`` samples. Shape: ``(B, N)``, ``(B,)``, ``(B,)`` -> ``(B, N')``, ``(B,)``."""
    sizes = torch.round(lengths.double() / factors.to(lengths.device)).long().clamp(min=1)
    return resample_rows(waves, lengths, sizes), sizes


# -------------------------------------------------------------------------------- pitch
def stretch(
    waves: Tensor, lengths: Tensor, rates: Tensor, n_fft: int = 256, hop: int = 64
) -> tuple[Tensor, Tensor]:
    """A phase-vocoder time stretch of each clip by ``rates[i]`` (> 1 faster, shorter), its
    pitch kept: magnitudes interpolated between analysis frames ``rate`` apart, each bin's
    phase advanced by its measured instantaneous frequency (librosa's ``phase_vocoder``).
    Shape: ``(B, N)``, ``(B,)``, ``(B,)`` -> ``(B, N')`` and the new lengths
    ``round(n / rate)``."""
    b, n = waves.shape
    window = torch.hann_window(n_fft, dtype=waves.dtype, device=waves.device)
    x = F.pad(waves, (0, max(0, n_fft - n)))
    spec = torch.stft(x, n_fft, hop, window=window, center=True, return_complex=True)  # (B, F, T)
    frames = (lengths // hop + 1).clamp(max=spec.shape[2])  # (B,): each clip's own frames
    rates = rates.to(torch.float64)[:, None]
    out_frames = int(torch.ceil((frames.max() - 1) / rates.min()).item()) + 1
    steps = torch.arange(out_frames, dtype=torch.float64, device=waves.device)[None, :] * rates
    last = (frames - 1).clamp(min=0)[:, None].double()
    steps = torch.minimum(steps, last)  # (B, T'): past a clip's end, its last frame again
    i = steps.floor().long()
    nxt = torch.minimum(i + 1, last.long())
    frac = (steps - i).to(waves.dtype)[:, None, :]  # (B, 1, T')
    idx = i[:, None, :].expand(-1, spec.shape[1], -1)
    left = spec.gather(2, idx)
    right = spec.gather(2, nxt[:, None, :].expand(-1, spec.shape[1], -1))  # (B, F, T')
    mag = (1 - frac) * left.abs() + frac * right.abs()
    # the phase advance of a bin in one hop at its own centre frequency
    expected = torch.linspace(0, math.pi * hop, spec.shape[1], dtype=waves.dtype)
    expected = expected.to(waves.device)[None, :, None]
    delta = right.angle() - left.angle() - expected
    delta = delta - 2 * math.pi * torch.round(delta / (2 * math.pi))  # wrapped to [-π, π]
    advance = torch.cat([spec[:, :, :1].angle(), (delta + expected)[:, :, :-1]], 2)
    out = torch.polar(mag, torch.cumsum(advance, 2))
    sizes = torch.round(lengths.double() / rates[:, 0]).long().clamp(min=1)
    y = torch.istft(out, n_fft, hop, window=window, center=True, length=int(sizes.max()))
    return y.masked_fill(~_real(y.shape[1], sizes), 0.0), sizes


def pitch_shift(waves: Tensor, lengths: Tensor, semitones: Tensor) -> Tensor:
    """Each clip's pitch (and spectrum) moved by ``semitones[i]``, its length kept: stretched
    to ``r = 2^{s/12}`` times its length (:func:`stretch` at rate ``1 / r``), then resampled
    back (:func:`resample_rows`), which multiplies every frequency by ``r``.
    Shape: ``(B, N)`` -> ``(B, N)``."""
    r = 2.0 ** (semitones.double() / 12)
    longer, sizes = stretch(waves, lengths, 1 / r)
    out = resample_rows(longer, sizes, lengths)
    return F.pad(out, (0, waves.shape[1] - out.shape[1]))


# -------------------------------------------------------------------------------- noise
def coloured_noise(lengths: Tensor, betas: Tensor, size: int) -> Tensor:
    """Gaussian noise with power spectral density ∝ ``1 / f^β`` (β = ``betas[i]``: 0 white,
    1 pink, 2 brown), zero mean and unit RMS over each row's first ``lengths[i]`` samples, zero
    past them. Shape: ``(B,)``, ``(B,)`` -> ``(B, size)``, float32."""
    white = torch.randn(len(lengths), max(size, 2), dtype=torch.float64)
    spec = torch.fft.rfft(white, dim=1)
    f = torch.arange(spec.shape[1], dtype=torch.float64).clamp(min=1.0)[None, :]
    noise = torch.fft.irfft(spec / f ** (betas.double()[:, None] / 2), n=white.shape[1])[:, :size]
    real = _real(size, lengths.cpu())
    count = lengths.cpu().clamp(min=1).double()
    noise = noise - (noise * real).sum(1, keepdim=True) / count[:, None]
    rms = ((noise.square() * real).sum(1) / count).sqrt().clamp(min=1e-12)
    return (noise / rms[:, None]).masked_fill(~real, 0.0).float()


def _rms(waves: Tensor, lengths: Tensor) -> Tensor:
    """``(B,)`` RMS of each clip over its own samples."""
    power = (waves.square() * _real(waves.shape[1], lengths)).sum(1) / lengths.clamp(min=1)
    return power.sqrt()


def add_noise(waves: Tensor, lengths: Tensor, snr_db: Tensor, betas: Tensor) -> Tensor:
    """Each clip plus noise of colour ``betas[i]`` (:func:`coloured_noise`) at ``snr_db[i]``
    dB below the clip's own power; padding stays 0. Shape: ``(B, N)`` -> ``(B, N)``."""
    scale = _rms(waves, lengths) / 10.0 ** (snr_db.to(waves) / 20)  # (B,)
    noise = coloured_noise(lengths, betas, waves.shape[1]).to(waves)
    return waves + scale[:, None] * noise


# -------------------------------------------------------------------------------- rooms
def room_response(rt60: Tensor, rate: int) -> Tensor:
    """Rooms' impulse responses ``(B, L)``: 1 (the direct path), then Gaussian noise under an
    envelope falling 60 dB in ``rt60[i]`` seconds (amplitude ``10^{-3 t / RT60}``), as long as
    the longest RT60; the tail holds the direct path's energy times ``min(1, RT60 / 0.5 s)``,
    so a short room is mostly dry."""
    rt60 = rt60.double()[:, None]  # (B, 1)
    length = max(2, round(float(rt60.max()) * rate))
    t = torch.arange(length, dtype=torch.float64)[None, :] / rate
    tail = torch.randn(len(rt60), length, dtype=torch.float64) * 10.0 ** (-3.0 * t / rt60)
    tail[:, 0] = 0.0
    energy = tail.square().sum(1, keepdim=True).sqrt().clamp(min=1e-12)
    tail = tail / energy * torch.clamp(rt60 / 0.5, max=1.0)
    tail[:, 0] = 1.0
    return tail.float()


def reverberate(waves: Tensor, lengths: Tensor, rt60: Tensor, rate: int) -> Tensor:
    """Each clip convolved (FFT) with its :func:`room_response` of ``rt60[i]`` seconds, cut to
    its own length and scaled back to its RMS. Shape: ``(B, N)`` -> ``(B, N)``."""
    h = room_response(rt60, rate).to(waves)
    n = waves.shape[1]
    size = n + h.shape[1] - 1
    wet = torch.fft.irfft(torch.fft.rfft(waves, size) * torch.fft.rfft(h, size), size)[:, :n]
    wet = wet.masked_fill(~_real(n, lengths), 0.0)
    gain = _rms(waves, lengths) / _rms(wet, lengths).clamp(min=1e-12)
    return wet * gain[:, None]
