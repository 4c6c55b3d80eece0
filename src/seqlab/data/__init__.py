"""Data: the dataset registry (download, checksums, cache), tokenizers and vocabularies, readers
and batching for each kind of data. Never imports the config or models."""
