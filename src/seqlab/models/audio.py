"""Audio classifier: a log-mel front end feeding one of seqlab's classifiers (``model.body``).

A batch of padded waveforms ``(B, N)`` with each clip's length in samples becomes log-mel
frames ``(B, T, n_mels)`` (:class:`seqlab.nn.audio.LogMel`), standardised per mel channel with
the mean and standard deviation of the training clips (:class:`seqlab.nn.audio.FeatureNorm`,
set by :meth:`AudioClassifier.set_normalisation` and saved with the weights), masked by
SpecAugment in training (Park et al. 2019; ``model.augment``), and read by the body where it
reads embedded tokens. The bodies are the existing classifiers, built by their own registered
builders with :attr:`seqlab.catalog.Sizes.input_dim` (a linear projection of the frames
replaces their embedding table):

- ``rnn_classifier``: a (bidirectional) LSTM/GRU over the frames, packed by length;
- ``cnn_text``: convolutions over time, max-pooled over each clip's own frames;
- ``cnn_spectrogram``: a 2-D CNN over the log-mel image (:mod:`seqlab.models.cnn_spectrogram`),
  whose filters slide along the mel axis too; a body of the front end's own, built here;
- ``transformer_classifier``: the Transformer encoder over the frames, padded frames masked as
  keys; its attention is over frames, as it is over words (``pooling: cls`` reads a learned
  first frame);
- ``vit``: the Vision Transformer over the spectrogram as a one-channel ``n_mels ×
  max_frames`` image (the Audio Spectrogram Transformer, Gong et al. 2021, with
  non-overlapping square patches): each clip is cut or padded to ``model.max_frames`` frames.
  **Padding**: the frames past a clip's end are 0, the normalised training mean of each
  channel, and the patches wholly past its end are masked as keys in every layer, so they never
  reach the class token; a clip gets the same logits alone, in a padded batch, and whatever
  ``max_frames`` leaves after it. (A patch column holding the clip's last frames also holds a
  few zero frames.)

:class:`~seqlab.config.audio.AudioFeatures` is the front end's settings (``model.features``), and
:class:`~seqlab.config.audio.AudioClassifierConfig` the model section, both with the config.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab import catalog
from seqlab.catalog import ModelSpec, Sizes, register_model
from seqlab.config.audio import AudioClassifierConfig, AudioFeatures, SpectrogramCNNConfig
from seqlab.models.cnn_spectrogram import SpectrogramCNN
from seqlab.nn import audio_augment as aug
from seqlab.nn.audio import FeatureNorm, LogMel, SpecAugment


class Draws(NamedTuple):
    """One training batch's spectral augmentation (:meth:`AudioClassifier.augment`): VTLP
    factors ``(B,)`` and microphone power gains per FFT bin ``(B, n_fft // 2 + 1)``."""

    warp: Tensor | None = None
    gains: Tensor | None = None


#: bodies whose :meth:`AudioClassifier.attention` gives weights (the others give none)
ATTENTION_BODIES = ("transformer_classifier", "vit")


def log_mel(features: AudioFeatures, sample_rate: int) -> LogMel:
    """The feature module ``features`` describes for clips at ``sample_rate`` (``ValueError`` if
    ``f_max`` is over half of it, or a mel filter covers no FFT bin)."""
    return LogMel(
        sample_rate,
        features.n_fft,
        features.win_length,
        features.hop_length,
        features.n_mels,
        features.f_min,
        features.f_max,
    )


def spec_augment(features: AudioFeatures) -> SpecAugment:
    """The training-time masking ``features`` describes (an identity in eval mode, or with no
    masks)."""
    return SpecAugment(
        features.freq_masks,
        features.freq_width,
        features.time_masks,
        features.time_width,
        features.time_ratio,
    )


class AudioClassifier(nn.Module):
    """Waveforms ``(B, N)`` with lengths ``(B,)`` in samples → class logits ``(B, C)``.

    ``temperature`` divides the logits (1 while training; a trained run's calibration sets it,
    :mod:`seqlab.tasks.classifier.calibration`). It is not part of the weights: a run keeps
    it in ``calibration.json``.

    Args:
        cfg: the model section.
        num_classes: C.
        sample_rate: of the waveforms (Hz), ``data.sample_rate``.
    """

    def __init__(self, cfg: AudioClassifierConfig, num_classes: int, sample_rate: int):
        super().__init__()
        n_mels = cfg.features.n_mels
        self.arch = cfg.body.arch
        self.log_mel = log_mel(cfg.features, sample_rate)
        self.norm = FeatureNorm(torch.zeros(n_mels), torch.ones(n_mels))
        self.spec_augment = spec_augment(cfg.features) if cfg.augment else None
        self.clip_norm = cfg.features.clip_norm
        #: the training-time waveform and filterbank augmentations (``model.features``)
        self.augmentation = cfg.features
        self.sample_rate = sample_rate
        #: softmax temperature (Guo et al. 2017), chosen on validation after training: the
        #: logits are divided by it, which moves probabilities and never the argmax
        self.register_buffer("temperature", torch.ones(()), persistent=False)
        vit = self.arch == "vit"
        self.max_frames = cfg.max_frames if vit else None
        sizes = Sizes(
            self.arch,
            num_classes=num_classes,
            input_dim=n_mels,
            input_frames=cfg.max_frames if vit else None,
        )
        self.body: nn.Module
        if isinstance(cfg.body, SpectrogramCNNConfig):  # a body of the front end's own
            self.body = SpectrogramCNN(n_mels, num_classes, cfg.body)
        else:
            self.body = catalog.model(self.arch).build(cfg.body, sizes)  # type: ignore[union-attr]
        #: whether :meth:`attention` gives weights
        self.has_attention = self.arch in ATTENTION_BODIES
        #: vit: the patches' grid, (rows over the mel channels, columns over time)
        self.patch_grid: tuple[int, int] | None = self.body.grid if vit else None

    @torch.no_grad()
    def set_normalisation(self, mean: Tensor, std: Tensor) -> None:
        """Standardise each mel channel with ``mean`` and ``std`` ``(n_mels,)``, measured on
        the training clips' log-mel frames (:func:`seqlab.nn.audio.feature_stats` of
        ``log_mel``'s output)."""
        fresh = FeatureNorm(mean, std)  # checks the shapes, floors the deviations
        want = tuple(self.norm.mean.shape)
        if tuple(fresh.mean.shape) != want:
            raise ValueError(f"normalisation of {tuple(mean.shape)}: need {want} (n_mels)")
        self.norm.mean.copy_(fresh.mean)
        self.norm.std.copy_(fresh.std)

    def raw_features(
        self, waves: Tensor, lengths: Tensor | None = None, draws: Draws | None = None
    ) -> tuple[Tensor, Tensor]:
        """Log-mel frames ``(B, T, n_mels)`` before the training set's standardisation (with
        ``features.clip_norm``, less each clip's own mean per channel, and divided by its own
        deviation for ``mean_var``), and frames ``(B,)``. ``draws``: training's spectral
        augmentation."""
        draws = draws or Draws()
        feats, frames = self.log_mel(waves, lengths, draws.warp, draws.gains)
        if self.clip_norm != "none":
            real = torch.arange(feats.shape[1], device=feats.device)[None] < frames[:, None]
            real = real[..., None].to(feats.dtype)  # (B, T, 1)
            count = frames.clamp(min=1)[:, None, None]
            mean = (feats * real).sum(1, keepdim=True) / count  # (B, 1, n_mels)
            feats = (feats - mean) * real
            if self.clip_norm == "mean_var":
                std = ((feats.square() * real).sum(1, keepdim=True) / count).sqrt()
                feats = feats / std.clamp(min=1e-3)
        return feats, frames

    def features(
        self, waves: Tensor, lengths: Tensor | None = None, draws: Draws | None = None
    ) -> tuple[Tensor, Tensor]:
        """What the body reads (without SpecAugment): normalised log-mel frames ``(B, T,
        n_mels)``, zero past each clip's end, and each clip's frames ``(B,)``."""
        feats, frames = self.raw_features(waves, lengths, draws)
        return self.norm(feats, frames), frames

    def augment(self, waves: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Draws]:
        """Training: the waveform augmentations of ``model.features`` in the order a recording
        meets them (the speaker's rate and pitch, the room, the noise:
        :mod:`seqlab.nn.audio_augment`), and the spectral ones the front end applies (the
        speaker's vocal tract: VTLP; the microphone: gain, colouring, low-pass). Returns waves
        ``(B, N')``, lengths ``(B,)`` and the spectral :class:`Draws`."""
        a, b = self.augmentation, len(waves)
        if a.speed > 0:
            waves, lengths = aug.speed_perturb(
                waves, lengths, aug.uniform(b, 1 - a.speed, 1 + a.speed)
            )
        if a.tempo > 0:
            waves, lengths = aug.stretch(waves, lengths, aug.uniform(b, 1 - a.tempo, 1 + a.tempo))
        if a.pitch > 0:
            waves = aug.pitch_shift(waves, lengths, aug.uniform(b, -a.pitch, a.pitch))
        if a.room > 0:
            pick = (torch.rand(b) < a.room).nonzero().flatten()
            if len(pick):
                rt60 = aug.uniform(len(pick), *a.room_rt60)
                waves = waves.clone()
                waves[pick] = aug.reverberate(waves[pick], lengths[pick], rt60, self.sample_rate)
        if a.noise > 0:
            pick = (torch.rand(b) < a.noise).nonzero().flatten()
            if len(pick):
                snr = aug.uniform(len(pick), *a.noise_snr)
                betas = torch.randint(0, 3, (len(pick),)).double()  # white, pink, brown
                waves = waves.clone()
                waves[pick] = aug.add_noise(waves[pick], lengths[pick], snr, betas)
        warp = aug.uniform(b, 1 - a.vtlp, 1 + a.vtlp) if a.vtlp > 0 else None
        gains = None
        if a.gain > 0 or a.eq > 0 or a.lowpass > 0:
            cutoff = aug.uniform(b, *a.lowpass_hz)
            cutoff[torch.rand(b) >= a.lowpass] = math.inf
            gains = aug.channel_gains(
                self.log_mel.bin_hz(),
                aug.uniform(b, -a.gain, a.gain),
                aug.uniform(b, 0.0, a.eq),
                cutoff,
            )
        return waves, lengths, Draws(warp, gains)

    def _image(self, feats: Tensor, frames: Tensor) -> tuple[Tensor, Tensor]:
        """vit: the frames as ``(B, 1, n_mels, max_frames)`` images, cut or padded with zeros,
        and each image's real columns ``(B,)``."""
        assert self.max_frames is not None
        t = feats.shape[1]
        fixed = (
            feats[:, : self.max_frames]
            if t >= self.max_frames
            else F.pad(feats, (0, 0, 0, self.max_frames - t))
        )  # (B, max_frames, n_mels)
        return fixed.transpose(1, 2)[:, None], frames.clamp(max=self.max_frames)

    def _body_inputs(self, feats: Tensor, frames: Tensor) -> tuple[Tensor, Tensor]:
        dtype = next(self.body.parameters()).dtype
        feats, frames = feats.to(dtype), frames.to(feats.device)
        return self._image(feats, frames) if self.max_frames is not None else (feats, frames)

    def forward(self, waves: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Shape: waves ``(B, N)``, lengths ``(B,)`` (samples) -> logits ``(B, C)``, divided by
        the ``temperature`` buffer (1 while training)."""
        draws = None
        if self.training:
            if lengths is None:
                lengths = torch.full((len(waves),), waves.shape[1], device=waves.device)
            waves, lengths, draws = self.augment(waves, lengths)
        feats, frames = self.features(waves, lengths, draws)
        if self.spec_augment is not None:
            feats = self.spec_augment(feats, frames)  # identity in eval mode
        x, n = self._body_inputs(feats, frames)
        if self.max_frames is not None:
            logits = self.body(x, columns=n)  # (B, C)
        else:
            logits = self.body(x, n)  # (B, C)
        return logits / self.temperature.to(logits.dtype)

    @torch.no_grad()
    def attention(self, waves: Tensor, lengths: Tensor | None = None) -> list[Tensor]:
        """Each layer's self-attention weights: ``transformer_classifier``, over the frames
        ``(B, h, T', T')`` (T' = T, or 1 + T with ``pooling: cls``, position 0 the [CLS]
        frame); ``vit``, over the class token and the patches ``(B, h, 1 + N, 1 + N)`` (patch
        ``1 + r·w + c`` in row r (mels) and column c (time) of ``patch_grid`` ``(h, w)``;
        :func:`seqlab.models.vit.attention_rollout` applies). ``[]`` for the bodies without
        attention (``rnn_classifier``, ``cnn_text``; ``has_attention`` is False)."""
        if not self.has_attention:
            return []
        x, n = self._body_inputs(*self.features(waves, lengths))
        if self.max_frames is not None:
            return self.body.attention(x, columns=n)
        return self.body.attention(x, n)


register_model(
    ModelSpec(
        AudioClassifierConfig,
        lambda cfg, sizes: AudioClassifier(
            cfg, sizes.need("num_classes"), sizes.need("sample_rate")
        ),
    )
)
