"""Language-model corpora: one text file → token ids, split into training and validation.

The validation split is the *last* ``val_fraction`` of the token sequence (contiguous, so
sequential batching and perplexity are meaningful), and the vocabulary is counted on the
training part only: validation tokens unseen in training map to ``<unk>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from seqlab.config import DataConfig
from seqlab.data.registry import resolve
from seqlab.data.tokenizers import CharTokenizer, Tokenizer, WordTokenizer, make_tokenizer
from seqlab.data.vocab import Vocab
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
    text: str, cfg: DataConfig, tokenizer: Tokenizer | None = None, vocab: Vocab | None = None
) -> LMCorpus:
    """Tokenize ``text``, split it, and map it to ids (building the vocabulary if not given)."""
    if cfg.tokenizer not in ("char", "word"):
        raise DataError(f"language models take data.tokenizer char or word, not {cfg.tokenizer!r}")
    tok = tokenizer or make_tokenizer(cfg.tokenizer, cfg.normalize)
    tokens = tok.tokenize(text)
    train_tokens, val_tokens = split_tokens(tokens, cfg.val_fraction)
    if vocab is None:
        vocab = Vocab(train_tokens, min_freq=cfg.min_freq, max_size=cfg.max_vocab)
    return LMCorpus(
        train=torch.tensor(vocab[train_tokens], dtype=torch.long),
        val=torch.tensor(vocab[val_tokens], dtype=torch.long),
        vocab=vocab,
        tokenizer=tok,
    )


def load_lm_corpus(
    cfg: DataConfig, tokenizer: Tokenizer | None = None, vocab: Vocab | None = None
) -> LMCorpus:
    """Load ``cfg.dataset`` (timemachine, tinyshakespeare, or ``text`` at ``cfg.path``)."""
    if cfg.dataset == "text" and cfg.path is not None:
        path = Path(cfg.path)
        if not path.is_file():
            raise DataError(f"data.path: text file not found: {path}")
    elif cfg.dataset in LM_FILES:
        path = resolve(cfg.dataset, LM_FILES[cfg.dataset])
    else:
        raise DataError(
            f"data.dataset={cfg.dataset!r} is not a language-modelling corpus; choose one of "
            + ", ".join([*LM_FILES, "text"])
        )
    return build_lm_corpus(read_text(path), cfg, tokenizer, vocab)
