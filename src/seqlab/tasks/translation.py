"""Translation experiments: data, model, loss, decoding and BLEU, wired for the trainer.

Evaluation follows the field's convention: hypotheses are detokenised and scored against the
raw reference sentences with sacreBLEU (cased, 13a tokenisation), whose signature is reported;
chrF alongside. The lowercased, tokenised BLEU that older papers report is given too, labelled
``bleu_lc`` — it is not comparable with cased detokenised BLEU.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn

from seqlab.config import (
    BahdanauConfig,
    DecodeConfig,
    ExperimentConfig,
    Seq2SeqConfig,
    TransformerConfig,
)
from seqlab.data.dates import date_splits
from seqlab.data.parallel import load_translation_splits
from seqlab.data.tokenizers import load_tokenizer, save_tokenizer
from seqlab.data.translation_batching import (
    EOS,
    Batch,
    TranslationBatches,
    TranslationVocabs,
    build_vocabs,
    encode_pairs,
    pad_sequences,
)
from seqlab.data.vocab import Vocab
from seqlab.models.search import Hypothesis, beam_search, greedy_search
from seqlab.training.trainer import LossOutput

MT_ARCHS = ("seq2seq", "bahdanau", "transformer")
Pairs = list[tuple[str, str]]


def build_translation_model(
    cfg: ExperimentConfig, src_vocab_size: int, tgt_vocab_size: int
) -> nn.Module:
    """The one place a translation model is constructed from its config."""
    m = cfg.model
    if isinstance(m, Seq2SeqConfig):
        from seqlab.models.seq2seq import Seq2Seq

        return Seq2Seq(src_vocab_size, tgt_vocab_size, m)
    if isinstance(m, BahdanauConfig):
        from seqlab.models.bahdanau import Bahdanau

        return Bahdanau(src_vocab_size, tgt_vocab_size, m)
    if isinstance(m, TransformerConfig):
        from seqlab.models.transformer_seq2seq import TransformerSeq2Seq

        return TransformerSeq2Seq(src_vocab_size, tgt_vocab_size, m)
    raise ValueError(f"model.arch={m.arch!r} is not a translation model ({', '.join(MT_ARCHS)})")


def load_pairs(cfg: ExperimentConfig) -> dict[str, Pairs]:
    """Train / val (/ test) sentence pairs of ``cfg.data.dataset``."""
    d = cfg.data
    if d.dataset == "dates":
        return date_splits(
            num_train=d.num_examples or 20000,
            num_val=d.val_examples,
            num_test=d.val_examples,
            seed=cfg.train.seed,
        )
    if d.dataset not in ("multi30k", "fra-eng"):
        raise ValueError(
            f"data.dataset={d.dataset!r} is not a translation dataset (multi30k, fra-eng, dates)"
        )
    splits = load_translation_splits(
        d.dataset, d.src_lang, d.tgt_lang, d.val_examples, d.num_examples
    )
    return {name: list(corpus.pairs) for name, corpus in splits.items()}


def translation_loss(
    model: nn.Module, batch: Batch, state: Any, label_smoothing: float = 0.0
) -> LossOutput:
    """Masked (padding-free) cross-entropy with label smoothing, as the model computes it."""
    loss, num_tokens = model.loss(batch, label_smoothing=label_smoothing)
    return LossOutput(loss, num_tokens, None)


# ------------------------------------------------------------------------------- decoding
def encode_sources(
    sentences: Sequence[str], vocabs: TranslationVocabs, max_len: int
) -> tuple[list[list[int]], int]:
    """Source ids with ``<eos>``, cut to ``max_len`` tokens; returns the ids and how many were cut."""
    out, cut = [], 0
    for s in sentences:
        ids = vocabs.src_vocab[vocabs.src_tokenizer.tokenize(s)]
        if len(ids) > max_len - 1:
            ids, cut = ids[: max_len - 1], cut + 1
        out.append(ids + [EOS])
    return out, cut


def detokenize(ids: Sequence[int], vocabs: TranslationVocabs) -> str:
    return vocabs.tgt_tokenizer.detokenize(vocabs.tgt_vocab.to_tokens(list(ids)))


@torch.no_grad()
def translate(
    model: nn.Module,
    vocabs: TranslationVocabs,
    sentences: Sequence[str],
    decode: DecodeConfig,
    max_len: int,
    batch_size: int = 64,
    need_attention: bool = False,
) -> list[list[Hypothesis]]:
    """Translate sentences (any number), batched by length; returns n-best lists in input order.

    Over-long inputs are truncated to ``max_len`` tokens with one warning, never an error.
    """
    src_ids, cut = encode_sources(sentences, vocabs, max_len)
    if cut:
        warnings.warn(
            f"truncated {cut} of {len(sentences)} input sentences to max_len={max_len} tokens",
            stacklevel=2,
        )
    device = next(model.parameters()).device
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    results: list[list[Hypothesis]] = [[] for _ in src_ids]
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src, src_len = pad_sequences([src_ids[i] for i in chunk])
        src, src_len = src.to(device), src_len.to(device)
        if decode.strategy == "beam":
            found = beam_search(
                model,
                src,
                src_len,
                beam_size=decode.beam_size,
                length_penalty=decode.length_penalty,
                nbest=min(decode.nbest, decode.beam_size),
                max_len_a=decode.max_len_a,
                max_len_b=decode.max_len_b,
                need_attention=need_attention,
            )
        else:
            found = [
                [h]
                for h in greedy_search(
                    model,
                    src,
                    src_len,
                    max_len_a=decode.max_len_a,
                    max_len_b=decode.max_len_b,
                    need_attention=need_attention,
                )
            ]
        for i, hyps in zip(chunk, found, strict=True):
            results[i] = hyps
    return results


def score_translations(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """sacreBLEU BLEU and chrF (cased, detokenised) with signatures, plus lowercased BLEU."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf, bleu_lc = BLEU(), CHRF(), BLEU(lowercase=True)
    refs = [list(references)]
    b, c, lc = (
        bleu.corpus_score(list(hypotheses), refs),
        chrf.corpus_score(list(hypotheses), refs),
        bleu_lc.corpus_score(list(hypotheses), refs),
    )
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True))
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_lc": lc.score,
        "exact_match": exact / max(len(references), 1),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
        "bleu_lc_signature": str(bleu_lc.get_signature()),
        "sentences": len(references),
    }


# ------------------------------------------------------------------------------ experiment
@dataclass
class TranslationExperiment:
    cfg: ExperimentConfig
    model: nn.Module
    vocabs: TranslationVocabs
    splits: dict[str, Pairs]
    train_batches: TranslationBatches
    select: tuple[str, str] = ("val_bleu", "max")

    @property
    def loss_fn(self):
        return partial(translation_loss, label_smoothing=self.cfg.train.label_smoothing)

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Teacher-forced validation loss, then greedy decoding of the validation set → BLEU."""
        val = self.splits["val"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # truncation was reported when the data was built
            data = encode_pairs(val, self.vocabs, self.cfg.data.max_len)
        batches = TranslationBatches(data, self.cfg.data.batch_tokens, bucket=True, shuffle=False)
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for batch in batches:
            loss, n = model.loss(batch.to(device))
            total, count = total + loss.item() * n, count + n
        greedy = DecodeConfig(
            strategy="greedy",
            max_len_a=self.cfg.decode.max_len_a,
            max_len_b=self.cfg.decode.max_len_b,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hyps = translate(model, self.vocabs, [s for s, _ in val], greedy, self.cfg.data.max_len)
        scores = score_translations(
            [detokenize(h[0].tokens, self.vocabs) for h in hyps], [t for _, t in val]
        )
        return {
            "val_loss": total / max(count, 1),
            "val_bleu": scores["bleu"],
            "val_chrf": scores["chrf"],
            "val_exact": scores["exact_match"],
        }

    def save_artefacts(self, run_dir: Path) -> None:
        save_vocabs(self.vocabs, run_dir)

    def extra_meta(self) -> dict[str, Any]:
        return {
            "src_vocab_size": len(self.vocabs.src_vocab),
            "tgt_vocab_size": len(self.vocabs.tgt_vocab),
        }


def save_vocabs(vocabs: TranslationVocabs, run_dir: Path) -> None:
    vocabs.src_vocab.save(Path(run_dir) / "src_vocab.json")
    vocabs.tgt_vocab.save(Path(run_dir) / "tgt_vocab.json")
    save_tokenizer(vocabs.src_tokenizer, run_dir, "src_tokenizer")
    save_tokenizer(vocabs.tgt_tokenizer, run_dir, "tgt_tokenizer")


def load_vocabs(run_dir: Path) -> TranslationVocabs:
    src_vocab = Vocab.load(Path(run_dir) / "src_vocab.json")
    tgt_vocab = Vocab.load(Path(run_dir) / "tgt_vocab.json")
    if tgt_vocab == src_vocab:
        tgt_vocab = src_vocab  # a joint vocabulary stays one object (shared embeddings)
    return TranslationVocabs(
        load_tokenizer(run_dir, "src_tokenizer"),
        load_tokenizer(run_dir, "tgt_tokenizer"),
        src_vocab,
        tgt_vocab,
    )


def build_translation_experiment(
    cfg: ExperimentConfig, run_dir: Path | None = None
) -> TranslationExperiment:
    splits = load_pairs(cfg)
    if run_dir is not None and (Path(run_dir) / "src_vocab.json").exists():
        vocabs = load_vocabs(run_dir)
    else:
        d = cfg.data
        vocabs = build_vocabs(
            splits["train"], d.tokenizer, d.min_freq, d.max_vocab, d.subword, d.normalize
        )
    train_data = encode_pairs(splits["train"], vocabs, cfg.data.max_len)
    batches = TranslationBatches(
        train_data, cfg.data.batch_tokens, bucket=True, shuffle=True, seed=cfg.train.seed
    )
    torch.manual_seed(cfg.train.seed)
    model = build_translation_model(cfg, len(vocabs.src_vocab), len(vocabs.tgt_vocab))
    return TranslationExperiment(cfg, model, vocabs, splits, batches)
