"""Dataset statistics: counts, vocabularies, percentiles, padding of bucketed vs random batches."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from seqlab.data import registry
from seqlab.data.stats import dataset_stats, format_stats, length_summary
from seqlab.errors import DataError


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    """Point registry.resolve at tmp_path/<dataset>/<file> (the real one checks published digests)."""
    monkeypatch.setattr(registry, "resolve", lambda dataset, name: tmp_path / dataset / name)
    return tmp_path


@pytest.fixture
def shared_data():
    if not os.environ.get("SEQLAB_DATA_DIR"):
        pytest.skip("SEQLAB_DATA_DIR is not set: no local copy of the real datasets")


def write_multi30k(root, texts: dict[str, str]) -> None:
    (root / "multi30k").mkdir()
    for name, text in texts.items():
        (root / "multi30k" / name).write_bytes(gzip.compress(text.encode("utf-8")))


def test_length_summary_uses_observed_values():
    lengths = list(range(1, 101))  # 1..100
    assert length_summary(lengths) == {"p50": 50, "p90": 90, "p95": 95, "p99": 99, "max": 100}
    assert length_summary([7]) == {"p50": 7, "p90": 7, "p95": 7, "p99": 7, "max": 7}
    assert length_summary([])["max"] == 0


def test_translation_stats_count_each_split_and_side(fake_registry):
    tiny = {
        "train.en.gz": "A dog runs.\nA dog.\nTwo dogs run fast!\n",
        "train.fr.gz": "Un chien court.\nUn chien.\nDeux chiens courent vite !\n",
        "val.en.gz": "A cat.\n",
        "val.fr.gz": "Un chat.\n",
        "test_2016_flickr.en.gz": "Dogs.\nA cat runs.\n",
        "test_2016_flickr.fr.gz": "Des chiens.\nUn chat court.\n",
    }
    write_multi30k(fake_registry, tiny)
    d = dataset_stats("multi30k", src="fr", tgt="en", batch_tokens=12)
    assert (d["src"], d["tgt"], d["kind"]) == ("fr", "en", "translation")
    train = d["splits"]["train"]
    # word tokens with the nmt cleaning: "un chien court ." / "a dog runs ." ...
    assert train["src"] == {
        "sentences": 3,
        "tokens": 4 + 3 + 5,
        "vocab": 9,
        "p50": 4,
        "p90": 5,
        "p95": 5,
        "p99": 5,
        "max": 5,
    }
    # "a dog runs ." / "a dog ." / "two dogs run fast !"
    assert train["tgt"]["tokens"] == 4 + 3 + 5 and train["tgt"]["vocab"] == 9
    assert d["splits"]["val"]["tgt"]["sentences"] == 1
    assert d["splits"]["test"]["src"]["tokens"] == 3 + 4
    padding = d["padding"]
    assert padding["batch_tokens"] == 12 and padding["random"]["batches"] >= 1
    # rows with <eos> have 5, 4, 6 positions: sorted, [4, 5] costs 2 x 5 <= 12, then [6] alone
    assert padding["bucketed"]["batches"] == 2
    assert padding["bucketed"]["tgt"] == pytest.approx((2 * 5 + 6) / (4 + 5 + 6))
    table = format_stats(d)
    assert "multi30k fr→en" in table and "batch_tokens=12" in table and "bucketed" in table
    json.dumps(d)  # JSON-ready for --json
    assert "padding" not in dataset_stats("multi30k", src="fr", tgt="en")


def test_char_tokenizer_counts_characters(fake_registry):
    write_multi30k(
        fake_registry,
        {
            f"{s}.{lang}.gz": "ab c\n"
            for s in ("train", "val", "test_2016_flickr")
            for lang in ("en", "de")
        },
    )
    d = dataset_stats("multi30k", tokenizer="char")
    assert (
        d["splits"]["train"]["src"]["tokens"] == 4 and d["splits"]["train"]["src"]["vocab"] == 4
    )  # a b ' ' c


def test_lm_stats(fake_registry):
    (fake_registry / "timemachine").mkdir()
    (fake_registry / "timemachine" / "timemachine.txt").write_text(
        "The Time Machine\n\nby H. G. Wells\nthe end\n", encoding="utf-8"
    )
    d = dataset_stats("timemachine")
    assert d["lines"] == 4 and d["nonempty_lines"] == 3
    assert d["characters"] == 17 + 1 + 15 + 8
    assert d["words"] == 3 + 4 + 2 and d["word_vocab"] == 9  # "The" and "the" differ: raw words
    assert d["char_vocab"] == len(set("The Time Machine\n\nby H. G. Wells\nthe end\n"))
    assert d["line_chars"]["max"] == 16 and d["line_words"]["p50"] == 3
    assert "lines 4 (3 non-empty)" in format_stats(d)


def test_lm_stats_report_undecodable_text_by_line(fake_registry):
    (fake_registry / "tinyshakespeare").mkdir()
    (fake_registry / "tinyshakespeare" / "input.txt").write_bytes(
        b"First Citizen:\nBefore \xe9 we\n"
    )
    with pytest.raises(DataError, match=r"input.txt:2: not valid UTF-8"):
        dataset_stats("tinyshakespeare")


def test_unknown_dataset_and_misplaced_options_are_errors():
    with pytest.raises(DataError, match="no statistics for dataset 'wmt14'.*multi30k"):
        dataset_stats("wmt14")
    with pytest.raises(DataError, match="single text"):
        dataset_stats("timemachine", batch_tokens=4096)


def test_real_multi30k_stats(shared_data):
    d = dataset_stats("multi30k", "en", "de", batch_tokens=4096)
    assert {k: v["pairs"] for k, v in d["splits"].items()} == {
        "train": 29_000,
        "val": 1_014,
        "test": 1_000,
    }
    # the dataset's README: 13.0 English and 12.4 German words per training sentence (its tokenisation)
    train = d["splits"]["train"]
    assert (
        12.0 < train["src"]["tokens"] / 29_000 < 14.0
        and 11.5 < train["tgt"]["tokens"] / 29_000 < 13.5
    )
    assert d["padding"]["bucketed"]["tgt"] <= 1.10 and d["padding"]["random"]["tgt"] >= 1.5


def test_real_lm_stats(shared_data):
    d = dataset_stats("tinyshakespeare")
    assert d["characters"] == 1_115_394 and d["char_vocab"] == 65
