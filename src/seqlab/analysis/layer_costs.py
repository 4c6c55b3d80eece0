"""Measured cost of one convolutional, recurrent and self-attention layer as the length n grows.

Every layer maps n vectors of width d to n vectors of width d (d2l.ai §11.6.2; Vaswani et al.
2017, Table 1). The textbook costs per layer:

================  ===============  =====================  ===================
layer             computation      sequential operations  maximum path length
================  ===============  =====================  ===================
convolution (k)   O(k n d²)        O(1)                   O(n / k)
RNN / GRU         O(n d²)          O(n)                   O(n)
self-attention    O(n² d)          O(1)                   O(1)
================  ===============  =====================  ===================

:func:`measure_layer_costs` times the forward and backward pass of ``nn.Conv1d``, ``nn.RNN``,
``nn.GRU`` and :class:`seqlab.nn.attention.MultiHeadAttention` (weights not requested, so the fused
``F.scaled_dot_product_attention`` kernel) at one width, and measures each one's peak memory;
``attention_explicit`` is the same attention layer with its weights requested, which
materialises the ``(B, h, n, n)`` score and weight matrices. A log–log slope of time against n
near 1 means linear cost, near 2 quadratic (for n large enough that fixed per-call overheads no
longer dominate, hence slopes are fitted on the longer half of the lengths).

**How memory is measured (CPU).** ``torch.profiler`` with ``profile_memory=True`` records every
allocation and free made through PyTorch's CPU allocator while one forward + backward pass runs;
the running sum of those byte counts, in time order, is the memory the pass holds beyond what
existed before it, and its maximum is reported as ``peak_bytes``. It includes activations saved
for backward, gradients (of the input and the parameters) and temporaries inside kernels that
allocate through PyTorch (the fused attention kernel's per-thread blocks and log-sum-exp
buffers). Limits: memory allocated behind PyTorch's allocator (oneDNN / MKL scratch space, the
Python heap) is not seen; it is bytes requested, not resident pages (allocator caching and page
granularity make the process RSS differ); the input and the parameters, which exist before the
pass, are not counted.

The table, the figure and the files written from these measurements:
:mod:`seqlab.analysis.layer_costs_report`.

Notation: B batch, n length, d width, h heads, k kernel size.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.nn.attention import MultiHeadAttention

LAYERS = ("conv", "rnn", "gru", "attention", "attention_explicit")
COMPLEXITY = {
    "conv": "O(knd²)",
    "rnn": "O(nd²)",
    "gru": "O(nd²)",
    "attention": "O(n²d)",
    "attention_explicit": "O(n²d)",
}
MEMORY_COMPLEXITY = {
    "conv": "O(nd)",
    "rnn": "O(nd)",
    "gru": "O(nd)",
    "attention": "O(nd)",  # fused kernel: output + log-sum-exp, no n × n matrix
    "attention_explicit": "O(hn²)",
}
DEFAULT_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096)


# ------------------------------------------------------------------------------------- layers
class _Conv(nn.Module):
    """Conv1d over the length axis, width d in and out, 'same' padding."""

    def __init__(self, width: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(width, width, kernel_size, padding=kernel_size // 2)

    def forward(self, x: Tensor) -> Tensor:
        """Shape: ``(B, n, d) -> (B, n, d)``."""
        return self.conv(x.transpose(1, 2)).transpose(1, 2)  # (B, n, d)


class _Recurrent(nn.Module):
    """One ``nn.RNN`` (tanh) or ``nn.GRU`` layer with hidden size d."""

    def __init__(self, width: int, cell: str):
        super().__init__()
        cls = nn.GRU if cell == "gru" else nn.RNN
        self.rnn = cls(width, width, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        """Shape: ``(B, n, d) -> (B, n, d)``."""
        return self.rnn(x)[0]  # (B, n, d)


class _SelfAttention(nn.Module):
    """Multi-head self-attention without a mask; ``explicit`` requests the weights."""

    def __init__(self, width: int, heads: int, explicit: bool):
        super().__init__()
        self.attn = MultiHeadAttention(width, heads)
        self.explicit = explicit

    def forward(self, x: Tensor) -> Tensor:
        """Shape: ``(B, n, d) -> (B, n, d)``."""
        out, _, _ = self.attn.self_attention(x, need_weights=self.explicit)  # (B, n, d)
        return out


def build_layer(name: str, width: int, kernel_size: int = 3, heads: int = 4) -> nn.Module:
    """One of :data:`LAYERS` at width d, mapping ``(B, n, d) -> (B, n, d)``."""
    if name == "conv":
        return _Conv(width, kernel_size)
    if name in ("rnn", "gru"):
        return _Recurrent(width, name)
    if name in ("attention", "attention_explicit"):
        return _SelfAttention(width, heads, explicit=name == "attention_explicit")
    raise ValueError(f"unknown layer {name!r}; choose from {', '.join(LAYERS)}")


# ---------------------------------------------------------------------------------- measuring
def _step(layer: nn.Module, x: Tensor, backward: bool) -> tuple[float, float]:
    """One forward (and backward) pass; returns (forward seconds, backward seconds).

    Without ``backward`` the forward runs under ``no_grad`` (inference: nothing saved).
    """
    layer.zero_grad(set_to_none=True)
    x.grad = None
    start = time.perf_counter()
    with torch.set_grad_enabled(backward):
        y = layer(x)  # (B, n, d)
    mid = time.perf_counter()
    if not backward:
        return mid - start, 0.0
    y.sum().backward()
    return mid - start, time.perf_counter() - mid


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence the C++ profiler's start/stop log lines (written to file descriptor 2)."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to redirect
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory_bytes(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated through PyTorch's CPU allocator while ``fn()`` runs.

    Memory that existed before the call is not counted (see the module docstring for the method
    and its limits).
    """
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        with _quiet_stderr():
            prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    memory = sorted(
        (e["ts"], e["args"]["Bytes"], e["args"]["Addr"])
        for e in events
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0
    )
    # Count a free only if its block was allocated during this call: the profiler also reports
    # frees of blocks allocated during an earlier profiling session, which must not lower the sum.
    live: dict[int, int] = {}
    total = peak = 0
    for _, nbytes, addr in memory:
        if nbytes > 0:
            live[addr] = live.get(addr, 0) + nbytes
            total += nbytes
            peak = max(peak, total)
        elif addr in live:
            total -= live.pop(addr)
    return int(peak)


def fitted_slope(lengths: Sequence[float], values: Sequence[float]) -> float | None:
    """Least-squares slope of log(value) against log(length): the exponent p in value ∝ nᵖ.

    None when fewer than two distinct lengths are given.
    """
    if len(set(lengths)) < 2:
        return None
    xs = [math.log(n) for n in lengths]
    ys = [math.log(max(v, 1e-12)) for v in values]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def _fit_range(lengths: Sequence[int]) -> list[int]:
    """Indices of the longer half of the lengths (at least two), where asymptotics show."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    keep = max(2, math.ceil(len(order) / 2))
    return sorted(order[-keep:])


def measure_layer_costs(
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    width: int = 256,
    batch: int = 1,
    kernel_size: int = 3,
    heads: int = 4,
    repeats: int = 3,
    layers: Sequence[str] = LAYERS,
    backward: bool = True,
    memory: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """Time (median of ``repeats``) and peak memory of each layer at every length n.

    The layers take turns within each repeat, so a change in machine load touches all of them
    alike. Times are in seconds, memory in bytes; slopes are log–log fits over the longer half
    of ``lengths`` (``*_slope``) and between the two longest (``*_slope_last``). Runs with the
    current ``torch.get_num_threads()``, in fp32.

    Returns:
        ``{"lengths", "width", "batch", "kernel_size", "heads", "repeats", "threads",
        "fit_lengths", "memory_method", "layers": {name: {"complexity", "memory_complexity",
        "forward_s", "backward_s", "time_s", "peak_bytes", "time_slope", "memory_slope",
        "time_slope_last", "memory_slope_last"}}}``
        where ``time_s`` is forward + backward (forward alone when ``backward=False``) and the
        lists follow ``lengths``; ``peak_bytes`` is empty when ``memory=False``.
    """
    lengths = [int(n) for n in lengths]
    if not lengths or min(lengths) < 1:
        raise ValueError(f"lengths must be positive integers, got {lengths}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for name in layers:
        if name not in LAYERS:
            raise ValueError(f"unknown layer {name!r}; choose from {', '.join(LAYERS)}")
    torch.manual_seed(seed)
    modules = {name: build_layer(name, width, kernel_size, heads) for name in layers}
    per_layer: dict[str, dict[str, list[float]]] = {
        name: {"forward_s": [], "backward_s": [], "time_s": [], "peak_bytes": []} for name in layers
    }
    for n in lengths:
        x = torch.randn(batch, n, width, requires_grad=backward)  # (B, n, d)
        for layer in modules.values():  # warm-up: first-call allocations, kernel selection
            _step(layer, x, backward)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in layers}
        for _ in range(repeats):
            for name, layer in modules.items():
                times[name].append(_step(layer, x, backward))
        for name, layer in modules.items():
            fwd = statistics.median(t[0] for t in times[name])
            bwd = statistics.median(t[1] for t in times[name])
            total = statistics.median(t[0] + t[1] for t in times[name])
            rec = per_layer[name]
            rec["forward_s"].append(fwd)
            rec["backward_s"].append(bwd)
            rec["time_s"].append(total)
            if memory:
                rec["peak_bytes"].append(
                    peak_memory_bytes(lambda layer=layer, x=x: _step(layer, x, backward))
                )
    fit = _fit_range(lengths)
    fit_lengths = [lengths[i] for i in fit]
    last = fit[-2:]  # the two longest lengths: the local slope where n is largest
    last_lengths = [lengths[i] for i in last]
    results: dict[str, Any] = {
        "lengths": lengths,
        "width": width,
        "batch": batch,
        "kernel_size": kernel_size,
        "heads": heads,
        "repeats": repeats,
        "backward": backward,
        "threads": torch.get_num_threads(),
        "fit_lengths": fit_lengths,
        "memory_method": (
            "torch.profiler(profile_memory=True): peak of the running sum of CPU-allocator "
            "allocations and frees during one pass; excludes the input, the parameters and "
            "memory allocated outside PyTorch's allocator"
        ),
        "layers": {},
    }
    for name, rec in per_layer.items():
        peaks = rec["peak_bytes"]
        results["layers"][name] = {
            "complexity": COMPLEXITY[name],
            "memory_complexity": MEMORY_COMPLEXITY[name],
            **rec,
            "time_slope": fitted_slope(fit_lengths, [rec["time_s"][i] for i in fit]),
            "memory_slope": fitted_slope(fit_lengths, [peaks[i] for i in fit]) if peaks else None,
            "time_slope_last": fitted_slope(last_lengths, [rec["time_s"][i] for i in last]),
            "memory_slope_last": (
                fitted_slope(last_lengths, [peaks[i] for i in last]) if peaks else None
            ),
        }
    return results


def attention_memory_report(
    length: int = 4096, width: int = 256, heads: int = 4, batch: int = 1
) -> dict[str, Any]:
    """Forward + backward peak memory of fused self-attention against one n × n matrix per head.

    ``matrix_bytes`` = B·h·n²·4 is what materialising the fp32 attention matrix (scores or
    weights) of every head takes; the explicit path (weights requested) holds several such
    matrices (scores, weights, their gradients) and its measured peak is reported next to the
    fused kernel's, which never forms the matrix.

    Returns:
        ``{"length", "width", "heads", "batch", "matrix_bytes", "fused_peak_bytes",
        "explicit_peak_bytes", "fused_below_matrix", "fused_over_matrix",
        "explicit_over_matrix"}``.
    """
    torch.manual_seed(0)
    x = torch.randn(batch, length, width, requires_grad=True)  # (B, n, d)
    fused = build_layer("attention", width, heads=heads)
    explicit = build_layer("attention_explicit", width, heads=heads)
    explicit.load_state_dict(fused.state_dict())
    _step(fused, x, True)  # warm-up
    fused_peak = peak_memory_bytes(lambda: _step(fused, x, True))
    explicit_peak = peak_memory_bytes(lambda: _step(explicit, x, True))
    matrix = batch * heads * length * length * 4
    return {
        "length": length,
        "width": width,
        "heads": heads,
        "batch": batch,
        "matrix_bytes": matrix,
        "fused_peak_bytes": fused_peak,
        "explicit_peak_bytes": explicit_peak,
        "fused_below_matrix": fused_peak < matrix,
        "fused_over_matrix": fused_peak / matrix,
        "explicit_over_matrix": explicit_peak / matrix,
    }
