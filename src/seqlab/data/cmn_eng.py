"""Tatoeba's Mandarin Chinese–English pairs (``cmn-eng``): the lecture's own problem, a Chinese
sentence to an English one (我爱机器学习 → "I love machine learning"), and back.

**The file.** The manythings.org Anki export ``cmn-eng.zip`` of 2026-02-13, read from the zip as
it is (its ``cmn.txt``: ``english<TAB>chinese<TAB>attribution``, 32,028 lines, shortest
first; and ``_about.txt``, the terms). The third column, Tatoeba's attribution of each
sentence pair, is kept beside the pairs (:func:`load_cmn_eng` ``.attribution``); the licence
(CC-BY 2.0 France) asks that it travel with them. The Chinese side is in both scripts as its
contributors typed it: read it through ``data.normalize: simplified``
(:mod:`seqlab.data.chinese`) to train one model of both.

**The split** (:func:`cmn_eng_splits`), fixed and the same for both directions. The export
repeats sentences: 30,193 distinct English sentences for 32,028 pairs (alternative Chinese
translations of one English sentence), and Chinese sentences recur too, in one script or the
other. A split that drew pairs at random would put one sentence in training and in test. So the
pairs are first grouped: two pairs are in one group when they share their English sentence
(compared with spaces collapsed and case folded) or their Chinese one (compared after the
``simplified`` normalisation, so 我愛你 and 我爱你 are one sentence). The groups, in file order,
are shuffled with seed 0; validation takes whole groups until it holds ``val_examples`` pairs
(1,000 by default) or more, test the next groups likewise, and training the rest, each part in
file order. No English sentence and no Chinese sentence is on two sides, whatever the script
(``tests/test_cmn_eng.py``). With the defaults: 30,028 training pairs, 1,000 validation,
1,000 test.
"""

from __future__ import annotations

import random
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from seqlab.builtin_records import CMN_ENG_FILE
from seqlab.data import registry
from seqlab.data.chinese import normalize_chinese
from seqlab.data.parallel import ParallelCorpus, decode_lines, parse_tsv_pairs, split_pairs
from seqlab.errors import DataError

CMN_ENG_MEMBER = "cmn.txt"
#: the seed of the fixed split (not ``train.seed``: runs of every seed validate alike)
SPLIT_SEED = 0


def read_zip_lines(path: str | Path, member: str) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` of a UTF-8 member of a zip file, line endings removed.

    Raises :class:`DataError` for a file that is not a zip, a member it lacks, or a line that
    is not UTF-8 (naming ``zip:member:line``).
    """
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{path}: not a readable zip file ({exc})") from None
    with archive:
        if member not in archive.namelist():
            raise DataError(
                f"{path} has no member {member!r}; it holds {', '.join(archive.namelist())}"
            )
        with archive.open(member) as fh:
            yield from decode_lines(fh, f"{path}:{member}")


def load_cmn_eng(path: str | Path | None = None) -> ParallelCorpus:
    """Every ``(english, chinese)`` pair of the export, in file order, with its attribution
    (``path``: the zip, else the catalog's verified copy)."""
    zip_path = path if path is not None else registry.resolve("cmn-eng", CMN_ENG_FILE)
    return parse_tsv_pairs(read_zip_lines(zip_path, CMN_ENG_MEMBER), f"{zip_path}:{CMN_ENG_MEMBER}")


def _english_key(text: str) -> str:
    return " ".join(text.split()).casefold()


def sentence_groups(pairs: list[tuple[str, str]]) -> list[list[int]]:
    """The indices of ``(english, chinese)`` pairs grouped so that pairs sharing a sentence
    (English by :func:`_english_key`, Chinese after the ``simplified`` normalisation) are in
    one group, each group in file order, the groups ordered by their first pair."""
    parent = list(range(len(pairs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str], int] = {}
    for i, (english, chinese) in enumerate(pairs):
        for key in (("en", _english_key(english)), ("zh", normalize_chinese(chinese))):
            if key in first:
                parent[root(i)] = root(first[key])
            else:
                first[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def cmn_eng_splits(
    src_lang: str = "zh",
    tgt_lang: str = "en",
    val_examples: int = 1000,
    num_examples: int | None = None,
    corpus: ParallelCorpus | None = None,
) -> dict[str, ParallelCorpus]:
    """Train / val / test of the module docstring, as ``(source, target)`` pairs in the
    direction asked (``zh``→``en`` or ``en``→``zh``); ``num_examples`` keeps the first N pairs
    of the file before the split."""
    if (src_lang, tgt_lang) not in (("en", "zh"), ("zh", "en")):
        raise DataError(
            f"cmn-eng pairs English with Chinese; got {src_lang}→{tgt_lang}, expected zh→en or "
            "en→zh (data.src_lang, data.tgt_lang)"
        )
    corpus = corpus if corpus is not None else load_cmn_eng()
    pairs = corpus.pairs if num_examples is None else corpus.pairs[:num_examples]
    if not 0 < 2 * val_examples < len(pairs):
        raise DataError(
            f"cannot hold out {val_examples} validation and {val_examples} test pairs from "
            f"{len(pairs)}; expected 0 < 2 × data.val_examples < number of pairs"
        )
    groups = sentence_groups(pairs)
    random.Random(SPLIT_SEED).shuffle(groups)
    parts: dict[str, list[int]] = {"val": [], "test": [], "train": []}
    for group in groups:
        name = next((n for n in ("val", "test") if len(parts[n]) < val_examples), "train")
        parts[name].extend(group)
    swap = src_lang == "zh"
    out = {}
    for name in ("train", "val", "test"):
        chosen = sorted(parts[name])
        out[name] = ParallelCorpus(
            [pairs[i][::-1] if swap else pairs[i] for i in chosen],
            corpus.skipped if name == "train" else 0,
            corpus.source,
            [corpus.attribution[i] for i in chosen] if corpus.attribution else [],
        )
    return out


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "cmn-eng": lambda data, seed: split_pairs(
        cmn_eng_splits(data.src_lang, data.tgt_lang, data.val_examples, data.num_examples)
    ),
}
