"""Positional encodings added to token embeddings: fixed sinusoidal and learned.

Notation (shapes in comments): B batch, T sequence length, d model width, L max_len.

Both modules take ``start``, the absolute position of the first input row, so incremental
decoding (one new token with ``start = tokens so far``) adds the same encoding as a full pass.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.nn.dropout import Dropout


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The fixed encoding P (Vaswani et al. 2017, §3.5).

    P[i, 2j] = sin(i / 10000^{2j/d}),  P[i, 2j+1] = cos(i / 10000^{2j/d}).
    Computed in float64, returned as float32. For odd d the last (cos) column is dropped.

    Shape:
        ``(L, d)``.
    """
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (L, 1)
    freqs = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (⌈d/2⌉,)
    angles = positions * freqs  # (L, ⌈d/2⌉)
    table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # (L, 2⌈d/2⌉)
    return table[:, :d_model].float()  # (L, d)


def relative_shift_matrix(offset: int, d_model: int) -> Tensor:
    """The fixed linear map M_k with P[i + k] = P[i] @ M_k for every position i (d2l.ai §11.6.3.2).

    Per frequency ω_j = 1/10000^{2j/d} the pair (sin iω_j, cos iω_j) is rotated by kω_j:
    [sin, cos] @ [[cos kω, -sin kω], [sin kω, cos kω]] = [sin (i+k)ω, cos (i+k)ω].
    M_k is block diagonal with these 2×2 blocks and does not depend on i.

    Shape:
        ``(d, d)`` (d must be even).
    """
    if d_model % 2:
        raise ValueError(f"the rotation property needs an even d_model, got {d_model}")
    freqs = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    cos, sin = (offset * freqs).cos(), (offset * freqs).sin()  # (d/2,)
    blocks = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)
    return torch.block_diag(*blocks).float()  # (d, d)


def _check_range(start: int, length: int, max_len: int) -> None:
    if start < 0 or start + length > max_len:
        raise ValueError(
            f"positions {start}..{start + length - 1} are outside the table of max_len={max_len}; "
            "raise max_len or crop the input"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """X + P[start : start + T], then dropout (Vaswani et al. 2017, §3.5 and §5.4).

    P is a formula, not a table of trained rows: positions past ``max_len`` (a precomputed
    prefix) are computed when asked for, so a model can be run on longer inputs than it was
    trained on (the extrapolation the paper hoped for; ``seqlab demo positions`` measures it).
    """

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0):
        super().__init__()
        self.max_len = max_len
        self.dropout = Dropout(dropout)
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """Add the encodings of positions ``start .. start + T - 1``.

        Shape:
            x ``(B, T, d)`` -> ``(B, T, d)``.
        """
        end = start + x.shape[1]
        if start < 0:
            raise ValueError(f"positions start at 0, got start={start}")
        table = self.table if end <= self.max_len else sinusoidal_table(end, x.shape[-1])
        pos = table[start:end].to(device=x.device, dtype=x.dtype)  # (T, d)
        return self.dropout(x + pos)  # (B, T, d)


class LearnedPositionalEncoding(nn.Module):
    """X + E_pos[start : start + T], then dropout; E_pos a trained ``(L, d)`` table (GPT style).

    E_pos starts as N(0, 1): the scale of the √d-scaled token embeddings it is added to (see
    :mod:`seqlab.nn.transformer`). A much smaller start (GPT-2's 0.02) leaves positions nearly
    invisible at first and trained measurably slower here.
    """

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0):
        super().__init__()
        self.max_len = max_len
        self.dropout = Dropout(dropout)
        self.weight = nn.Parameter(torch.randn(max_len, d_model))

    def forward(self, x: Tensor, start: int = 0) -> Tensor:
        """Add the learned embeddings of positions ``start .. start + T - 1``.

        Shape:
            x ``(B, T, d)`` -> ``(B, T, d)``.
        """
        _check_range(start, x.shape[1], self.max_len)
        return self.dropout(x + self.weight[start : start + x.shape[1]])  # (B, T, d)
