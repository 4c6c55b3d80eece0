"""The translation task's rules across config sections, its loss, validation, how an experiment is built,
and how checkpoints are chosen (:data:`SELECT`)."""

from __future__ import annotations

import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn

from seqlab.config import DecodeConfig, ExperimentConfig
from seqlab.data.translation_batching import (
    Batch,
    TranslationBatches,
    TranslationVocabs,
    build_vocabs,
    encode_pairs,
)
from seqlab.models import build_model
from seqlab.objective import LossOutput, Selection
from seqlab.storage.text import own_data
from seqlab.tasks.base import Experiment
from seqlab.tasks.translation.artefacts import Pairs, _sizes, load_pairs, load_vocabs, save_vocabs
from seqlab.tasks.translation.engines import cores_for_seqlab
from seqlab.tasks.translation.translator import Translator


def translation_loss(
    model: nn.Module, batch: Batch, state: Any, label_smoothing: float = 0.0
) -> LossOutput:
    """Masked (padding-free) cross-entropy with label smoothing, as the model computes it."""
    loss, num_tokens = model.loss(batch, label_smoothing=label_smoothing)
    return LossOutput(loss, num_tokens, None)


def validation(cfg: ExperimentConfig, vocabs: TranslationVocabs, val: Pairs, final: bool = False):
    """``evaluate(model)``: teacher-forced loss, then decoding of ``val`` → BLEU (sacreBLEU's and
    the paper-style one), chrF, exact match. Greedy during training; ``final``: as the run's
    ``decode`` section says (beam search), for the choice between the average of the last
    checkpoints and the best one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation was reported when the data was built
        data = encode_pairs(val, vocabs, cfg.data.max_len)
    batches = TranslationBatches(data, cfg.data.batch_tokens, bucket=True, shuffle=False)
    greedy = DecodeConfig(
        strategy="greedy",
        max_len_a=cfg.decode.max_len_a,
        max_len_b=cfg.decode.max_len_b,
        precision=cfg.decode.precision,
    )
    decoding = cfg if final else cfg.model_copy(update={"decode": greedy})

    def evaluate(model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for batch in batches:
            loss, n = model.loss(batch.to(device))
            total, count = total + loss.item() * n, count + n
        translator = Translator(model, decoding, vocabs)
        layout = cores_for_seqlab() if device.type == "cpu" else nullcontext()  # batch per core
        with warnings.catch_warnings(), own_data(), layout:
            warnings.simplefilter("ignore")
            scores = translator.score([s for s, _ in val], [t for _, t in val])
        return {
            "val_loss": total / max(count, 1),
            "val_bleu": scores["bleu"],
            "val_chrf": scores["chrf"],
            "val_exact": scores["exact_match"],
            # about 0.1 s per 1,000 sentences; natural-language datasets only
            **({"val_bleu_paper": scores["bleu_paper"]} if "bleu_paper" in scores else {}),
        }

    return evaluate


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Pairs, vocabularies (the run's own when resuming), token-budget batches and the model."""
    splits = load_pairs(cfg)
    d = cfg.data
    if run_dir is not None:
        vocabs = load_vocabs(run_dir)
    else:
        vocabs = build_vocabs(
            splits["train"], d.tokenizer, d.min_freq, d.max_vocab, d.subword, d.normalize
        )
    train_data = encode_pairs(splits["train"], vocabs, d.max_len)
    batches = TranslationBatches(
        train_data, d.batch_tokens, bucket=True, shuffle=True, seed=cfg.train.seed
    )
    torch.manual_seed(cfg.train.seed)
    model = build_model(
        cfg.model, src_vocab_size=len(vocabs.src_vocab), tgt_vocab_size=len(vocabs.tgt_vocab)
    )
    smoothing = cfg.train.label_smoothing
    return Experiment(
        model=model,
        train_batches=batches,
        loss_fn=lambda m, batch, state: translation_loss(m, batch, state, smoothing),
        evaluate=validation(cfg, vocabs, splits["val"]),
        select=SELECT,
        save_artefacts=lambda directory: save_vocabs(vocabs, directory),
        predictor=Translator(model, cfg, vocabs),
        meta=_sizes(vocabs),
        final_evaluate=(
            validation(cfg, vocabs, splits["val"], final=True)
            if cfg.decode.strategy == "beam" and cfg.decode.beam_size > 1
            else None
        ),
    )


#: translation chooses checkpoints by validation BLEU, higher is better
SELECT = Selection("val_bleu", "max")
