"""Sinusoidal and learned positional encodings."""

import math

import pytest
import torch

from seqlab.nn.positional_encoding import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    relative_shift_matrix,
    sinusoidal_table,
)


@pytest.mark.parametrize("d", [4, 16, 7])
def test_table_matches_the_formula(d):
    table = sinusoidal_table(50, d)
    assert table.shape == (50, d)
    for i in (0, 1, 17, 49):
        for col in range(d):
            j = col // 2
            angle = i / 10000 ** (2 * j / d)
            expected = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert table[i, col].item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("d", [2, 8, 32])
@pytest.mark.parametrize("k", [0, 1, 5, 37])
def test_offset_is_a_fixed_linear_map(d, k):
    """P[i + k] = P[i] @ M_k for every i, with M_k built from k alone (a rotation per frequency)."""
    table = sinusoidal_table(100, d)
    m = relative_shift_matrix(k, d)
    assert m.shape == (d, d)
    torch.testing.assert_close(table[: 100 - k] @ m, table[k:], atol=2e-5, rtol=0)
    torch.testing.assert_close(m @ m.T, torch.eye(d), atol=1e-6, rtol=0)  # a rotation
    off_block = m.clone()
    for j in range(d // 2):
        off_block[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = 0
    assert (off_block == 0).all()  # frequencies do not mix


def test_shift_maps_compose():
    torch.testing.assert_close(
        relative_shift_matrix(3, 8) @ relative_shift_matrix(4, 8),
        relative_shift_matrix(7, 8),
        atol=1e-6,
        rtol=0,
    )


@pytest.mark.parametrize("cls", [SinusoidalPositionalEncoding, LearnedPositionalEncoding])
def test_start_offset_matches_the_full_sequence(cls):
    pe = cls(d_model=8, max_len=20).eval()
    x = torch.randn(2, 10, 8)
    full = pe(x)
    pieces = torch.cat([pe(x[:, :4]), pe(x[:, 4:5], start=4), pe(x[:, 5:], start=5)], dim=1)
    torch.testing.assert_close(pieces, full)
    assert not torch.allclose(pe(x[:, :1], start=3), full[:, :1])  # positions matter


def test_sinusoidal_module_adds_the_table():
    pe = SinusoidalPositionalEncoding(d_model=6, max_len=12).eval()
    x = torch.randn(3, 5, 6)
    torch.testing.assert_close(pe(x, start=2), x + sinusoidal_table(12, 6)[2:7])
    assert list(pe.state_dict()) == []  # fixed table, not saved


def test_learned_encoding_is_trained():
    pe = LearnedPositionalEncoding(d_model=4, max_len=6)
    pe(torch.zeros(1, 3, 4), start=2).sum().backward()
    grad_rows = (pe.weight.grad != 0).any(-1)
    assert grad_rows.tolist() == [False, False, True, True, True, False]


def test_learned_positions_past_max_len_are_rejected():
    pe = LearnedPositionalEncoding(d_model=4, max_len=5)
    with pytest.raises(ValueError, match="max_len=5"):
        pe(torch.zeros(1, 2, 4), start=4)


def test_sinusoidal_positions_past_max_len_are_computed():
    """The formula has no last row: a model trained on short inputs runs on longer ones."""
    pe = SinusoidalPositionalEncoding(d_model=6, max_len=5).eval()
    x = torch.randn(2, 9, 6)
    torch.testing.assert_close(pe(x, start=3), x + sinusoidal_table(12, 6)[3:12])
    assert pe.table.shape == (5, 6)  # nothing cached on the module


def test_dropout_applies_in_training_only():
    pe = SinusoidalPositionalEncoding(d_model=16, max_len=8, dropout=0.5)
    x = torch.randn(4, 8, 16)
    assert (pe(x) == 0).any()
    pe.eval()
    torch.testing.assert_close(pe(x), x + sinusoidal_table(8, 16))
