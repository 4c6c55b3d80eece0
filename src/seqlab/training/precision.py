"""Numeric precision of matrix products: fp32, bf16, or ``auto`` (what the hardware runs natively).

bf16 autocast halves the memory traffic of matrix products and doubles their throughput where
the hardware has bf16 instructions (AVX512_BF16 or AMX on x86 CPUs, bf16 tensor cores on GPUs).
Where it has none, PyTorch falls back to a scalar kernel that is many times *slower* than fp32,
so ``auto`` picks bf16 only on hardware that has it:

- CUDA: ``torch.cuda.is_bf16_supported()``.
- CPU: the ISA flags PyTorch reports (``torch.cpu._is_avx512_bf16_supported()``,
  ``_is_amx_tile_supported()``); where they say yes, a short timed probe confirms that a bf16
  matrix product is not slower than fp32 (virtual machines may hide or emulate instructions).

An explicit ``bf16`` on hardware without native support is honoured, with a warning that names
the slowdown measured by the same probe. :func:`resolve_precision` decides once per process.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch

Precision = Literal["auto", "fp32", "bf16"]


@dataclass(frozen=True)
class Resolved:
    """The precision a run uses and why (printed in the log)."""

    precision: Literal["fp32", "bf16"]
    reason: str

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype, or None for plain fp32."""
        return torch.bfloat16 if self.precision == "bf16" else None


def cpu_bf16_flags() -> dict[str, bool]:
    """The CPU features relevant to bf16 matrix products, as PyTorch detects them."""
    cpu = torch.cpu
    return {
        "avx512_bf16": bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)()),
        "amx": bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)()),
    }


@functools.cache
def bf16_speedup(size: int = 512, repeats: int = 5) -> float:
    """Time of an fp32 ``size``² matrix product over that of a bf16 one (>1: bf16 is faster).

    Best of ``repeats`` after a warm-up; takes well under a second where bf16 is native and a
    few seconds where it is emulated.
    """
    a32 = torch.randn(size, size)
    b32 = torch.randn(size, size)
    a16, b16 = a32.bfloat16(), b32.bfloat16()

    def best(a: torch.Tensor, b: torch.Tensor) -> float:
        a @ b  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        return min(times)

    return best(a32, b32) / best(a16, b16)


def native_bf16(device: torch.device) -> tuple[bool, str]:
    """Whether ``device`` runs bf16 matrix products natively, and the evidence."""
    if device.type == "cuda":
        ok = torch.cuda.is_bf16_supported()
        return ok, f"CUDA device {'supports' if ok else 'lacks'} bf16"
    flags = cpu_bf16_flags()
    capability = torch.backends.cpu.get_cpu_capability()
    if not any(flags.values()):
        return False, f"CPU has no AVX512_BF16/AMX (PyTorch capability {capability})"
    speedup = bf16_speedup()
    have = ", ".join(name for name, on in flags.items() if on)
    if speedup < 1.0:
        return False, f"CPU reports {have} but a bf16 matmul ran {1 / speedup:.1f}x slower"
    return True, f"CPU has {have} (bf16 matmul {speedup:.1f}x fp32)"


def resolve_precision(requested: Precision, device: torch.device | str = "cpu") -> Resolved:
    """Turn ``auto``/``fp32``/``bf16`` into what runs on ``device``, with the reason."""
    device = torch.device(device)
    if requested == "fp32":
        return Resolved("fp32", "requested fp32")
    native, why = native_bf16(device)
    if requested == "auto":
        return Resolved("bf16" if native else "fp32", f"auto: {why}")
    if requested != "bf16":
        raise ValueError(f"precision must be auto, fp32 or bf16, got {requested!r}")
    if not native:
        slowdown = 1 / bf16_speedup() if device.type == "cpu" else float("nan")
        warnings.warn(
            f"precision bf16 requested, but {why}: bf16 matrix products run about "
            f"{slowdown:.1f}x slower than fp32 here; use precision auto or fp32",
            stacklevel=2,
        )
    return Resolved("bf16", "requested bf16")


@contextlib.contextmanager
def autocast(resolved: Resolved, device: torch.device | str = "cpu") -> Iterator[None]:
    """Run the block in the resolved precision (bf16 autocast, or nothing for fp32)."""
    device = torch.device(device)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=resolved.dtype is not None):
        yield
