"""How an audio classifier reads clips already read at its rate (:class:`ClipReader`): each
clip heard once by the no-speech detector, and each clip with speech read once by the model
(its log-mel computed once, its body run once), whatever that one pass is asked to give: the
class probabilities, the normalised log-mel frames the body read, each layer's attention
(:class:`Reading`). :class:`~seqlab.tasks.audio.predictor.ClipClassifier` (the Python API and
``seqlab classify``) and ``POST /classify-audio`` read clips through it.

**One pass, its parts kept.** The model runs as in validation, in batches
(:func:`~seqlab.tasks.classifier.base.forward_batches`), and forward hooks keep what was asked
on the way: the front end's normalised frames (what ``model.norm`` gives the body) and, for
attention, each encoder block's weights (the block is asked for them, its ``need_weights``,
as :meth:`seqlab.models.audio.AudioClassifier.attention` asks). The hooks act only on the
thread that set them and are removed after the pass. Asked for its weights, attention computes
them explicitly instead of in the fused kernel: the probabilities then agree with a pass
without them to float rounding (about 1e-7), the weights are those of ``attention`` itself.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.config import ExperimentConfig
from seqlab.data.audio import AudioError
from seqlab.data.audio_batching import AudioBatches, pad_waves
from seqlab.data.speech import Speech, detect_speech
from seqlab.errors import SeqlabError
from seqlab.nn.transformer import EncoderBlock
from seqlab.runtime.precision import Resolved
from seqlab.tasks.classifier.base import forward_batches


def patch_names(grid: tuple[int, int], max_frames: int, n_mels: int, hop: float) -> list[str]:
    """The positions of a ViT body over a spectrogram of ``grid`` (rows of mel bins, columns of
    frames): ``[CLS]``, then each patch row by row, named by its first frame's time and first
    mel bin (``t0.40s m8``)."""
    rows, cols = grid
    step, mels = max_frames // cols * hop, n_mels // rows
    return ["[CLS]"] + [f"t{c * step:.2f}s m{r * mels}" for r in range(rows) for c in range(cols)]


def patches_to_frames(
    received: Tensor, grid: tuple[int, int], max_frames: int, frames: int
) -> Tensor:
    """A ViT body's attention received by each patch ``(1 + rows·cols,)``, the class token
    first, as the share of each of ``frames`` frames: each column's patches summed over the
    mel rows and spread over the frames it covers ``(frames,)``."""
    rows, cols = grid
    per_column = received[1:].view(rows, cols).sum(0)  # (cols,)
    spread = per_column.repeat_interleave(max_frames // cols)[:frames]
    return torch.nn.functional.pad(spread, (0, frames - len(spread)))


class NoSpeech(AudioError):
    """A recording with no speech in it was asked for what only speech has (its attention)."""


@dataclass(frozen=True)
class Reading:
    """What one pass made of one clip: the detector's answer (``speech``), the class
    probabilities ``(C,)`` (zeros with no speech: the model is not asked) and, where asked and
    heard, the normalised log-mel frames ``(T, n_mels)`` (``feats``) and each layer's attention
    weights ``(h, T', T')`` (``weights``; T' = T, 1 + T with a ``[CLS]`` frame, or a ViT's
    class token and patches)."""

    speech: Speech
    probs: Tensor
    feats: Tensor | None = None
    weights: list[Tensor] | None = None


class _Kept:
    """What the hooks of one pass keep, per batch: the body's frames with their counts, and
    each layer's weights (in layer order, batch after batch)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.frames: list[tuple[Tensor, Tensor]] = []
        self.weights: list[Tensor] = []

    def mine(self) -> bool:
        return threading.get_ident() == self.thread


@contextlib.contextmanager
def _keeping(model: nn.Module, blocks: Sequence[nn.Module], feats: bool) -> Iterator[_Kept]:
    """Hooks on ``model`` for one pass on this thread: the normalised frames (``feats``) and
    the weights of ``blocks`` (none: no attention asked)."""
    kept, handles = _Kept(), []

    def frames(_module: nn.Module, args: tuple[Any, ...], out: Tensor) -> None:
        if kept.mine():
            kept.frames.append((out.detach(), args[1]))

    def ask(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return (args, {**kwargs, "need_weights": True}) if kept.mine() else None

    def weights(_module: nn.Module, _args: tuple[Any, ...], out: tuple[Tensor, Tensor]) -> None:
        if kept.mine():
            kept.weights.append(out[1])

    if feats:
        handles.append(model.norm.register_forward_hook(frames))
    for block in blocks:
        handles.append(block.register_forward_pre_hook(ask, with_kwargs=True))
        handles.append(block.register_forward_hook(weights))
    try:
        yield kept
    finally:
        for handle in handles:
            handle.remove()


class ClipReader:
    """Clips already read at the model's rate ``(N_i,)``, read by the model once each (see the
    module). ``model``: an :class:`~seqlab.models.audio.AudioClassifier` over ``num_classes``
    classes; ``precision``: autocast to it (None: as the caller set up)."""

    def __init__(
        self,
        model: nn.Module,
        cfg: ExperimentConfig,
        num_classes: int,
        precision: Resolved | None = None,
    ) -> None:
        self.model, self.num_classes, self.precision = model, num_classes, precision
        self.rate, self.features = int(cfg.data.sample_rate), cfg.model.features
        self.arch = cfg.model.body.arch

    def speech(self, waves: Sequence[Tensor], batch_size: int = 64) -> list[Speech]:
        """The no-speech detector's answer for each clip, in batches
        (:func:`seqlab.data.speech.detect_speech` on the model's analysis frames)."""
        f, out = self.features, []
        for start in range(0, len(waves), batch_size):
            padded, lengths = pad_waves(waves[start : start + batch_size])
            out += detect_speech(padded, lengths, self.rate, f.win_length, f.hop_length)
        return out

    def probabilities(self, waves: Sequence[Tensor], batch_size: int = 64) -> Tensor:
        """The model's class probabilities ``(N, C)``, with no speech detection."""
        return self._pass(waves, batch_size, feats=False, attention=False)[0]

    def read(
        self,
        waves: Sequence[Tensor],
        batch_size: int = 64,
        *,
        feats: bool = False,
        attention: bool = False,
        speech: Sequence[Speech] | None = None,
    ) -> list[Reading]:
        """Each clip heard (``speech``: heard already), then those with speech read by the model
        in one pass: their probabilities, with ``feats`` their frames, with ``attention`` their
        frames and weights too (a model with self-attention)."""
        heard = list(speech) if speech is not None else self.speech(waves, batch_size)
        ids = [i for i, s in enumerate(heard) if s.heard]
        probs, frames, weights = self._pass(
            [waves[i] for i in ids], batch_size, feats=feats, attention=attention
        )
        found = {i: (probs[k], frames[k], weights[k]) for k, i in enumerate(ids)}
        silent = (torch.zeros(self.num_classes), None, None)
        return [Reading(s, *found.get(i, silent)) for i, s in enumerate(heard)]

    @torch.no_grad()
    def frames(self, wave: Tensor) -> Tensor:
        """The normalised log-mel frames ``(T, n_mels)`` of one clip: the front end alone."""
        device = next(self.model.parameters()).device
        waves, lengths = pad_waves([wave])
        feats, frames = self.model.features(waves.to(device), lengths.to(device))
        return feats[0, : int(frames[0])].float().cpu()

    def one(self, wave: Tensor, name: str, *, attention: bool = False) -> Reading:
        """One clip ``name`` read once: its frames, with ``attention`` its weights too. A clip
        with no speech is :class:`NoSpeech`, attention asked of a model without it an error,
        each before the model is asked."""
        (heard,) = self.speech([wave])
        if not heard.heard:
            raise NoSpeech(f"{name}: no speech ({heard.reason}): no attention to show")
        if attention:
            self.needs_attention()
        (reading,) = self.read([wave], feats=True, attention=attention, speech=[heard])
        return reading

    def needs_attention(self) -> None:
        """An error unless the model has self-attention to show."""
        if not getattr(self.model, "has_attention", False):
            raise SeqlabError(
                f"model.body.arch={self.arch} has no self-attention over the frames to draw; "
                "the transformer_classifier and vit bodies have"
            )

    def _blocks(self) -> list[nn.Module]:
        """The body's self-attention layers, in order (none: a body without attention)."""
        return [m for m in self.model.body.modules() if isinstance(m, EncoderBlock)]

    def _pass(
        self, waves: Sequence[Tensor], batch_size: int, *, feats: bool, attention: bool
    ) -> tuple[Tensor, list[Tensor | None], list[list[Tensor] | None]]:
        """Probabilities ``(N, C)`` of ``waves`` from one forward pass, and each clip's frames
        (asked, or with ``attention``) and weights where asked (else None)."""
        feats = feats or attention  # the weights' positions are the frames'
        none: list[Any] = [None] * len(waves)
        if not waves:
            return torch.zeros(0, self.num_classes), none, none
        blocks = self._blocks() if attention else []
        if attention and not blocks:
            self.needs_attention()  # a body with attention that is no encoder blocks: a bug
            raise SeqlabError(f"{type(self.model.body).__name__} has no encoder blocks to ask")
        batches = AudioBatches(waves, [0] * len(waves), batch_size, shuffle=False, bucket=False)
        with _keeping(self.model, blocks, feats) as kept:
            logits, _ = forward_batches(self.model, batches, self.precision)
        frames, weights = list(none), list(none)
        layers, row = len(blocks), 0
        for b, (batch_feats, counts) in enumerate(kept.frames):
            layer_weights = kept.weights[b * layers : (b + 1) * layers]
            for i, count in enumerate(counts.tolist()):
                frames[row] = batch_feats[i, :count].float().cpu()
                if attention:
                    weights[row] = [
                        self._own(w[i], count, batch_feats.shape[1]) for w in layer_weights
                    ]
                row += 1
        return logits.softmax(-1), frames, weights

    def _own(self, weights: Tensor, frames: int, padded: int) -> Tensor:
        """One clip's weights ``(h, S, S)`` from its row of a padded batch: a Transformer's
        positions are its frames (and a ``[CLS]`` frame); a ViT's image is the same size for
        every clip (its padding is masked)."""
        if getattr(self.model, "patch_grid", None) is None:
            size = frames + weights.shape[-1] - padded  # + 1 with a [CLS] frame
            weights = weights[:, :size, :size]
        return weights.float().cpu().contiguous()

    def over_time(self, reading: Reading) -> Tensor:
        """The share of the last layer's attention (averaged over heads and queries) that each
        of a reading's frames receives ``(T,)``, summing to 1. A ``[CLS]`` position's own share
        is left out; a ViT's patches give their share to the frames they cover (summed over mel
        rows)."""
        assert reading.feats is not None and reading.weights
        received = reading.weights[-1].mean(0).mean(0)  # (T',): each key's mean over queries
        grid, frames = getattr(self.model, "patch_grid", None), len(reading.feats)
        if grid is not None:
            received = patches_to_frames(received, grid, self.model.max_frames, frames)
        elif len(received) == frames + 1:
            received = received[1:]
        total = received.sum()
        return received / total if total > 0 else received

    def figure(self, reading: Reading, path: str | Path, title: str = "") -> Path:
        """A reading's log-mel frames with its attention over time drawn under them
        (:func:`~seqlab.tasks.audio.figures.plot_spectrogram_attention`)."""
        from seqlab.tasks.audio.figures import plot_spectrogram_attention  # deferred: matplotlib

        assert reading.feats is not None
        hop = self.features.hop_length / self.rate
        return plot_spectrogram_attention(reading.feats, self.over_time(reading), hop, path, title)

    def positions(self, reading: Reading) -> list[str]:
        """The name of each position a reading's weights are over: a frame's time (``0.25s``),
        ``[CLS]``, or a ViT's class token and spectrogram patches (``t0.40s m8``)."""
        assert reading.feats is not None and reading.weights
        hop = self.features.hop_length / self.rate
        grid = getattr(self.model, "patch_grid", None)
        if grid is not None:  # ViT: the class token, then its patches
            return patch_names(grid, self.model.max_frames, self.features.n_mels, hop)
        size, frames = reading.weights[0].shape[-1], len(reading.feats)
        times = [f"{i * hop:.2f}s" for i in range(size)]
        return times if size == frames else ["[CLS]"] + times[: size - 1]
