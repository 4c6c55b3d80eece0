import pytest

from seqlab.data.tokenizers import (
    CharTokenizer,
    SubwordTokenizer,
    WordTokenizer,
    load_tokenizer,
    normalize_text,
    save_tokenizer,
)
from seqlab.data.vocab import Vocab, unknown_tokens
from seqlab.errors import DataError


def test_nmt_normalisation_matches_d2l():
    # d2l §9.5.1: nbsp → space, lowercase, a space before , . ! ? (not after a space already)
    assert normalize_text("Go.\u202fNow!", "nmt") == "go . now !"
    assert normalize_text("Va\u00a0!", "nmt") == "va !"
    assert normalize_text("Hi , there?", "nmt") == "hi , there ?"


def test_letters_normalisation_matches_d2l_timemachine():
    assert (
        normalize_text("The Time-Machine, by H. G. Wells\n", "letters")
        == "the time machine by h g wells"
    )


def test_word_round_trip_on_normalised_text():
    tok = WordTokenizer("nmt")
    text = "je suis calme, vraiment. et toi ?"
    tokens = tok.tokenize(text)
    assert tokens == ["je", "suis", "calme", ",", "vraiment", ".", "et", "toi", "?"]
    assert tok.detokenize(tokens) == "je suis calme, vraiment. et toi?"


def test_char_round_trip():
    tok = CharTokenizer()
    text = "Ünïcode\nlines  and\ttabs"
    assert tok.detokenize(tok.tokenize(text)) == text


@pytest.fixture(scope="module")
def sentences():
    words = "the a cat dog sat ran on under mat tree quickly slowly big small red".split()
    import random

    rng = random.Random(0)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(400)]


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_subword_round_trip_and_deterministic(sentences, model_type, tmp_path):
    tok = SubwordTokenizer.train(sentences, vocab_size=60, model_type=model_type)
    again = SubwordTokenizer.train(sentences, vocab_size=60, model_type=model_type)
    assert tok.model_proto == again.model_proto
    for s in sentences[:50] + ["an unseen sentence, with punctuation!"]:
        assert tok.detokenize(tok.tokenize(s)) == s
    save_tokenizer(tok, tmp_path, "src")
    loaded = load_tokenizer(tmp_path, "src")
    assert loaded.tokenize(sentences[0]) == tok.tokenize(sentences[0])


def test_subword_pieces_that_read_as_unk_are_the_unknown_tokens(sentences):
    """SentencePiece keeps characters it never saw as pieces of their own ('z', '!'), and some
    of its pieces were never counted into seqlab's vocabulary: each reads as <unk>, and
    :func:`unknown_tokens` names exactly those."""
    tok = SubwordTokenizer.train(sentences, vocab_size=60)
    vocab = Vocab([tok.tokenize(s) for s in sentences])
    pieces = tok.tokenize("the zebra sat, quickly!")
    unknown = unknown_tokens(vocab, pieces)
    assert {"z", ",", "!"} <= set(unknown)
    assert unknown == [p for p in pieces if vocab[p] == vocab.unk]
    assert unknown_tokens(vocab, tok.tokenize(sentences[0])) == []


@pytest.mark.parametrize("tok", [CharTokenizer("letters"), WordTokenizer("nmt")])
def test_save_load(tok, tmp_path):
    save_tokenizer(tok, tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert type(loaded) is type(tok) and loaded.normalize == tok.normalize


def test_bad_tokenizer_files(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"format": "seqlab.tokenizer/1", "kind": "subword"}')
    with pytest.raises(DataError, match="subword model missing"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.spm.model").write_bytes(b"garbage")
    with pytest.raises(DataError, match="not a SentencePiece model"):
        load_tokenizer(tmp_path)
    with pytest.raises(DataError, match="empty corpus"):
        SubwordTokenizer.train(["", "  "], vocab_size=10)
