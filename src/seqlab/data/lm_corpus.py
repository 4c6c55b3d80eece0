"""Language-model corpora: one text file → token ids, split into training and validation.

The validation split is the *last* ``val_fraction`` of the token sequence (contiguous, so
sequential batching and perplexity are meaningful), and the vocabulary is counted on the
training part only: validation tokens unseen in training map to ``<unk>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqlab.data.registry import resolve
from seqlab.data.tokenizers import (
    CharTokenizer,
    Normalize,
    Tokenizer,
    WordTokenizer,
    make_tokenizer,
)
from seqlab.data.vocab import Vocab, check_not_empty
from seqlab.errors import DataError

LM_FILES = {"timemachine": "timemachine.txt", "tinyshakespeare": "input.txt"}


@dataclass
class LMCorpus:
    train: Tensor  # (N_train,) token ids
    val: Tensor  # (N_val,)
    vocab: Vocab
    tokenizer: CharTokenizer | WordTokenizer


def read_text(path: str | Path) -> str:
    """Read UTF-8 text, naming the file and line of the first undecodable byte."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path}:{line}: not valid UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None


def split_tokens(tokens: list[str], val_fraction: float) -> tuple[list[str], list[str]]:
    n_val = int(len(tokens) * val_fraction)
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]


def build_lm_corpus(
    text: str,
    *,
    tokenizer: str = "char",
    normalize: Normalize = "none",
    val_fraction: float = 0.1,
    min_freq: int = 0,
    max_vocab: int | None = None,
    tok: Tokenizer | None = None,
    vocab: Vocab | None = None,
) -> LMCorpus:
    """Tokenize ``text``, split it, and map it to ids.

    Args:
        tokenizer, normalize: how to cut the text (``char`` or ``word``), unless ``tok`` is given.
        val_fraction: the held-out tail.
        min_freq, max_vocab: for the vocabulary counted on the training part, unless ``vocab``
            is given (a trained run's own).
    """
    if tok is None and tokenizer not in ("char", "word"):
        raise DataError(f"language models take data.tokenizer char or word, not {tokenizer!r}")
    tok = tok or make_tokenizer(tokenizer, normalize)
    tokens = tok.tokenize(text)
    train_tokens, val_tokens = split_tokens(tokens, val_fraction)
    if vocab is None:
        vocab = Vocab(train_tokens, min_freq=min_freq, max_size=max_vocab)
        if train_tokens:  # an empty text gets its own, more specific error from the task
            check_not_empty(vocab, "language model's", min_freq, max_vocab)
    return LMCorpus(
        train=torch.tensor(vocab[train_tokens], dtype=torch.long),
        val=torch.tensor(vocab[val_tokens], dtype=torch.long),
        vocab=vocab,
        tokenizer=tok,
    )


def corpus_path(dataset: str, path: str | None = None) -> Path:
    """The text file of ``dataset`` (timemachine, tinyshakespeare, or ``text`` at ``path``)."""
    if dataset == "text" and path is not None:
        file = Path(path)
        if not file.is_file():
            raise DataError(f"data.path: text file not found: {file}")
        return file
    if dataset in LM_FILES:
        return resolve(dataset, LM_FILES[dataset])
    raise DataError(
        f"data.dataset={dataset!r} is not a language-modelling corpus; choose one of "
        + ", ".join([*LM_FILES, "text"])
    )


def _read_corpus(name: str) -> Callable[[Any, int], str]:
    """The reader of ``name``'s records: the whole text (``data.path``'s for ``text``)."""

    def read(data: Any, seed: int) -> str:
        return read_text(corpus_path(name, data.path))

    return read


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "timemachine": _read_corpus("timemachine"),
    "tinyshakespeare": _read_corpus("tinyshakespeare"),
    "text": _read_corpus("text"),
}
