"""Recurrent cells and layers: tanh/ReLU RNN, output-gated RNN, GRU (two forms), LSTM and
peephole LSTM, from scratch or fused.

Notation (every shape comment uses it):
    B batch size, T time steps, I input size, H hidden size, G gate blocks per cell
    (1 for the RNN, 2 for the output-gated RNN, 3 for the GRUs, 4 for the LSTMs), L layers,
    D directions (1, or 2 when bidirectional), V vocabulary size.

Equations are written with row vectors, as in d2l: ``x_t W_x + h_{t-1} W_h + b``. The weights are
stored in PyTorch's layout so that converting to ``nn.RNN``/``nn.GRU``/``nn.LSTM`` is a renaming:
``weight_ih`` (G*H, I) stacks the transposed input weights of the G blocks (x_t W_x is
``x_t @ weight_ih.T``), ``weight_hh`` (G*H, H) the recurrent ones, in PyTorch's block order
(GRU: r, z, n; LSTM: i, f, g, o). Each block has two biases, ``bias_ih`` and ``bias_hh``, as in
PyTorch (they only matter separately for the GRU's candidate state).

One layer class, :class:`RNN`, has two backends behind the same interface:

* ``scratch``: the equations, in the cells below. All input projections of a sequence are computed
  in one matmul before the time loop, which then does only the recurrent matmul per step.
* ``fused``: ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` (their C++ kernels); the peephole LSTM, the
  reset-before GRU and the output-gated RNN have none.

Each cell is registered by one record (:class:`seqlab.catalog.CellSpec`, after the cell classes):
its ``model.cell`` name, its class and PyTorch's fused layer for it, if any. ``model.cell``'s
choices, :func:`make_cell` and the layer's backends derive from these records.

State is explicit and never stored on a module: a tensor ``h`` (L*D, B, H) for the RNN and GRU, a
tuple ``(h, c)`` of two such tensors for the LSTMs, laid out as in PyTorch (index ``layer*D +
direction``). Batches are batch-first; variable-length batches pass ``lengths`` (padding at the end).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab import catalog
from seqlab.catalog import CellSpec, register_cell

BACKENDS = ("scratch", "fused")

#: ``h`` (L*D, B, H) for rnn/rnn_relu/gru; ``(h, c)`` for lstm/peephole_lstm.
State = Tensor | tuple[Tensor, Tensor]

_WEIGHT_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
_PEEPHOLE_NAMES = ("weight_ci", "weight_cf", "weight_co")


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
    weights (they agree when r_t = 1 and b_hn = 0); both train equally well in practice. This
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
# one record per cell: model.cell's name, the scratch cell, PyTorch's fused layer (or why none)
register_cell(CellSpec("rnn", RNNCell, {"nonlinearity": "tanh"}, fused=nn.RNN))
register_cell(
    CellSpec(
        "rnn_relu", RNNCell, {"nonlinearity": "relu"}, fused=partial(nn.RNN, nonlinearity="relu")
    )
)
register_cell(CellSpec("gru", GRUCell, fused=nn.GRU))
register_cell(
    CellSpec(
        "gru_reset_before",
        GRUResetBeforeCell,
        why_not_fused="nn.GRU applies the reset gate after the recurrent matmul",
    )
)
register_cell(
    CellSpec("output_gated_rnn", OutputGatedRNNCell, why_not_fused="PyTorch has no such layer")
)
register_cell(CellSpec("lstm", LSTMCell, fused=nn.LSTM))
register_cell(
    CellSpec("peephole_lstm", PeepholeLSTMCell, why_not_fused="nn.LSTM has no peephole connections")
)


def cell_spec(cell: str) -> CellSpec:
    """The record of the cell called ``cell`` (:func:`seqlab.catalog.cells`)."""
    known = catalog.cells()
    if cell not in known:
        raise ValueError(f"unknown cell {cell!r}; choose one of {', '.join(known)}")
    return known[cell]


def make_cell(cell: str, input_size: int, hidden_size: int) -> _Cell:
    """The scratch cell called ``cell`` (a registered :class:`~seqlab.catalog.CellSpec`)."""
    spec = cell_spec(cell)
    return spec.cell(input_size, hidden_size, **spec.options)


# ------------------------------------------------------------------------------------------ layer
class RNN(nn.Module):
    """Stacked, optionally bidirectional, batch-first recurrent layer with two backends.

    Args:
        cell: a registered cell (:func:`seqlab.catalog.cells`): ``rnn`` (tanh), ``rnn_relu``,
            ``gru``, ``gru_reset_before``, ``output_gated_rnn``, ``lstm``, ``peephole_lstm``.
        input_size: I, features per time step.
        hidden_size: H, features of each direction's hidden state.
        num_layers: L; layer l > 0 reads the (B, T, D*H) output of layer l-1.
        dropout: dropout on each layer's output except the last's (training only).
        bidirectional: also run each layer right to left; the two outputs are concatenated on
            the feature axis (forward first), as in PyTorch.
        backend: ``scratch`` (the cells above) or ``fused`` (``nn.RNN``/``nn.GRU``/``nn.LSTM``).
        truncation_keep: π of randomized truncated BPTT (:func:`randomly_truncate`), applied
            between time steps in training mode; None = regular truncation only (at the ends of
            the minibatch's T steps, by the caller detaching the state).

    Shape:
        x: (B, T, I); lengths: (B,) or None; state: (L*D, B, H), or a tuple (h, c) of those.
        output: (B, T, D*H), zeros at padded positions.
    """

    def __init__(
        self,
        cell: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        bidirectional: bool = False,
        backend: str = "scratch",
        truncation_keep: float | None = None,
    ) -> None:
        super().__init__()
        if truncation_keep is not None and (
            backend != "scratch" or not 0.0 < truncation_keep <= 1.0
        ):
            raise ValueError(
                "randomized truncation needs backend='scratch' (it acts between time steps) and "
                f"0 < truncation_keep <= 1, got backend={backend!r}, keep={truncation_keep}"
            )
        spec = cell_spec(cell)
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose 'scratch' or 'fused'")
        if backend == "fused" and spec.fused is None:
            raise ValueError(
                f"cell {cell!r} has no fused backend ({spec.why_not_fused}); use backend='scratch'"
            )
        if num_layers < 1 or input_size < 1 or hidden_size < 1:
            raise ValueError(
                f"input_size, hidden_size and num_layers must be positive, got "
                f"{input_size}, {hidden_size}, {num_layers}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.cell = cell
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = dropout
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        self.backend = backend
        self.truncation_keep = truncation_keep
        self.state_size = spec.cell.state_size  # 1 for h, 2 for (h, c)
        if backend == "scratch":
            # cells[layer * D + direction], the order of PyTorch's state layout
            self.cells = nn.ModuleList(
                make_cell(cell, input_size if layer == 0 else self.output_size, hidden_size)
                for layer in range(num_layers)
                for _ in range(self.num_directions)
            )
        else:
            # dropout acts between layers only, so it is 0 with one layer
            self.fused = spec.fused(
                input_size,
                hidden_size,
                num_layers,
                batch_first=True,
                dropout=dropout if num_layers > 1 else 0.0,
                bidirectional=bidirectional,
            )

    @property
    def output_size(self) -> int:
        """D*H, the feature size of the output."""
        return self.num_directions * self.hidden_size

    def extra_repr(self) -> str:
        return (
            f"{self.cell!r}, {self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
            f"dropout={self.dropout}, bidirectional={self.bidirectional}, backend={self.backend!r}"
        )

    def begin_state(self, batch_size: int, device=None, dtype=None) -> State:
        """The zero state: h (L*D, B, H), or (h, c) for the LSTMs."""
        shape = (self.num_layers * self.num_directions, batch_size, self.hidden_size)
        if self.state_size == 1:
            return torch.zeros(shape, device=device, dtype=dtype)
        return (
            torch.zeros(shape, device=device, dtype=dtype),
            torch.zeros(shape, device=device, dtype=dtype),
        )

    def forward(
        self, x: Tensor, state: State | None = None, lengths: Tensor | None = None
    ) -> tuple[Tensor, State]:
        """Run the whole sequence; returns the output at every step and the final state.

        With ``lengths``, sequence b is ``x[b, :lengths[b]]``: its outputs and final state equal
        running it alone, the backward direction starting at its last valid token; outputs at
        padded positions are zero.

        Shape:
            x: (B, T, I); lengths: (B,) integers in [1, T]; state: (L*D, B, H) or a tuple of two.
            returns output (B, T, D*H) and the final state, shaped like ``state``.
        """
        if x.dim() != 3 or x.size(-1) != self.input_size:
            raise ValueError(
                f"expected input of shape (B, T, {self.input_size}), got {tuple(x.shape)}"
            )
        batch_size, num_steps, _ = x.shape
        if lengths is not None:
            lengths = _check_lengths(lengths, batch_size, num_steps)
        states = self._state_tuple(state, x)  # state_size × (L*D, B, H)
        if self.backend == "fused":
            output, states = self._forward_fused(x, states, lengths)
        else:
            output, states = self._forward_scratch(x, states, lengths)
        return output, (states[0] if self.state_size == 1 else states)

    # -- scratch ----------------------------------------------------------------------------------
    def _forward_scratch(
        self, x: Tensor, states: tuple[Tensor, ...], lengths: Tensor | None
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        mask = None
        if lengths is not None:
            steps = torch.arange(x.size(1), device=x.device)  # (T,)
            mask = steps[None, :] < lengths.to(x.device)[:, None]  # (B, T)
        layer_input = x  # (B, T, I)
        keep = self.truncation_keep if self.training and torch.is_grad_enabled() else None
        finals: list[tuple[Tensor, ...]] = []  # one state tuple of (B, H) per layer*D + direction
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self.num_directions):
                k = layer * self.num_directions + direction
                initial = tuple(s[k] for s in states)  # state_size × (B, H)
                if direction == 0:
                    out, final = _run_cell(self.cells[k], layer_input, initial, mask, keep)
                else:
                    reversed_input = _reverse_time(layer_input, lengths)  # (B, T, I or D*H)
                    out, final = _run_cell(self.cells[k], reversed_input, initial, mask, keep)
                    out = _reverse_time(out, lengths)  # (B, T, H)
                outputs.append(out)
                finals.append(final)
            layer_input = torch.cat(outputs, dim=-1)  # (B, T, D*H)
            if layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, self.training)  # (B, T, D*H)
        new_states = tuple(
            torch.stack([final[i] for final in finals]) for i in range(self.state_size)
        )  # state_size × (L*D, B, H)
        return layer_input, new_states

    # -- fused ------------------------------------------------------------------------------------
    def _forward_fused(
        self, x: Tensor, states: tuple[Tensor, ...], lengths: Tensor | None
    ) -> tuple[Tensor, tuple[Tensor, ...]]:
        hx = states[0] if self.state_size == 1 else states
        if lengths is None:
            output, hx = self.fused(x, hx)  # (B, T, D*H)
        else:
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            packed_output, hx = self.fused(packed, hx)
            output, _ = pad_packed_sequence(
                packed_output, batch_first=True, total_length=x.size(1)
            )  # (B, T, D*H)
        return output, ((hx,) if self.state_size == 1 else tuple(hx))

    # -- state ------------------------------------------------------------------------------------
    def _state_tuple(self, state: State | None, x: Tensor) -> tuple[Tensor, ...]:
        """Validate ``state`` and return it as a tuple of (L*D, B, H) tensors."""
        if state is None:
            begin = self.begin_state(x.size(0), x.device, x.dtype)
            return (begin,) if self.state_size == 1 else begin
        states = (state,) if isinstance(state, Tensor) else tuple(state)
        expected = (self.num_layers * self.num_directions, x.size(0), self.hidden_size)
        kind = "a tensor h" if self.state_size == 1 else "a tuple (h, c)"
        if len(states) != self.state_size or any(tuple(s.shape) != expected for s in states):
            got = [tuple(s.shape) for s in states]
            raise ValueError(
                f"cell {self.cell!r} expects state as {kind}, each of shape {expected} "
                f"(L*D, B, H); got shapes {got}"
            )
        return tuple(s.contiguous() for s in states)

    # -- conversion -------------------------------------------------------------------------------
    def to_backend(self, backend: str) -> RNN:
        """A new :class:`RNN` on ``backend`` with the same weights (copied), dtype, device, mode."""
        new = RNN(
            self.cell,
            self.input_size,
            self.hidden_size,
            self.num_layers,
            self.dropout,
            self.bidirectional,
            backend,
            truncation_keep=self.truncation_keep if backend == "scratch" else None,
        )
        reference = next(self.parameters())
        new.to(device=reference.device, dtype=reference.dtype)
        if backend == self.backend:
            state_dict = self.state_dict()
        elif backend == "fused":
            state_dict = scratch_to_fused_state_dict(
                self.state_dict(), self.num_layers, self.bidirectional
            )
        else:
            state_dict = fused_to_scratch_state_dict(
                self.state_dict(), self.num_layers, self.bidirectional
            )
        new.load_state_dict(state_dict)
        new.train(self.training)
        return new


def recurrent_layer(
    cell: str,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    dropout: float = 0.0,
    bidirectional: bool = False,
) -> nn.Module:
    """The recurrent layer a model builds for ``model.cell``: the record's fused PyTorch layer
    where it has one (``nn.GRU``, ``nn.LSTM``, …, so its state-dict keys are PyTorch's,
    ``weight_ih_l0``), else a scratch :class:`RNN`. Run it with :func:`run_layer`.

    ``dropout`` acts between layers only (it is 0 with one layer, where PyTorch warns).
    """
    spec = cell_spec(cell)
    if spec.fused is None:
        return RNN(cell, input_size, hidden_size, num_layers, dropout, bidirectional, "scratch")
    return spec.fused(
        input_size,
        hidden_size,
        num_layers,
        batch_first=True,
        dropout=dropout if num_layers > 1 else 0.0,
        bidirectional=bidirectional,
    )


def run_layer(
    layer: nn.Module, x: Tensor, state: State | None = None, lengths: Tensor | None = None
) -> tuple[Tensor, State]:
    """Run a layer of :func:`recurrent_layer` over ``x`` from ``state`` (None: zeros).

    With ``lengths`` the fused layer reads a packed sequence, so each row's final state is the
    state after its last real step, as :class:`RNN` computes it.

    Shape:
        x: (B, T, I); lengths: (B,) or None; state: (L*D, B, H), or a tuple (h, c) of those.
        returns output (B, T, D*H), zeros at padded positions, and the final state.
    """
    if isinstance(layer, RNN):
        return layer(x, state, lengths)
    if lengths is None:
        return layer(x, state)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    packed_output, state = layer(packed, state)
    output, _ = pad_packed_sequence(packed_output, batch_first=True, total_length=x.size(1))
    return output, state  # (B, T, D*H)


def randomly_truncate(state: tuple[Tensor, ...], keep: float) -> tuple[Tensor, ...]:
    """Randomized truncation of backpropagation through time (d2l.ai §9.7.1, Randomized
    Truncation; Tallec & Ollivier 2017).

    The value of the state is unchanged; the gradient flowing back through it is multiplied by
    ξ_t, with P(ξ_t = 1/π) = π and P(ξ_t = 0) = 1 − π, drawn per sequence and step. So
    ∂h_t/∂w is replaced by z_t = ∂f/∂w + ξ_t ∂f/∂h_{t-1} ∂h_{t-1}/∂w, whose expectation is the
    full gradient: chains of random length, long ones rare but up-weighted.

    Shape:
        state: tuple of (B, H) -> the same.
    """
    first = state[0]
    xi = (torch.rand(first.shape[0], 1, device=first.device) < keep).to(first.dtype) / keep
    return tuple(s.detach() + xi * (s - s.detach()) for s in state)  # value s, gradient ξ·∂s


def _run_cell(
    cell: _Cell,
    x: Tensor,
    state: tuple[Tensor, ...],
    mask: Tensor | None,
    truncation_keep: float | None = None,
) -> tuple[Tensor, tuple[Tensor, ...]]:
    """Run one cell left to right over ``x``; where ``mask`` is False the state is kept.
    With ``truncation_keep`` π, the gradient through the state between steps is randomly cut
    (:func:`randomly_truncate`).

    Shape:
        x: (B, T, I); state: tuple of (B, H); mask: (B, T) bool or None.
        returns outputs (B, T, H), zero where masked, and the final state tuple.
    """
    xw = cell.project_inputs(x)  # (B, T, G*H): all input projections in one matmul
    outputs = []
    for t in range(x.size(1)):
        if truncation_keep is not None and t > 0:
            state = randomly_truncate(state, truncation_keep)
        new_state = cell.step(xw[:, t], state)  # state_size × (B, H)
        if mask is not None:
            valid = mask[:, t, None]  # (B, 1)
            new_state = tuple(
                torch.where(valid, new, old) for new, old in zip(new_state, state, strict=True)
            )
        state = new_state
        outputs.append(state[0])
    output = torch.stack(outputs, dim=1)  # (B, T, H)
    if mask is not None:
        output = output.masked_fill(~mask[..., None], 0.0)  # (B, T, H)
    return output, state


def _reverse_time(x: Tensor, lengths: Tensor | None) -> Tensor:
    """Reverse each row in time within its valid length; padding stays at the end.

    Shape:
        x: (B, T, F); lengths: (B,) or None → (B, T, F).
    """
    if lengths is None:
        return x.flip(1)
    steps = torch.arange(x.size(1), device=x.device)  # (T,)
    index = lengths.to(x.device)[:, None] - 1 - steps[None, :]  # (B, T)
    index = torch.where(index >= 0, index, steps[None, :])  # (B, T): padding maps to itself
    return x.gather(1, index[..., None].expand_as(x))  # (B, T, F)


def _check_lengths(lengths: Tensor, batch_size: int, num_steps: int) -> Tensor:
    lengths = torch.as_tensor(lengths)
    if lengths.shape != (batch_size,) or lengths.dtype.is_floating_point:
        raise ValueError(
            f"lengths must be an integer tensor of shape ({batch_size},), "
            f"got {lengths.dtype} {tuple(lengths.shape)}"
        )
    if batch_size and (int(lengths.min()) < 1 or int(lengths.max()) > num_steps):
        raise ValueError(
            f"lengths must lie in [1, T={num_steps}], got {lengths.tolist()} "
            "(padding goes at the end of each row)"
        )
    return lengths.long()


# ------------------------------------------------------------------------------------ conversion
def _key_pairs(num_layers: int, bidirectional: bool) -> Iterator[tuple[str, str]]:
    """(scratch key, fused key) for every weight of an :class:`RNN`."""
    num_directions = 2 if bidirectional else 1
    for layer in range(num_layers):
        for direction in range(num_directions):
            suffix = "_reverse" if direction else ""
            for name in _WEIGHT_NAMES:
                k = layer * num_directions + direction
                yield f"cells.{k}.{name}", f"fused.{name}_l{layer}{suffix}"


def scratch_to_fused_state_dict(
    state_dict: Mapping[str, Tensor], num_layers: int, bidirectional: bool
) -> dict[str, Tensor]:
    """Rename a scratch :class:`RNN`'s state dict (``cells.{l*D+d}.weight_ih`` …) to the fused
    one's (``fused.weight_ih_l{l}[_reverse]`` …). The tensors are not copied.

    Raises ``ValueError`` for peephole weights (nn.LSTM has none) and for missing or extra keys.
    """
    if any(key.rsplit(".", 1)[-1] in _PEEPHOLE_NAMES for key in state_dict):
        raise ValueError(
            "peephole_lstm weights cannot be converted to the fused backend: "
            "nn.LSTM has no peephole connections"
        )
    pairs = list(_key_pairs(num_layers, bidirectional))
    _check_keys(state_dict, [scratch for scratch, _ in pairs], "scratch")
    return {fused: state_dict[scratch] for scratch, fused in pairs}


def fused_to_scratch_state_dict(
    state_dict: Mapping[str, Tensor], num_layers: int, bidirectional: bool
) -> dict[str, Tensor]:
    """Inverse of :func:`scratch_to_fused_state_dict`. The tensors are not copied."""
    pairs = list(_key_pairs(num_layers, bidirectional))
    _check_keys(state_dict, [fused for _, fused in pairs], "fused")
    return {scratch: state_dict[fused] for scratch, fused in pairs}


def _check_keys(state_dict: Mapping[str, Tensor], expected: list[str], backend: str) -> None:
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"not a {backend} RNN state dict for this shape: missing {missing}, "
            f"unexpected {unexpected}"
        )
