"""Whole models, and :func:`build_model`, the one place a model is constructed from its config."""

from __future__ import annotations

from torch import nn

from seqlab.config import (
    ARConfig,
    BahdanauConfig,
    CNNTextConfig,
    ImageCNNConfig,
    ModelConfig,
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


def build_model(
    cfg: ModelConfig,
    *,
    vocab_size: int | None = None,
    src_vocab_size: int | None = None,
    tgt_vocab_size: int | None = None,
    num_classes: int | None = None,
    window: int | None = None,
) -> nn.Module:
    """Construct the model ``cfg`` describes (fresh weights).

    Args:
        cfg: the ``model`` section of an experiment config.
        vocab_size: language models' vocabulary size.
        src_vocab_size, tgt_vocab_size: translation models' vocabulary sizes.
    """

    def need(name: str, value: int | None) -> int:
        if value is None:
            raise ValueError(f"model.arch={cfg.arch} needs {name}")
        return value

    if isinstance(cfg, RNNLMConfig):
        from seqlab.models.rnn_lm import RNNLanguageModel

        return RNNLanguageModel(need("vocab_size", vocab_size), cfg)
    if isinstance(cfg, TransformerLMConfig):
        from seqlab.models.transformer_lm import TransformerLanguageModel

        return TransformerLanguageModel(need("vocab_size", vocab_size), cfg)
    if isinstance(cfg, Seq2SeqConfig | BahdanauConfig | TransformerConfig):
        from seqlab.models.bahdanau import Bahdanau, BahdanauD2L
        from seqlab.models.seq2seq import Seq2Seq
        from seqlab.models.transformer_seq2seq import TransformerSeq2Seq

        cls = {
            Seq2SeqConfig: Seq2Seq,
            BahdanauConfig: Bahdanau,
            TransformerConfig: TransformerSeq2Seq,
        }
        if isinstance(cfg, BahdanauConfig) and cfg.decoder == "linear":
            cls[BahdanauConfig] = BahdanauD2L
        src = need("src_vocab_size", src_vocab_size)
        return cls[type(cfg)](src, need("tgt_vocab_size", tgt_vocab_size), cfg)
    if isinstance(cfg, TransformerClassifierConfig | RNNClassifierConfig | CNNTextConfig):
        from seqlab.models.cnn_text import CNNTextClassifier
        from seqlab.models.rnn_classifier import RNNClassifier
        from seqlab.models.transformer_classifier import TransformerClassifier

        text = {
            TransformerClassifierConfig: TransformerClassifier,
            RNNClassifierConfig: RNNClassifier,
            CNNTextConfig: CNNTextClassifier,
        }
        classes = need("num_classes", num_classes)
        return text[type(cfg)](need("vocab_size", vocab_size), classes, cfg)
    if isinstance(cfg, ViTConfig):
        from seqlab.models.vit import VisionTransformer

        return VisionTransformer(need("num_classes", num_classes), cfg)
    if isinstance(cfg, ImageCNNConfig):
        from seqlab.models.cnn_image import ImageCNN

        return ImageCNN(need("num_classes", num_classes), cfg)
    if isinstance(cfg, ARConfig | RNNForecasterConfig | TransformerForecasterConfig):
        from seqlab.models.forecasters import AutoRegressive, RNNForecaster, TransformerForecaster

        series = {
            ARConfig: AutoRegressive,
            RNNForecasterConfig: RNNForecaster,
            TransformerForecasterConfig: TransformerForecaster,
        }
        return series[type(cfg)](need("window", window), cfg)
    raise ValueError(f"no model is built for model.arch={cfg.arch!r}")
