import pytest
import torch

from seqlab.data.lm_batching import LMBatches, random_sampling, sequential_partitioning
from seqlab.data.lm_corpus import build_lm_corpus, read_text
from seqlab.errors import DataError

CASES = [(1, 2, 50), (2, 5, 103), (3, 4, 500), (4, 7, 1000), (8, 3, 777)]


def corpus_of(n):
    # value == position in the corpus, so every token of a batch says where it came from
    return torch.arange(n)


@pytest.mark.parametrize("make", [random_sampling, sequential_partitioning])
@pytest.mark.parametrize("seed", [0, 1])
def test_random_corpus_batches_are_the_positions_of_the_index_corpus(make, seed):
    # the properties below are checked on position corpora; this ties them to arbitrary tokens
    g = torch.Generator().manual_seed(100 + seed)
    tokens = torch.randint(0, 30, (997,), generator=g)
    got = list(make(tokens, 3, 6, torch.Generator().manual_seed(seed)))
    pos = list(make(corpus_of(997), 3, 6, torch.Generator().manual_seed(seed)))
    assert len(got) == len(pos) > 0
    for (x, y), (px, py) in zip(got, pos, strict=True):
        assert torch.equal(x, tokens[px]) and torch.equal(y, tokens[py])


@pytest.mark.parametrize("batch_size, num_steps, n", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_sampling_properties(batch_size, num_steps, n, seed):
    corpus = corpus_of(n)
    batches = list(
        random_sampling(corpus, batch_size, num_steps, torch.Generator().manual_seed(seed))
    )
    starts = []
    for x, y in batches:
        assert x.shape == y.shape == (batch_size, num_steps)
        assert torch.equal(y, x + 1)  # Y is X shifted by one token
        assert torch.equal(x[:, 1:], x[:, :-1] + 1)  # each row is a contiguous subsequence
        starts += x[:, 0].tolist()
    offset = min(starts)
    assert 0 <= offset < num_steps
    # subsequences do not overlap and tile the corpus from the offset, in shuffled order
    assert all((s - offset) % num_steps == 0 for s in starts)
    assert len(set(starts)) == len(starts)
    num_subseqs = (n - offset - 1) // num_steps
    assert len(batches) == num_subseqs // batch_size


def test_random_sampling_is_shuffled_and_seeded():
    corpus = corpus_of(2000)
    first = [x for x, _ in random_sampling(corpus, 4, 5, torch.Generator().manual_seed(0))]
    again = [x for x, _ in random_sampling(corpus, 4, 5, torch.Generator().manual_seed(0))]
    other = [x for x, _ in random_sampling(corpus, 4, 5, torch.Generator().manual_seed(1))]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=False))
    starts = torch.cat([x[:, 0] for x in first])
    assert not torch.equal(starts, starts.sort().values)  # not in corpus order


@pytest.mark.parametrize("batch_size, num_steps, n", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sequential_partitioning_rows_continue(batch_size, num_steps, n, seed):
    corpus = corpus_of(n)
    batches = list(
        sequential_partitioning(corpus, batch_size, num_steps, torch.Generator().manual_seed(seed))
    )
    assert batches
    offset = int(batches[0][0][0, 0])
    assert 0 <= offset < num_steps
    for k, (x, y) in enumerate(batches):
        assert x.shape == y.shape == (batch_size, num_steps)
        assert torch.equal(y, x + 1)
        if k + 1 < len(batches):  # row i of batch k+1 starts where row i of batch k ended
            assert torch.equal(batches[k + 1][0][:, 0], x[:, -1] + 1)
    # each row walks a contiguous stretch of the corpus: concatenating batches gives it back
    rows = torch.cat([x for x, _ in batches], dim=1)
    assert torch.equal(rows[:, 1:], rows[:, :-1] + 1)
    row_len = (n - offset - 1) // batch_size
    assert torch.equal(rows[:, 0], offset + torch.arange(batch_size) * row_len)


@pytest.mark.parametrize("sampling", ["random", "sequential"])
def test_lm_batches_epochs_are_reproducible_and_differ(sampling):
    corpus = corpus_of(3000)
    data = LMBatches(corpus, 4, 10, sampling, seed=7)
    epoch0 = [x for x, _ in data]
    assert len(epoch0) == len(data)
    assert all(torch.equal(a, b) for a, b in zip(epoch0, [x for x, _ in data], strict=True))
    data.set_epoch(1)
    epoch1 = [x for x, _ in data]
    assert len(epoch1) == len(data)
    assert not all(torch.equal(a, b) for a, b in zip(epoch0, epoch1, strict=True))
    assert data.carries_state == (sampling == "sequential")


def test_lm_batches_rejects_tiny_corpus_and_bad_sampling():
    with pytest.raises(ValueError, match="too short"):
        LMBatches(corpus_of(20), 4, 10)
    with pytest.raises(ValueError, match="sampling"):
        LMBatches(corpus_of(200), 2, 3, "shuffled")


def test_lm_corpus_split_and_vocab_from_train_only():
    text = "abcabcabcabc" * 10 + "xyz"
    corpus = build_lm_corpus(text, tokenizer="char", val_fraction=0.1)
    n_val = int(len(text) * 0.1)
    assert len(corpus.train) == len(text) - n_val and len(corpus.val) == n_val
    assert "x" not in corpus.vocab  # seen only in the validation tail
    assert corpus.val[-1].item() == corpus.vocab.unk
    assert corpus.vocab.to_tokens(corpus.train[:3]) == ["a", "b", "c"]


def test_lm_corpus_word_letters():
    corpus = build_lm_corpus(
        "The Time Machine, by H. G. Wells " * 20, tokenizer="word", normalize="letters"
    )
    assert set(corpus.vocab.idx_to_token[4:]) == {"the", "time", "machine", "by", "h", "g", "wells"}


def test_read_text_names_line_of_bad_utf8(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nalso fine\nbad \xff here\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: not valid UTF-8"):
        read_text(path)
