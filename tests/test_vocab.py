import json
import random
import warnings

import pytest
import torch

from seqlab.config import config_from_dict
from seqlab.data.vocab import (
    RESERVED,
    WARNED_INPUTS,
    UnknownTokenWarning,
    Vocab,
    quiet_unknown,
    unknown_messages,
    unknown_tokens,
    warn_unknown,
)
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
    # flat lists take a fast path; mixed ones, tensors and tuples map alike
    assert v[("a", "q")] == [4, 0] and v[["c", ("a",)]] == [6, [4]]
    assert v.to_tokens([6, [4, 5], torch.tensor(5)]) == ["c", ["a", "b"], "b"]
    assert v.to_tokens(torch.tensor([[4], [6]])) == [["a"], ["c"]]


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


def test_unknown_tokens_are_named_a_few_then_counted_and_so_are_the_inputs():
    v = Vocab([["a", "b"]])
    assert unknown_tokens(v, ["a", "x", "b", "<unk>", "y", "x"]) == ["x", "y", "x"]
    many = [f"t{i}" for i in range(8)] + ["t0"]
    assert unknown_messages([("input line 3", many), ("input line 4", [])]) == [
        "input line 3: 9 tokens not in the model's vocabulary, read as <unk>: "
        "'t0', 't1', 't2', 't3', 't4' and 3 more"
    ]
    assert unknown_messages([("the prefix", ["\u2603"])]) == [
        "the prefix: 1 token not in the model's vocabulary, read as <unk>: '\u2603'"
    ]
    found = [(f"sentence {i}", ["x", "x"]) for i in range(WARNED_INPUTS + 15)]
    messages = unknown_messages(found)
    assert len(messages) == WARNED_INPUTS + 1  # bounded, whatever the number of inputs
    assert messages[-2].startswith(f"sentence {WARNED_INPUTS - 1}: 2 tokens")
    assert messages[-1] == (
        "and 15 more inputs with tokens not in the model's vocabulary (30 tokens), read as <unk>"
    )


def test_unknown_tokens_warn_one_warning_per_input_except_inside_quiet_unknown():
    found = [("sentence 0", ["x"]), ("sentence 1", []), ("sentence 2", ["y"])]
    with pytest.warns(UnknownTokenWarning) as caught:
        warn_unknown(found)
    assert [str(w.message)[:10] for w in caught] == ["sentence 0", "sentence 2"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with quiet_unknown():
            warn_unknown(found)
    with pytest.warns(UnknownTokenWarning):  # quiet for that block only
        warn_unknown(found)


@pytest.mark.parametrize("override", [{"min_freq": 10**9}, {"max_vocab": 4}])
def test_training_refuses_a_vocabulary_of_reserved_tokens_only(tmp_path, override):
    from seqlab.experiment import train

    (tmp_path / "c.txt").write_text("the time machine " * 40)
    cfg = config_from_dict(
        {
            "data": {"dataset": "text", "path": str(tmp_path / "c.txt"), "batch_size": 2,
                     "num_steps": 5, **override},
            "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 4, "hidden_size": 4},
            "train": {"max_steps": 1, "threads": 1},
        }
    )  # fmt: skip
    with pytest.raises(DataError, match="only the reserved tokens"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()
