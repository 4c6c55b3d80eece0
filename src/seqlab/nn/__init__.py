"""Building blocks: attention, recurrent cells and layers, positional encodings, Transformer
blocks, losses, sampling. They import torch only (never the data layer or a task)."""
