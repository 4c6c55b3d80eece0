"""The searches' two-stage choices over the vocabulary (``seqlab.models.vocab_select``) equal
the plain ``topk`` / ``argmax`` over every token: in vocabularies that fill whole groups, that
leave a short last group, and that are smaller than one group; with removed (-inf) tokens, rows
of dead beams, and equal scores."""

import math

import pytest
import torch

from seqlab.models.vocab_select import GROUP, best_extensions, best_tokens, group_max


def _logits(rows: int, vocab: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=g) * 4
    logits[:, :2] = -math.inf  # <pad> and <bos>, as the searches remove them
    return logits


@pytest.mark.parametrize("vocab", [8000, 150, 7])
def test_group_max_is_the_maximum_of_each_group(vocab):
    logits = _logits(6, vocab)
    maxima = group_max(logits)
    assert maxima.shape == (6, -(-vocab // GROUP))
    for j in range(maxima.shape[1]):
        expected = logits[:, j * GROUP : (j + 1) * GROUP].amax(dim=1)
        torch.testing.assert_close(maxima[:, j], expected, rtol=0, atol=0)


@pytest.mark.parametrize("vocab", [8000, 150, 7])
def test_best_tokens_equal_argmax_and_take_the_first_of_equal_scores(vocab):
    logits = _logits(9, vocab, seed=1)
    logits[3, vocab // 2] = logits[3, vocab - 1] = 100.0  # a tie: argmax takes the first
    logits[4] = 1.0  # every token alike (but the removed ones)
    tokens, top, _ = best_tokens(logits)
    assert torch.equal(tokens.squeeze(1), logits.argmax(dim=1))
    torch.testing.assert_close(top.squeeze(1), logits.amax(dim=1), rtol=0, atol=0)


@pytest.mark.parametrize("vocab", [8000, 150, 7])
@pytest.mark.parametrize("per_block", [1, 5])
def test_best_extensions_equal_topk_over_each_sentences_rows_and_tokens(vocab, per_block):
    blocks, k = 4, 10
    logits = _logits(blocks * per_block, vocab, seed=2)
    offsets = torch.randn(blocks * per_block, 1) * 3
    if per_block > 1:
        offsets[1::per_block] = -math.inf  # a dead beam: none of its extensions may win
    scores, rows, tokens = best_extensions(logits, offsets, group_max(logits), per_block, k)
    full = (logits + offsets).view(blocks, per_block * vocab)  # every extension of a sentence
    expected = full.topk(min(k, full.shape[1]), dim=1).values
    assert scores.shape == rows.shape == tokens.shape == (blocks, k)
    torch.testing.assert_close(scores[:, : expected.shape[1]], expected, rtol=0, atol=0)
    assert bool((scores[:, expected.shape[1] :] == -math.inf).all())  # fewer pairs than k
    # each chosen pair is a real (row of its own sentence, token) with that score
    block = torch.arange(blocks)[:, None]
    assert bool(((rows // per_block) == block).all()) and bool((tokens < vocab).all())
    finite = scores > -math.inf
    picked = logits[rows, tokens] + offsets.squeeze(1)[rows]
    torch.testing.assert_close(picked[finite], scores[finite], rtol=0, atol=0)
    # no pair twice among the finite ones
    for b in range(blocks):
        chosen = zip(rows[b].tolist(), tokens[b].tolist(), finite[b].tolist(), strict=True)
        pairs = {(r, v) for r, v, f in chosen if f}
        assert len(pairs) == int(finite[b].sum())


@pytest.mark.parametrize("per_block", [1, 5])
def test_scores_from_bf16_with_many_equal_values_choose_the_same_values(per_block):
    """A model computing in bf16 (forced, or native on a CPU with AVX512_BF16/AMX) gives logits
    on bf16's coarse grid, where equal scores are common: the values chosen still equal topk's,
    and the token chosen greedily is still argmax's."""
    blocks, k, vocab = 3, 10, 8000
    logits = _logits(blocks * per_block, vocab, seed=3).bfloat16().float()  # the search's .float()
    assert logits[0, 2:].unique().numel() < vocab // 4  # many ties
    tokens, _, _ = best_tokens(logits)
    assert torch.equal(tokens.squeeze(1), logits.argmax(dim=1))
    offsets = (torch.randn(blocks * per_block, 1) * 3).bfloat16().float()
    scores, rows, chosen = best_extensions(logits, offsets, group_max(logits), per_block, k)
    full = (logits + offsets).view(blocks, per_block * vocab)
    torch.testing.assert_close(scores, full.topk(k, dim=1).values, rtol=0, atol=0)
    torch.testing.assert_close(
        logits[rows, chosen] + offsets.squeeze(1)[rows], scores, rtol=0, atol=0
    )
