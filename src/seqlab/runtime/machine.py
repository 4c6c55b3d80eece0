"""The machine a benchmark ran on, recorded in every benchmark's JSON."""

from __future__ import annotations

import os
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import torch


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def set_threads(threads: int, what: str = "threads") -> int:
    """Set PyTorch's thread count; more threads than CPUs is cut to the CPU count, with a
    warning (thousands of threads crash the OpenMP runtime, and more than one per CPU only
    slows the work). 0 leaves PyTorch's default. Returns the count in use."""
    if threads > cpu_count():
        warnings.warn(
            f"{what}={threads} is more than the {cpu_count()} CPU(s) this process may use: "
            f"using {cpu_count()}",
            stacklevel=2,
        )
        threads = cpu_count()
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def _cpuinfo(field: str) -> str:
    """The first ``field`` of ``/proc/cpuinfo`` (``model name``, ``vendor_id``), or ``""``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_model() -> str:
    return _cpuinfo("model name") or platform.processor() or "unknown"


def cpu_vendor() -> str:
    """The CPU's vendor (``GenuineIntel``, ``AuthenticAMD``, …), or ``""`` where unknown."""
    return _cpuinfo("vendor_id")


def isa_flags() -> dict[str, bool]:
    """The matmul-relevant instruction sets the CPU reports."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = set(next(ln for ln in text.splitlines() if ln.startswith("flags")).split())
    except (OSError, StopIteration):
        flags = set()
    return {
        "avx2": "avx2" in flags,
        "avx512f": "avx512f" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx": "amx_bf16" in flags or "amx_tile" in flags,
    }


def machine(precision: str | None = None) -> dict[str, Any]:
    """CPU model, ISA flags, PyTorch's CPU capability, threads, and the precision used."""
    return {
        "cpu": cpu_model(),
        "isa": isa_flags(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "precision": precision,
    }


def matmul_peak(dtype: torch.dtype = torch.float32, n: int = 1536, repeats: int = 5) -> float:
    """Measured ``torch.mm`` throughput of an n×n product, best of ``repeats``, in FLOP/s."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best
