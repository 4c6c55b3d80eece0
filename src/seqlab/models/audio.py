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

from typing import Annotated, Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator, model_validator
from torch import Tensor, nn

from seqlab import catalog
from seqlab.catalog import ModelSpec, Sizes, register_model
from seqlab.config import ModelConfigBase, NonNegative, Positive, Strict
from seqlab.models.cnn_text import CNNTextConfig
from seqlab.models.vit import ViTConfig
from seqlab.nn.audio import FeatureNorm, LogMel, SpecAugment

#: the classifiers the front end feeds (``model.body.arch``)
BODIES = ("cnn_text", "rnn_classifier", "transformer_classifier", "vit")
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
    clip_norm: bool = Field(
        False,
        description="subtract each clip's own mean of every mel channel (cepstral mean "
        "normalisation: a gain or a fixed channel colouring becomes a no-op)",
    )
    speed: Annotated[float, Field(ge=0.0, lt=0.5)] = Field(
        0.0,
        description="training only: each clip played at a random speed in [1 - speed, "
        "1 + speed] (resampled, so its pitch moves too; Ko et al. 2015)",
    )

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
        self.clip_norm, self.speed = cfg.features.clip_norm, cfg.features.speed
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

    def raw_features(self, waves: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Log-mel frames ``(B, T, n_mels)`` before the training set's standardisation (with
        ``features.clip_norm``, less each clip's own mean per channel), and frames ``(B,)``."""
        feats, frames = self.log_mel(waves, lengths)
        if self.clip_norm:
            real = torch.arange(feats.shape[1], device=feats.device)[None] < frames[:, None]
            real = real[..., None].to(feats.dtype)  # (B, T, 1)
            mean = (feats * real).sum(1, keepdim=True) / frames.clamp(min=1)[:, None, None]
            feats = (feats - mean) * real
        return feats, frames

    def features(self, waves: Tensor, lengths: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """What the body reads (without SpecAugment): normalised log-mel frames ``(B, T,
        n_mels)``, zero past each clip's end, and each clip's frames ``(B,)``."""
        feats, frames = self.raw_features(waves, lengths)
        return self.norm(feats, frames), frames

    def perturb_speed(self, waves: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Training: each clip resampled (linear interpolation) to play at a random speed in
        ``[1 - speed, 1 + speed]``, re-padded: ``(B, N')`` and lengths ``(B,)``."""
        factors = 1 + (torch.rand(len(waves)) * 2 - 1) * self.speed
        clips = []
        for wave, n, f in zip(waves, lengths.tolist(), factors.tolist(), strict=True):
            size = max(1, round(n / f))
            clips.append(F.interpolate(wave[None, None, :n], size=size, mode="linear")[0, 0])
        padded = nn.utils.rnn.pad_sequence(clips, batch_first=True)
        return padded, torch.tensor([len(c) for c in clips], device=lengths.device)

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
        """Shape: waves ``(B, N)``, lengths ``(B,)`` (samples) -> logits ``(B, C)``."""
        if self.training and self.speed > 0:
            if lengths is None:
                lengths = torch.full((len(waves),), waves.shape[1], device=waves.device)
            waves, lengths = self.perturb_speed(waves, lengths)
        feats, frames = self.features(waves, lengths)
        if self.spec_augment is not None:
            feats = self.spec_augment(feats, frames)  # identity in eval mode
        x, n = self._body_inputs(feats, frames)
        if self.max_frames is not None:
            return self.body(x, columns=n)  # (B, C)
        return self.body(x, n)  # (B, C)

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
