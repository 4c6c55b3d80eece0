"""A trained audio classifier (:class:`ClipClassifier`): labels and probabilities of recordings,
scores on a split, and where its attention went over time.

It is a third kind of :class:`~seqlab.tasks.classification.base.Classifier`: labels, scores,
evaluation (accuracy, macro-F1, the confusion matrix) and ``seqlab classify`` are the
classifiers' own; what is written here is how a recording becomes what the model reads. A
recording is a WAV file (a path), a file's bytes, or raw ``(samples, rate)``; it is read as mono
float samples at the model's rate (``data.sample_rate``; :func:`seqlab.data.audio.read_audio`
downmixes and resamples), and the model's front end turns the padded waveforms into log-mel
frames (:class:`seqlab.models.audio.AudioClassifier`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from seqlab import catalog
from seqlab.config import ExperimentConfig
from seqlab.data.audio import AudioSource, read_audio
from seqlab.data.audio_batching import AudioBatches, pad_waves
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.runtime.precision import autocast
from seqlab.storage.outputs import RULE
from seqlab.tasks.base import Run, load_weights
from seqlab.tasks.classification.base import Classes, Classifier, forward_batches
from seqlab.tasks.options import Option

#: the longest recording read (seconds); the server has its own limit (``max_audio_seconds``)
MAX_SECONDS = 600.0


def _single(items: Any) -> bool:
    """Whether ``items`` is one recording (a path, bytes, or ``(samples, rate)``)."""
    if isinstance(items, str | os.PathLike | bytes | bytearray):
        return True
    return isinstance(items, tuple) and len(items) == 2 and isinstance(items[1], int)


def _name(item: Any, i: int) -> str:
    if isinstance(item, str | os.PathLike):
        return str(item)
    return f"recording {i}" if not isinstance(item, tuple) else f"array {i}"


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
        return cls(load_weights(model, run), run.cfg, classes, run)

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
        """The longest recording the model reads whole: a Transformer body's positions
        (``model.body.max_len`` frames), a ViT's image width (``model.max_frames``), else
        :data:`MAX_SECONDS`."""
        m = self.cfg.model
        frames = {"transformer_classifier": getattr(m.body, "max_len", None), "vit": m.max_frames}
        limit = frames.get(m.body.arch)
        if limit is None:
            return MAX_SECONDS
        return min(MAX_SECONDS, (limit - 1) * m.features.hop_length / self.rate)

    @property
    def has_attention(self) -> bool:
        return bool(getattr(self.model, "has_attention", False))

    # ----------------------------------------------------------------------------- reading
    def read(self, item: AudioSource, name: str, max_seconds: float | None = None) -> Tensor:
        """One recording as the model reads it: mono float samples ``(N,)`` at :attr:`rate`;
        longer than ``max_seconds`` (default and at most: :attr:`max_seconds`) is an error."""
        limit = min(max_seconds or self.max_seconds, self.max_seconds)
        samples, _ = read_audio(item, rate=self.rate, max_seconds=limit, name=name)
        return torch.from_numpy(samples)

    def encode(self, items: Sequence[Any] | Tensor) -> list[Tensor]:
        if isinstance(items, Tensor):
            raise SeqlabError(
                "give recordings as WAV files, bytes or (samples, rate) pairs, not one tensor"
            )
        return [self.read(item, _name(item, i)) for i, item in enumerate(items, start=1)]

    def probabilities(self, items: Any, batch_size: int = 64) -> Tensor:  # type: ignore[override]
        """Class probabilities ``(N, C)`` of recordings (paths, bytes or ``(samples, rate)``);
        ``(C,)`` for one recording."""
        if _single(items):
            return self.probabilities([items], batch_size)[0]
        waves = self.encode(list(items))
        return self.probabilities_of(waves, batch_size)

    def probabilities_of(self, waves: Sequence[Tensor], batch_size: int = 64) -> Tensor:
        """Class probabilities ``(N, C)`` of clips already read (:meth:`read`)."""
        if not waves:
            return torch.zeros(0, len(self.labels))
        batches = AudioBatches(waves, [0] * len(waves), batch_size, shuffle=False, bucket=False)
        logits, _ = forward_batches(self.model, batches, self.precision)
        return logits.softmax(-1)

    def classify(self, items: Any, batch_size: int = 64) -> Any:
        """The most probable label of each recording with its probability; one pair for one
        recording (a path, bytes or ``(samples, rate)``)."""
        single = _single(items)
        probs = self.probabilities([items] if single else items, batch_size)
        found = [(self.labels[int(p.argmax())], float(p.max())) for p in probs]
        return found[0] if single else found

    def split_examples(self, split: str) -> tuple[list[Tensor], list[str]]:
        examples = catalog.datasets()[self.cfg.data.dataset].read(
            self.cfg.data, self.cfg.train.seed
        )
        if split not in examples:
            raise SeqlabError(
                f"data.dataset={self.cfg.data.dataset} has no {split!r} split; it has "
                + ", ".join(examples)
            )
        return [c.samples for c, _ in examples[split]], [label for _, label in examples[split]]

    def score(self, items: Any, labels: Any) -> dict[str, Any]:
        if items and isinstance(items[0], Tensor):  # clips of a split, read already
            items = [(w.numpy(), self.rate) for w in items]
        return super().score(items, labels)

    # --------------------------------------------------------------------------- attention
    @torch.no_grad()
    def frames(self, item: Any) -> tuple[Tensor, Tensor]:
        """What the model reads of one recording: normalised log-mel frames ``(T, n_mels)``,
        and the recording itself ``(N,)`` at :attr:`rate`."""
        wave = item if isinstance(item, Tensor) else self.read(item, _name(item, 1))
        waves, lengths = pad_waves([wave])
        feats, frames = self.model.features(waves, lengths)
        return feats[0, : int(frames[0])].float(), wave

    @torch.no_grad()
    def attention(self, item: Any) -> tuple[list[str], list[Tensor]]:
        """Self-attention over one recording: each position's name (a frame's time, ``0.25s``;
        ``[CLS]``; or a spectrogram patch, ``t0.40s m8``) and each layer's weights
        ``(h, T, T)``."""
        self._needs_attention()
        wave = item if isinstance(item, Tensor) else self.read(item, _name(item, 1))
        waves, lengths = pad_waves([wave])
        with autocast(self.precision):
            weights = [w[0].float().cpu() for w in self.model.attention(waves, lengths)]
        size = weights[0].shape[-1]
        grid = getattr(self.model, "patch_grid", None)
        if grid is not None:  # ViT: the class token, then patches row (mel) by row, column (time)
            rows, cols = grid
            step = self.model.max_frames // cols * self.hop_seconds
            mels = self.cfg.model.features.n_mels // rows
            names = ["[CLS]"] + [
                f"t{c * step:.2f}s m{r * mels}" for r in range(rows) for c in range(cols)
            ]
        else:
            times = [f"{i * self.hop_seconds:.2f}s" for i in range(size)]
            names = (
                times
                if size == len(times) and size == self._frames(waves, lengths)
                else (["[CLS]"] + times[: size - 1])
            )
        return names, weights

    def _frames(self, waves: Tensor, lengths: Tensor) -> int:
        return int(self.model.features(waves, lengths)[1][0])

    def over_time(self, item: Any) -> tuple[Tensor, Tensor]:
        """Attention over time of one recording: the log-mel frames ``(T, n_mels)`` and, for
        each frame, the share of the last layer's attention (averaged over heads and queries)
        that it receives ``(T,)``, summing to 1. A ``[CLS]`` position's own share is left out;
        a ViT's patches give their share to the frames they cover (summed over mel rows)."""
        feats, wave = self.frames(item)
        _, weights = self.attention(wave)
        received = weights[-1].mean(0).mean(0)  # (T',): each key's mean weight over queries
        grid = getattr(self.model, "patch_grid", None)
        if grid is not None:
            rows, cols = grid
            per_column = received[1:].view(rows, cols).sum(0)  # (cols,)
            width = self.model.max_frames // cols
            received = per_column.repeat_interleave(width)[: len(feats)]
            received = torch.nn.functional.pad(received, (0, len(feats) - len(received)))
        elif len(received) == len(feats) + 1:
            received = received[1:]
        total = received.sum()
        return feats, received / total if total > 0 else received

    def figures_of(self, item: Any, weights: list[Tensor], stem: str) -> list[Path]:
        from seqlab.tasks.audio.figures import plot_spectrogram_attention  # deferred: matplotlib

        feats, received = self.over_time(item)
        title = f"{_name(item, 1)}: {self.classify([item])[0][0]}"
        return [plot_spectrogram_attention(feats, received, self.hop_seconds, f"{stem}.png", title)]

    def _draw_attention(self, directory: Path, number: int, item: Any, layer: int) -> list[Path]:
        """The spectrogram with its attention over time (``attention-NNNN.png``)."""
        return self.figures_of(item, [], str(directory / f"attention-{number:04d}"))

    def _needs_attention(self) -> None:
        if not self.has_attention:
            raise SeqlabError(
                f"model.body.arch={self.cfg.model.body.arch} has no self-attention over the "
                "frames to draw; the transformer_classifier and vit bodies have"
            )

    def check(self, command: str, options: Mapping[str, Any]) -> None:
        if options.get("attention_png"):
            self._needs_attention()
        super().check(command, options)

    @classmethod
    def accepts(cls, cfg: ExperimentConfig) -> bool:
        return True


def model_of(cfg: ExperimentConfig, num_classes: int) -> nn.Module:
    """A fresh audio model for ``cfg`` (:func:`seqlab.models.build_model`)."""
    return build_model(cfg.model, num_classes=num_classes, sample_rate=cfg.data.sample_rate)
