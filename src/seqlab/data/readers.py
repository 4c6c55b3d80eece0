"""Where the examples of each of seqlab's own datasets come from: the one table binding each
record of :mod:`seqlab.builtin_records` to its reader (:data:`READERS`) and, for a dataset that
is a folder, to what finds or downloads it (:data:`FOLDERS`); :func:`read` and :func:`fetch`,
which a record from outside seqlab answers with its own ``read`` and ``fetch``.

Each module of readers is imported here by name, so that the import graph shows it; nothing
below the tasks imports this module (validating a config reads the records alone).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqlab import catalog
from seqlab.catalog import DatasetSpec
from seqlab.data import (
    audio_datasets,
    classification,
    cmn_eng,
    dates,
    emodb,
    images,
    lm_corpus,
    parallel,
    registry,
    series,
)

#: the reader of each of seqlab's own datasets, by ``data.dataset``
READERS: dict[str, Callable[[Any, int], Any]] = {
    **lm_corpus.READERS,
    **parallel.READERS,
    **cmn_eng.READERS,
    **dates.READERS,
    **classification.READERS,
    **images.READERS,
    **series.READERS,
    **audio_datasets.READERS,
    **emodb.READERS,
}
#: the datasets that are a folder of files, and what finds or downloads each
FOLDERS: dict[str, Callable[[], Path]] = {**audio_datasets.FOLDERS, **emodb.FOLDERS}


def reader(spec: DatasetSpec) -> Callable[[Any, int], Any]:
    """``read(data, seed)`` of a dataset: its record's own, else seqlab's (:data:`READERS`)."""
    if spec.read is not None:
        return spec.read
    if spec.name not in READERS:
        raise ValueError(f"dataset {spec.name!r} has no reader: its record needs read=")
    return READERS[spec.name]


def read(data: Any, seed: int) -> Any:
    """The examples of the dataset an experiment's ``data`` section names (``train.seed``)."""
    return reader(catalog.datasets()[data.dataset])(data, seed)


def fetch(dataset: str) -> list[Path]:
    """Resolve every file of a dataset (downloading what is missing); a dataset that is a
    folder (:attr:`DatasetSpec.folder`): that folder."""
    spec = registry.get_dataset(dataset)
    if spec.fetch is not None:
        return [spec.fetch()]
    if spec.folder:
        return [FOLDERS[spec.name]()]
    return [registry.resolve(dataset, f.name) for f in spec.files]
