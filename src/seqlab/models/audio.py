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

:class:`AudioFeatures` is the front end's settings (``model.features``).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

import torch
import torch.nn.functional as F
from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator, model_validator
from torch import Tensor, nn

from seqlab import catalog
from seqlab.catalog import ModelSpec, Sizes, register_model
from seqlab.config import ModelConfigBase, NonNegative, Positive, Strict
from seqlab.models.cnn_text import CNNTextConfig
from seqlab.models.vit import ViTConfig
from seqlab.nn import audio_augment as aug
from seqlab.nn.audio import FeatureNorm, LogMel, SpecAugment

#: the classifiers the front end feeds (``model.body.arch``)
BODIES = ("cnn_text", "rnn_classifier", "transformer_classifier", "vit")


class Draws(NamedTuple):
    """One training batch's spectral augmentation (:meth:`AudioClassifier.augment`): VTLP
    factors ``(B,)`` and microphone power gains per FFT bin ``(B, n_fft // 2 + 1)``."""

    warp: Tensor | None = None
    gains: Tensor | None = None


#: a share of the clips, 0 to 1 inclusive
Share = Annotated[float, Field(ge=0.0, le=1.0)]
#: a [low, high] range of a random draw
Range = Annotated[list[float], Field(min_length=2, max_length=2)]
#: bodies whose :meth:`AudioClassifier.attention` gives weights (the others give none)
ATTENTION_BODIES = ("transformer_classifier", "vit")


class AudioFeatures(Strict):
    """Log-mel features and their augmentation: :meth:`log_mel`, :meth:`spec_augment`.

    The defaults are the usual speech framing at FSDD's 8 kHz: a 25 ms Hann window (200
    samples) every 10 ms (80), in a 256-point FFT (31.25 Hz bins), 40 Slaney mel channels; two
    frequency masks of at most 6 channels and two time masks of at most 10 frames and a fifth
    of the clip (Park et al., 2019, scaled down from LibriSpeech's 80 channels and 1 s masks
    for clips of 0.14–2.3 s). They are a starting point, not tuned values.
    """

    n_fft: Annotated[int, Field(ge=16, le=8192)] = Field(256, description="FFT size (samples)")
    win_length: Positive = Field(200, description="Hann window (samples), at most n_fft")
    hop_length: Positive = Field(80, description="samples between frames")
    n_mels: Annotated[int, Field(ge=1, le=256)] = Field(40, description="mel channels")
    f_min: Annotated[float, Field(ge=0.0, le=96_000.0)] = Field(
        0.0, description="lowest frequency (Hz)"
    )
    f_max: Annotated[float, Field(gt=0.0, le=96_000.0)] | None = Field(
        None, description="highest frequency (Hz); null = half the sample rate"
    )
    freq_masks: NonNegative = Field(2, description="SpecAugment: frequency masks per clip")
    freq_width: NonNegative = Field(6, description="SpecAugment: widest frequency mask (mels)")
    time_masks: NonNegative = Field(2, description="SpecAugment: time masks per clip")
    time_width: NonNegative = Field(10, description="SpecAugment: longest time mask (frames)")
    time_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.2, description="SpecAugment: a time mask covers at most this share of the clip"
    )
    clip_norm: Literal["none", "mean", "mean_var"] = Field(
        "none",
        description="per-utterance normalisation of every mel channel by the clip's own "
        "frames: mean (cepstral mean normalisation: a gain or a fixed channel colouring "
        "becomes a no-op), mean_var (also divided by the clip's own deviation), none; true "
        "and false read as mean and none",
    )
    speed: Annotated[float, Field(ge=0.0, lt=0.5)] = Field(
        0.0,
        description="training only: each clip played at a random speed in [1 - speed, "
        "1 + speed] (resampled, so its pitch moves too; Ko et al. 2015)",
    )
    tempo: Annotated[float, Field(ge=0.0, lt=0.5)] = Field(
        0.0,
        description="training only: each clip spoken faster or slower by a factor in "
        "[1 - tempo, 1 + tempo], its pitch kept (a phase-vocoder time stretch)",
    )
    vtlp: Annotated[float, Field(ge=0.0, lt=0.5)] = Field(
        0.0,
        description="training only: vocal tract length perturbation, each clip's mel filters "
        "read at frequencies warped by a factor in [1 - vtlp, 1 + vtlp] (Jaitly & Hinton 2013)",
    )
    pitch: Annotated[float, Field(ge=0.0, le=12.0)] = Field(
        0.0,
        description="training only: each clip's pitch moved by up to this many semitones, "
        "its length kept (phase vocoder, then resampling)",
    )
    noise: Share = Field(
        0.0, description="training only: the share of clips given white/pink/brown noise"
    )
    noise_snr: Range = Field(
        [5.0, 30.0], description="the noise's signal-to-noise ratio range (dB)"
    )
    room: Share = Field(
        0.0,
        description="training only: the share of clips played in a simulated room (an "
        "exponentially decaying noise impulse response)",
    )
    room_rt60: Range = Field(
        [0.1, 0.6], description="the simulated rooms' reverberation time range RT60 (s)"
    )
    gain: Annotated[float, Field(ge=0.0, le=40.0)] = Field(
        0.0, description="training only: each clip's level moved by up to this many dB"
    )
    eq: Annotated[float, Field(ge=0.0, le=24.0)] = Field(
        0.0,
        description="training only: each clip's spectrum coloured by a random smooth curve of "
        "at most this many dB either way (a different microphone)",
    )
    lowpass: Share = Field(
        0.0, description="training only: the share of clips band-limited by a random low-pass"
    )
    lowpass_hz: Range = Field([2000.0, 4000.0], description="the low-pass cutoff range (Hz)")

    @field_validator("clip_norm", mode="before")
    @classmethod
    def _clip_norm_bool(cls, value: object) -> object:
        return {True: "mean", False: "none"}.get(value, value) if isinstance(value, bool) else value

    @field_validator("noise_snr", "room_rt60", "lowpass_hz")
    @classmethod
    def _ordered(cls, value: list[float], info: ValidationInfo) -> list[float]:
        low, high = value
        floor = {"noise_snr": -20.0, "room_rt60": 0.01, "lowpass_hz": 100.0}[info.field_name]
        if not floor <= low <= high:
            raise ValueError(f"need {floor:g} <= low <= high, got [{low:g}, {high:g}]")
        return value

    @model_validator(mode="after")
    def _window_fits(self) -> AudioFeatures:
        if self.win_length > self.n_fft:
            raise ValueError(f"win_length={self.win_length} is longer than n_fft={self.n_fft}")
        if self.f_max is not None and self.f_max <= self.f_min:
            raise ValueError(f"f_max={self.f_max:g} is not above f_min={self.f_min:g}")
        return self

    def log_mel(self, sample_rate: int) -> LogMel:
        """The feature module for clips at ``sample_rate`` (``ValueError`` if ``f_max`` is over
        half of it, or a mel filter covers no FFT bin)."""
        return LogMel(
            sample_rate,
            self.n_fft,
            self.win_length,
            self.hop_length,
            self.n_mels,
            self.f_min,
            self.f_max,
        )

    def spec_augment(self) -> SpecAugment:
        """The training-time masking (an identity in eval mode, or with no masks)."""
        return SpecAugment(
            self.freq_masks, self.freq_width, self.time_masks, self.time_width, self.time_ratio
        )


def _bodies() -> str:
    return catalog.choices(BODIES)


class AudioClassifierConfig(ModelConfigBase):
    """Log-mel features of the waveform (standardised, SpecAugment in training) read by one of
    the classifiers (``body``): an LSTM/GRU, a 1-D CNN or a Transformer over the frames, or a
    Vision Transformer over the spectrogram's patches (AST)."""

    arch: Literal["audio_classifier"] = "audio_classifier"
    task: ClassVar[str] = "audio_classification"
    features: AudioFeatures = Field(default_factory=AudioFeatures)
    augment: bool = Field(True, description="SpecAugment (model.features) in training")
    max_frames: Positive = Field(
        240,
        description="vit body: each clip is cut or padded to this many frames (240 at a 10 ms "
        "hop covers FSDD's longest clip, 2.3 s); the other bodies read every frame",
    )
    body: SerializeAsAny[ModelConfigBase] = Field(
        default_factory=CNNTextConfig,
        description="the classifier reading the frames, a model section of its own: "
        + ", ".join(BODIES),
    )

    @field_validator("body", mode="before")
    @classmethod
    def _classifier_body(cls, value: object, info: ValidationInfo) -> object:
        arch = value.arch if isinstance(value, ModelConfigBase) else None
        if isinstance(value, dict):
            arch = value.get("arch")
            if arch is None:
                raise ValueError(f"arch is missing; choose {_bodies()}")
        elif not isinstance(value, ModelConfigBase):
            raise ValueError(f"expected a mapping with an arch ({_bodies()})")
        if arch not in BODIES:
            raise ValueError(
                f"arch {arch!r} is not a classifier the audio front end feeds; choose {_bodies()}"
            )
        if not isinstance(value, dict):
            return value
        if arch == "vit":  # the image is the spectrogram: n_mels rows, one channel
            value = _vit_image(dict(value), info.data.get("features"))
        return catalog.models()[arch].config.model_validate(value)

    @model_validator(mode="after")
    def _image_fits(self) -> AudioClassifierConfig:
        body, n_mels = self.body, self.features.n_mels
        if not isinstance(body, ViTConfig):
            return self
        if body.image_size != n_mels or body.channels != 1:
            raise ValueError(
                f"body.image_size={body.image_size} and body.channels={body.channels} must be "
                f"features.n_mels={n_mels} and 1 (the spectrogram image)"
            )
        if self.max_frames % body.patch_size:
            raise ValueError(
                f"max_frames={self.max_frames} is not a multiple of body.patch_size="
                f"{body.patch_size}"
            )
        return self


def _vit_image(value: dict[str, Any], features: AudioFeatures | None) -> dict[str, Any]:
    """A vit body's raw section with ``image_size`` (the height, ``n_mels``) and ``channels``
    (1) filled in; either given otherwise is an error."""
    n_mels = (features or AudioFeatures()).n_mels
    for key, want in (("image_size", n_mels), ("channels", 1)):
        if value.get(key, want) != want:
            raise ValueError(
                f"{key}={value[key]!r}: the vit body's image is the log-mel spectrogram, "
                f"{n_mels} mel rows by max_frames columns, one channel; leave {key} out"
            )
        value[key] = want
    patch = value.get("patch_size", 4)
    if isinstance(patch, int) and patch > 0 and n_mels % patch:
        raise ValueError(
            f"patch_size={patch} does not divide model.features.n_mels={n_mels} (the height of "
            "the spectrogram image)"
        )
    return value


class AudioClassifier(nn.Module):
    """Waveforms ``(B, N)`` with lengths ``(B,)`` in samples → class logits ``(B, C)``.

    ``temperature`` divides the logits (1 while training; a trained run's calibration sets it,
    :mod:`seqlab.tasks.classification.calibration`). It is not part of the weights: a run keeps
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
        self.log_mel = cfg.features.log_mel(sample_rate)
        self.norm = FeatureNorm(torch.zeros(n_mels), torch.ones(n_mels))
        self.spec_augment = cfg.features.spec_augment() if cfg.augment else None
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
        self.body = catalog.models()[self.arch].build(cfg.body, sizes)
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
        inputs="audio",
    )
)
