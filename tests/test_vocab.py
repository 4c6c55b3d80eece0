import json
import random

import pytest

from seqlab.data.vocab import RESERVED, Vocab
from seqlab.errors import DataError


def test_reserved_ids_fixed_and_frequency_order():
    v = Vocab([["b", "a", "a"], ["c", "a", "b"]])
    assert v.idx_to_token[:4] == list(RESERVED)
    assert (v.unk, v.pad, v.bos, v.eos) == (0, 1, 2, 3)
    assert v.idx_to_token[4:] == ["a", "b", "c"]
    assert v.token_freqs() == [("a", 3), ("b", 2), ("c", 1)]


def test_ties_keep_first_appearance():
    v = Vocab(list("zyxzyx"))
    assert v.idx_to_token[4:] == ["z", "y", "x"]


def test_min_freq_and_max_size():
    tokens = list("aaaabbbccd")
    assert Vocab(tokens, min_freq=2).idx_to_token[4:] == ["a", "b", "c"]
    assert Vocab(tokens, max_size=6).idx_to_token[4:] == ["a", "b"]
    assert len(Vocab(tokens, max_size=6)) == 6
    with pytest.raises(ValueError, match="reserved"):
        Vocab(tokens, max_size=3)


def test_lookup_lists_nested_and_unknown():
    v = Vocab(list("abc"))
    assert v["a"] == 4 and v["zzz"] == v.unk
    assert v[["a", ["b", "q"]]] == [4, [5, 0]]
    assert v.to_tokens([[4, 5], [6]]) == [["a", "b"], ["c"]]
    assert v.to_tokens(v[list("cab")]) == list("cab")


def test_reserved_tokens_in_text_are_not_duplicated():
    v = Vocab(["<pad>", "a", "<unk>"])
    assert v.idx_to_token == list(RESERVED) + ["a"]


def test_save_load_round_trip_exact(tmp_path):
    rng = random.Random(0)
    tokens = [rng.choice(["α", "b", "c d", "\n", "é", "<x>"]) for _ in range(200)]
    v = Vocab(tokens, min_freq=2)
    v.save(tmp_path / "vocab.json")
    w = Vocab.load(tmp_path / "vocab.json")
    assert w == v and w.idx_to_token == v.idx_to_token and w.counts == v.counts
    assert w[tokens] == v[tokens]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"format": "other"}), "not a seqlab vocabulary"),
        (
            json.dumps({"format": "seqlab.vocab/1", "tokens": ["a"], "counts": [1, 2]}),
            "equal length",
        ),
        (
            json.dumps(
                {"format": "seqlab.vocab/1", "tokens": ["a", "b", "c", "d"], "counts": [0] * 4}
            ),
            "first tokens",
        ),
    ],
)
def test_bad_vocab_files(tmp_path, content, message):
    path = tmp_path / "vocab.json"
    path.write_text(content)
    with pytest.raises(DataError, match=message) as exc:
        Vocab.load(path)
    assert str(path) in str(exc.value)
