"""The relative position schemes' defining properties (seqlab.nn.relative_positions): RoPE's
scores depend on the distance only, ALiBi's slopes and bias, T5's buckets at their edges."""

from __future__ import annotations

import torch

from seqlab.nn.relative_positions import alibi_bias, alibi_slopes, rotate, t5_buckets


def test_rope_scores_are_unchanged_when_both_positions_shift():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 16, 32, generator=g).unbind(0)  # (h, T, d) each
    scores = rotate(q) @ rotate(k).transpose(-1, -2)  # positions 0..15
    for shift in (1, 7, 1000):
        shifted = rotate(q, offset=shift) @ rotate(k, offset=shift).transpose(-1, -2)
        torch.testing.assert_close(shifted, scores, atol=1e-5, rtol=0)
    # but not when only one moves: the scores see the distance
    moved = rotate(q, offset=3) @ rotate(k).transpose(-1, -2)
    assert (moved - scores).abs().max() > 1e-2


def test_rope_is_a_rotation_and_position_zero_is_the_identity():
    x = torch.randn(4, 8, 16, dtype=torch.float64)
    rotated = rotate(x, offset=5)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rotate(x[:, :1]), x[:, :1])


def test_rope_rows_at_an_offset_equal_the_same_rows_of_the_full_sequence():
    """Incremental decoding: the rows of positions 5..7 rotated alone at offset 5 are those
    rows of the whole sequence."""
    x = torch.randn(2, 8, 12)
    torch.testing.assert_close(rotate(x[:, 5:], offset=5), rotate(x)[:, 5:])


def test_alibi_slopes_for_8_heads_are_the_powers_of_one_half():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]))
    # not a power of two: the 4 of 4 heads, then every other slope of 8 heads
    six = alibi_slopes(6)
    torch.testing.assert_close(six[:4], alibi_slopes(4))
    torch.testing.assert_close(six[4:], alibi_slopes(8)[0::2][:2])


def test_alibi_bias_is_minus_slope_times_distance_and_its_rows_follow_the_offset():
    bias = alibi_bias(2, 4, 4)  # (h, T, T)
    assert bias[0, 3, 0] == -0.0625 * 3 and bias[1, 2, 1] == -(2.0**-8)
    assert (bias.diagonal(dim1=1, dim2=2) == 0).all()
    torch.testing.assert_close(alibi_bias(2, 1, 4, offset=3), bias[:, 3:4])


def test_t5_buckets_at_their_edges():
    """32 buckets, 128 positions: each direction has 16; the first 8 count exact distances,
    the next 8 grow logarithmically to 128; farther keys share the last one."""
    rel = torch.arange(-300, 301)
    at = dict(zip(rel.tolist(), t5_buckets(rel, 32, 128).tolist(), strict=True))
    assert [at[-d] for d in range(8)] == list(range(8))  # keys before the query: exact
    assert [at[d] for d in range(1, 8)] == list(range(17, 24))  # after it: from 16 on
    assert at[0] == 0 and at[-8] == 8 and at[8] == 24
    assert at[-90] == 14 and at[-91] == at[-128] == at[-300] == 15  # the last of each side
    assert at[90] == 30 and at[91] == at[300] == 31
    before = [at[-d] for d in range(301)]
    assert before == sorted(before)  # farther never falls in a nearer bucket
    causal = dict(
        zip(rel.tolist(), t5_buckets(rel, 32, 128, bidirectional=False).tolist(), strict=True)
    )
    assert all(causal[d] == 0 for d in range(0, 301))  # future keys: bucket 0 (masked anyway)
    assert [causal[-d] for d in range(16)] == list(range(16))  # 16 exact distances
    assert causal[-16] == 16 and causal[-112] == 30 and causal[-113] == causal[-300] == 31
