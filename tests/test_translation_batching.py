"""Translation batches: vocabularies, <bos>/<eos> layout, truncation, padding, token budgets."""

from __future__ import annotations

import os
import random
import warnings

import pytest
import torch

from seqlab.config import SubwordConfig
from seqlab.data.parallel import DataWarning, load_multi30k
from seqlab.data.translation_batching import (
    BOS,
    EOS,
    PAD,
    Batch,
    EncodeSummary,
    TokenBatchSampler,
    TranslationBatches,
    TranslationData,
    build_vocabs,
    cut_batches,
    encode_pairs,
    pad_sequences,
    padding_ratio,
)

TRAIN = [
    ("A dog runs.", "Ein Hund läuft."),
    ("Two men are talking, loudly!", "Zwei Männer reden laut!"),
    ("A dog sleeps.", "Ein Hund schläft."),
]


def random_lengths(n: int, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    src = [rng.randint(2, 40) for _ in range(n)]
    tgt = [max(2, s + rng.randint(-5, 5)) for s in src]
    return src, tgt


# ---------------------------------------------------------------------------- vocabularies
def test_word_vocabs_come_from_training_pairs_only():
    v = build_vocabs(TRAIN, "word", min_freq=2)
    assert v.src_vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert "dog" in v.src_vocab and "." in v.src_vocab and "hund" in v.tgt_vocab  # nmt: lowercased
    assert "runs" not in v.src_vocab  # seen once < min_freq
    assert "dog" not in v.tgt_vocab and "hund" not in v.src_vocab  # one vocabulary per side
    assert len(build_vocabs(TRAIN, "word", max_vocab=6).src_vocab) == 6


def test_subword_vocabs_joint_share_one_model_separate_do_not():
    joint = build_vocabs(TRAIN * 5, "subword", subword=SubwordConfig(vocab_size=40, joint=True))
    assert joint.src_tokenizer is joint.tgt_tokenizer and joint.src_vocab is joint.tgt_vocab
    for sentence in TRAIN[0]:  # both languages' pieces are in the one vocabulary
        assert all(p in joint.src_vocab for p in joint.src_tokenizer.tokenize(sentence))
    apart = build_vocabs(TRAIN * 5, "subword", subword=SubwordConfig(vocab_size=40, joint=False))
    assert apart.src_tokenizer is not apart.tgt_tokenizer
    assert "▁Hund" in apart.tgt_vocab and "▁Hund" not in apart.src_vocab
    assert "▁dog" in apart.src_vocab and "▁dog" not in apart.tgt_vocab


# -------------------------------------------------------------------------------- encoding
def test_encoder_gets_eos_decoder_gets_bos_then_eos():
    v = build_vocabs(TRAIN, "word")
    data = encode_pairs(TRAIN[:1], v, max_len=50)
    x = v.src_vocab[["a", "dog", "runs", "."]]
    y = v.tgt_vocab[["ein", "hund", "läuft", "."]]
    assert data.src == [x + [EOS]]
    assert data.tgt == [[BOS] + y + [EOS]]
    assert data.src_lens == [5] and data.tgt_lens == [5]
    batch = data.collate([0])
    assert batch.tgt_in.tolist() == [[BOS] + y]  # decoder input  = <bos> y1..yn
    assert batch.tgt_out.tolist() == [y + [EOS]]  # decoder output = y1..yn <eos>


def test_truncation_is_counted_and_warned_once():
    v = build_vocabs(TRAIN, "word")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = encode_pairs(TRAIN, v, max_len=5)
    messages = [str(w.message) for w in caught if issubclass(w.category, DataWarning)]
    # sources have 4, 7 and 4 tokens; targets 4, 5 and 4: only lengths > max_len - 1 = 4 are cut
    assert data.summary.src_truncated == 1 and data.summary.tgt_truncated == 1
    assert messages == [data.summary.message()]
    assert "truncated 1 of 3 source sentences" in messages[0] and "max_len=5" in messages[0]
    assert max(data.src_lens) == 5 and max(data.tgt_lens) == 5  # no row longer than max_len
    assert data.src[1][-1] == EOS and data.tgt[1][-1] == EOS  # cut rows still end in <eos>


def test_no_warning_without_truncation():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = encode_pairs(TRAIN, build_vocabs(TRAIN, "word"), max_len=100)
    assert data.summary.src_truncated == data.summary.tgt_truncated == 0


# --------------------------------------------------------------------------------- padding
def test_pad_sequences_and_collate_pad_with_one():
    padded, lengths = pad_sequences([[5, 6, 7], [8]])
    assert padded.tolist() == [[5, 6, 7], [8, PAD, PAD]] and lengths.tolist() == [3, 1]
    data = encode_pairs(TRAIN, build_vocabs(TRAIN, "word"), max_len=100)
    b = data.collate([1, 0, 2])
    assert b.src.shape == (3, 8) and b.tgt_in.shape == b.tgt_out.shape == (3, 6)
    assert b.indices.tolist() == [1, 0, 2] and len(b) == 3
    for row in range(3):
        s, t = int(b.src_lengths[row]), int(b.tgt_lengths[row])
        assert (b.src[row, s:] == PAD).all() and (b.src[row, :s] != PAD).all()
        assert (b.tgt_out[row, t:] == PAD).all() and b.tgt_out[row, t - 1] == EOS
        assert b.tgt_in[row, 0] == BOS and (b.tgt_in[row, 1:t] == b.tgt_out[row, : t - 1]).all()
    assert b.num_tgt_tokens == int((b.tgt_out != PAD).sum()) == 5 + 6 + 5


# --------------------------------------------------------------------------------- batches
@pytest.mark.parametrize("bucket", [True, False])
def test_every_example_once_per_epoch_and_budget_respected(bucket):
    src, tgt = random_lengths(500)
    sampler = TokenBatchSampler(src, tgt, batch_tokens=200, bucket=bucket, seed=1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(500))
        for b in batches:
            assert len(b) * max(max(src[i], tgt[i]) for i in b) <= 200


@pytest.mark.parametrize("bucket", [True, False])
def test_batches_are_deterministic_per_seed_and_epoch(bucket):
    src, tgt = random_lengths(300)

    def epoch_batches(seed, epoch):
        sampler = TokenBatchSampler(src, tgt, 150, bucket=bucket, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert epoch_batches(0, 2) == epoch_batches(0, 2)
    assert epoch_batches(0, 2) != epoch_batches(0, 3)
    assert epoch_batches(0, 2) != epoch_batches(1, 2)


def test_bucketed_epochs_shuffle_the_order_of_batches():
    src, tgt = random_lengths(300)
    sampler = TokenBatchSampler(src, tgt, 150, bucket=True)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert [max(src[i] for i in b) for b in first] != [max(src[i] for i in b) for b in second]


def test_unshuffled_batches_are_fixed_and_sorted():
    src, tgt = random_lengths(300)
    sampler = TokenBatchSampler(src, tgt, 150, bucket=True, shuffle=False)
    first = list(sampler)
    sampler.set_epoch(5)
    assert list(sampler) == first
    longest = [max(max(src[i], tgt[i]) for i in b) for b in first]
    assert longest == sorted(longest)


def test_an_example_over_the_budget_gets_a_batch_of_its_own():
    assert cut_batches([0, 1, 2], [3, 50, 3], [3, 2, 3], batch_tokens=10) == [[0], [1], [2]]
    assert cut_batches([0, 1, 2, 3], [2, 2, 2, 2], [2, 2, 2, 5], batch_tokens=6) == [[0, 1, 2], [3]]


def test_padding_ratio_by_hand():
    b = Batch(
        src=torch.tensor([[4, 5, EOS], [4, EOS, PAD]]),  # (2, 3)
        src_lengths=torch.tensor([3, 2]),
        tgt_in=torch.tensor([[BOS, 6, 7, 8], [BOS, PAD, PAD, PAD]]),  # (2, 4)
        tgt_out=torch.tensor([[6, 7, 8, EOS], [EOS, PAD, PAD, PAD]]),
        tgt_lengths=torch.tensor([4, 1]),
        indices=torch.tensor([0, 1]),
    )
    r = padding_ratio([b, b])
    assert r["tgt"] == pytest.approx(16 / 10) and r["src"] == pytest.approx(12 / 10)
    assert r["batches"] == 2 and r["examples"] == 4


def test_bucketing_pads_much_less_than_random_batches():
    src, tgt = random_lengths(2000)
    data_src = [[7] * (n - 1) + [EOS] for n in src]
    data_tgt = [[BOS] + [7] * (n - 1) + [EOS] for n in tgt]
    data = TranslationData(data_src, data_tgt, EncodeSummary(2000, 0, 0, 100))
    bucketed = padding_ratio(TranslationBatches(data, 400, bucket=True))
    shuffled = padding_ratio(TranslationBatches(data, 400, bucket=False))
    assert bucketed["tgt"] < 1.15 and shuffled["tgt"] > 1.5
    assert bucketed["examples"] == shuffled["examples"] == 2000


def test_real_multi30k_bucketed_padding_is_near_one():
    """Multi30k en–de train, word tokens, 4096-token batches: bucketed <= 1.10, random >= 1.5."""
    if not os.environ.get("SEQLAB_DATA_DIR"):
        pytest.skip("SEQLAB_DATA_DIR is not set: no local copy of Multi30k")
    pairs = load_multi30k("train", "en", "de").pairs
    data = encode_pairs(pairs, build_vocabs(pairs, "word"), max_len=100)
    bucketed = TranslationBatches(data, 4096, bucket=True, seed=0)
    shuffled = TranslationBatches(data, 4096, bucket=False, seed=0)
    for epoch in (0, 1):
        bucketed.set_epoch(epoch)
        shuffled.set_epoch(epoch)
        b, r = padding_ratio(bucketed), padding_ratio(shuffled)
        assert b["tgt"] <= 1.10 and b["src"] <= 1.10, b
        assert r["tgt"] >= 1.5, r
        assert b["examples"] == r["examples"] == 29_000
