"""Recurrent cells, from scratch: tanh/ReLU RNN, output-gated RNN, GRU (two forms), LSTM and
peephole LSTM, each named by one record (:class:`seqlab.catalog.CellSpec`, in
:mod:`seqlab.builtin_records`) and bound here to its class and PyTorch's fused layer
(:data:`CELLS`).

Notation and weight layout as in :mod:`seqlab.nn.rnn`, the layer that runs these cells: B batch
size, I input size, H hidden size, G gate blocks per cell (1 for the RNN, 2 for the output-gated
RNN, 3 for the GRUs, 4 for the LSTMs). Equations are written with row vectors, as in d2l:
``x_t W_x + h_{t-1} W_h + b``; ``weight_ih`` (G*H, I) and ``weight_hh`` (G*H, H) stack the blocks in
PyTorch's order (GRU: r, z, n; LSTM: i, f, g, o), each block with two biases, ``bias_ih`` and
``bias_hh``, so that converting to ``nn.RNN``/``nn.GRU``/``nn.LSTM`` is a renaming.

``model.cell``'s choices, :func:`make_cell` and the layer's backends derive from the records.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab import catalog
from seqlab.catalog import CellSpec


# ------------------------------------------------------------------------------------------ cells
class _Cell(nn.Module):
    """Weights shared by every cell: G gate blocks of input and recurrent weights, PyTorch layout.

    A cell works on a tuple state, ``(h,)`` or ``(h, c)``, each (B, H). ``project_inputs`` maps a
    whole sequence through the input weights at once; ``step`` does one recurrent update.
    """

    num_gates: int = 1
    state_size: int = 1  # tensors in the state: 1 for (h,), 2 for (h, c)

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        gh = self.num_gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(gh, input_size))
        self.weight_hh = nn.Parameter(torch.empty(gh, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(gh))
        self.bias_hh = nn.Parameter(torch.empty(gh))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's init: every parameter uniform in ±1/sqrt(H)."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def project_inputs(self, x: Tensor) -> Tensor:
        """``x W_x + b_x`` for every position at once.

        Shape:
            x: (..., I) → (..., G*H), e.g. (B, T, I) → (B, T, G*H).
        """
        return F.linear(x, self.weight_ih, self.bias_ih)

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """One recurrent update from the projected input ``xw_t`` (B, G*H); see the subclasses."""
        raise NotImplementedError

    def forward(self, x_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """One time step from the raw input ``x_t`` (B, I); returns the new state tuple."""
        return self.step(self.project_inputs(x_t), state)

    def zero_state(self, batch_size: int, device=None, dtype=None) -> tuple[Tensor, ...]:
        """``state_size`` zero tensors of shape (B, H)."""
        return tuple(
            torch.zeros(batch_size, self.hidden_size, device=device, dtype=dtype)
            for _ in range(self.state_size)
        )


class RNNCell(_Cell):
    """Elman RNN cell (Elman 1990) with a tanh or ReLU nonlinearity φ.

    Equation:
        h_t = φ(x_t W_xh + b_xh + h_{t-1} W_hh + b_hh)

    Shape:
        xw_t: (B, H); state: (h,) with h (B, H).
    """

    num_gates = 1
    state_size = 1

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh") -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size)
        self.nonlinearity = nonlinearity

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (h,) = state
        pre = xw_t + F.linear(h, self.weight_hh, self.bias_hh)  # (B, H)
        h = torch.tanh(pre) if self.nonlinearity == "tanh" else torch.relu(pre)  # (B, H)
        return (h,)


class GRUCell(_Cell):
    """Gated recurrent unit (Cho et al. 2014), in PyTorch's/cuDNN's form.

    Equations (σ the logistic sigmoid, ⊙ the elementwise product):
        r_t = σ(x_t W_xr + b_xr + h_{t-1} W_hr + b_hr)            reset gate
        z_t = σ(x_t W_xz + b_xz + h_{t-1} W_hz + b_hz)            update gate
        n_t = tanh(x_t W_xn + b_xn + r_t ⊙ (h_{t-1} W_hn + b_hn))  candidate state
        h_t = (1 - z_t) ⊙ n_t + z_t ⊙ h_{t-1}

    Cho et al. (and d2l) reset before the matmul, ``(r_t ⊙ h_{t-1}) W_hn``; PyTorch resets after
    it, as above, and so do we, so that the weights are interchangeable with ``nn.GRU``.

    Shape:
        xw_t: (B, 3H); state: (h,) with h (B, H).
    """

    num_gates = 3
    state_size = 1

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (h,) = state
        hw = F.linear(h, self.weight_hh, self.bias_hh)  # (B, 3H)
        x_r, x_z, x_n = xw_t.chunk(3, dim=-1)  # 3 × (B, H)
        h_r, h_z, h_n = hw.chunk(3, dim=-1)  # 3 × (B, H)
        r = torch.sigmoid(x_r + h_r)  # (B, H)
        z = torch.sigmoid(x_z + h_z)  # (B, H)
        n = torch.tanh(x_n + r * h_n)  # (B, H)
        h = (1.0 - z) * n + z * h  # (B, H)
        return (h,)


class GRUResetBeforeCell(GRUCell):
    """The GRU as Cho et al. 2014 (§2.3) and d2l.ai §10.2.2 (Candidate Hidden State) write it:
    the reset gate acts *before* the recurrent matmul of the candidate state.

    Equations (as :class:`GRUCell` except the candidate):
        n_t = tanh(x_t W_xn + b_xn + (r_t ⊙ h_{t-1}) W_hn + b_hn)

    Why two forms exist: resetting after the matmul, r_t ⊙ (h_{t-1} W_hn + b_hn), lets a layer
    compute h_{t-1} W_h for all three gates in one matmul before r_t is known; cuDNN chose it for
    speed and PyTorch's ``nn.GRU`` follows cuDNN. The two are different functions of the same
    weights (they agree when r_t = 1, whatever b_hn); both train equally well in practice. This
    cell is ``cell: gru_reset_before``, scratch backend only.

    Shape:
        xw_t: (B, 3H); state: (h,) with h (B, H).
    """

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (h,) = state
        h_size = h.shape[-1]
        w_rz, w_n = self.weight_hh[: 2 * h_size], self.weight_hh[2 * h_size :]  # (2H, H), (H, H)
        b_rz, b_n = self.bias_hh[: 2 * h_size], self.bias_hh[2 * h_size :]  # (2H,), (H,)
        x_rz, x_n = xw_t[:, : 2 * h_size], xw_t[:, 2 * h_size :]  # (B, 2H), (B, H)
        rz = torch.sigmoid(x_rz + F.linear(h, w_rz, b_rz))  # (B, 2H)
        r, z = rz[:, :h_size], rz[:, h_size:]  # (B, H) each
        n = torch.tanh(x_n + F.linear(r * h, w_n, b_n))  # (B, H)
        h = (1.0 - z) * n + z * h  # (B, H)
        return (h,)


class OutputGatedRNNCell(_Cell):
    """A tanh RNN whose output passes through a sigmoid gate: gating in its smallest form, one
    gate and no memory cell (compare the LSTM's output gate, H_t = O_t ⊙ tanh(C_t), d2l.ai
    §10.1.1 Gated Memory Cell).

    Equations (block order g, ĥ):
        g_t = σ(x_t U_g + h_{t-1} W_g + b_g)      gate
        ĥ_t = tanh(x_t W_i + h_{t-1} W_h + b_h)   candidate
        h_t = ĥ_t ⊙ g_t

    Shape:
        xw_t: (B, 2H); state: (h,) with h (B, H).
    """

    num_gates = 2
    state_size = 1

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (h,) = state
        g, candidate = (xw_t + F.linear(h, self.weight_hh, self.bias_hh)).chunk(2, dim=-1)
        return (torch.tanh(candidate) * torch.sigmoid(g),)  # (B, H)


class LSTMCell(_Cell):
    """Long short-term memory cell (Hochreiter & Schmidhuber 1997, with the forget gate of
    Gers, Schmidhuber & Cummins 2000).

    Equations:
        i_t = σ(x_t W_xi + h_{t-1} W_hi + b_i)      input gate
        f_t = σ(x_t W_xf + h_{t-1} W_hf + b_f)      forget gate
        g_t = tanh(x_t W_xg + h_{t-1} W_hg + b_g)   candidate memory
        o_t = σ(x_t W_xo + h_{t-1} W_ho + b_o)      output gate
        c_t = f_t ⊙ c_{t-1} + i_t ⊙ g_t
        h_t = o_t ⊙ tanh(c_t)
    where each b is ``bias_ih + bias_hh`` of its block.

    Shape:
        xw_t: (B, 4H); state: (h, c), each (B, H).
    """

    num_gates = 4
    state_size = 2

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        h, c = state
        gates = xw_t + F.linear(h, self.weight_hh, self.bias_hh)  # (B, 4H)
        i, f, g, o = gates.chunk(4, dim=-1)  # 4 × (B, H)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # (B, H)
        h = torch.sigmoid(o) * torch.tanh(c)  # (B, H)
        return (h, c)


class PeepholeLSTMCell(_Cell):
    """LSTM with peephole connections (Gers & Schmidhuber 2000): the gates also see the cell.

    The peephole weights are diagonal, so they act elementwise: ``w_ci``, ``w_cf``, ``w_co`` (H,).
    The input and forget gates look at the previous cell c_{t-1}, the output gate at the new c_t.

    Equations:
        i_t = σ(x_t W_xi + h_{t-1} W_hi + w_ci ⊙ c_{t-1} + b_i)
        f_t = σ(x_t W_xf + h_{t-1} W_hf + w_cf ⊙ c_{t-1} + b_f)
        g_t = tanh(x_t W_xg + h_{t-1} W_hg + b_g)
        c_t = f_t ⊙ c_{t-1} + i_t ⊙ g_t
        o_t = σ(x_t W_xo + h_{t-1} W_ho + w_co ⊙ c_t + b_o)
        h_t = o_t ⊙ tanh(c_t)
    With the peephole weights at zero this is :class:`LSTMCell`.

    Shape:
        xw_t: (B, 4H); state: (h, c), each (B, H).
    """

    num_gates = 4
    state_size = 2

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ci = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.weight_cf = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        self.weight_co = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))

    def step(self, xw_t: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        h, c_prev = state
        gates = xw_t + F.linear(h, self.weight_hh, self.bias_hh)  # (B, 4H)
        i, f, g, o = gates.chunk(4, dim=-1)  # 4 × (B, H)
        i = torch.sigmoid(i + self.weight_ci * c_prev)  # (B, H)
        f = torch.sigmoid(f + self.weight_cf * c_prev)  # (B, H)
        c = f * c_prev + i * torch.tanh(g)  # (B, H)
        o = torch.sigmoid(o + self.weight_co * c)  # (B, H)
        h = o * torch.tanh(c)  # (B, H)
        return (h, c)


# ---------------------------------------------------------------------------------------- records
#: the scratch cell and PyTorch's fused layer (None: none) of each of seqlab's own cells, by
#: ``model.cell``; their records (options, why no fused layer): :mod:`seqlab.builtin_records`
CELLS: dict[str, tuple[type[_Cell], Callable[..., nn.Module] | None]] = {
    "rnn": (RNNCell, nn.RNN),
    "rnn_relu": (RNNCell, partial(nn.RNN, nonlinearity="relu")),
    "gru": (GRUCell, nn.GRU),
    "gru_reset_before": (GRUResetBeforeCell, None),
    "output_gated_rnn": (OutputGatedRNNCell, None),
    "lstm": (LSTMCell, nn.LSTM),
    "peephole_lstm": (PeepholeLSTMCell, None),
}


def cell_spec(cell: str) -> CellSpec:
    """The record of the cell called ``cell`` (:func:`seqlab.catalog.cells`), with its classes
    (seqlab's own: from :data:`CELLS`)."""
    known = catalog.cells()
    if cell not in known:
        raise ValueError(f"unknown cell {cell!r}; choose one of {', '.join(known)}")
    spec = known[cell]
    if spec.cell is None:
        scratch, fused = CELLS[cell]
        spec = replace(spec, cell=scratch, fused=fused)
    return spec


def make_cell(cell: str, input_size: int, hidden_size: int) -> _Cell:
    """The scratch cell called ``cell`` (a registered :class:`~seqlab.catalog.CellSpec`)."""
    spec = cell_spec(cell)
    return spec.cell(input_size, hidden_size, **spec.options)
