"""Speech features: log-mel spectrograms of padded waveforms, their normalisation, SpecAugment.

:class:`LogMel` computes, for each clip of a padded batch ``(B, N)`` with its length:

1. the short-time Fourier transform (``torch.stft``) with a periodic Hann window of
   ``win_length`` samples centred in ``n_fft``, every ``hop_length`` samples; frames are centred
   (``center=True``): the clip is first padded by ``n_fft // 2`` on each side by reflection
   (NumPy's ``reflect``: the edge sample is not repeated), each clip by its *own* length, so a
   clip gives the same frames alone and in a padded batch. A clip of ``L`` samples has
   ``1 + (L + 2 * (n_fft // 2) - n_fft) // hop_length`` frames (``1 + L // hop`` for even n_fft);
2. the power spectrum ``|X|²``;
3. a mel filterbank in Slaney's definition (Auditory Toolbox, Slaney 1998; librosa's default,
   ``htk=False, norm="slaney"``): the mel scale is linear below 1 kHz (200/3 Hz per mel) and
   logarithmic above (27 mels per factor 6.4), ``n_mels`` triangles between ``n_mels + 2``
   points equally spaced in mels from ``f_min`` to ``f_max`` (default ``rate / 2``), each
   scaled to unit area (height ``2 / (f[i+2] - f[i])``);
4. decibels: ``10 * log10(max(E, floor))`` (librosa's ``power_to_db`` with ``ref=1``,
   ``amin=floor``, no ``top_db``).

It returns ``(B, frames, n_mels)`` (frames past a clip's length are 0) and each clip's number
of frames. The features are computed in float32 (float64 if the waveform is), outside autocast:
bf16 keeps 8 bits of mantissa, too few for a power spectrum spanning 100 dB.

:class:`FeatureNorm` standardises each mel channel with a mean and standard deviation the
caller measured on the training clips (:func:`feature_stats`). :class:`SpecAugment` masks
random bands of channels and runs of frames in training (Park et al., 2019, §2; time warping is
not done). This module imports torch only.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from seqlab.nn.audio_augment import vtlp_warp

__all__ = [
    "FeatureNorm",
    "LogMel",
    "SpecAugment",
    "feature_stats",
    "hz_to_mel",
    "mel_edges",
    "mel_filterbank",
    "mel_to_hz",
    "mel_triangles",
]

# Slaney's mel scale: linear to 1 kHz, logarithmic above
_F_SP = 200.0 / 3  # Hz per mel below 1 kHz
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP  # 15 mels
_LOG_STEP = math.log(6.4) / 27.0  # mels above 1 kHz: 27 per factor 6.4


def hz_to_mel(hz: Tensor) -> Tensor:
    """Slaney's mel scale (Auditory Toolbox ``mfcc.m``; librosa ``hz_to_mel(htk=False)``)."""
    linear = hz / _F_SP
    log = _MIN_LOG_MEL + torch.log(hz.clamp(min=_MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOG_STEP
    return torch.where(hz >= _MIN_LOG_HZ, log, linear)


def mel_to_hz(mel: Tensor) -> Tensor:
    """The inverse of :func:`hz_to_mel`."""
    linear = mel * _F_SP
    log = _MIN_LOG_HZ * torch.exp(_LOG_STEP * (mel.clamp(min=_MIN_LOG_MEL) - _MIN_LOG_MEL))
    return torch.where(mel >= _MIN_LOG_MEL, log, linear)


def mel_edges(
    sample_rate: int, n_mels: int, f_min: float = 0.0, f_max: float | None = None
) -> Tensor:
    """The ``n_mels + 2`` corner frequencies (Hz, float64) of the mel triangles: equally spaced
    in mels from ``f_min`` to ``f_max`` (default ``sample_rate / 2``)."""
    f_max = sample_rate / 2 if f_max is None else f_max
    if not 0.0 <= f_min < f_max <= sample_rate / 2:
        raise ValueError(
            f"mel filterbank: need 0 <= f_min < f_max <= rate/2 = {sample_rate / 2:g} Hz, got "
            f"f_min={f_min:g}, f_max={f_max:g}"
        )
    lo, hi = hz_to_mel(torch.tensor([f_min, f_max], dtype=torch.float64))
    return mel_to_hz(torch.linspace(float(lo), float(hi), n_mels + 2, dtype=torch.float64))


def mel_triangles(bins: Tensor, edges: Tensor) -> Tensor:
    """Slaney-normalised triangles with corners ``edges`` ``(M + 2,)`` evaluated at the
    frequencies ``bins`` ``(..., F)`` (Hz): ``(..., F, M)``. With warped bin frequencies
    (:func:`seqlab.nn.audio_augment.vtlp_warp`) this is VTLP's filterbank."""
    left, centre, right = edges[:-2], edges[1:-1], edges[2:]  # (M,)
    f = bins[..., None]  # (..., F, 1)
    rising = (f - left) / (centre - left)
    falling = (right - f) / (right - centre)
    return torch.minimum(rising, falling).clamp(min=0.0) * (2.0 / (right - left))


def mel_filterbank(
    sample_rate: int, n_fft: int, n_mels: int, f_min: float = 0.0, f_max: float | None = None
) -> Tensor:
    """Slaney-normalised triangular mel filters, float64 ``(n_fft // 2 + 1, n_mels)`` (see the
    module). A filter that falls between two FFT bins (all zeros) is an error: fewer mels or
    a larger ``n_fft``."""
    edges = mel_edges(sample_rate, n_mels, f_min, f_max)
    bins = torch.linspace(0.0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    weights = mel_triangles(bins, edges)  # (F, M)
    empty = (weights.amax(dim=0) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"mel filterbank: filter(s) {empty} of n_mels={n_mels} cover no FFT bin of "
            f"n_fft={n_fft} at {sample_rate} Hz; use fewer mels or a larger n_fft"
        )
    return weights.contiguous()


class LogMel(nn.Module):
    """Log-mel spectrogram of padded waveforms (see the module for the definition).

    Args:
        sample_rate: of the waveforms (Hz).
        n_fft: FFT size (samples); ``n_fft // 2 + 1`` frequency bins.
        win_length: Hann window length (samples), at most ``n_fft``; default ``n_fft``.
        hop_length: samples between frames.
        n_mels: mel channels.
        f_min, f_max: the filterbank's range (Hz; ``f_max`` default ``sample_rate / 2``).
        floor: the smallest mel energy before the logarithm (``-100`` dB for ``1e-10``).
    """

    def __init__(
        self,
        sample_rate: int = 8000,
        n_fft: int = 256,
        win_length: int | None = 200,
        hop_length: int = 80,
        n_mels: int = 40,
        f_min: float = 0.0,
        f_max: float | None = None,
        floor: float = 1e-10,
    ) -> None:
        super().__init__()
        win_length = n_fft if win_length is None else win_length
        if not 0 < win_length <= n_fft or hop_length <= 0 or floor <= 0:
            raise ValueError(
                f"LogMel: need 0 < win_length <= n_fft, hop_length > 0 and floor > 0, got "
                f"win_length={win_length}, n_fft={n_fft}, hop_length={hop_length}, floor={floor}"
            )
        self.sample_rate, self.n_fft, self.win_length = sample_rate, n_fft, win_length
        self.hop_length, self.n_mels, self.floor = hop_length, n_mels, floor
        # float64, not saved (they follow from the arguments); cast to the input's precision
        window = torch.hann_window(win_length, periodic=True, dtype=torch.float64)
        self.register_buffer("window", window, persistent=False)
        fb = mel_filterbank(sample_rate, n_fft, n_mels, f_min, f_max)
        self.register_buffer("filters", fb, persistent=False)
        self.register_buffer("edges", mel_edges(sample_rate, n_mels, f_min, f_max), False)

    def num_frames(self, lengths: Tensor) -> Tensor:
        """Frames of clips of ``lengths`` samples (centred framing)."""
        pad = self.n_fft // 2
        return 1 + torch.div(lengths + 2 * pad - self.n_fft, self.hop_length, rounding_mode="floor")

    def _reflect_padded(self, x: Tensor, lengths: Tensor) -> Tensor:
        """Each row padded by ``n_fft // 2`` on both sides by reflection about its own ends
        (``numpy.pad(mode="reflect")``, repeated when the pad is longer than the clip), then
        zeros: ``(B, N + 2 * (n_fft // 2))``."""
        pad = self.n_fft // 2
        lengths = lengths.to(x.device).clamp(min=1)[:, None]  # (B, 1)
        s = torch.arange(-pad, x.shape[1] + pad, device=x.device)[None, :]  # (1, M)
        period = (2 * (lengths - 1)).clamp(min=1)
        r = torch.remainder(s, period)
        index = torch.where(r < lengths, r, period - r)
        padded = x.gather(1, index.expand(x.shape[0], -1))
        return padded.masked_fill(s >= lengths + pad, 0.0)

    def power(self, waves: Tensor, lengths: Tensor) -> Tensor:
        """The power spectrogram ``|STFT|²`` of ``(B, N)`` waveforms: ``(B, n_fft // 2 + 1,
        frames)``, in float32 (float64 for float64 input), whatever autocast says."""
        dtype = torch.float64 if waves.dtype == torch.float64 else torch.float32
        with torch.autocast(waves.device.type, enabled=False):
            x = self._reflect_padded(waves.to(dtype), lengths.to(waves.device))
            spec = torch.stft(
                x,
                self.n_fft,
                self.hop_length,
                self.win_length,
                window=self.window.to(dtype),
                center=False,
                return_complex=True,
            )
            return spec.real.square() + spec.imag.square()

    def filters_for(self, warp: Tensor | None, dtype: torch.dtype) -> Tensor:
        """The mel filters ``(F, M)``, or with VTLP factors ``warp`` ``(B,)`` each clip's own
        filters ``(B, F, M)``: the triangles read at the warped bin frequencies
        (:func:`seqlab.nn.audio_augment.vtlp_warp`; a factor of 1 gives the ``filters`` buffer)."""
        if warp is None:
            return self.filters.to(dtype)
        nyquist = self.sample_rate / 2
        warped = vtlp_warp(self.bin_hz().to(self.edges.device), warp.to(self.edges.device), nyquist)
        return mel_triangles(warped, self.edges).to(dtype)  # (B, F, M)

    def bin_hz(self) -> Tensor:
        """The FFT bins' frequencies (Hz), float64 ``(n_fft // 2 + 1,)``."""
        return torch.linspace(0.0, self.sample_rate / 2, self.n_fft // 2 + 1, dtype=torch.float64)

    def forward(
        self,
        waves: Tensor,
        lengths: Tensor | None = None,
        warp: Tensor | None = None,
        gains: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``(B, N)`` waveforms (each row's first ``lengths`` samples are the clip; default all
        ``N``) -> ``(B, frames, n_mels)`` log-mel features (dB) and ``(B,)`` frame counts.
        Training augmentations: ``warp`` ``(B,)``, VTLP factors, one per clip; ``gains``
        ``(B, n_fft // 2 + 1)``, power gains per bin (a random microphone,
        :func:`seqlab.nn.audio_augment.channel_gains`)."""
        if waves.dim() != 2:
            raise ValueError(f"LogMel expects (batch, samples) waveforms, got {tuple(waves.shape)}")
        if lengths is None:
            lengths = torch.full((waves.shape[0],), waves.shape[1], dtype=torch.long)
        lengths = lengths.to(waves.device)
        with torch.autocast(waves.device.type, enabled=False):
            power = self.power(waves, lengths)  # (B, n_fft // 2 + 1, frames)
            if gains is not None:
                power = power * gains.to(power)[:, :, None]
            mel = power.transpose(1, 2) @ self.filters_for(warp, power.dtype)  # (B, frames, M)
            feats = 10.0 * torch.log10(mel.clamp(min=self.floor))
        frames = self.num_frames(lengths)
        real = torch.arange(feats.shape[1], device=feats.device)[None, :] < frames[:, None]
        return feats.masked_fill(~real[..., None], 0.0), frames


def _real_frames(x: Tensor, lengths: Tensor) -> Tensor:
    """``(B, T, 1)`` mask, True at each row's first ``lengths`` frames."""
    t = torch.arange(x.shape[1], device=x.device)[None, :]
    return (t < lengths.to(x.device)[:, None])[..., None]


def feature_stats(features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Each channel's mean and (population) standard deviation over the real frames of
    ``(B, T, C)`` features, in float64: ``(C,)`` and ``(C,)``. Accumulate training batches by
    concatenating, or call once on all of them."""
    real = _real_frames(features, lengths)
    x = features.double().masked_fill(~real, 0.0)
    count = real.sum().clamp(min=1).double()
    mean = x.sum(dim=(0, 1)) / count
    var = ((x - mean).masked_fill(~real, 0.0).square().sum(dim=(0, 1))) / count
    return mean, var.sqrt()


class FeatureNorm(nn.Module):
    """``(x - mean) / max(std, min_std)`` per channel; frames past each clip's length stay 0.
    ``mean`` and ``std`` are buffers (saved with the model): measure them on the training clips
    (:func:`feature_stats`), never on the clips being scored."""

    def __init__(self, mean: Tensor, std: Tensor, min_std: float = 1e-5) -> None:
        super().__init__()
        if mean.shape != std.shape or mean.dim() != 1:
            raise ValueError(f"mean {tuple(mean.shape)} and std {tuple(std.shape)}: need (C,)")
        self.register_buffer("mean", mean.detach().float().clone())
        self.register_buffer("std", std.detach().float().clamp(min=min_std))

    def forward(self, features: Tensor, lengths: Tensor) -> Tensor:
        out = (features - self.mean.to(features.dtype)) / self.std.to(features.dtype)
        return out.masked_fill(~_real_frames(features, lengths), 0.0)


class SpecAugment(nn.Module):
    """Frequency and time masking (Park et al., 2019, "SpecAugment", §2), in training only.

    For each clip: ``freq_masks`` times, ``f`` is drawn uniformly from ``[0, freq_width]`` and
    ``f0`` from ``[0, ν - f)`` (``ν`` channels), and channels ``[f0, f0 + f)`` are set to 0;
    ``time_masks`` times, ``t`` from ``[0, min(time_width, ⌊time_ratio·τ⌋)]`` and ``t0`` from
    ``[0, τ - t)`` (``τ`` the clip's frames), and frames ``[t0, t0 + t)`` are set to 0. Applied
    after :class:`FeatureNorm`, 0 is the mean, as in the paper. Time warping is not done.

    In eval mode (``module.eval()``) the features pass unchanged. The draws come from
    ``generator`` (a seeded ``torch.Generator``, for reproducible masks) or torch's global one.
    """

    def __init__(
        self,
        freq_masks: int = 2,
        freq_width: int = 6,
        time_masks: int = 2,
        time_width: int = 10,
        time_ratio: float = 0.2,
    ) -> None:
        super().__init__()
        if min(freq_masks, freq_width, time_masks, time_width) < 0 or not 0 <= time_ratio <= 1:
            raise ValueError("SpecAugment: counts and widths must be >= 0, time_ratio in [0, 1]")
        self.freq_masks, self.freq_width = freq_masks, freq_width
        self.time_masks, self.time_width, self.time_ratio = time_masks, time_width, time_ratio

    def _bands(
        self, count: int, width: Tensor, size: Tensor, n: int, generator: torch.Generator | None
    ) -> Tensor:
        """``(B, n)`` mask of ``count`` bands per row: widths uniform in ``[0, width]``, starts
        uniform in ``[0, size - w)`` (0 when ``w = size``)."""
        b = size.shape[0]
        device = generator.device if generator is not None else torch.device("cpu")
        u = torch.rand((2, b, count), generator=generator, device=device, dtype=torch.float64)
        width, size = width.to(device)[:, None], size.to(device)[:, None]  # (B, 1)
        w = torch.floor(u[0] * (width + 1)).long()
        start = torch.floor(u[1] * (size - w).clamp(min=0)).long()  # [0, size - w)
        pos = torch.arange(n, device=device)[None, None, :]
        hit = (pos >= start[..., None]) & (pos < (start + w)[..., None])  # (B, count, n)
        return hit.any(dim=1)

    def forward(
        self, features: Tensor, lengths: Tensor, generator: torch.Generator | None = None
    ) -> Tensor:
        """``(B, T, C)`` features of clips with ``lengths`` frames -> the same, masked."""
        if not self.training:
            return features
        b, t, c = features.shape
        mask = torch.zeros((b, t, c), dtype=torch.bool)
        if self.freq_masks and self.freq_width:
            width = torch.full((b,), min(self.freq_width, c))
            freq = self._bands(self.freq_masks, width, torch.full((b,), c), c, generator)
            mask |= freq.cpu()[:, None, :]
        if self.time_masks and self.time_width:
            frames = lengths.cpu().long()
            bound = torch.floor(self.time_ratio * frames.double()).long()
            width = bound.clamp(max=self.time_width)
            time = self._bands(self.time_masks, width, frames, t, generator)
            mask |= time.cpu()[:, :, None]
        return features.masked_fill(mask.to(features.device), 0.0)
