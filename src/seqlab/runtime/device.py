"""Which device computes: ``auto`` (a CUDA GPU when one is present, else the CPU), ``cpu`` or ``cuda``.

One rule for every caller: training (``train.device``), evaluation and every predictor behind
:func:`seqlab.load` (``device=``), the command line (``--device``) and the server
(``seqlab serve --device``). A run records the device it trained on (``run.json``), and its
checkpoints hold CPU tensors (safetensors), so a run trained on a GPU loads on a CPU and the
reverse: the device is chosen where the model is used, never read from the run.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import torch

from seqlab.errors import ConfigError

DeviceName = Literal["auto", "cpu", "cuda"]
#: the names a user may give (``cuda:N`` picks one GPU of several)
CHOICES = ("auto", "cpu", "cuda")


def resolve_device(name: str | int | torch.device | None, what: str = "device") -> torch.device:
    """The ``torch.device`` that ``name`` means here: ``auto`` (or None) is ``cuda`` when PyTorch
    sees a CUDA device, else ``cpu``; ``cuda`` (or ``cuda:N``, or the number N, PyTorch's own
    spelling of ``cuda:N``) without one is refused, saying what to use instead (``what`` names
    the setting in the message: ``train.device``). Under ``torchrun``, ``cuda`` is the GPU of
    the process's local rank."""
    if isinstance(name, torch.device):
        name = str(name)
    elif isinstance(name, int) and not isinstance(name, bool) and name >= 0:
        name = f"cuda:{name}"  # torch.device(0) is cuda:0
    elif name is not None and not isinstance(name, str):
        raise ConfigError(
            f"{what} must be one of auto, cpu, cuda, cuda:N or a GPU's number N, got "
            f"{name!r} ({type(name).__name__})"
        )
    if name is None or name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" and torch.cuda.is_available() and "LOCAL_RANK" in os.environ:
        # torchrun: each process of a machine takes its own GPU (NCCL needs one per process)
        name = f"cuda:{int(os.environ['LOCAL_RANK']) % torch.cuda.device_count()}"
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise ConfigError(f"{what}={name}, but PyTorch sees no CUDA device; use cpu or auto")
        index = int(name[5:]) if ":" in name else None
        if index is not None and index >= torch.cuda.device_count():
            raise ConfigError(
                f"{what}={name}, but PyTorch sees {torch.cuda.device_count()} CUDA device(s) "
                f"(cuda:0 to cuda:{torch.cuda.device_count() - 1})"
            )
        return torch.device(name)
    raise ConfigError(f"{what} must be one of auto, cpu, cuda or cuda:N, got {name!r}")


def describe_device(device: torch.device | str) -> dict[str, Any]:
    """What ``run.json`` and the evaluation lines record of ``device``: its name as PyTorch
    writes it and, for a GPU, the card, its compute capability and CUDA version."""
    device = torch.device(device)
    if device.type != "cuda":
        return {"device": device.type}
    index = device.index if device.index is not None else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return {
        "device": f"cuda:{index}",
        "gpu": torch.cuda.get_device_name(index),
        "capability": f"{major}.{minor}",
        "cuda": torch.version.cuda,
    }


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter (or buffer); the CPU for a model with neither."""
    for tensor in (*model.parameters(), *model.buffers()):
        return tensor.device
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (a timing's end); nothing on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
