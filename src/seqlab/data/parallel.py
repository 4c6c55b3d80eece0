"""Parallel corpora: aligned (source, target) sentence pairs as raw strings.

Two layouts are read:

- **line-aligned files** (Multi30k): one sentence per line, line *i* of the source file translates
  line *i* of the target file; ``.gz`` files are decompressed transparently (detected by their
  magic bytes, not their name). Files with different line counts are an error.
- **tab-separated pairs** (fra–eng and cmn–eng, the manythings.org Anki exports):
  ``english<TAB>french`` per line; a third column (the export's attribution) is kept beside
  the pairs, not read as text.

Malformed lines are *skipped*, never fatal, and reported by **one** :class:`DataWarning` per file
(``warnings.warn``) that counts them and names the first as ``file:line``. A line is malformed
when it has no tab (tab-separated files only), when a side is empty, or (tab-separated files
only) when a side ends in whitespace: the export trims every sentence, so an untrimmed side is
the mark of a line cut off mid-sentence, e.g. the last line of the shared 18,066-line slice,
``They did it again.<TAB>Ils l'ont ``. Text that is not UTF-8 is a :class:`DataError` naming
``file:line``. Kept sentences are stripped of surrounding whitespace.

fra–eng has no official split. :func:`split_heldout` holds out ``val_examples`` pairs chosen by a
seeded shuffle (seed 0 unless told otherwise), and keeps both parts in file order. We do not use
d2l's convention (the first pairs train, the next ones validate) because the file is sorted
shortest-first, which would make the validation sentences systematically longer.
"""

from __future__ import annotations

import gzip
import random
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seqlab.data import registry
from seqlab.errors import DataError

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MULTI30K_LANGS = ("en", "de", "fr")
FRA_ENG_FILE = "fra.txt"
_GZIP_MAGIC = b"\x1f\x8b"


class DataWarning(UserWarning):
    """Something in a dataset was skipped or changed (malformed lines, truncated sentences)."""


@dataclass
class ParallelCorpus:
    """Sentence pairs read from one or two files.

    Attributes:
        pairs: ``(source, target)`` raw strings, in file order.
        skipped: how many malformed lines were left out.
        source: the file(s) read, for messages.
        attribution: for tab-separated pairs, each pair's third column (Tatoeba's
            per-sentence attribution, ``CC-BY 2.0 (France) Attribution: tatoeba.org #538123
            (CM) & ...``), empty where there is none.
    """

    pairs: list[tuple[str, str]]
    skipped: int = 0
    source: str = ""
    attribution: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pairs)


class _Skips:
    """Counts skipped lines and remembers the first, for the one warning per file."""

    def __init__(self) -> None:
        self.count = 0
        self.first = ""

    def add(self, where: str, why: str) -> None:
        if self.count == 0:
            self.first = f"{where} ({why})"
        self.count += 1

    def warn(self, source: str) -> None:
        if self.count:
            warnings.warn(
                f"{source}: skipped {self.count} malformed line(s); first at {self.first}",
                DataWarning,
                stacklevel=3,
            )


# ------------------------------------------------------------------------------------ reading
def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for a UTF-8 text file, gzip or not (1-based numbers).

    The line ending (``\\n`` or ``\\r\\n``) and a leading byte-order mark are removed; nothing
    else is. Raises :class:`DataError` for a missing file, a corrupt gzip stream, or a line that
    is not valid UTF-8 (naming ``file:line``).
    """
    path = Path(path)
    try:
        with open(path, "rb") as probe:
            compressed = probe.read(2) == _GZIP_MAGIC
        fh = gzip.open(path, "rb") if compressed else open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise DataError(f"file not found: {path}") from None
    number = 0
    with fh:
        try:
            for number, text in decode_lines(fh, str(path)):
                yield number, text
        except (gzip.BadGzipFile, EOFError, OSError) as exc:
            raise DataError(
                f"{path}: corrupt gzip stream after line {number} ({exc}); expected a complete .gz file"
            ) from None


def decode_lines(raw_lines: Iterable[bytes], where: str) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` of UTF-8 lines read as bytes (a file, a zip member), without
    their line ending and, on line 1, a byte-order mark; a line that is not UTF-8 is a
    :class:`DataError` naming ``where:line`` and the column."""
    for number, raw in enumerate(raw_lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(
                f"{where}:{number}: not valid UTF-8 ({exc.reason} at column {exc.start + 1}); "
                "expected UTF-8 text"
            ) from None
        if number == 1:
            text = text.removeprefix("\ufeff")
        yield number, text.removesuffix("\n").removesuffix("\r")


def read_parallel_files(src_path: str | Path, tgt_path: str | Path) -> ParallelCorpus:
    """Read two line-aligned files into pairs; a pair with an empty side is skipped (one warning).

    Raises:
        DataError: the files have different line counts (both files and counts are named), or
            one is missing, corrupt or not UTF-8.
    """
    src_lines = [text for _, text in read_lines(src_path)]
    tgt_lines = [text for _, text in read_lines(tgt_path)]
    if len(src_lines) != len(tgt_lines):
        raise DataError(
            f"parallel files differ in length: {src_path} has {len(src_lines)} lines, "
            f"{tgt_path} has {len(tgt_lines)}; expected the same number (one sentence per line)"
        )
    pairs, skips = [], _Skips()
    for number, (src, tgt) in enumerate(zip(src_lines, tgt_lines, strict=True), start=1):
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            where = src_path if not src else tgt_path
            skips.add(f"{where}:{number}", "empty line")
            continue
        pairs.append((src, tgt))
    source = f"{src_path} + {tgt_path}"
    skips.warn(source)
    return ParallelCorpus(pairs, skips.count, source)


def read_tsv_pairs(path: str | Path, swap: bool = False) -> ParallelCorpus:
    """Read ``left<TAB>right[<TAB>attribution...]`` lines into ``(left, right)`` pairs.

    Args:
        path: the file (gzip or plain).
        swap: return ``(right, left)`` instead, e.g. French → English from ``fra.txt``.

    Malformed lines (no tab, an empty side, a side ending in whitespace) are skipped with one
    :class:`DataWarning`; see the module docstring.
    """
    return parse_tsv_pairs(read_lines(path), str(path), swap)


def parse_tsv_pairs(
    lines: Iterable[tuple[int, str]], where: str, swap: bool = False
) -> ParallelCorpus:
    """:func:`read_tsv_pairs` of ``(line_number, text)`` lines read already (from a zip member,
    say), named ``where`` in messages; a third column is kept as the pair's attribution
    (:attr:`ParallelCorpus.attribution`)."""
    pairs, attribution, skips = [], [], _Skips()
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) < 2:
            skips.add(f"{where}:{number}", "no tab")
            continue
        left, right = fields[0], fields[1]
        if not left.strip() or not right.strip():
            skips.add(f"{where}:{number}", "empty side")
            continue
        if left != left.rstrip() or right != right.rstrip():
            skips.add(f"{where}:{number}", "side ends in whitespace: cut off?")
            continue
        left, right = left.strip(), right.strip()
        pairs.append((right, left) if swap else (left, right))
        attribution.append("\t".join(fields[2:]))
    skips.warn(where)
    return ParallelCorpus(pairs, skips.count, where, attribution)


def split_heldout(
    pairs: list[tuple[str, str]], val_examples: int, seed: int = 0
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Hold out ``val_examples`` pairs picked by a seeded shuffle; both parts keep file order.

    Returns:
        ``(train, val)``. The same ``pairs`` and ``seed`` always give the same split.
    """
    if not 0 < val_examples < len(pairs):
        raise DataError(
            f"cannot hold out {val_examples} validation pairs from {len(pairs)}; "
            "expected 0 < val_examples < number of pairs"
        )
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    held = set(order[len(pairs) - val_examples :])
    train = [p for i, p in enumerate(pairs) if i not in held]
    val = [p for i, p in enumerate(pairs) if i in held]
    return train, val


# --------------------------------------------------------------------- datasets by name
def load_multi30k(split: str, src_lang: str = "en", tgt_lang: str = "de") -> ParallelCorpus:
    """One Multi30k split (``train``, ``val`` or ``test_2016_flickr``) for two of en/de/fr."""
    if split not in MULTI30K_SPLITS:
        raise DataError(
            f"multi30k has no split {split!r}; expected one of {', '.join(MULTI30K_SPLITS)}"
        )
    for lang in (src_lang, tgt_lang):
        if lang not in MULTI30K_LANGS:
            raise DataError(
                f"multi30k has no language {lang!r}; expected one of {', '.join(MULTI30K_LANGS)}"
            )
    if src_lang == tgt_lang:
        raise DataError(
            f"source and target are both {src_lang!r}; expected two different languages"
        )
    return read_parallel_files(
        registry.resolve("multi30k", f"{split}.{src_lang}.gz"),
        registry.resolve("multi30k", f"{split}.{tgt_lang}.gz"),
    )


def load_fra_eng(src_lang: str = "en", tgt_lang: str = "fr") -> ParallelCorpus:
    """All of ``fra-eng/fra.txt`` as pairs, English → French or French → English."""
    if (src_lang, tgt_lang) not in (("en", "fr"), ("fr", "en")):
        raise DataError(
            f"fra-eng pairs English with French; got {src_lang}→{tgt_lang}, expected en→fr or fr→en"
        )
    return read_tsv_pairs(registry.resolve("fra-eng", FRA_ENG_FILE), swap=src_lang == "fr")


def multi30k_splits(
    src_lang: str, tgt_lang: str, num_examples: int | None = None
) -> dict[str, ParallelCorpus]:
    """Multi30k's own splits; ``test`` is ``test_2016_flickr``, and ``num_examples`` keeps the
    first N training pairs."""
    out = {
        "train": load_multi30k("train", src_lang, tgt_lang),
        "val": load_multi30k("val", src_lang, tgt_lang),
        "test": load_multi30k("test_2016_flickr", src_lang, tgt_lang),
    }
    if num_examples is not None:
        out["train"].pairs = out["train"].pairs[:num_examples]
    return out


def fra_eng_splits(
    src_lang: str,
    tgt_lang: str,
    val_examples: int = 1000,
    num_examples: int | None = None,
    seed: int = 0,
) -> dict[str, ParallelCorpus]:
    """fra–eng held out by :func:`split_heldout`: ``val_examples`` validation pairs, then as
    many test pairs (validation is the same whatever the test split), of the first
    ``num_examples`` pairs of the file (as d2l does)."""
    corpus = load_fra_eng(src_lang, tgt_lang)
    pairs = corpus.pairs if num_examples is None else corpus.pairs[:num_examples]
    rest, val = split_heldout(pairs, val_examples, seed)
    train, test = split_heldout(rest, val_examples, seed + 1)
    return {
        "train": ParallelCorpus(train, corpus.skipped, corpus.source),
        "val": ParallelCorpus(val, 0, corpus.source),
        "test": ParallelCorpus(test, 0, corpus.source),
    }


def load_translation_splits(
    dataset: str,
    src_lang: str,
    tgt_lang: str,
    val_examples: int = 1000,
    num_examples: int | None = None,
    seed: int = 0,
) -> dict[str, ParallelCorpus]:
    """Train/validation/test pairs of a parallel corpus read from files (``multi30k`` or
    ``fra-eng``); see :func:`multi30k_splits` and :func:`fra_eng_splits`.

    Args:
        val_examples, seed: fra–eng only: the held-out pairs and their seed.
        num_examples: keep only the first N pairs: of the train split (Multi30k), or of the whole
            file before holding out validation pairs (fra–eng).
    """
    if dataset == "multi30k":
        return multi30k_splits(src_lang, tgt_lang, num_examples)
    if dataset == "fra-eng":
        return fra_eng_splits(src_lang, tgt_lang, val_examples, num_examples, seed)
    raise DataError(f"{dataset!r} is not a translation dataset; expected multi30k or fra-eng")


def split_pairs(splits: dict[str, ParallelCorpus]) -> dict[str, list[tuple[str, str]]]:
    """The pairs of each split, as a translation dataset's reader returns them."""
    return {name: list(corpus.pairs) for name, corpus in splits.items()}


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "multi30k": lambda data, seed: split_pairs(
        multi30k_splits(data.src_lang, data.tgt_lang, data.num_examples)
    ),
    # a fixed split (seed 0), whatever train.seed: runs with other seeds validate alike
    "fra-eng": lambda data, seed: split_pairs(
        fra_eng_splits(data.src_lang, data.tgt_lang, data.val_examples, data.num_examples)
    ),
}
