"""Translation's decoding: its options (:func:`decode_options`, the run's ``decode`` section
changed by ``beam``, ``nbest``, ``length_penalty``) and inputs (:func:`as_sentences`), sentences
decoded to their n-best hypotheses (:func:`decode_sentences`, behind
:meth:`~seqlab.tasks.translation.Translator.hypotheses`), and what ``seqlab translate`` prints
(:class:`Translations`, made by :func:`predict`)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqlab.config import DecodeConfig
from seqlab.data.vocab import quiet_unknown, unknown_tokens, warn_unknown
from seqlab.errors import SeqlabError
from seqlab.models.search import Hypothesis
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.base import as_batch
from seqlab.tasks.report import Prediction
from seqlab.tasks.translation.engines import check_engine, decode_batches
from seqlab.tokens import EOS

#: the largest length penalty accepted (``decode.length_penalty``'s bound)
MAX_LENGTH_PENALTY = 10.0


def decode_options(
    decode: DecodeConfig,
    beam: int | None = None,
    nbest: int | None = None,
    length_penalty: float | None = None,
) -> DecodeConfig:
    """The run's decoding changed by ``beam``, ``nbest`` and ``length_penalty`` (see the module
    docstring)."""
    for name, value in (("beam size", beam), ("nbest", nbest)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise SeqlabError(f"{name} must be a whole number, got {value!r}")
    if beam is not None and beam < 1:
        raise SeqlabError(f"beam size must be >= 1 (1 = greedy), got {beam}")
    if nbest is not None and nbest < 1:
        raise SeqlabError(f"nbest must be >= 1, got {nbest}")
    if length_penalty is not None and (
        isinstance(length_penalty, bool)
        or not isinstance(length_penalty, int | float)
        or not 0.0 <= length_penalty <= MAX_LENGTH_PENALTY
    ):
        raise SeqlabError(
            f"length penalty must be a number from 0 to {MAX_LENGTH_PENALTY:g} (0 = raw "
            f"log-probability, 1 = per-token average), got {length_penalty!r}"
        )
    d = decode.model_copy()
    if beam is not None:
        d.strategy = "greedy" if beam == 1 else "beam"
        d.beam_size = beam if beam > 1 else d.beam_size
    width = d.beam_size if d.strategy == "beam" else 1
    if length_penalty is not None:
        if width == 1:
            raise SeqlabError(
                f"a length penalty ranks the hypotheses of a beam search, but decoding is greedy "
                f"search; ask for a beam too (e.g. --beam 5 --length-penalty {length_penalty:g})"
            )
        d.length_penalty = float(length_penalty)
    want = nbest if nbest is not None else min(d.nbest, width)
    if want > width:
        now = f"beam {width}" if width > 1 else "greedy search"
        raise SeqlabError(
            f"nbest {want} needs a beam of at least {want}, but decoding is {now}; "
            f"ask for a beam too (e.g. --beam {max(want, 5)} --nbest {want})"
        )
    d.nbest = want
    return d


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
    translator: Any,
    sentences: list[str],
    decode: DecodeConfig,
    need_weights: bool,
    batch_size: int,
    engine: str,
    quantize: str | None,
) -> list[list[Hypothesis]]:
    """The n-best hypotheses of each of ``sentences`` under ``decode``, in input order, decoded
    by ``translator``'s ``engine`` in batches of similar lengths; the rules, warnings and
    refusals of :meth:`~seqlab.tasks.translation.Translator.hypotheses` (which calls this)."""
    translator.check_ensemble_engine(engine)
    check_engine(engine, quantize, translator.cfg.model.arch, need_weights)
    vocab, longest = translator.vocabs.src_vocab, translator.max_source_tokens
    pieces = [translator.source_tokens(s) for s in sentences]  # once: ids, cuts, unknown tokens
    src_ids = [
        vocab[p][:longest] + [EOS] if s.strip() else []
        for s, p in zip(sentences, pieces, strict=True)
    ]
    # stack levels: the frames the method warned at, one more (this function)
    warn_unknown(((f"sentence {i}", unknown_tokens(vocab, p)) for i, p in enumerate(pieces)), 5)
    cut = sum(len(p) > longest for p in pieces)
    if cut:
        warnings.warn(
            f"truncated {cut} of {len(sentences)} input sentences to "
            f"data.max_len={translator.cfg.data.max_len} positions",
            stacklevel=3,
        )
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in src_ids]
    order = sorted((i for i, ids in enumerate(src_ids) if ids), key=lambda i: len(src_ids[i]))
    found = decode_batches(
        translator.engine(engine, quantize),
        [src_ids[i] for i in order],
        decode,
        need_weights,
        batch_size,
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


def predict(
    translator: Any,
    inputs: Sequence[str] | str,
    options: dict[str, Any],
    attention_png: str | Path | None = None,
    numbers: Sequence[int] | None = None,
) -> Translations:
    """:meth:`~seqlab.tasks.translation.Translator.predict` (which calls this, see there) with
    its decoding ``options`` (``beam``, ``nbest``, ``length_penalty``, ``engine``,
    ``quantize``)."""
    sentences, _ = as_sentences(inputs)
    translator.check("translate", {**options, "attention_png": attention_png})
    numbers = list(numbers) if numbers is not None else list(range(1, len(sentences) + 1))
    warn_unknown(
        (
            (f"input line {n}", translator.unknown_tokens(s))
            for n, s in zip(numbers, sentences, strict=True)
        ),
        3,  # the frame the method warned at: one more, this function
    )
    with quiet_unknown():  # reported above, by input line
        found = translator.hypotheses(sentences, need_weights=bool(attention_png), **options)
    out = Translations(
        [[(translator.detokenize(h.tokens), h.score) for h in hyps] for hyps in found],
        numbers,
        decode_options(translator.cfg.decode, options["beam"], options["nbest"]).nbest,
    )
    if attention_png:
        out.figures = [
            translator.draw_alignment(Path(attention_png), number, line, hyps[0])
            for number, line, hyps in zip(numbers, sentences, found, strict=True)
            if line.strip()
        ]
    return out
