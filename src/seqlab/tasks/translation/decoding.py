"""Translation's decoding: its inputs (:func:`as_sentences`), each sentence read once by the
encoder's tokenizer into a :class:`Sentence` (its tokens travel with it: the ids decoded, the
tokens the vocabulary lacks, whether it was cut), sentences decoded to their n-best hypotheses
(:func:`decode_sentences`), and what ``seqlab translate`` prints (:class:`Translations`). The
options are :mod:`seqlab.tasks.translation.options`'s."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from seqlab.config import DecodeConfig
from seqlab.data.translation_batching import TranslationVocabs
from seqlab.data.vocab import unknown_tokens, warn_unknown
from seqlab.errors import SeqlabError
from seqlab.models.search import Hypothesis
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.base import as_batch
from seqlab.tasks.report import Prediction
from seqlab.tasks.translation.engines import Engine, decode_batches
from seqlab.tasks.translation.options import MAX_LENGTH_PENALTY, DecodeOptions, TranslateOptions
from seqlab.tokens import EOS


def decode_options(
    decode: DecodeConfig,
    beam: int | None = None,
    nbest: int | None = None,
    length_penalty: float | None = None,
) -> DecodeConfig:
    """The run's decoding ``decode`` changed by ``beam``, ``nbest`` and ``length_penalty``:
    :meth:`TranslateOptions.decode <seqlab.tasks.translation.options.DecodeOptions.decode>` of
    the options validated by :meth:`~seqlab.tasks.options.CommandOptions.of` (kept for code that
    calls it)."""
    options = TranslateOptions.of(beam=beam, nbest=nbest, length_penalty=length_penalty)
    return options.decode(decode)


@dataclass(frozen=True)
class Sentence:
    """One source sentence as the encoder reads it, tokenised once (:meth:`SourceReader.read`).

    Attributes:
        text: the sentence.
        tokens: the source tokenizer's tokens (all of them, before the cut).
        ids: the ids the encoder reads: the first ``data.max_len - 1`` tokens' and ``<eos>``
            (a blank sentence is decoded to an empty hypothesis without the model).
        unknown: the tokens the source vocabulary lacks (read as ``<unk>``), in order.
        cut: whether the encoder reads only the first tokens.
    """

    text: str
    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    unknown: tuple[str, ...]
    cut: bool


@dataclass(frozen=True)
class SourceReader:
    """The encoder's side of a run's vocabularies: reads a text into a :class:`Sentence`
    (``longest``: the most source tokens the encoder reads)."""

    vocabs: TranslationVocabs
    longest: int

    def read(self, text: str | Sentence) -> Sentence:
        if isinstance(text, Sentence):
            return text
        tokens = tuple(self.vocabs.src_tokenizer.tokenize(text))
        vocab = self.vocabs.src_vocab
        ids = (*vocab[list(tokens)][: self.longest], EOS)
        return Sentence(
            text, tokens, ids, tuple(unknown_tokens(vocab, tokens)), len(tokens) > self.longest
        )


def normalised_inputs(found: Iterable[tuple[str, str]], how: str) -> list[tuple[str, str]]:
    """The ``(where, text)`` inputs of ``found`` whose changes by ``data.normalize=how`` are
    reported (:func:`~seqlab.data.tokenizers.normalisation_messages`): ``simplified``'s, a
    character replaced by another (愛 -> 爱); ``nmt``'s lowercasing is how translation reads
    every sentence and is not reported."""
    return list(found) if how == "simplified" else []


def as_sentences(items: Any, what: str = "sentence") -> tuple[list[str], bool]:
    """:func:`~seqlab.tasks.base.as_batch` for text: every item must be a string holding no line
    break other than ``\\n`` (:func:`~seqlab.storage.text.check_line_breaks`)."""
    batch, single = as_batch(items, what)
    for i, item in enumerate(batch):
        if not isinstance(item, str):
            raise SeqlabError(f"{what} {i} is not a string but {type(item).__name__} {item!r:.40}")
        check_line_breaks(item, f"{what} {i}")
    return batch, single


def decode_sentences(
    engine: Engine,
    sentences: Sequence[Sentence],
    decode: DecodeConfig,
    need_weights: bool = False,
    batch_size: int = 128,
    max_len: int | None = None,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each of ``sentences`` under ``decode`` (options already
    checked), in input order, decoded by ``engine`` in batches of similar lengths; an
    :class:`~seqlab.data.vocab.UnknownTokenWarning` per sentence holding tokens the vocabulary
    lacks (``sentence I``) and one warning for the sentences cut to ``data.max_len`` (``max_len``)
    positions."""
    # stack levels: the frames of the method that warns, one more (this function)
    warn_unknown(((f"sentence {i}", s.unknown) for i, s in enumerate(sentences)), 5)
    cut = sum(s.cut for s in sentences)
    if cut:
        warnings.warn(
            f"truncated {cut} of {len(sentences)} input sentences to "
            f"data.max_len={max_len} positions",
            stacklevel=4,
        )
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in sentences]
    order = sorted(
        (i for i, s in enumerate(sentences) if s.text.strip()), key=lambda i: len(sentences[i].ids)
    )
    found = decode_batches(
        engine, [list(sentences[i].ids) for i in order], decode, need_weights, batch_size
    )
    for i, hyps in zip(order, found, strict=True):
        results[i] = hyps
    return results


@dataclass
class Translations(Prediction):
    """The n-best hypotheses of each sentence, detokenised: ``(text, score)`` best first.

    Attributes:
        numbers: the input line of each sentence (n-best lines start with it).
        nbest: hypotheses printed per sentence (1: the best translation alone).
    """

    hypotheses: list[list[tuple[str, float]]]
    numbers: list[int]
    nbest: int = 1

    def lines(self) -> list[str]:
        if self.nbest == 1:
            return [hyps[0][0] for hyps in self.hypotheses]
        return [
            f"{number}\t{rank}\t{score:.4f}\t{text}"
            for number, hyps in zip(self.numbers, self.hypotheses, strict=True)
            for rank, (text, score) in enumerate(hyps[: self.nbest])
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "translations": [
                {"text": hyps[0][0], "hypotheses": [{"text": t, "score": s} for t, s in hyps]}
                for hyps in self.hypotheses
            ]
        }


__all__ = [
    "MAX_LENGTH_PENALTY",
    "DecodeOptions",
    "Sentence",
    "SourceReader",
    "TranslateOptions",
    "Translations",
    "as_sentences",
    "decode_options",
    "normalised_inputs",
    "decode_sentences",
]
