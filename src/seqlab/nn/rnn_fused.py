"""PyTorch's fused recurrent layers (``nn.RNN``, ``nn.GRU``, ``nn.LSTM``) beside seqlab's own
:class:`seqlab.nn.rnn.RNN`: running one over a batch of padded rows in the precision this CPU has
a kernel for (:func:`run_fused`, :func:`bf16_kernel`), and renaming an :class:`~seqlab.nn.rnn.RNN`'s
weights between the scratch and the fused layouts (:func:`scratch_to_fused_state_dict`,
:func:`fused_to_scratch_state_dict`). Notation: that of :mod:`seqlab.nn.rnn`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

#: ``h`` (L*D, B, H) for rnn/rnn_relu/gru; ``(h, c)`` for lstm/peephole_lstm.
State = Tensor | tuple[Tensor, Tensor]

_WEIGHT_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
_PEEPHOLE_NAMES = ("weight_ci", "weight_cf", "weight_co")


# -------------------------------------------------------------------------------------- running
def run_fused(
    layer: nn.Module, x: Tensor, state: State | None = None, lengths: Tensor | None = None
) -> tuple[Tensor, State]:
    """Run a fused layer over ``x`` from ``state`` (None: zeros); with ``lengths`` it reads a
    packed sequence, so each row's final state is the state after its last real step.

    Shape:
        x: (B, T, I); lengths: (B,) or None; state: (L*D, B, H), or a tuple (h, c) of those.
        returns output (B, T, D*H), zeros at padded positions, and the final state.
    """
    fp32_weights = next(layer.parameters()).dtype == torch.float32
    if _bf16_on_cpu(x) and fp32_weights and not bf16_kernel(type(layer)):
        # oneDNN has no bf16 LSTM kernel for CPUs without AVX-512 (an AVX2 CPU under bf16
        # autocast): run the layer in float32 there and return bf16, as a native CPU would
        return _run_fused_fp32(layer, x, state, lengths)
    if _bf16_autocast_on_cuda(x) and fp32_weights:
        # cuDNN's autocast runs an RNN in fp16 whatever the autocast dtype (no grad scaler under
        # bf16: its gradients could underflow): float32 there, returned in bf16
        return _run_fused_fp32(layer, x, state, lengths)
    return _run_packed(layer, x, state, lengths)


#: per fused layer class: whether this CPU runs it in bf16 (probed once, see bf16_kernel)
_BF16_KERNEL: dict[type, bool] = {}


def bf16_kernel(kind: type) -> bool:
    """Whether this CPU has a bf16 kernel for the fused layer class ``kind`` (``nn.LSTM`` has
    none on AVX2 CPUs; ``nn.GRU`` and ``nn.RNN`` do). Probed once per class on a one-unit
    layer under bf16 autocast, inside ``torch.random.fork_rng``, so the caller's random
    numbers (dropout masks) are the same whether or not the probe ran."""
    if kind not in _BF16_KERNEL:
        with torch.random.fork_rng(devices=[]), torch.autocast("cpu", dtype=torch.bfloat16):
            probe = kind(1, 1, batch_first=True)
            try:
                probe(torch.zeros(1, 1, 1))
                _BF16_KERNEL[kind] = True
            except RuntimeError:
                _BF16_KERNEL[kind] = False
    return _BF16_KERNEL[kind]


def _bf16_on_cpu(x: Tensor) -> bool:
    """Whether a fused layer would run ``x`` in bf16 on the CPU (bf16 input, or autocast)."""
    if x.device.type != "cpu":
        return False
    autocast = (
        torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )
    return x.dtype == torch.bfloat16 or autocast


def _bf16_autocast_on_cuda(x: Tensor) -> bool:
    """Whether ``x`` is on a CUDA device under bf16 autocast."""
    return (
        x.device.type == "cuda"
        and torch.is_autocast_enabled("cuda")
        and torch.get_autocast_dtype("cuda") == torch.bfloat16
    )


def _run_packed(
    layer: nn.Module, x: Tensor, state: State | None, lengths: Tensor | None
) -> tuple[Tensor, State]:
    if lengths is None:
        return layer(x, state)
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    packed_output, state = layer(packed, state)
    output, _ = pad_packed_sequence(packed_output, batch_first=True, total_length=x.size(1))
    return output, state  # (B, T, D*H)


def _run_fused_fp32(
    layer: nn.Module, x: Tensor, state: State | None, lengths: Tensor | None
) -> tuple[Tensor, State]:
    """The fused layer in float32 with autocast off (on ``x``'s device); output and state back
    in bf16."""

    def cast(s: Any, dtype: torch.dtype) -> Any:
        return tuple(t.to(dtype) for t in s) if isinstance(s, tuple) else s.to(dtype)

    with torch.autocast(x.device.type, enabled=False):  # the input's device: CPU or CUDA
        fp32_state = None if state is None else cast(state, torch.float32)
        out, new_state = _run_packed(layer, x.float(), fp32_state, lengths)
    return out.to(torch.bfloat16), cast(new_state, torch.bfloat16)


# ------------------------------------------------------------------------------------ conversion
def _key_pairs(num_layers: int, bidirectional: bool) -> Iterator[tuple[str, str]]:
    """(scratch key, fused key) for every weight of an :class:`~seqlab.nn.rnn.RNN`."""
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
    """Rename a scratch :class:`~seqlab.nn.rnn.RNN`'s state dict (``cells.{l*D+d}.weight_ih``
    …) to the fused one's (``fused.weight_ih_l{l}[_reverse]`` …). The tensors are not copied.

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
