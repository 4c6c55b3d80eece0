"""The run's dataset, as classification reads it: its record, its splits and its label names.

Each dataset's reader makes its splits (:func:`seqlab.data.readers.read`). The validation
split that chooses checkpoints is always held out of the training data (``data.val_examples``, a
seeded choice); the dataset's evaluation split (:attr:`seqlab.catalog.DatasetSpec.eval_split`) is
never used to choose anything.
"""

from __future__ import annotations

from torch import Tensor

from seqlab import catalog
from seqlab.config import ExperimentConfig
from seqlab.data import readers
from seqlab.data.classification import Examples


def dataset_of(cfg: ExperimentConfig) -> catalog.DatasetSpec:
    """The record of the run's dataset: its label names, evaluation split, inputs."""
    return catalog.datasets()[cfg.data.dataset]


def is_image_task(cfg: ExperimentConfig) -> bool:
    return dataset_of(cfg).inputs == "image"


def text_splits(cfg: ExperimentConfig) -> dict[str, Examples]:
    """``(text, label)`` examples of each split, from the dataset's reader
    (:func:`seqlab.data.readers.read`)."""
    return readers.read(cfg.data, cfg.train.seed)


def known_labels(cfg: ExperimentConfig) -> tuple[str, ...]:
    """The dataset's label names in its own order (none: the training split's, sorted)."""
    return dataset_of(cfg).labels


def image_splits(cfg: ExperimentConfig) -> dict[str, tuple[Tensor, Tensor]]:
    """Images ``(N, C, H, W)`` in [0, 1] and labels, per split, from the dataset's reader."""
    return readers.read(cfg.data, cfg.train.seed)


def eval_split(cfg: ExperimentConfig) -> str:
    """The split ``seqlab evaluate`` scores by default: the dataset's evaluation split, else
    ``val``."""
    return dataset_of(cfg).eval_split or "val"
