"""Tokenizers: characters, words, and SentencePiece subwords — each with its inverse.

- :class:`CharTokenizer`: one token per character (d2l.ai §9.2.2, ``token='char'``).
- :class:`WordTokenizer`: whitespace words after normalisation. ``normalize="nmt"`` is the
  d2l fra–eng preprocessing (d2l.ai §10.5.1): non-breaking spaces become spaces, text is
  lowercased and a space is put before ``, . ! ?``. ``normalize="letters"`` is the d2l Time
  Machine cleaning: anything that is not a letter becomes a space, lowercased.
  ``normalize="simplified"`` reads Chinese one documented way (:mod:`seqlab.data.chinese`:
  traditional characters to simplified by OpenCC, full-width letters and digits to ASCII, no
  spaces between Chinese characters, Chinese punctuation full-width); English passes unchanged.
- :class:`SubwordTokenizer`: SentencePiece BPE, unigram or characters (Kudo & Richardson 2018),
  trained on the training split only, saved next to the model that uses it; it applies
  ``simplified`` (the only normalisation that keeps case) before cutting.

A tokenizer is saved with :func:`save_tokenizer` (a JSON file, plus the SentencePiece model
for subwords) and restored with :func:`load_tokenizer`: plain data, no pickles.
"""

from __future__ import annotations

import io
import json
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from seqlab.atomic import atomic_write_bytes, atomic_write_json
from seqlab.data.chinese import changed_characters, normalize_chinese
from seqlab.data.vocab import WARNED_INPUTS, reporting_unknown
from seqlab.errors import DataError

Normalize = Literal["none", "nmt", "letters", "simplified"]
_NON_LETTERS = re.compile(r"[^A-Za-z]+")
_SPACE_BEFORE_PUNCT = re.compile(r"(?<=\S)([,.!?])")
_SPACE_THEN_PUNCT = re.compile(r" ([,.!?])")


def normalize_text(text: str, how: Normalize) -> str:
    """Apply one of the cleanings of the module docstring."""
    if how == "none":
        return text
    if how == "simplified":
        return normalize_chinese(text)
    if how == "letters":
        return _NON_LETTERS.sub(" ", text).strip().lower()
    if how == "nmt":
        text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
        return _SPACE_BEFORE_PUNCT.sub(r" \1", text)
    raise ValueError(f"unknown normalisation {how!r}; choose none, nmt, letters or simplified")


# ---------------------------------------------------------------- what a normalisation changed
class NormalisedTextWarning(UserWarning):
    """The user's text was changed by the run's ``data.normalize`` before the model read it
    (characters dropped, words lowercased): one warning per input, as for tokens outside the
    vocabulary (:class:`~seqlab.data.vocab.UnknownTokenWarning`), and silenced with them
    (:func:`~seqlab.data.vocab.quiet_unknown`)."""


#: distinct characters, and distinct words, named in one message; the others are counted
SHOWN_CHANGES = 5
_LETTER_RUNS = re.compile(r"[A-Za-z]+")


def normalisation_changes(
    text: str, how: Normalize
) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """What :func:`normalize_text` changes of ``text`` that the model cannot read back: the
    distinct characters it drops (``letters``: all but ASCII letters and spaces), the
    distinct words it lowercases, and the distinct characters it replaces by others
    (``simplified``: 愛 -> 爱, ２ -> 2), in order. Spacing (runs of spaces, a space before ``,
    . ! ?``, non-breaking spaces, spaces between Chinese characters) is not counted: it
    changes no token's letters."""
    if how == "simplified":
        return [], [], changed_characters(text)
    if how == "letters":
        dropped = [c for c in dict.fromkeys(text) if not c.isspace() and not _is_ascii_letter(c)]
        words = _LETTER_RUNS.findall(text)
    elif how == "nmt":
        dropped, words = [], text.split()
    else:
        return [], [], []
    return dropped, [w for w in dict.fromkeys(words) if w != w.lower()], []


def _is_ascii_letter(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z"


def normalisation_messages(found: Iterable[tuple[str, str]], how: Normalize) -> list[str]:
    """One message per input that ``data.normalize=how`` changes, for ``(where, text)`` pairs
    (``where``: the input's name, e.g. ``the prefix``): ``the prefix: normalised
    (data.normalize=letters): 'é', '🙂' dropped; 'THE' -> 'the'``. The command line and the
    Python API warn each (:func:`warn_normalised`), the server answers them in ``warnings``."""
    messages, more = [], 0
    for where, text in found:
        dropped, lowered, replaced = normalisation_changes(text, how)
        if (dropped or lowered or replaced) and len(messages) == WARNED_INPUTS:
            more += 1
            continue
        parts = []
        if dropped:
            parts.append(_listed([repr(c) for c in dropped]) + " dropped")
        if lowered:
            parts.append(_listed([f"{w!r} -> {w.lower()!r}" for w in lowered]))
        if replaced:
            parts.append(_listed([f"{a!r} -> {b!r}" for a, b in replaced]))
        if parts:
            messages.append(f"{where}: normalised (data.normalize={how}): " + "; ".join(parts))
    if more:
        messages.append(f"and {more} more input{'s' if more > 1 else ''} normalised")
    return messages


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN_CHANGES])
    return shown + (f" and {len(items) - SHOWN_CHANGES} more" if len(items) > SHOWN_CHANGES else "")


def warn_normalised(found: Iterable[tuple[str, str]], how: Normalize, stacklevel: int = 2) -> None:
    """A :class:`NormalisedTextWarning` for each message of :func:`normalisation_messages`
    (none inside :func:`~seqlab.data.vocab.quiet_unknown`)."""
    if not reporting_unknown():
        return
    for message in normalisation_messages(found, how):
        warnings.warn(message, NormalisedTextWarning, stacklevel=stacklevel + 1)


class CharTokenizer:
    """Characters as tokens; the inverse is concatenation."""

    kind = "char"

    def __init__(self, normalize: Normalize = "none") -> None:
        self.normalize = normalize

    def tokenize(self, text: str) -> list[str]:
        return list(normalize_text(text, self.normalize))

    def detokenize(self, tokens: Iterable[str]) -> str:
        return "".join(tokens)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "normalize": self.normalize}


class WordTokenizer:
    """Whitespace-separated words after normalisation; detokenisation re-attaches punctuation."""

    kind = "word"

    def __init__(self, normalize: Normalize = "nmt") -> None:
        self.normalize = normalize

    def tokenize(self, text: str) -> list[str]:
        return normalize_text(text, self.normalize).split()

    def detokenize(self, tokens: Iterable[str]) -> str:
        text = " ".join(tokens)
        return _SPACE_THEN_PUNCT.sub(r"\1", text) if self.normalize == "nmt" else text

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "normalize": self.normalize}


class SubwordTokenizer:
    """SentencePiece pieces (BPE or unigram); the inverse is SentencePiece's own decoding."""

    kind = "subword"

    def __init__(self, model_proto: bytes, normalize: Normalize = "none") -> None:
        import sentencepiece as spm

        if normalize not in ("none", "simplified"):
            raise ValueError(
                f"a subword tokenizer keeps case: data.normalize={normalize} does not apply to "
                "it; choose none or simplified"
            )
        self.model_proto = model_proto
        self.normalize = normalize
        self._sp = spm.SentencePieceProcessor(model_proto=model_proto)

    @classmethod
    def train(
        cls,
        sentences: Iterable[str],
        vocab_size: int = 8000,
        model_type: Literal["bpe", "unigram", "char"] = "bpe",
        character_coverage: float = 1.0,
        normalize: Normalize = "none",
    ) -> SubwordTokenizer:
        """Train on the given sentences (pass the training split only), normalised first;
        deterministic (one thread). ``model_type="char"`` cuts into characters (its vocabulary
        is every character seen, ``vocab_size`` at most)."""
        import sentencepiece as spm

        model = io.BytesIO()
        sentences = [normalize_text(s, normalize) for s in sentences if s.strip()]
        if not sentences:
            raise DataError("cannot train a subword model on an empty corpus")
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model,
                vocab_size=vocab_size,
                model_type=model_type,
                character_coverage=character_coverage,
                # ids are assigned by seqlab's Vocab; SentencePiece only segments
                unk_id=0,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                hard_vocab_limit=False,
                # seqlab's own normalisation has read the text already: SentencePiece's NFKC would
                # turn Chinese ，？！ into , ? ! and write them back so (none keeps SentencePiece's)
                normalization_rule_name="identity" if normalize == "simplified" else "nmt_nfkc",
                num_threads=1,
                minloglevel=2,
            )
        except RuntimeError as exc:  # SentencePiece's own refusal, e.g. too small a vocabulary
            raise DataError(
                f"SentencePiece cannot train a {model_type} model of {vocab_size} pieces on "
                f"{len(sentences)} training sentences: {exc} (data.subword.vocab_size, "
                "data.subword.model_type)"
            ) from None
        return cls(model.getvalue(), normalize)

    def tokenize(self, text: str) -> list[str]:
        return self._sp.encode(normalize_text(text, self.normalize), out_type=str)

    def detokenize(self, tokens: Iterable[str]) -> str:
        return self._sp.decode_pieces(list(tokens))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "normalize": self.normalize}


Tokenizer = CharTokenizer | WordTokenizer | SubwordTokenizer


def make_tokenizer(kind: str, normalize: Normalize = "none") -> CharTokenizer | WordTokenizer:
    """Build a character or word tokenizer (subword ones are trained: see SubwordTokenizer.train)."""
    if kind == "char":
        return CharTokenizer(normalize)
    if kind == "word":
        return WordTokenizer(normalize)
    raise ValueError(
        f"unknown tokenizer {kind!r}; choose char or word (subword models are trained)"
    )


def save_tokenizer(tok: Tokenizer, directory: str | Path, name: str = "tokenizer") -> None:
    """Write ``NAME.json`` (and ``NAME.spm.model`` for subwords) into ``directory``."""
    directory = Path(directory)
    if isinstance(tok, SubwordTokenizer):
        atomic_write_bytes(directory / f"{name}.spm.model", tok.model_proto)
    atomic_write_json(directory / f"{name}.json", {"format": "seqlab.tokenizer/1", **tok.to_dict()})


def load_tokenizer(directory: str | Path, name: str = "tokenizer") -> Tokenizer:
    """Inverse of :func:`save_tokenizer`."""
    path = Path(directory) / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"tokenizer file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    if data.get("format") != "seqlab.tokenizer/1":
        raise DataError(f"{path}: not a seqlab tokenizer file")
    kind = data.get("kind")
    if kind == "subword":
        model = Path(directory) / f"{name}.spm.model"
        try:
            return SubwordTokenizer(model.read_bytes(), data.get("normalize", "none"))
        except FileNotFoundError:
            raise DataError(f"subword model missing: {model}") from None
        except RuntimeError as exc:
            raise DataError(f"{model}: not a SentencePiece model ({exc})") from None
    if kind in ("char", "word"):
        return make_tokenizer(kind, data.get("normalize", "none"))
    raise DataError(f"{path}: unknown tokenizer kind {kind!r}")
