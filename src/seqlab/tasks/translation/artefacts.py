"""What a translation run directory holds besides its config and checkpoints: vocabularies and
tokenizers (:data:`ARTEFACTS`), the trained model read back with them (:func:`load_trained`), and
where its sentence pairs come from (:func:`load_pairs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.builtin_records import RUN_FILES
from seqlab.config import ExperimentConfig
from seqlab.data import readers
from seqlab.data.tokenizers import load_tokenizer, save_tokenizer
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import Vocab
from seqlab.models import build_model
from seqlab.models.encoder_decoder import EncoderDecoder
from seqlab.tasks.base import Run, load_weights

ARTEFACTS = RUN_FILES["translation"]  # vocabularies, tokenizers, SentencePiece models
Pairs = list[tuple[str, str]]


def load_pairs(cfg: ExperimentConfig) -> dict[str, Pairs]:
    """Train / val (/ test) sentence pairs of ``cfg.data.dataset``, from its reader
    (:func:`seqlab.data.readers.read`)."""
    return readers.read(cfg.data, cfg.train.seed)


def save_vocabs(vocabs: TranslationVocabs, run_dir: Path) -> None:
    vocabs.src_vocab.save(Path(run_dir) / "src_vocab.json")
    vocabs.tgt_vocab.save(Path(run_dir) / "tgt_vocab.json")
    save_tokenizer(vocabs.src_tokenizer, run_dir, "src_tokenizer")
    save_tokenizer(vocabs.tgt_tokenizer, run_dir, "tgt_tokenizer")


def _splits(tokenizer: Any) -> tuple[Any, ...]:
    """What decides how a tokenizer splits text: its settings and its subword model."""
    return (tokenizer.to_dict(), getattr(tokenizer, "model_proto", None))


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


def _sizes(vocabs: TranslationVocabs) -> dict[str, int]:
    return {"src_vocab_size": len(vocabs.src_vocab), "tgt_vocab_size": len(vocabs.tgt_vocab)}


def load_trained(run: Run) -> tuple[EncoderDecoder, TranslationVocabs]:
    """The trained model of ``run`` (in eval mode) and its vocabularies and tokenizers: the run
    directory's vocabularies, tokenizers and checkpoint only, the sizes checked against the
    run's (:meth:`~seqlab.tasks.translation.Translator.load` calls this)."""
    for name in ARTEFACTS[:4]:
        run.file(name)
    vocabs = load_vocabs(run.run_dir)
    for key, value in _sizes(vocabs).items():
        run.check_size(key, value)
    model = build_model(
        run.cfg.model,
        src_vocab_size=len(vocabs.src_vocab),
        tgt_vocab_size=len(vocabs.tgt_vocab),
    )
    load_weights(model, run)
    return model, vocabs
