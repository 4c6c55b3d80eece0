"""Labelled examples for classification: readers, label sets, and shuffled minibatches.

Text datasets give ``(text, label)`` pairs: GLUE SST-2 (``sentence<TAB>label`` with a header),
AG News (CSV ``"class","title","description"``, classes 1–4) and a user's own file (TSV
``text<TAB>label``, or CSV with a header naming the text and label columns). Malformed rows are
skipped with one counted warning naming the first ``file:line``.

Images come from :mod:`seqlab.data.images`. Either way a dataset is a list of examples and a
list of label names; :class:`ClassificationBatches` shuffles them per epoch (a pure function of
seed and epoch) and, for text, groups similar lengths to waste little padding.

Each dataset's reader (``read_sst2``, ``read_ag_news``, ``read_labelled_file``, registered at the
end of this module) returns its splits: ``train``, the ``val`` that chooses checkpoints, always
held out of the training data with a seeded choice (:func:`hold_out`; for SST-2, whole sentences
and their phrases, :func:`sentence_holdout`), and the dataset's own evaluation split if it has one.
"""

from __future__ import annotations

import csv
import functools
import io
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqlab.builtin_records import AG_NEWS_LABELS, SST2_LABELS
from seqlab.data.parallel import _Skips, read_lines
from seqlab.data.registry import resolve
from seqlab.errors import DataError
from seqlab.tokens import PAD

Examples = list[tuple[str, str]]  # (text, label name)


def read_labelled_tsv(path: str | Path, header: bool | None = None) -> Examples:
    """``text<TAB>label`` rows (gzip or plain). A first row ``…<TAB>label`` is a header.

    Rows without exactly one tab, or with an empty text or label, are skipped (one warning).
    """
    examples, skips = [], _Skips()
    for number, line in read_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and (header or (header is None and fields[-1].strip() == "label")):
            continue
        if len(fields) != 2:
            skips.add(f"{path}:{number}", f"{len(fields)} tab-separated fields, expected 2")
            continue
        text, label = fields[0].strip(), fields[1].strip()
        if not text or not label:
            skips.add(f"{path}:{number}", "empty text or label")
            continue
        examples.append((text, label))
    skips.warn(str(path))
    return examples


def read_labelled_csv(
    path: str | Path,
    text_column: str | Sequence[int] = "text",
    label_column: str | int = "label",
) -> Examples:
    """CSV rows into ``(text, label)``: by header names, or by column numbers for header-less
    files (several text columns are joined with a space, e.g. AG News title + description)."""
    lines = [text for _, text in read_lines(path)]
    rows = csv.reader(io.StringIO("\n".join(lines)))
    by_name = isinstance(label_column, str)
    try:
        first = next(rows)
    except StopIteration:
        raise DataError(f"{path}: empty file; expected CSV rows of labelled text") from None
    except csv.Error as exc:
        raise DataError(f"{path}:1: not valid CSV ({exc})") from None
    if by_name:
        missing = [c for c in (text_column, label_column) if c not in first]
        if missing:
            raise DataError(
                f"{path}:1: the header has no column {', '.join(map(repr, missing))}; it has "
                f"{', '.join(map(repr, first))} (set data.text_column and data.label_column)"
            )
        text_idx: list[int] = [first.index(text_column)]  # type: ignore[arg-type]
        label_idx = first.index(label_column)  # type: ignore[arg-type]
        body: Iterator[list[str]] = rows
        start = 2
    else:
        text_idx, label_idx = list(text_column), int(label_column)  # type: ignore[arg-type]
        body = _chain([first], rows)
        start = 1
    need = max([*text_idx, label_idx]) + 1
    examples, skips = [], _Skips()
    number = start - 1
    try:
        for number, row in enumerate(body, start=start):
            if len(row) < need:
                skips.add(f"{path}:{number}", f"{len(row)} fields, expected at least {need}")
                continue
            text = " ".join(row[i].strip() for i in text_idx).strip()
            label = row[label_idx].strip()
            if not text or not label:
                skips.add(f"{path}:{number}", "empty text or label")
                continue
            examples.append((text, label))
    except csv.Error as exc:
        raise DataError(f"{path}:{number + 1}: not valid CSV ({exc})") from None
    skips.warn(str(path))
    return examples


def _chain(head: list[list[str]], rest: Iterator[list[str]]) -> Iterator[list[str]]:
    yield from head
    yield from rest


def read_user_file(path: str | Path, text_column: str, label_column: str) -> Examples:
    """A user's labelled file: ``.csv``/``.csv.gz`` by header names, anything else as TSV."""
    name = Path(path).name.lower().removesuffix(".gz")
    if name.endswith(".csv"):
        return read_labelled_csv(path, text_column, label_column)
    return read_labelled_tsv(path)


def load_sst2(split: str) -> Examples:
    """GLUE SST-2 ``train`` or ``dev``; labels 0/1 named negative/positive."""
    rows = read_labelled_tsv(resolve("sst2", f"{split}.tsv.gz"), header=True)
    names = {"0": SST2_LABELS[0], "1": SST2_LABELS[1]}
    return [(text, names.get(label, label)) for text, label in rows]


def load_ag_news(split: str) -> Examples:
    """AG News ``train`` or ``test``: title and description joined; classes 1–4 named."""
    rows = read_labelled_csv(resolve("ag_news", f"{split}.csv.gz"), (1, 2), 0)
    names = {str(i + 1): name for i, name in enumerate(AG_NEWS_LABELS)}
    return [(text.replace("\\", " "), names.get(label, label)) for text, label in rows]


def label_set(examples: Examples, known: Sequence[str] = ()) -> list[str]:
    """The label names, in ``known`` order first, then sorted (deterministic ids)."""
    seen = {label for _, label in examples}
    return list(known) + sorted(seen - set(known))


def label_ids(labels: Sequence[str], names: Sequence[str], where: str) -> list[int]:
    """Map label names to ids; an unknown label is an error naming it and the known ones."""
    index = {n: i for i, n in enumerate(names)}
    out = []
    for label in labels:
        if label not in index:
            raise DataError(
                f"{where}: label {label!r} is not one the model was trained on "
                f"({', '.join(map(repr, names))})"
            )
        out.append(index[label])
    return out


# -------------------------------------------------------------------------------- splits
def hold_out(n: int, val: int, seed: int, what: str) -> tuple[list[int], list[int]]:
    """Indices of the training and held-out validation examples (both in file order)."""
    if not 0 < val < n:
        raise DataError(
            f"{what}: cannot hold out data.val_examples={val} validation examples from {n}; "
            "expected 0 < val_examples < number of examples"
        )
    order = list(range(n))
    random.Random(seed).shuffle(order)
    held = set(order[n - val :])
    return [i for i in range(n) if i not in held], sorted(held)


#: shortest SST-2 example considered a validation sentence (tokens)
MIN_SENTENCE_TOKENS = 6


def _spans(words: list[str], shortest: int = 1) -> Iterator[str]:
    """Every contiguous span of at least ``shortest`` words, as text."""
    for a in range(len(words)):
        for b in range(a + shortest, len(words) + 1):
            yield " ".join(words[a:b])


def inner_spans(texts: Sequence[list[str]], shortest: int) -> set[str]:
    """The texts (word lists of at least ``shortest`` words) that are a proper span of a longer
    one, joined by spaces: ``{" ".join(t) for t in texts if t is inside a longer text}``.

    Each text is indexed by its first ``shortest`` words, and each window of ``shortest`` words
    of every text looks up only the texts that start so: about linear in the words (SST-2's
    67,349 phrases in under a second), where listing every span of every text is quadratic in
    each text's length.
    """
    starts: dict[tuple[str, ...], list[list[str]]] = {}
    for words in texts:
        starts.setdefault(tuple(words[:shortest]), []).append(words)
    inner: set[str] = set()
    for words in texts:
        for a in range(len(words) - shortest + 1):
            for found in starts.get(tuple(words[a : a + shortest]), ()):
                n = len(found)
                if n < len(words) and words[a : a + n] == found:
                    inner.add(" ".join(found))
    return inner


def sentence_holdout(examples: Examples, val: int, seed: int) -> tuple[list[int], list[int], int]:
    """Hold out ``val`` whole sentences of a phrase-level corpus (SST-2) without leakage.

    A sentence is an example of at least :data:`MIN_SENTENCE_TOKENS` words that is no proper
    span of a longer example. ``val`` of them (a seeded choice) are held out, and every example
    that is a span of a held-out sentence (its phrases) leaves the training set.

    The split of the last two corpora is remembered (keyed by their content, seed and ``val``):
    a process that trains and scores several models on SST-2 finds its sentences once.

    Returns:
        training indices, validation indices (file order), and how many phrases were dropped.
    """
    key = tuple((text, label) for text, label in examples)
    train, held, dropped = _sentence_holdout(key, val, seed)
    return list(train), list(held), dropped


@functools.lru_cache(maxsize=2)
def _sentence_holdout(
    examples: tuple[tuple[str, str], ...], val: int, seed: int
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """:func:`sentence_holdout`, computed (the cache holds tuples: nobody can change them)."""
    words = [text.split() for text, _ in examples]
    long = [i for i, w in enumerate(words) if len(w) >= MIN_SENTENCE_TOKENS]
    inner = inner_spans([words[i] for i in long], MIN_SENTENCE_TOKENS)
    sentences = [i for i in long if " ".join(words[i]) not in inner]
    if not 0 < val < len(sentences):
        raise DataError(
            f"sst2: cannot hold out data.val_examples={val} sentences from {len(sentences)}"
        )
    random.Random(seed).shuffle(sentences)
    held = set(sentences[:val])
    phrases = {span for i in held for span in _spans(words[i])}
    train = [i for i in range(len(examples)) if i not in held and " ".join(words[i]) not in phrases]
    return tuple(train), tuple(sorted(held)), len(examples) - len(held) - len(train)


def _splits(
    full: Examples, train: list[int], val: list[int], num_examples: int | None
) -> dict[str, Examples]:
    return {"train": [full[i] for i in train][:num_examples], "val": [full[i] for i in val]}


def read_sst2(data: Any, seed: int) -> dict[str, Examples]:
    """SST-2: ``train`` without the held-out sentences and their phrases, ``val``
    (``data.val_examples`` whole sentences, :func:`sentence_holdout`), and ``dev``, GLUE's
    labelled evaluation split (its test labels are not public)."""
    full = load_sst2("train")
    train, val, _ = sentence_holdout(full, data.val_examples, seed)
    return _splits(full, train, val, data.num_examples) | {"dev": load_sst2("dev")}


def read_ag_news(data: Any, seed: int) -> dict[str, Examples]:
    """AG News: ``train`` and ``val`` (``data.val_examples`` held out of it), and ``test``."""
    full = load_ag_news("train")
    train, val = hold_out(len(full), data.val_examples, seed, "ag_news")
    return _splits(full, train, val, data.num_examples) | {"test": load_ag_news("test")}


def read_labelled_file(data: Any, seed: int) -> dict[str, Examples]:
    """A user's file (``data.path``): ``train`` and ``val``, ``data.val_examples`` examples but at
    most a tenth of the file."""
    full = read_user_file(data.path, data.text_column, data.label_column)
    if len(full) < 2:
        raise DataError(f"{data.path}: {len(full)} usable example(s); need at least 2")
    val_examples = min(data.val_examples, max(1, len(full) // 10))
    train, val = hold_out(len(full), val_examples, seed, data.path)
    return _splits(full, train, val, data.num_examples)


# ------------------------------------------------------------------------------- batches
@dataclass
class ClassBatch:
    """A minibatch: ``inputs`` token ids ``(B, T)`` (padded with ``PAD``) with ``lengths`` ``(B,)``,
    or images ``(B, C, H, W)`` with ``lengths`` None; ``labels`` ``(B,)``."""

    inputs: Tensor
    lengths: Tensor | None
    labels: Tensor

    def to(self, device: torch.device | str) -> ClassBatch:
        lengths = None if self.lengths is None else self.lengths.to(device)
        return ClassBatch(self.inputs.to(device), lengths, self.labels.to(device))

    def __len__(self) -> int:
        return len(self.labels)


def pad_ids(seqs: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """Right-pad token id lists with ``PAD``: ``(B, T)`` ids and ``(B,)`` lengths."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    out = torch.full((len(seqs), int(lengths.max())), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out, lengths


def batch_order(
    n: int,
    batch_size: int,
    shuffle: bool,
    lengths: Sequence[int] | None,
    seed: int,
    epoch: int,
) -> list[list[int]]:
    """The examples' indices cut into batches, a pure function of (seed, epoch): shuffled (when
    ``shuffle``) and, given ``lengths``, sorted by length inside windows of 50 batches before the
    cut (then the batches shuffled), so a batch holds examples of similar lengths."""
    order = list(range(n))
    rng = random.Random(seed * 100_003 + epoch)
    if shuffle:
        rng.shuffle(order)
    if lengths is not None:
        window = batch_size * 50
        order = [
            i
            for w in range(0, n, window)
            for i in sorted(order[w : w + window], key=lambda j: lengths[j])
        ]
    batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]
    if shuffle and lengths is not None:
        rng.shuffle(batches)
    return batches


class ClassificationBatches:
    """Shuffled minibatches of ``batch_size`` examples, a pure function of (seed, epoch).

    Args:
        inputs: token id lists (text) or one ``(N, C, H, W)`` float tensor (images).
        labels: label ids ``(N,)``.
        bucket: text only: sort each window of 50 batches by length before cutting it into
            batches (then shuffle the batches), so a batch holds similar lengths.
    """

    carries_state = False

    def __init__(
        self,
        inputs: Sequence[Sequence[int]] | Tensor,
        labels: Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = True,
        bucket: bool = True,
        seed: int = 0,
    ) -> None:
        if len(inputs) != len(labels):
            raise ValueError(f"{len(inputs)} inputs but {len(labels)} labels")
        if not len(labels):
            raise DataError("no examples to make batches of")
        self.inputs, self.labels = inputs, torch.as_tensor(list(labels), dtype=torch.long)
        self.batch_size, self.shuffle, self.seed, self.epoch = batch_size, shuffle, seed, 0
        self.bucket = bucket and not isinstance(inputs, Tensor)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return -(-len(self.labels) // self.batch_size)

    def _order(self) -> list[list[int]]:
        lengths = None if not self.bucket else [len(x) for x in self.inputs]
        return batch_order(
            len(self.labels), self.batch_size, self.shuffle, lengths, self.seed, self.epoch
        )

    def __iter__(self) -> Iterator[ClassBatch]:
        for idx in self._order():
            yield self.batch(idx)

    def batch(self, idx: Sequence[int]) -> ClassBatch:
        labels = self.labels[list(idx)]
        if isinstance(self.inputs, Tensor):
            return ClassBatch(self.inputs[list(idx)], None, labels)
        ids, lengths = pad_ids([self.inputs[i] for i in idx])
        return ClassBatch(ids, lengths, labels)


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "sst2": read_sst2,
    "ag_news": read_ag_news,
    "text-classification": read_labelled_file,
}
