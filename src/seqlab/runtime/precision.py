"""Numeric precision of matrix products: fp32, bf16, or ``auto`` (what the hardware runs natively).

bf16 autocast halves the memory traffic of matrix products and doubles their throughput where
the hardware has bf16 instructions (AVX512_BF16 or AMX on x86 CPUs, bf16 tensor cores on GPUs).
Where it has none, PyTorch falls back to a scalar kernel that is many times *slower* than fp32.

Training (``train.precision``): ``auto`` picks bf16 where the hardware has it and fp32 elsewhere,
except on an Intel CPU with AVX512_BF16 but no AMX, where bf16 trained seqlab's models 1.4–1.5×
slower than fp32 (:func:`auto_avoids_bf16`; AMX and AMD's Zen 4 make bf16 the faster one).
The decision reads only the hardware's feature flags and vendor, never a timing, so every process on one
machine decides the same, and a run records the precision it resolved to (``run.json`` and every
checkpoint): a resumed run keeps it (see :func:`resume_precision`).

- CUDA: ``torch.cuda.is_bf16_supported(including_emulation=False)`` (Ampere and later). On
  an older GPU ``auto`` trains in fp16 with a gradient scaler (``torch.amp.GradScaler``,
  Micikevicius et al. 2018, "Mixed Precision Training"): fp16's range is too narrow for
  gradients unscaled, and its matrix products run on the tensor cores bf16 lacks there.
- CPU: the ISA flags PyTorch reports (``torch.cpu._is_avx512_bf16_supported()``,
  ``_is_amx_tile_supported()``).
- ``SEQLAB_NATIVE_BF16=0`` or ``1`` overrides both (a VM that misreports its flags); with ``1``,
  ``auto`` is bf16 on any CPU.

Inference (``decode.precision``: ``translate``, ``evaluate``, ``classify``, ``generate``,
``forecast``, validation during training and the Python API) is fp32 unless bf16 is asked for:
bf16 rounds each product to 8 bits of mantissa, so two near-tied tokens can swap between a batch
of 1 and a batch of 64, between greedy and beam 1, or between seqlab and CTranslate2. In fp32
those paths agree exactly; bf16 is an explicit, faster option whose outputs agree up to such ties.

An explicit ``bf16`` on hardware without native support is honoured, with a warning.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch

from seqlab.errors import ConfigError
from seqlab.runtime.machine import cpu_vendor

Precision = Literal["auto", "fp32", "bf16"]


@dataclass(frozen=True)
class Resolved:
    """The precision a run uses and why (printed in the log, written into ``run.json``)."""

    precision: Literal["fp32", "bf16", "fp16"]
    reason: str

    @property
    def dtype(self) -> torch.dtype | None:
        """The autocast dtype, or None for plain fp32."""
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)

    @property
    def scaled(self) -> bool:
        """Whether training scales the loss (fp16: :class:`torch.amp.GradScaler`)."""
        return self.precision == "fp16"

    def to_json(self) -> dict[str, str]:
        return {"precision": self.precision, "reason": self.reason}


FP32 = Resolved("fp32", "requested fp32")


#: overrides the hardware detection: ``1`` (the machine runs bf16 natively) or ``0`` (it does
#: not), for virtual machines that hide or misreport CPU flags, and for tests that must decide the
#: same on every machine
NATIVE_BF16_ENV = "SEQLAB_NATIVE_BF16"


def cpu_bf16_flags() -> dict[str, bool]:
    """The CPU features relevant to bf16 matrix products, as PyTorch detects them."""
    cpu = torch.cpu
    return {
        "avx512_bf16": bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)()),
        "amx": bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)()),
    }


def native_bf16(device: torch.device | str = "cpu") -> tuple[bool, str]:
    """Whether ``device`` runs bf16 matrix products natively, and the evidence (flags only)."""
    device = torch.device(device)
    forced = os.environ.get(NATIVE_BF16_ENV)
    if forced is not None:
        if forced not in ("0", "1"):
            raise ConfigError(
                f"environment variable {NATIVE_BF16_ENV} must be 0 or 1, got {forced!r}"
            )
        return forced == "1", f"{NATIVE_BF16_ENV}={forced}"
    if device.type == "cuda":
        ok = _cuda_bf16()
        return ok, f"CUDA device {'supports' if ok else 'lacks'} bf16"
    flags = cpu_bf16_flags()
    capability = torch.backends.cpu.get_cpu_capability()
    if not any(flags.values()):
        return False, f"CPU has no AVX512_BF16/AMX (PyTorch capability {capability})"
    have = ", ".join(name for name, on in flags.items() if on)
    return True, f"CPU has {have} (PyTorch capability {capability})"


def _cuda_bf16() -> bool:
    """bf16 in hardware on the current GPU (not PyTorch's emulation of it on older cards)."""
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # a PyTorch without the argument
        return torch.cuda.is_bf16_supported()


def auto_avoids_bf16(device: torch.device | str = "cpu") -> str | None:
    """Why ``auto`` trains in fp32 on a CPU that runs bf16 natively, or None.

    An Intel CPU with AVX512_BF16 but no AMX (Cooper Lake, or a virtual machine that hides AMX):
    bf16 autocast trained the tiny Multi30k recipe and the dates Transformer at 0.70–0.72× the
    speed of fp32 on one (docs/reference/data.md), its bf16 dot products not paying for the
    conversions around them, where AMX and AMD's Zen 4 make bf16 the faster one. The environment
    override (``SEQLAB_NATIVE_BF16``) and other devices are taken as they say.
    """
    if torch.device(device).type != "cpu" or os.environ.get(NATIVE_BF16_ENV) is not None:
        return None
    flags = cpu_bf16_flags()
    if flags["avx512_bf16"] and not flags["amx"] and cpu_vendor() == "GenuineIntel":
        return "Intel CPU with AVX512_BF16 but no AMX, where bf16 trains slower than fp32"
    return None


def resolve_precision(requested: str, device: torch.device | str = "cpu") -> Resolved:
    """Turn ``auto``/``fp32``/``bf16`` into what runs on ``device``, with the reason."""
    if requested == "fp32":
        return FP32
    if requested not in ("auto", "bf16"):
        raise ValueError(f"precision must be auto, fp32 or bf16, got {requested!r}")
    native, why = native_bf16(device)
    if requested == "auto":
        slower = auto_avoids_bf16(device) if native else None
        if slower:
            return Resolved("fp32", f"auto: {slower}")
        if not native and torch.device(device).type == "cuda":
            return Resolved("fp16", f"auto: {why}: fp16 with a gradient scaler")
        return Resolved("bf16" if native else "fp32", f"auto: {why}")
    if not native:
        warnings.warn(
            f"precision bf16 requested, but {why}: bf16 matrix products are emulated here and "
            "run many times slower than fp32; use fp32 on this machine",
            stacklevel=2,
        )
    return Resolved("bf16", "requested bf16")


def resume_precision(
    recorded: str | None, requested: str, overridden: bool, device: torch.device | str = "cpu"
) -> Resolved:
    """The training precision of a resumed run.

    Args:
        recorded: the precision the run trained in so far (``run.json`` / its checkpoint), or
            None for runs written before it was recorded.
        requested: ``train.precision`` of the run's config (with the resume's overrides).
        overridden: whether the resume command set ``train.precision`` explicitly.

    A run keeps its recorded precision, so that the resumed steps compute what the uninterrupted
    run would have. Where ``auto`` chose bf16 and this machine cannot run it natively, the resume
    refuses and names both choices; an explicit ``train.precision=...`` on the resume command is
    the user's choice and is honoured.
    """
    if overridden or recorded is None:
        return resolve_precision(requested, device)
    if recorded not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"recorded training precision {recorded!r} is not fp32, bf16 or fp16")
    if recorded == "fp32":
        return Resolved("fp32", "recorded in the run (resumed as trained)")
    if recorded == "fp16":  # auto chose it on a GPU without bf16; the scaler restarts
        if torch.device(device).type != "cuda":
            raise ConfigError(
                "this run trained in fp16 on a GPU; on a CPU choose train.precision=fp32 or "
                "train.precision=bf16 on the resume command"
            )
        return Resolved("fp16", "recorded in the run (resumed as trained)")
    if requested == "bf16":  # the run asked for bf16 itself: honoured as for a new run
        return resolve_precision("bf16", device)
    native, why = native_bf16(device)
    if not native:
        raise ConfigError(
            f"this run trained in bf16, but {why}: emulated bf16 runs many times slower. Choose "
            "one on the resume command: train.precision=bf16 (the same numbers as the run so "
            "far, slowly) or train.precision=fp32 (fast; the steps from here on differ from an "
            "uninterrupted bf16 run)"
        )
    return Resolved("bf16", f"recorded in the run (resumed as trained; {why})")


@contextlib.contextmanager
def autocast(resolved: Resolved, device: torch.device | str = "cpu") -> Iterator[None]:
    """Run the block in the resolved precision (bf16 or fp16 autocast, or nothing for fp32) on
    ``device``'s kind (autocast is per device type: a CPU context leaves CUDA work in fp32)."""
    device = torch.device(device)
    dtype = resolved.dtype or torch.bfloat16
    with torch.autocast(device.type, dtype=dtype, enabled=resolved.dtype is not None):
        yield
