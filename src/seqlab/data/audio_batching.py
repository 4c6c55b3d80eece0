"""Minibatches of audio clips: waveforms of different lengths, zero-padded to the longest of the
batch, with their lengths in samples (the model's front end computes features per clip, so the
padding never reaches a clip's frames).

Like :class:`~seqlab.data.classification.ClassificationBatches`, an epoch is a pure function of
(seed, epoch): shuffled, and (``bucket``) sorted by length inside windows of 50 batches before
being cut, so that a batch holds clips of similar lengths and little padding is computed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from seqlab.data.classification import ClassBatch, batch_order
from seqlab.errors import DataError


def pad_waves(waves: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Right-pad mono clips ``(N_i,)`` with zeros: ``(B, N)`` float and lengths ``(B,)``."""
    lengths = torch.tensor([len(w) for w in waves], dtype=torch.long)
    out = torch.zeros(len(waves), int(lengths.max()) if len(waves) else 0)
    for i, w in enumerate(waves):
        out[i, : len(w)] = w
    return out, lengths


class AudioBatches:
    """Minibatches of ``batch_size`` clips (:class:`~seqlab.data.classification.ClassBatch`:
    waves ``(B, N)``, lengths ``(B,)``, labels ``(B,)``).

    Args:
        waves: mono float clips ``(N_i,)``, all at the model's rate.
        labels: label ids, one per clip.
        shuffle: a new order every epoch (else the input order).
        bucket: sort windows of 50 batches by length before cutting them (training).
    """

    carries_state = False

    def __init__(
        self,
        waves: Sequence[Tensor],
        labels: Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = True,
        bucket: bool = True,
        seed: int = 0,
    ) -> None:
        if len(waves) != len(labels):
            raise ValueError(f"{len(waves)} clips but {len(labels)} labels")
        if not len(waves):
            raise DataError("no clips to make batches of")
        self.waves, self.labels = list(waves), torch.as_tensor(list(labels), dtype=torch.long)
        self.batch_size, self.shuffle, self.bucket = batch_size, shuffle, bucket
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.waves) // self.batch_size)

    def _order(self) -> list[list[int]]:
        lengths = [len(w) for w in self.waves] if self.bucket else None
        return batch_order(
            len(self.waves), self.batch_size, self.shuffle, lengths, self.seed, self.epoch
        )

    def __iter__(self) -> Iterator[ClassBatch]:
        for idx in self._order():
            waves, lengths = pad_waves([self.waves[i] for i in idx])
            yield ClassBatch(waves, lengths, self.labels[idx])
