"""A trained audio classifier (:class:`ClipClassifier`): labels and probabilities of recordings,
scores on a split, and where its attention went over time.

It is a third kind of :class:`~seqlab.tasks.classifier.base.Classifier`: labels, scores,
evaluation (accuracy, macro-F1, the confusion matrix) and ``seqlab classify`` are the
classifiers' own; what is written here is how a recording becomes what the model reads. A
recording (a path, a WAV file's bytes or file object, or ``(samples, rate)``) is read, or
refused, by :func:`seqlab.data.audio.load_clip`, the check the server calls too: mono float
samples at the model's rate (``data.sample_rate``), with its warnings (a rate below the
model's: :class:`~seqlab.data.audio.LowRateWarning`), which the Python API and the command line
issue with ``warnings.warn``. The model's front end turns the padded waveforms into log-mel
frames (:class:`seqlab.models.audio.AudioClassifier`). How clips read are heard and read by the
model, each once whatever is asked of it (the probabilities, the frames, the attention, a
figure), is :class:`~seqlab.tasks.audio.reader.ClipReader`'s (:attr:`ClipClassifier.reader`).

**No speech is an answer.** Before the model is asked, the no-speech detector
(:mod:`seqlab.data.speech`, on the model's own analysis frames) hears each clip; one with no
frame at or above :data:`~seqlab.data.speech.SPEECH_DBFS`, or shorter than one analysis window,
is given no label: ``classify`` answers ``(None, 0.0)``, ``probabilities`` a row of zeros,
``speech`` the reason, ``seqlab classify`` prints ``no speech`` in the label column, and no
attention is drawn for it (``attention`` and ``over_time`` raise :class:`NoSpeech`). ``score``
and ``evaluate`` refuse recordings with no speech: they have no label to score (every FSDD
recording is speech, see :mod:`seqlab.data.speech`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from seqlab.config import ExperimentConfig
from seqlab.data import readers
from seqlab.data.audio import LOCAL_LIMITS, AudioError, AudioSource, Clip, load_clip, warn_about
from seqlab.data.speech import Speech
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.storage.output_dirs import api_output_dir
from seqlab.storage.outputs import RULE
from seqlab.tasks.audio.reader import (  # NoSpeech and the patch helpers: moved there
    ClipReader,
    NoSpeech,
    Reading,
    patch_names,
    patches_to_frames,
)

__all__ = [
    "MAX_SECONDS",
    "NO_SPEECH",
    "ClipClassifier",
    "NoSpeech",
    "Recordings",
    "longest_seconds",
    "model_of",
    "patch_names",
    "patches_to_frames",
]
from seqlab.tasks.base import Run, load_weights
from seqlab.tasks.classifier.base import Classes, Classifications, Classifier
from seqlab.tasks.classifier.calibration import CALIBRATION, Calibration
from seqlab.tasks.options import Option

#: what ``seqlab classify`` prints in the label column of a recording with no speech
NO_SPEECH = "no speech"
#: the longest recording the command line and the Python API read (seconds): named, with the
#: server's and the reason they differ, in :data:`seqlab.audio_limits.LOCAL_LIMITS`
MAX_SECONDS = LOCAL_LIMITS.max_seconds


def _is_rate(x: Any) -> bool:
    if isinstance(x, Tensor):
        return x.ndim == 0
    return isinstance(x, int | float | np.number) and not isinstance(x, bool | np.bool_)


def _single(items: Any) -> bool:
    """Whether ``items`` is one recording (a path, bytes, a file object, ``(samples, rate)``, or
    anything else that is not a list of them: it is then refused as one, by its type)."""
    if isinstance(items, str | os.PathLike | bytes | bytearray | memoryview):
        return True
    if isinstance(items, tuple):
        return (
            len(items) == 2 and _is_rate(items[1]) and not isinstance(items[0], str | os.PathLike)
        )
    return not isinstance(items, Sequence)


def _name(item: Any, i: int) -> str:
    if isinstance(item, Clip):
        return item.source
    if isinstance(item, str | os.PathLike):
        return str(item)
    if isinstance(item, tuple | np.ndarray | Tensor):
        return f"array {i}"
    named = getattr(item, "name", None)
    return named if isinstance(named, str) else f"recording {i}"


@dataclass
class Recordings(Classifications):
    """``seqlab classify``'s answer for recordings: a label and its probability, or no speech
    (the label None, the probability 0) and why (:class:`seqlab.data.speech.Speech`)."""

    speech: list[Speech] = field(default_factory=list)

    def lines(self) -> list[str]:
        """``LABEL<TAB>PROBABILITY<TAB>FILE`` per recording; ``no speech<TAB>0.0000<TAB>FILE``
        for one with no speech."""
        return [
            f"{NO_SPEECH if label is None else label}\t{prob:.4f}\t{item}"
            for item, (label, prob) in zip(self.items, self.found, strict=True)
        ]

    def to_json(self) -> dict[str, Any]:
        rows = super().to_json()["classifications"]
        for row, heard in zip(rows, self.speech, strict=True):
            row.update(speech=heard.heard, reason=heard.reason)
        return {"classifications": rows}


class ClipClassifier(Classifier):
    """A trained audio classifier (see the module docstring)."""

    task = "audio_classification"
    kind = "audio classification"
    item = "recording"
    options: ClassVar[tuple[Option, ...]] = (
        Option("files", "WAV files to classify", ("classify",), role="cli"),
        Option("--input", "one WAV file a line", ("classify",), role="cli", metavar="FILE"),
        *(o for o in Classifier.options if o.flag != "--attention-png"),
        Option(
            "--attention-png",
            "draw each recording's log-mel spectrogram with the attention over time into DIR: "
            + RULE,
            ("classify",),
            role="figure_dir",
            metavar="DIR",
            figure="spectrograms with attention",
        ),
    )
    usage: ClassVar[dict[str, str]] = {
        "classify": "give WAV files to classify: seqlab classify --run RUN_DIR a.wav b.wav, "
        "or --input LIST",
        "evaluate": "an audio classifier is scored on a --split of its dataset",
    }

    @classmethod
    def load(cls, run: Run) -> ClipClassifier:
        classes = Classes.load(run.file("classes.json"))
        model = model_of(run.cfg, len(classes.labels))
        load_weights(model, run)
        _calibrate(model, run)
        return cls(model, run.cfg, classes, run)

    @property
    def rate(self) -> int:
        """The sample rate the model reads (Hz)."""
        return int(self.cfg.data.sample_rate)

    @property
    def hop_seconds(self) -> float:
        """Seconds between two frames."""
        return self.cfg.model.features.hop_length / self.rate

    @property
    def max_seconds(self) -> float:
        """The longest recording the model reads whole (:func:`longest_seconds`)."""
        return longest_seconds(self.cfg)

    @property
    def has_attention(self) -> bool:
        return bool(getattr(self.model, "has_attention", False))

    # ----------------------------------------------------------------------------- reading
    def read_clip(self, item: Any, name: str, max_seconds: float | None = None) -> Clip:
        """One recording as the model reads it (:func:`seqlab.data.audio.load_clip`: mono at
        :attr:`rate`, with its warnings, not issued); longer than ``max_seconds`` (default and
        at most: :attr:`max_seconds`) is an error."""
        if isinstance(item, Clip):
            return item
        limit = min(max_seconds or self.max_seconds, self.max_seconds)
        return load_clip(item, rate=self.rate, max_seconds=limit, name=name)

    def read(self, item: AudioSource, name: str, max_seconds: float | None = None) -> Tensor:
        """One recording's samples ``(N,)`` at :attr:`rate` (:meth:`read_clip`), its warnings
        issued (``warnings.warn``)."""
        clip = self.read_clip(item, name, max_seconds)
        warn_about(clip, stacklevel=3)
        return clip.samples

    def _wave(self, item: Any) -> tuple[Tensor, str]:
        """One recording's samples at :attr:`rate` and its name (a tensor: read already)."""
        if isinstance(item, Tensor) and item.ndim == 1 and item.is_floating_point():
            return item, "the recording"
        if isinstance(item, Clip):
            return item.samples, item.source
        name = _name(item, 1)
        return self.read(item, name), name

    def encode(self, items: Sequence[Any] | Tensor) -> list[Tensor]:
        return self._many(items)[0]

    def _many(self, items: Any) -> tuple[list[Tensor], list[str], bool]:
        """Each recording's samples (warnings issued) and name, and whether one was given."""
        single = _single(items)
        items = [items] if single else list(items)
        names = [_name(item, i) for i, item in enumerate(items, start=1)]
        return [self.read(x, n) for x, n in zip(items, names, strict=True)], names, single

    @property
    def reader(self) -> ClipReader:
        """How the model reads clips already read (:class:`~seqlab.tasks.audio.reader.ClipReader`:
        each clip heard once, its log-mel and the body once), at its ``precision``."""
        return ClipReader(self.model, self.cfg, len(self.labels), self.precision)

    def speech_of(self, waves: Sequence[Tensor], batch_size: int = 64) -> list[Speech]:
        """The no-speech detector's answer for clips already read (:meth:`read`), in batches
        (:func:`seqlab.data.speech.detect_speech` on the model's analysis frames)."""
        return self.reader.speech(waves, batch_size)

    def speech(self, items: Any, batch_size: int = 64) -> Any:
        """Whether each recording holds speech, and why not
        (:class:`~seqlab.data.speech.Speech`); one answer for one recording."""
        waves, _, single = self._many(items)
        found = self.speech_of(waves, batch_size)
        return found[0] if single else found

    def heard_of(
        self, waves: Sequence[Tensor], batch_size: int = 64
    ) -> tuple[Tensor, list[Speech]]:
        """Class probabilities ``(N, C)`` of clips already read, a row of zeros where the
        detector heard no speech (the model is not asked), and each clip's
        :class:`~seqlab.data.speech.Speech`."""
        return _stacked(self.reader.read(waves, batch_size), len(self.labels))

    def probabilities(self, items: Any, batch_size: int = 64) -> Tensor:  # type: ignore[override]
        """Class probabilities ``(N, C)`` of recordings (paths, bytes, file objects or
        ``(samples, rate)``); ``(C,)`` for one recording. A recording with no speech has a row
        of zeros (:meth:`speech` says why)."""
        waves, _, single = self._many(items)
        probs, _ = self.heard_of(waves, batch_size)
        return probs[0] if single else probs

    def probabilities_of(self, waves: Sequence[Tensor], batch_size: int = 64) -> Tensor:
        """The model's class probabilities ``(N, C)`` of clips already read (:meth:`read`), with
        no speech detection (:meth:`heard_of` has it)."""
        return self.reader.probabilities(waves, batch_size)

    def _found(self, probs: Tensor, speech: Sequence[Speech]) -> list[tuple[str | None, float]]:
        return [
            (self.labels[int(p.argmax())], float(p.max())) if s.heard else (None, 0.0)
            for p, s in zip(probs, speech, strict=True)
        ]

    def classify(self, items: Any, batch_size: int = 64) -> Any:
        """The most probable label of each recording with its probability, ``(None, 0.0)`` for
        one with no speech; one pair for one recording (a path, bytes, a file object or
        ``(samples, rate)``)."""
        waves, _, single = self._many(items)
        found = self._found(*self.heard_of(waves, batch_size))
        return found[0] if single else found

    def predict(
        self,
        inputs: Sequence[Any] | Any,
        *,
        attention_png: str | Path | None = None,
        layer: int = -1,
        numbers: Sequence[int] | None = None,
    ) -> Recordings:
        """``seqlab classify``: each recording's label, or no speech (the reason as a note);
        with ``attention_png`` its spectrogram and attention drawn into that directory (by the
        rule of ``--attention-png``), ``attention-NNNN.png`` after its input line (``numbers``),
        except for a recording with no speech (a note says so)."""
        self.check("classify", {"attention_png": attention_png})
        folder = api_output_dir(attention_png, "attention_png")  # checked now, before any work
        items = [inputs] if _single(inputs) else list(inputs)
        numbers = list(numbers) if numbers is not None else list(range(1, len(items) + 1))
        clips = [self.read_clip(x, _name(x, n)) for x, n in zip(items, numbers, strict=True)]
        for clip in clips:
            warn_about(clip, stacklevel=3)
        readings = self.reader.read([c.samples for c in clips], attention=bool(attention_png))
        probs, speech = _stacked(readings, len(self.labels))
        out = Recordings([c.source for c in clips], self._found(probs, speech), speech=speech)
        out.notes += [
            f"{c.source}: no speech: {s.reason}"
            for c, s in zip(clips, speech, strict=True)
            if s.reason
        ]
        with folder:  # a null context without attention_png
            for number, clip, reading in zip(numbers, clips, readings, strict=True):
                if attention_png and reading.speech.heard:
                    stem = Path(attention_png) / f"attention-{number:04d}"
                    out.figures.append(self._figure(reading, clip.source, stem))
                elif attention_png:
                    out.notes.append(f"{clip.source}: no attention figure: no speech to attend to")
        return out

    def split_examples(self, split: str) -> tuple[list[Tensor], list[str]]:
        examples = readers.read(self.cfg.data, self.cfg.train.seed)
        if split not in examples:
            raise SeqlabError(
                f"data.dataset={self.cfg.data.dataset} has no {split!r} split; it has "
                + ", ".join(examples)
            )
        return [c.samples for c, _ in examples[split]], [label for _, label in examples[split]]

    def predicted_ids(self, items: Any) -> Tensor:
        """The classifiers' scores read each recording once (:meth:`heard_of`: the detector,
        the log-mel and the body once each); no speech is refused. A split's clips (tensors)
        stay as read: resampled, they may overshoot full scale a little, which a user's array
        may not."""
        if items and isinstance(items[0], Tensor):
            items = [Clip(w, self.rate, f"clip {i}") for i, w in enumerate(items, start=1)]
        waves, names, _ = self._many(items)
        probs, heard = self.heard_of(waves)
        silent = [(n, s) for n, s in zip(names, heard, strict=True) if not s.heard]
        if silent:
            raise AudioError(
                f"{silent[0][0]}: no speech ({silent[0][1].reason}); {len(silent)} of "
                f"{len(waves)} recording(s) have none and no label to score: leave them out"
            )
        return probs.argmax(-1)

    # --------------------------------------------------------------------------- attention
    def frames(self, item: Any) -> tuple[Tensor, Tensor]:
        """What the model reads of one recording: normalised log-mel frames ``(T, n_mels)``
        (its front end alone), and the recording itself ``(N,)`` at :attr:`rate`."""
        wave, _ = self._wave(item)
        return self.reader.frames(wave), wave

    def attention(self, item: Any) -> tuple[list[str], list[Tensor]]:
        """Self-attention over one recording: each position's name (a frame's time, ``0.25s``;
        ``[CLS]``; or a spectrogram patch, ``t0.40s m8``) and each layer's weights
        ``(h, T, T)``. A recording with no speech has none: :class:`NoSpeech`."""
        self._needs_attention()
        reading = self.reader.one(*self._wave(item), attention=True)
        assert reading.weights is not None
        return self.reader.positions(reading), reading.weights

    def over_time(self, item: Any) -> tuple[Tensor, Tensor]:
        """Attention over time of one recording: the log-mel frames ``(T, n_mels)`` and, for
        each frame, the share of the last layer's attention (averaged over heads and queries)
        that it receives ``(T,)``, summing to 1. A ``[CLS]`` position's own share is left out;
        a ViT's patches give their share to the frames they cover (summed over mel rows)."""
        reading = self.reader.one(*self._wave(item), attention=True)
        assert reading.feats is not None
        return reading.feats, self.reader.over_time(reading)

    def figures_of(self, item: Any, weights: list[Tensor], stem: str) -> list[Path]:
        """The spectrogram with its attention over time (``STEM.png``)."""
        wave, name = self._wave(item)
        return [self._figure(self.reader.one(wave, name, attention=True), name, stem)]

    def _figure(self, reading: Reading, name: str, stem: str | Path) -> Path:
        """A reading's spectrogram and attention, titled with its name and label."""
        title = f"{name}: {self.labels[int(reading.probs.argmax())]}"
        return self.reader.figure(reading, f"{stem}.png", title)

    def _needs_attention(self) -> None:
        self.reader.needs_attention()

    def check(self, command: str, options: Mapping[str, Any]) -> dict[str, Any]:
        if options.get("attention_png"):
            self._needs_attention()
        return super().check(command, options)

    @classmethod
    def accepts(cls, cfg: ExperimentConfig) -> bool:
        return True


def longest_seconds(cfg: ExperimentConfig) -> float:
    """The longest recording a model of ``cfg`` reads whole: a Transformer body's positions
    (``model.body.max_len`` frames), a ViT's image width (``model.max_frames``), else
    :data:`MAX_SECONDS`."""
    m = cfg.model
    frames = {"transformer_classifier": getattr(m.body, "max_len", None), "vit": m.max_frames}
    limit = frames.get(m.body.arch)
    if limit is None:
        return MAX_SECONDS
    return min(MAX_SECONDS, (limit - 1) * m.features.hop_length / int(cfg.data.sample_rate))


def _calibrate(model: nn.Module, run: Run) -> None:
    """The run's softmax temperature (``calibration.json``) set in ``model``: chosen for the
    best checkpoint, another checkpoint stays at T = 1."""
    calibration = run.run_dir / CALIBRATION
    if calibration.is_file():
        found = Calibration.load(calibration)
        if found.checkpoint in ("", run.checkpoint.name):
            model.temperature.fill_(found.temperature)


def _stacked(readings: Sequence[Reading], classes: int) -> tuple[Tensor, list[Speech]]:
    """The probabilities ``(N, C)`` and the detector's answers of readings."""
    probs = torch.stack([r.probs for r in readings]) if readings else torch.zeros(0, classes)
    return probs, [r.speech for r in readings]


def model_of(cfg: ExperimentConfig, num_classes: int) -> nn.Module:
    """A fresh audio model for ``cfg`` (:func:`seqlab.models.build_model`)."""
    return build_model(cfg.model, num_classes=num_classes, sample_rate=cfg.data.sample_rate)
