"""Data: the dataset registry (download, checksums, cache), tokenizers and vocabularies, readers
and batching for each kind of data. Never imports the config or models.

Each of seqlab's own datasets is one record in :mod:`seqlab.builtin_records` (what a config
names, with its files and licence) and one line binding it to its reader in
:mod:`seqlab.data.readers`: a new dataset is a record, a reader and that line.
"""
