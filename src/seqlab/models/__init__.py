"""Whole models, and :func:`build_model`, the one place a model is constructed from its config.

Each architecture's module holds its config class (a :class:`seqlab.config.ModelConfigBase`), its
model and one :func:`seqlab.catalog.register_model` line; the catalog imports the module when its
architecture is first named (:data:`seqlab.builtin.MODELS`), so a config or a run of one
architecture imports no other: a new architecture is a new module plus its line there.
"""

from __future__ import annotations

from torch import nn

from seqlab import catalog
from seqlab.config import ModelConfigBase


def build_model(
    cfg: ModelConfigBase,
    *,
    vocab_size: int | None = None,
    src_vocab_size: int | None = None,
    tgt_vocab_size: int | None = None,
    num_classes: int | None = None,
    window: int | None = None,
    sample_rate: int | None = None,
) -> nn.Module:
    """Construct the model ``cfg`` describes (fresh weights), with the builder registered for
    ``cfg.arch`` (:class:`seqlab.catalog.ModelSpec`).

    Args:
        cfg: the ``model`` section of an experiment config.
        vocab_size: language models' and text classifiers' vocabulary size.
        src_vocab_size, tgt_vocab_size: translation models' vocabulary sizes.
        num_classes: classifiers' number of labels.
        window: forecasters' τ, the past values they read.
        sample_rate: audio models' rate of the waveforms (Hz), ``data.sample_rate``.
    """
    spec = catalog.model(cfg.arch)
    if spec is None:
        raise ValueError(
            f"no model is built for model.arch={cfg.arch!r}; registered: "
            + ", ".join(catalog.models())
        )
    sizes = catalog.Sizes(
        cfg.arch, vocab_size, src_vocab_size, tgt_vocab_size, num_classes, window, sample_rate
    )
    return spec.build(cfg, sizes)
