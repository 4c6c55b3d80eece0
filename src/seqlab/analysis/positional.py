"""The sinusoidal positional encoding's properties (Vaswani et al. 2017, §3.5; d2l.ai §11.6.3).

P[t, 2i] = sin(t ω_i), P[t, 2i+1] = cos(t ω_i), ω_i = 10000^{-2i/d}. Claims checked here:

- **Binary counting** (d2l.ai §11.6.3.1): like the bits of t (the lowest bit flips every step,
  higher bits ever more slowly), the columns of P oscillate with frequencies falling from the
  first column to the last, continuously instead of in 0/1 steps.
- **Relative positions**: p_{t+k} = M_k p_t with M_k block-diagonal rotations that depend on k
  only (:func:`seqlab.nn.positional_encoding.relative_shift_matrix`).
- **Cosine similarity depends only on the offset**: each frequency pair contributes
  sin(tω)sin((t+k)ω) + cos(tω)cos((t+k)ω) = cos(kω), so p_t · p_{t+k} = Σ_i cos(k ω_i) and, as
  ‖p_t‖² = d/2, cos(p_t, p_{t+k}) = (2/d) Σ_i cos(k ω_i), whatever t.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqlab.analysis.summary import claim, num
from seqlab.nn.positional_encoding import relative_shift_matrix, sinusoidal_table


def cosine_similarities(table: Tensor) -> Tensor:
    """cos(p_s, p_t) for every pair of positions. Shape: ``(L, d) -> (L, L)``."""
    unit = table.double() / table.double().norm(dim=1, keepdim=True)  # (L, d)
    return unit @ unit.T  # (L, L)


def predicted_cosine(offsets: Tensor, d_model: int) -> Tensor:
    """(2/d) Σ_i cos(k ω_i) for each offset k (even d). Shape: ``(K,) -> (K,)``."""
    freqs = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,)
    return torch.cos(offsets.double()[:, None] * freqs).mean(dim=1)  # (K,)


def offset_spread(similarity: Tensor) -> Tensor:
    """For each offset k ≥ 0, max − min of cos(p_t, p_{t+k}) over t (0 when only k matters).
    Shape: ``(L, L) -> (L,)``."""
    n = similarity.shape[0]
    return torch.stack(
        [similarity.diagonal(k).max() - similarity.diagonal(k).min() for k in range(n)]
    )


def binary_table(num_positions: int, bits: int) -> Tensor:
    """Bits of 0 … n−1, lowest bit first (the fastest, like P's first column). ``(n, bits)``."""
    t = torch.arange(num_positions)[:, None]
    return ((t >> torch.arange(bits)[None, :]) & 1).float()


def run_positional_demo(
    out_dir: str | Path, max_len: int = 60, d_model: int = 32
) -> dict[str, Any]:
    """Write the four figures and return the numbers (see the module docstring)."""
    from seqlab.plotting import plot_lines  # deferred: matplotlib
    from seqlab.plotting_heatmaps import plot_heatmap  # deferred: matplotlib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = sinusoidal_table(max_len, d_model)  # (L, d)
    plot_heatmap(
        table,
        out / "pe_matrix.png",
        title=f"sinusoidal positional encoding P ({max_len} positions × {d_model} dims)",
        xlabel="encoding dimension",
        ylabel="position t",
        colorbar_label="P[t, dimension]",
    )
    steps = torch.arange(max_len, dtype=torch.float32)
    plot_lines(
        steps,
        {f"col {c}": table[:, c] for c in (6, 7, 8, 9)},
        out / "pe_columns.png",
        title="columns 6-9 of P: lower frequency further right",
        xlabel="position t",
        ylabel="P[t, col]",
    )
    plot_heatmap(
        binary_table(8, 3),
        out / "pe_binary.png",
        title="binary codes of 0-7, lowest bit first (compare P)",
        xlabel="bit",
        ylabel="number",
        colorbar_label="bit value",
        levels=["0", "1"],
    )
    sim = cosine_similarities(table)  # (L, L)
    plot_heatmap(
        sim,
        out / "pe_cosine.png",
        title="cos(p_s, p_t): constant along each diagonal (depends on t - s only)",
        xlabel="position t",
        ylabel="position s",
        colorbar_label="cosine similarity",
    )
    offsets = torch.arange(max_len)
    measured = torch.stack([sim.diagonal(k).mean() for k in range(max_len)])  # (L,)
    shift = relative_shift_matrix(5, d_model).double()  # (d, d)
    shift_error = float((table[:-5].double() @ shift - table[5:].double()).abs().max())
    return {
        "max_len": max_len,
        "d_model": d_model,
        "max_spread_over_t": float(offset_spread(sim).max()),
        "max_error_vs_formula": float((measured - predicted_cosine(offsets, d_model)).abs().max()),
        "cosine_by_offset": {str(k): round(float(measured[k]), 4) for k in (0, 1, 2, 5, 10, 30)},
        "shift_by_5_max_error": shift_error,
        "figures": [
            str(out / f)
            for f in ("pe_matrix.png", "pe_columns.png", "pe_binary.png", "pe_cosine.png")
        ],
    }


#: a measured property "holds" when its largest deviation is below this: the table is float32
#: (about 6e-8 relative rounding), so an exact identity shows up as ~1e-8, a false one as ≥ 1e-3
EXACT = 1e-6


def summary(result: dict[str, Any]) -> list[str]:
    """The claims of the module docstring, one sentence each, rounded for reading."""
    spread, gap = result["max_spread_over_t"], result["max_error_vs_formula"]
    shift = result["shift_by_5_max_error"]
    size = f"{result['max_len']} positions, d = {result['d_model']}"
    cosines = ", ".join(f"k = {k}: {num(v)}" for k, v in result["cosine_by_offset"].items())
    return [
        claim(
            "cos(p_t, p_t+k) depends on the offset k only",
            spread < EXACT,
            f"over t it varies by at most {num(spread, 2)} for any k; {size}",
        ),
        claim(
            "it equals (2/d) Σ_i cos(k ω_i)",
            gap < EXACT,
            f"largest difference {num(gap, 2)}; by offset {cosines}",
        ),
        claim(
            "p_t+5 is the same rotation of p_t for every t",
            shift < 10 * EXACT,
            f"largest error of M_5 p_t against p_t+5: {num(shift, 2)}",
        ),
    ]
