"""Vanishing gradients, measured: how much does the last step's loss depend on early hidden states?

Notation (every shape comment uses it):
    B batch size, T time steps (``seq_len``), I input size, H hidden size, k a time step 1..T.

For a loss L_T on the last step only, backpropagation through time gives

    ∂L_T/∂h_k = ∂L_T/∂h_T · ∏_{j=k+1}^{T} ∂h_j/∂h_{j-1},

and for a plain RNN ‖∂h_j/∂h_{j-1}‖ ≤ β_W β_h (the norms of W_hh and of φ'), so when
β_W β_h < 1 the norm shrinks geometrically in T − k (Bengio et al. 1994; Pascanu et al. 2013,
§2.1; d2l.ai §9.7). The LSTM's memory cell (c_t = f_t ⊙ c_{t-1} + …) and the GRU's interpolation
(h_t = … + z_t ⊙ h_{t-1}) give the gradient an additive path, scaled by a gate instead of by W_hh.

:func:`measure_gradient_norms` records ‖∂L_T/∂h_k‖ for k = 1..T, :func:`plot_gradient_norms` draws
it on a log scale, :func:`run_gradient_diagnosis` does both for several cells and saves the results.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from seqlab.analysis.summary import claim, num
from seqlab.atomic import atomic_open, atomic_write_json
from seqlab.errors import SeqlabError
from seqlab.nn.cells import GRUCell, LSTMCell, PeepholeLSTMCell, make_cell
from seqlab.runtime.machine import machine


def measure_gradient_norms(
    cell: str,
    seq_len: int = 50,
    hidden_size: int = 64,
    input_size: int = 16,
    batch_size: int = 8,
    gate_bias: float = 1.0,
    seed: int = 0,
    recurrent_scale: float = 1.0,
) -> list[float]:
    """‖∂L_T/∂h_k‖ for k = 1..T, for a one-layer network of ``cell`` at initialisation.

    The network is one cell with PyTorch's init (uniform in ±1/sqrt(H)), in float64. The data
    depend only on ``seed``, so every cell sees the same inputs, readout and target:
    x (B, T, I) ~ N(0, 1), and the loss on the last step only,
    L_T = ‖h_T w − y‖² / (2B) with w (H,) ~ N(0, 1/H) and y (B,) ~ N(0, 1).

    Args:
        cell: a registered cell's name (:func:`seqlab.catalog.cells`).
        seq_len: T.
        hidden_size: H.
        input_size: I.
        batch_size: B; the norm is taken over the whole (B, H) gradient.
        gate_bias: initial bias of the gate that keeps the old state, the LSTM's forget gate
            (Gers, Schmidhuber & Cummins 2000; Jozefowicz et al. 2015 recommend 1) and the GRU's
            update gate z (same role: h_t = (1 − z_t) ⊙ n_t + z_t ⊙ h_{t-1}). 0 is PyTorch's
            plain init, where gated cells vanish too, only more slowly. Unused by plain RNNs.
        seed: seeds the data and the weights.
        recurrent_scale: multiplies the recurrent weights W_h after init. ‖∂h_t/∂h_{t-1}‖ is
            bounded by ‖diag(φ')‖·‖W_h‖ (Pascanu et al. 2013, §2.1), so a large scale makes a
            plain RNN's gradients explode (with ReLU) instead of vanish.

    Returns:
        T floats, element k-1 being ‖∂L_T/∂h_k‖.
    """
    data = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, seq_len, input_size, generator=data, dtype=torch.float64)
    readout = torch.randn(hidden_size, generator=data, dtype=torch.float64) / hidden_size**0.5
    target = torch.randn(batch_size, generator=data, dtype=torch.float64)
    rnn_cell = _build_cell(cell, input_size, hidden_size, seed, gate_bias, recurrent_scale)

    state = rnn_cell.zero_state(batch_size, dtype=torch.float64)  # (h,) or (h, c), each (B, H)
    xw = rnn_cell.project_inputs(x)  # (B, T, G*H)
    hidden_states = []
    for t in range(seq_len):
        state = rnn_cell.step(xw[:, t], state)
        state[0].retain_grad()  # keep ∂L_T/∂h_k of this non-leaf tensor
        hidden_states.append(state[0])  # (B, H)
    prediction = hidden_states[-1] @ readout  # (B,)
    loss = 0.5 * (prediction - target).pow(2).mean()
    loss.backward()
    return [float(h.grad.norm()) for h in hidden_states]


def _build_cell(
    cell: str, input_size: int, hidden_size: int, seed: int, gate_bias: float, scale: float
) -> torch.nn.Module:
    """The float64 cell of :func:`measure_gradient_norms`: seeded init, gate bias, W_h × scale."""
    with torch.random.fork_rng(devices=[]):  # the weights, without touching the global RNG
        torch.manual_seed(seed)
        rnn_cell = make_cell(cell, input_size, hidden_size).double()
    _set_gate_bias(rnn_cell, gate_bias)
    with torch.no_grad():
        rnn_cell.weight_hh.mul_(scale)
    return rnn_cell


#: sup |φ'| of the plain RNNs' nonlinearities (tanh' ≤ 1, ReLU' ∈ {0, 1})
BETA_H = {"rnn": 1.0, "rnn_relu": 1.0}


def gradient_bound(
    cell: str,
    norms: list[float],
    hidden_size: int = 64,
    input_size: int = 16,
    seed: int = 0,
    recurrent_scale: float = 1.0,
) -> dict[str, object] | None:
    """The bound for a plain RNN (Pascanu et al. 2013, §2.1):
    ‖∂L_T/∂h_k‖ ≤ ‖∂L_T/∂h_T‖ (β_W β_h)^{T−k}, with β_W = ‖W_hh‖₂ (largest singular value) of
    the measured cell and β_h = sup |φ'| = 1.
    None for gated cells (their Jacobian is not W_hh times a diagonal)."""
    if cell not in BETA_H:
        return None
    rnn_cell = _build_cell(cell, input_size, hidden_size, seed, 0.0, recurrent_scale)
    beta_w = float(torch.linalg.matrix_norm(rnn_cell.weight_hh.detach(), ord=2))
    factor = beta_w * BETA_H[cell]
    steps = len(norms)
    try:
        bound = [norms[-1] * factor ** (steps - k) for k in range(1, steps + 1)]
    except OverflowError:
        bound = [math.inf]
    if not all(math.isfinite(b) for b in bound):
        raise SeqlabError(
            f"{cell}: the bound (β_W β_h)^(T-1) = {factor:.3g}^{steps - 1} is beyond float64's "
            "range; lower --recurrent-scale or --seq-len"
        )
    return {"beta_w": beta_w, "beta_h": BETA_H[cell], "bound": bound}


def _set_gate_bias(rnn_cell: torch.nn.Module, gate_bias: float) -> None:
    """Set the total bias (b_ih + b_hh) of the LSTM's forget gate / the GRU's update gate."""
    hidden = rnn_cell.hidden_size
    if isinstance(rnn_cell, (LSTMCell, PeepholeLSTMCell, GRUCell)):
        block = slice(hidden, 2 * hidden)  # f in (i, f, g, o); z in (r, z, n)
        with torch.no_grad():
            rnn_cell.bias_ih[block] = gate_bias
            rnn_cell.bias_hh[block] = 0.0


def plot_gradient_norms(
    results: dict[str, list[float]],
    path: str | Path,
    title: str | None = None,
    bounds: dict[str, list[float]] | None = None,
) -> None:
    """Write a PNG of ‖∂L_T/∂h_k‖ against k, log-scale y, one line per cell (and, dotted, the
    bound (β_W β_h)^{T−k} of each plain RNN in ``bounds``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from seqlab.fonts import use_cjk_fonts  # deferred: matplotlib

    fig, ax = plt.subplots(figsize=(7, 4.5))
    linestyles = ("-", "--", "-.", ":")  # lines that overlap (lstm, peephole_lstm) stay visible
    for i, (cell, norms) in enumerate(results.items()):
        steps = range(1, len(norms) + 1)
        line = ax.semilogy(steps, norms, label=cell, linewidth=1.8, linestyle=linestyles[i % 4])[0]
        if bounds and cell in bounds:
            ax.semilogy(
                steps,
                bounds[cell],
                color=line.get_color(),
                linewidth=1.0,
                linestyle=":",
                label=f"{cell}: bound (β_W β_h)^(T-k)",
            )
    seq_len = max((len(norms) for norms in results.values()), default=0)
    ax.set_xlabel("time step k")
    ax.set_ylabel(r"$\|\partial L_T / \partial h_k\|$ (log scale)")
    ax.set_title(
        title or f"Gradient of the last step's loss w.r.t. each hidden state (T = {seq_len})"
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(title="cell")
    use_cjk_fonts(fig)  # a title in Chinese: its glyphs, not boxes (before the layout measures)
    fig.tight_layout()
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format="png", dpi=120)
    plt.close(fig)


def run_gradient_diagnosis(
    cells: list[str],
    seq_len: int = 50,
    hidden_size: int = 64,
    out_dir: str | Path = "runs/gradients",
    seed: int = 0,
    gate_bias: float = 1.0,
    recurrent_scale: float = 1.0,
) -> dict[str, list[float]]:
    """Measure every cell on the same data; write ``gradients.json`` and ``gradients.png``.

    ``gradients.json`` holds the settings and ``norms``: {cell: [‖∂L_T/∂h_k‖ for k = 1..T]}.
    Returns that ``norms`` mapping.
    """
    out_dir = Path(out_dir)
    norms = {
        cell: measure_gradient_norms(
            cell,
            seq_len=seq_len,
            hidden_size=hidden_size,
            gate_bias=gate_bias,
            seed=seed,
            recurrent_scale=recurrent_scale,
        )
        for cell in cells
    }
    for cell, values in norms.items():
        if not all(math.isfinite(v) for v in values):
            raise SeqlabError(
                f"{cell}: the gradient norms overflow float64 (T = {seq_len}, W_h × "
                f"{recurrent_scale:g}); lower --recurrent-scale or --seq-len"
            )
    bounds = {
        cell: b
        for cell in cells
        if (b := gradient_bound(cell, norms[cell], hidden_size, 16, seed, recurrent_scale))
    }
    report = {
        "seq_len": seq_len,
        "hidden_size": hidden_size,
        "seed": seed,
        "gate_bias": gate_bias,
        "recurrent_scale": recurrent_scale,
        "loss": "last step only: L_T",
        "norms": norms,
        "ratio_first_to_last": {cell: values[0] / values[-1] for cell, values in norms.items()},
        "bounds": bounds,
        "machine": machine("float64"),
    }
    atomic_write_json(out_dir / "gradients.json", report)
    plot_gradient_norms(
        norms,
        out_dir / "gradients.png",
        title=f"‖∂L_T/∂h_k‖, T = {seq_len}, H = {hidden_size}"
        + (f", W_h × {recurrent_scale:g}" if recurrent_scale != 1.0 else ""),
        bounds={cell: b["bound"] for cell, b in bounds.items()},
    )
    return norms


def main() -> None:
    """``python -m seqlab.analysis.gradients [out_dir]``: every cell's gradient norms, drawn."""
    import sys

    out_dir = sys.argv[1] if len(sys.argv) > 1 else "runs/gradients"
    norms = run_gradient_diagnosis(
        ["rnn", "rnn_relu", "gru", "lstm", "peephole_lstm"], out_dir=out_dir
    )
    ratios = {cell: f"{values[0] / values[-1]:.1e}" for cell, values in norms.items()}
    print(json.dumps({"out_dir": out_dir, "ratio_first_to_last": ratios}, indent=2))


if __name__ == "__main__":
    main()


#: cells whose state update has an additive path (the LSTM's memory cell, the GRU's
#: interpolation): the module docstring's claim is that they keep the gradient longer
ADDITIVE = ("gru", "gru_reset_before", "lstm", "peephole_lstm")
#: ‖∂L_T/∂h_1‖ / ‖∂L_T/∂h_T‖ below VANISHED reads as vanishing, above 1 / VANISHED as exploding
VANISHED = 1e-2


def summary(report: dict[str, Any]) -> list[str]:
    """What ``gradients.json`` (:func:`run_gradient_diagnosis`) shows, one sentence per cell and
    per claim, rounded for reading."""
    steps, ratios = report["seq_len"], report["ratio_first_to_last"]
    lines = []
    for cell, ratio in ratios.items():
        verdict = (
            "vanishing"
            if ratio < VANISHED
            else "exploding"
            if ratio > 1 / VANISHED
            else f"neither vanishing nor exploding (within {num(1 / VANISHED)}×)"
        )
        lines.append(
            f"{cell}: over T = {steps} steps the gradient reaching h_1 is {num(ratio, 2)} times "
            f"the one at h_T: {verdict}"
        )
    for cell, b in report["bounds"].items():
        bound = b["bound"][0] / report["norms"][cell][-1]  # (β_W β_h)^(T-1)
        lines.append(
            claim(
                f"{cell} stays under the bound (β_W β_h)^(T−1)",
                ratios[cell] <= bound * (1 + 1e-9),
                f"β_W = ‖W_hh‖₂ = {num(b['beta_w'])}, β_h = {b['beta_h']:g}: bound "
                f"{num(bound, 2)}, measured {num(ratios[cell], 2)}",
            )
        )
    additive = {c: r for c, r in ratios.items() if c in ADDITIVE}
    plain = {c: r for c, r in ratios.items() if c in BETA_H}
    if additive and plain and report["recurrent_scale"] == 1.0:
        worst = min(additive, key=additive.__getitem__)
        best = max(plain, key=plain.__getitem__)
        lines.append(
            claim(
                "cells with an additive path (GRU, LSTM) keep more of the gradient than plain RNNs",
                additive[worst] > plain[best],
                f"least of them {worst} {num(additive[worst], 2)}, most of the plain RNNs "
                f"{best} {num(plain[best], 2)}",
            )
        )
    return lines
