"""Translation's decoding options and inputs: :func:`decode_options` (the run's ``decode``
section changed by ``beam``, ``nbest``, ``length_penalty``) and :func:`as_sentences`."""

from __future__ import annotations

from typing import Any

from seqlab.config import DecodeConfig
from seqlab.errors import SeqlabError
from seqlab.storage.text import check_line_breaks
from seqlab.tasks.base import as_batch

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
