"""Every architecture's config class, by ``model.arch`` (:func:`model_config`): seqlab's own
(:data:`MODEL_CONFIGS`, from :mod:`seqlab.config.models` and :mod:`seqlab.config.audio`), found
without importing a model, and those registered from outside seqlab
(:func:`seqlab.catalog.model`).
"""

from __future__ import annotations

from seqlab import catalog
from seqlab.config.audio import AudioClassifierConfig
from seqlab.config.models import (
    ARConfig,
    BahdanauConfig,
    CNNTextConfig,
    ImageCNNConfig,
    RNNClassifierConfig,
    RNNForecasterConfig,
    RNNLMConfig,
    Seq2SeqConfig,
    TransformerClassifierConfig,
    TransformerConfig,
    TransformerForecasterConfig,
    TransformerLMConfig,
    ViTConfig,
)
from seqlab.config.sections import ModelConfigBase

#: seqlab's own architectures' config classes, by ``model.arch`` (each model's module registers
#: its class with its builder: :data:`seqlab.builtin.MODELS`)
MODEL_CONFIGS: dict[str, type[ModelConfigBase]] = {
    c.model_fields["arch"].default: c
    for c in (
        RNNLMConfig,
        TransformerLMConfig,
        Seq2SeqConfig,
        BahdanauConfig,
        TransformerConfig,
        RNNClassifierConfig,
        CNNTextConfig,
        TransformerClassifierConfig,
        ViTConfig,
        ImageCNNConfig,
        AudioClassifierConfig,
        ARConfig,
        RNNForecasterConfig,
        TransformerForecasterConfig,
    )
}


def model_config(arch: object) -> type[ModelConfigBase] | None:
    """The config class of ``model.arch=arch`` (None if no architecture has that name): of
    seqlab's own, without importing its model."""
    if not isinstance(arch, str):
        return None
    if arch in MODEL_CONFIGS:
        return MODEL_CONFIGS[arch]
    spec = catalog.model(arch) if arch not in catalog.BUILTIN_MODELS else None
    return spec.config if spec is not None else None
