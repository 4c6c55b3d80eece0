"""Vocabulary: a two-way map between tokens and integer ids (d2l.ai §9.2.3).

Reserved tokens have fixed ids, whatever the corpus: ``<unk>`` 0, ``<pad>`` 1, ``<bos>`` 2,
``<eos>`` 3 (defined in :mod:`seqlab.tokens`). The remaining tokens follow by descending frequency (ties broken by first
appearance in the counted text, so the order is deterministic). Unknown tokens map to ``<unk>``;
where a model reads the user's text, each input holding some is reported with the tokens
(:func:`warn_unknown`, :class:`UnknownTokenWarning`), never replaced silently.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from seqlab import tokens as special
from seqlab.atomic import atomic_write_json
from seqlab.errors import DataError

RESERVED = special.SPECIAL_TOKENS
FORMAT = "seqlab.vocab/1"


def count_tokens(tokens: Iterable[Any]) -> Counter[str]:
    """Count tokens in a flat list or a list of token lists."""
    counter: Counter[str] = Counter()
    for item in tokens:
        if isinstance(item, list | tuple):
            counter.update(item)
        else:
            counter[item] += 1
    return counter


def check_not_empty(vocab: Vocab, what: str, min_freq: int, max_size: int | None) -> Vocab:
    """Refuse a vocabulary, just built from training data, that holds only the reserved tokens:
    every token of the data would be ``<unk>`` and a model trained on it learns nothing.

    Raises:
        DataError: naming ``what`` (e.g. "source") and the settings that emptied it.
    """
    if len(vocab) > vocab.num_reserved:
        return vocab
    raise DataError(
        f"the {what} vocabulary holds only the reserved tokens ({', '.join(RESERVED)}): "
        f"with data.min_freq={min_freq} and data.max_vocab={max_size}, every token of the "
        "training data would be <unk>; lower data.min_freq or raise data.max_vocab (above "
        f"{vocab.num_reserved}), or check that the training data is not empty"
    )


class Vocab:
    """Token ↔ id mapping built from token counts.

    Args:
        tokens: a flat list of tokens or a list of token lists (sentences/lines) to count.
        min_freq: tokens seen fewer times than this are left out (they map to ``<unk>``).
        max_size: keep at most this many tokens in all, reserved ones included.
        extra_reserved: further special tokens placed right after the four fixed ones.
    """

    def __init__(
        self,
        tokens: Iterable[Any] = (),
        min_freq: int = 0,
        max_size: int | None = None,
        extra_reserved: Sequence[str] = (),
    ) -> None:
        counts = count_tokens(tokens)
        reserved = list(RESERVED) + [t for t in extra_reserved if t not in RESERVED]
        if max_size is not None and max_size < len(reserved):
            raise ValueError(
                f"max_size={max_size} is smaller than the {len(reserved)} reserved tokens"
            )
        # Counter.most_common keeps insertion order among equal counts: deterministic.
        ordered = [t for t, c in counts.most_common() if c >= min_freq and t not in reserved]
        if max_size is not None:
            ordered = ordered[: max_size - len(reserved)]
        self.idx_to_token: list[str] = reserved + ordered
        self.token_to_idx: dict[str, int] = {t: i for i, t in enumerate(self.idx_to_token)}
        self.counts: dict[str, int] = {t: counts.get(t, 0) for t in self.idx_to_token}
        self.num_reserved = len(reserved)

    # ids of the special tokens (fixed across every vocabulary)
    unk, pad, bos, eos = special.UNK, special.PAD, special.BOS, special.EOS

    def __len__(self) -> int:
        return len(self.idx_to_token)

    def __contains__(self, token: str) -> bool:
        return token in self.token_to_idx

    def __getitem__(self, tokens: Any) -> Any:
        """Token → id; lists and nested lists map element-wise."""
        if isinstance(tokens, list | tuple):
            get, unk = self.token_to_idx.get, self.unk  # a flat list of tokens: no call each
            return [get(t, unk) if isinstance(t, str) else self[t] for t in tokens]
        return self.token_to_idx.get(tokens, self.unk)

    def to_tokens(self, ids: Any) -> Any:
        """Id → token; lists, nested lists and tensors map element-wise."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, list | tuple):
            names = self.idx_to_token  # a flat list of ids: no call each
            return [names[i] if type(i) is int else self.to_tokens(i) for i in ids]
        return self.idx_to_token[int(ids)]

    def token_freqs(self) -> list[tuple[str, int]]:
        """Non-reserved tokens with their counts, most frequent first."""
        return [(t, self.counts[t]) for t in self.idx_to_token[self.num_reserved :]]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Vocab)
            and self.idx_to_token == other.idx_to_token
            and self.counts == other.counts
        )

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)}, reserved={self.idx_to_token[: self.num_reserved]})"

    # -------------------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "tokens": self.idx_to_token,
            "counts": [self.counts[t] for t in self.idx_to_token],
            "num_reserved": self.num_reserved,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<dict>") -> Vocab:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DataError(f"{source}: not a seqlab vocabulary (expected format {FORMAT!r})")
        tokens, counts = data.get("tokens"), data.get("counts")
        if (
            not isinstance(tokens, list)
            or not isinstance(counts, list)
            or len(tokens) != len(counts)
        ):
            raise DataError(f"{source}: 'tokens' and 'counts' must be lists of equal length")
        if tuple(tokens[: len(RESERVED)]) != RESERVED:
            raise DataError(
                f"{source}: the first tokens must be {list(RESERVED)}, got {tokens[:4]}"
            )
        if len(set(tokens)) != len(tokens):
            raise DataError(f"{source}: duplicate tokens in the vocabulary")
        vocab = cls.__new__(cls)
        vocab.idx_to_token = list(tokens)
        vocab.token_to_idx = {t: i for i, t in enumerate(tokens)}
        vocab.counts = dict(zip(tokens, (int(c) for c in counts), strict=True))
        vocab.num_reserved = int(data.get("num_reserved", len(RESERVED)))
        return vocab

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"vocabulary file not found: {path}") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: not valid JSON ({exc})") from None
        return cls.from_dict(data, str(path))


# ------------------------------------------------------------------------- unknown tokens
class UnknownTokenWarning(UserWarning):
    """The user's text held tokens that the model's vocabulary lacks: the model read each as
    ``<unk>`` (one warning per input, naming the input and the tokens; see :func:`warn_unknown`).
    """


#: distinct unknown tokens named in one message; the others are counted
SHOWN_UNKNOWN = 5
#: inputs warned about one by one in one call; the others are counted in one last message
WARNED_INPUTS = 10
#: set inside :func:`quiet_unknown` (per thread and per asyncio task)
_QUIET: ContextVar[bool] = ContextVar("seqlab_unknown_quiet", default=False)


def unknown_tokens(vocab: Vocab, tokens: Iterable[str]) -> list[str]:
    """The tokens that ``vocab`` lacks, in order (each is read as ``<unk>``)."""
    index = vocab.token_to_idx
    return [t for t in tokens if t not in index]


def unknown_messages(found: Iterable[tuple[str, Sequence[str]]]) -> list[str]:
    """One message per input that holds unknown tokens, for ``(where, unknown tokens)`` pairs
    (``where``: the input's name, e.g. ``input line 3``): its count and the first
    :data:`SHOWN_UNKNOWN` distinct tokens; after :data:`WARNED_INPUTS` inputs, one message
    counts the rest."""
    messages, more, more_tokens = [], 0, 0
    for where, tokens in found:
        if not tokens:
            continue
        if len(messages) == WARNED_INPUTS:
            more, more_tokens = more + 1, more_tokens + len(tokens)
            continue
        distinct = list(dict.fromkeys(tokens))
        shown = ", ".join(repr(t) for t in distinct[:SHOWN_UNKNOWN])
        if len(distinct) > SHOWN_UNKNOWN:
            shown += f" and {len(distinct) - SHOWN_UNKNOWN} more"
        n = len(tokens)
        messages.append(
            f"{where}: {n} token{'s' if n > 1 else ''} not in the model's vocabulary, read as "
            f"<unk>: {shown}"
        )
    if more:
        messages.append(
            f"and {more} more input{'s' if more > 1 else ''} with tokens not in the model's "
            f"vocabulary ({more_tokens} token{'s' if more_tokens > 1 else ''}), read as <unk>"
        )
    return messages


def warn_unknown(found: Iterable[tuple[str, Sequence[str]]], stacklevel: int = 2) -> None:
    """An :class:`UnknownTokenWarning` for each message of :func:`unknown_messages` (none inside
    :func:`quiet_unknown`)."""
    if not reporting_unknown():
        return
    for message in unknown_messages(found):
        warnings.warn(message, UnknownTokenWarning, stacklevel=stacklevel + 1)


def reporting_unknown() -> bool:
    """Whether unknown tokens are warned about here (False inside :func:`quiet_unknown`)."""
    return not _QUIET.get()


@contextmanager
def quiet_unknown() -> Iterator[None]:
    """No :class:`UnknownTokenWarning` inside this block (for this thread or asyncio task only):
    a caller that reports unknown tokens its own way (the server's responses, ``evaluate``'s file
    lines) reads the inputs inside it."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)
