"""Reading parallel corpora: gzip, tab-separated pairs, malformed lines, errors, held-out split."""

from __future__ import annotations

import gzip
import os
import warnings
from pathlib import Path

import pytest

from seqlab.data import registry
from seqlab.data.parallel import (
    DataWarning,
    load_fra_eng,
    load_multi30k,
    load_translation_splits,
    read_lines,
    read_parallel_files,
    read_tsv_pairs,
    split_heldout,
)
from seqlab.errors import DataError


def write(path: Path, text: str, compress: bool = False) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


def data_warnings(fn, *args, **kwargs):
    """Call fn and return (result, list of DataWarning messages it emitted)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    return result, [str(w.message) for w in caught if issubclass(w.category, DataWarning)]


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    """Point registry.resolve at tmp_path/<dataset>/<file> (the real one checks published digests)."""
    monkeypatch.setattr(registry, "resolve", lambda dataset, name: tmp_path / dataset / name)
    return tmp_path


@pytest.fixture
def shared_data():
    if not os.environ.get("SEQLAB_DATA_DIR"):
        pytest.skip("SEQLAB_DATA_DIR is not set: no local copy of the real datasets")


# ---------------------------------------------------------------------------- read_lines
def test_gzip_is_read_transparently_whatever_the_name(tmp_path):
    text = "Zwei Männer.\nEin Hund läuft.\n"
    plain = write(tmp_path / "a.txt", text)
    packed = write(tmp_path / "a.txt.gz", text, compress=True)
    unnamed = write(tmp_path / "b.txt", text, compress=True)  # gzip without the suffix
    expected = [(1, "Zwei Männer."), (2, "Ein Hund läuft.")]
    assert (
        list(read_lines(plain)) == list(read_lines(packed)) == list(read_lines(unnamed)) == expected
    )


def test_crlf_and_byte_order_mark_are_removed(tmp_path):
    path = tmp_path / "w.txt"
    path.write_bytes(b"\xef\xbb\xbfHello\r\nWorld\r\n")
    assert list(read_lines(path)) == [(1, "Hello"), (2, "World")]


@pytest.mark.parametrize("compress", [False, True])
def test_undecodable_utf8_names_file_and_line(tmp_path, compress):
    raw = b"fine\nalso fine\nbad \xff byte\n"
    path = tmp_path / ("x.gz" if compress else "x.txt")
    path.write_bytes(gzip.compress(raw) if compress else raw)
    with pytest.raises(DataError, match=rf"{path.name}:3: not valid UTF-8.*expected UTF-8"):
        list(read_lines(path))


def test_truncated_gzip_and_missing_file_are_data_errors(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(b"one\ntwo\nthree\n" * 100)[:40])
    with pytest.raises(DataError, match="cut.gz: corrupt gzip"):
        list(read_lines(path))
    with pytest.raises(DataError, match="file not found"):
        list(read_lines(tmp_path / "nope.txt"))


# ------------------------------------------------------------------------- line-aligned
def test_parallel_files_pair_lines_and_strip(tmp_path):
    en = write(tmp_path / "t.en.gz", "A dog runs .\n  Two men.  \n", compress=True)
    de = write(tmp_path / "t.de.gz", "Ein Hund läuft .\nZwei Männer.\n", compress=True)
    corpus, warned = data_warnings(read_parallel_files, en, de)
    assert corpus.pairs == [("A dog runs .", "Ein Hund läuft ."), ("Two men.", "Zwei Männer.")]
    assert corpus.skipped == 0 and warned == []


def test_parallel_files_with_different_line_counts_name_both(tmp_path):
    en = write(tmp_path / "t.en", "a\nb\nc\n")
    de = write(tmp_path / "t.de", "x\ny\n")
    with pytest.raises(DataError) as err:
        read_parallel_files(en, de)
    message = str(err.value)
    assert f"{en} has 3 lines" in message and f"{de} has 2" in message


def test_empty_side_is_skipped_with_one_warning(tmp_path):
    en = write(tmp_path / "t.en", "one\n\nthree\nfour\n")
    de = write(tmp_path / "t.de", "eins\nzwei\n   \n\n")
    corpus, warned = data_warnings(read_parallel_files, en, de)
    assert corpus.pairs == [("one", "eins")]
    assert corpus.skipped == 3
    assert len(warned) == 1
    assert "skipped 3 malformed line(s)" in warned[0]
    assert f"{en}:2 (empty line)" in warned[0]  # the first problem, on the side that is empty


# ------------------------------------------------------------------------ tab-separated
def test_tsv_pairs_ignore_a_third_column_and_skip_malformed_lines(tmp_path):
    path = write(
        tmp_path / "fra.txt",
        "Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM)\n"
        "Run!\tCours !\n"
        "no tab here\n"  # line 3: the first malformed one
        "Hi.\t\n"  # empty side
        "\tSalut.\n"  # empty side
        "They did it again.\tIls l'ont \n"  # cut off mid-sentence (as the shared slice's last line)
        "Wow!\tÇa alors !\n",
    )
    corpus, warned = data_warnings(read_tsv_pairs, path)
    assert corpus.pairs == [("Go.", "Va !"), ("Run!", "Cours !"), ("Wow!", "Ça alors !")]
    assert corpus.skipped == 4
    assert len(warned) == 1
    assert "skipped 4 malformed line(s)" in warned[0] and f"{path}:3 (no tab)" in warned[0]


def test_tsv_swap_gives_french_to_english(tmp_path):
    path = write(tmp_path / "fra.txt", "Go.\tVa !\n")
    assert read_tsv_pairs(path, swap=True).pairs == [("Va !", "Go.")]


def test_clean_tsv_gives_no_warning(tmp_path):
    path = write(tmp_path / "fra.txt", "Go.\tVa !\nHi.\tSalut !\n")
    corpus, warned = data_warnings(read_tsv_pairs, path)
    assert len(corpus) == 2 and corpus.skipped == 0 and warned == []


# ---------------------------------------------------------------------- held-out split
def test_split_heldout_is_a_deterministic_partition_in_file_order():
    pairs = [(f"s{i}", f"t{i}") for i in range(50)]
    train, val = split_heldout(pairs, 10, seed=3)
    assert len(val) == 10 and len(train) == 40
    assert sorted(train + val) == sorted(pairs)  # every pair exactly once
    assert train == [p for p in pairs if p in train] and val == [p for p in pairs if p in val]
    assert split_heldout(pairs, 10, seed=3) == (train, val)
    assert split_heldout(pairs, 10, seed=4)[1] != val
    assert val != pairs[-10:]  # not simply the tail (the file is sorted by length)


@pytest.mark.parametrize("n", [0, 5, 6])
def test_split_heldout_rejects_impossible_sizes(n):
    with pytest.raises(DataError, match="cannot hold out"):
        split_heldout([("a", "b")] * 5, n)


# ------------------------------------------------------------------- datasets by name
def make_multi30k(root: Path, n_train: int = 6) -> None:
    folder = root / "multi30k"
    folder.mkdir()
    for split, n in (("train", n_train), ("val", 2), ("test_2016_flickr", 3)):
        for lang in ("en", "de", "fr"):
            write(
                folder / f"{split}.{lang}.gz",
                "".join(f"{split} {lang} {i}\n" for i in range(n)),
                compress=True,
            )


def test_multi30k_any_two_languages_and_splits(fake_registry):
    make_multi30k(fake_registry)
    corpus = load_multi30k("val", "fr", "de")
    assert corpus.pairs == [("val fr 0", "val de 0"), ("val fr 1", "val de 1")]
    splits = load_translation_splits("multi30k", "en", "fr", num_examples=4)
    assert {k: len(v) for k, v in splits.items()} == {"train": 4, "val": 2, "test": 3}
    assert splits["test"].pairs[0] == ("test_2016_flickr en 0", "test_2016_flickr fr 0")


@pytest.mark.parametrize(
    ("split", "src", "tgt", "match"),
    [
        ("dev", "en", "de", "no split 'dev'"),
        ("val", "en", "cs", "no language 'cs'"),
        ("val", "de", "de", "both 'de'"),
    ],
)
def test_multi30k_rejects_unknown_splits_and_languages(fake_registry, split, src, tgt, match):
    with pytest.raises(DataError, match=match):
        load_multi30k(split, src, tgt)


def test_fra_eng_direction_and_heldout_split(fake_registry):
    (fake_registry / "fra-eng").mkdir()
    write(fake_registry / "fra-eng" / "fra.txt", "".join(f"e{i}\tf{i}\n" for i in range(20)))
    assert load_fra_eng("fr", "en").pairs[0] == ("f0", "e0")
    with pytest.raises(DataError, match="en→fr or fr→en"):
        load_fra_eng("en", "de")
    splits = load_translation_splits("fra-eng", "en", "fr", val_examples=5, num_examples=15)
    assert {k: len(v) for k, v in splits.items()} == {"train": 5, "val": 5, "test": 5}
    # The test split is held out of what validation leaves: validation does not move.
    assert splits["val"].pairs == split_heldout([(f"e{i}", f"f{i}") for i in range(15)], 5)[1]
    assert {p for c in splits.values() for p in c.pairs} == {(f"e{i}", f"f{i}") for i in range(15)}
    with pytest.raises(DataError, match="not a translation dataset"):
        load_translation_splits("timemachine", "en", "fr")


# ------------------------------------------------------------------------ real files
def test_real_fra_eng_skips_its_cut_off_last_line(shared_data):
    corpus, warned = data_warnings(load_fra_eng)
    assert corpus.skipped == 1 and len(corpus) == 18_065
    assert len(warned) == 1 and "fra.txt:18066" in warned[0]
    assert corpus.pairs[0] == ("Go.", "Va !")


def test_real_multi30k_splits_are_complete(shared_data):
    splits, warned = data_warnings(load_translation_splits, "multi30k", "en", "fr")
    assert {k: len(v) for k, v in splits.items()} == {"train": 29_000, "val": 1_014, "test": 1_000}
    assert warned == []
