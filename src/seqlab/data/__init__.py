"""Data: the dataset registry (download, checksums, cache), tokenizers and vocabularies, readers
and batching for each kind of data. Never imports the config or models.

Each dataset is one record (:class:`seqlab.catalog.DatasetSpec`) next to its reader; the imports
below are the registration lines: a new dataset is a new module plus its line here.
"""

# one line per module of dataset records: importing it registers its datasets
from seqlab.data import (  # noqa: F401
    audio_datasets,
    classification,
    cmn_eng,
    dates,
    emodb,
    images,
    lm_corpus,
    parallel,
    series,
)
