"""seqlab: sequence models from RNNs to the Transformer, readable, tested and fast on a CPU."""

__version__ = "0.1.0"
