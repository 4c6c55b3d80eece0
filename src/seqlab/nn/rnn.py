"""The recurrent layer: every registered cell (:mod:`seqlab.nn.cells`: tanh/ReLU RNN, output-gated
RNN, GRU in two forms, LSTM, peephole LSTM), stacked and bidirectional, from scratch or fused.

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

* ``scratch``: the equations, in the cells of :mod:`seqlab.nn.cells`. All input projections of a
  sequence are computed in one matmul before the time loop, which then does only the recurrent
  matmul per step.
* ``fused``: ``nn.RNN`` / ``nn.GRU`` / ``nn.LSTM`` (their C++ kernels); the peephole LSTM, the
  reset-before GRU and the output-gated RNN have none.

Each cell is registered by one record (:class:`seqlab.catalog.CellSpec`, in
:mod:`seqlab.nn.cells`): its ``model.cell`` name, its class and PyTorch's fused layer for it, if any. ``model.cell``'s
choices, :func:`~seqlab.nn.cells.make_cell` and the layer's backends derive from these records.

PyTorch's fused layers are run, in the precision this CPU has a kernel for, and an RNN's weights
renamed between the two backends' layouts in :mod:`seqlab.nn.rnn_fused`.

State is explicit and never stored on a module: a tensor ``h`` (L*D, B, H) for the RNN and GRU, a
tuple ``(h, c)`` of two such tensors for the LSTMs, laid out as in PyTorch (index ``layer*D +
direction``). Batches are batch-first; variable-length batches pass ``lengths`` (padding at the end).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.nn.cells import _Cell, cell_spec, make_cell
from seqlab.nn.rnn_fused import (
    State,
    fused_to_scratch_state_dict,
    run_fused,
    scratch_to_fused_state_dict,
)

BACKENDS = ("scratch", "fused")


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
        output, hx = run_layer(self.fused, x, hx, lengths)  # (B, T, D*H)
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
    state after its last real step, as :class:`RNN` computes it
    (:func:`seqlab.nn.rnn_fused.run_fused`, which also picks the precision this CPU has a kernel
    for).

    Shape:
        x: (B, T, I); lengths: (B,) or None; state: (L*D, B, H), or a tuple (h, c) of those.
        returns output (B, T, D*H), zeros at padded positions, and the final state.
    """
    if isinstance(layer, RNN):
        return layer(x, state, lengths)
    return run_fused(layer, x, state, lengths)


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
