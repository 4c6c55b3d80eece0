"""The audio classifier's config (``model.arch: audio_classifier``): its front end's settings
(:class:`AudioFeatures`, ``model.features``) and the classifier it feeds (``model.body``, one of
:data:`BODIES`, validated by that architecture's config class). With the config, not beside the
model (:mod:`seqlab.models.audio`), as every one of seqlab's model configs is
(:mod:`seqlab.config.models`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SerializeAsAny, ValidationInfo, field_validator, model_validator

from seqlab import catalog
from seqlab.config.models import (
    CNNTextConfig,
    RNNClassifierConfig,
    TransformerClassifierConfig,
    ViTConfig,
)
from seqlab.config.sections import ModelConfigBase
from seqlab.config.strict import NonNegative, Positive, Probability, Strict


class SpectrogramCNNConfig(ModelConfigBase):
    """A 2-D CNN over the log-mel spectrogram, a body only the audio front end feeds
    (:mod:`seqlab.models.cnn_spectrogram`): blocks of two 3×3 convolutions with batch norm and a
    2×2 max-pool, the maximum over time, the head (Sainath & Parada 2015)."""

    arch: Literal["cnn_spectrogram"] = "cnn_spectrogram"
    task: ClassVar[str] = "audio_classification"
    widths: Annotated[list[Positive], Field(min_length=1, max_length=6)] = Field(
        [16, 32, 64], description="channels of each block (two 3×3 convolutions, a 2×2 pool)"
    )
    dropout: Probability = 0.3
    pooling: Literal["max", "mean_max"] = Field(
        "max",
        description="over each clip's frames at the end: the maximum (a word's peak), or the "
        "mean and the maximum side by side (a property of the whole utterance, as an emotion)",
    )


#: the classifiers the front end feeds (``model.body.arch``)
BODIES = ("cnn_text", "cnn_spectrogram", "rnn_classifier", "transformer_classifier", "vit")
#: their config classes
BODY_CONFIGS: dict[str, type[ModelConfigBase]] = {
    "cnn_text": CNNTextConfig,
    "cnn_spectrogram": SpectrogramCNNConfig,
    "rnn_classifier": RNNClassifierConfig,
    "transformer_classifier": TransformerClassifierConfig,
    "vit": ViTConfig,
}

#: a share of the clips, 0 to 1 inclusive
Share = Annotated[float, Field(ge=0.0, le=1.0)]
#: a [low, high] range of a random draw
Range = Annotated[list[float], Field(min_length=2, max_length=2)]


class AudioFeatures(Strict):
    """Log-mel features and their augmentation (``model.features``); the modules they describe
    are built by :func:`seqlab.models.audio.log_mel` and :func:`seqlab.models.audio.spec_augment`.

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


def _bodies() -> str:
    return catalog.choices(BODIES)


class AudioClassifierConfig(ModelConfigBase):
    """Log-mel features of the waveform (standardised, SpecAugment in training) read by one of
    the classifiers (``body``): an LSTM/GRU, a 1-D CNN or a Transformer over the frames, or a
    Vision Transformer over the spectrogram's patches (AST)."""

    arch: Literal["audio_classifier"] = "audio_classifier"
    task: ClassVar[str] = "audio_classification"
    inputs: ClassVar[str] = "audio"
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
        return BODY_CONFIGS[arch].model_validate(value)

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
