"""Reading a checkpoint folder: its metadata, its tensors (checksums verified), a model's weights.

A checkpoint is a folder of safetensors files and a ``meta.json`` (the layout of a whole run
directory is in :mod:`seqlab.rundir`); loading one never executes code. ``meta.json`` records the
SHA-256 of each tensor file rank 0 wrote (``sha256``); loading a file checks it, so weights
damaged in place (same size, bytes overwritten) are refused naming the file. Checkpoints written
before the checksums were added have none and load as before.

This is the side inference needs; writing checkpoints (and the optimizer and RNG state only
training reads back) is :mod:`seqlab.training.checkpoint`, which builds on this module.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt, ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor, nn

from seqlab.errors import CheckpointError

FORMAT = "seqlab.checkpoint/1"
#: tensor files rank 0 writes before ``meta.json``, whose SHA-256 the metadata records
CHECKSUMMED = ("model.safetensors", "optimizer.safetensors", "rank0.safetensors")
META = "meta.json"
WEIGHTS = "model.safetensors"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_checksum(path: Path) -> None:
    """Compare ``path`` with the SHA-256 its checkpoint's ``meta.json`` recorded, if any.

    Raises:
        CheckpointError: the bytes differ from those saved (the file was damaged or replaced).
    """
    try:
        meta = json.loads((path.parent / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # read_meta reports a missing or damaged meta.json
    recorded = meta.get("sha256") if isinstance(meta, dict) else None
    expected = recorded.get(path.name) if isinstance(recorded, dict) else None
    if expected is not None and sha256_of(path) != expected:
        raise CheckpointError(
            f"{path} is damaged: its SHA-256 differs from the one recorded in "
            f"{path.parent / META} when it was saved; use another checkpoint (--which) "
            "or restore the file"
        )


def load_safetensors(path: Path) -> dict[str, Tensor]:
    """The tensors of a checkpoint file, its checksum verified (:func:`verify_checksum`)."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint file missing: {path}")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: corrupt or not a safetensors file ({exc})") from None
    verify_checksum(path)  # a file that still parses may hold damaged numbers
    return tensors


def read_json(path: Path, what: str = "checkpoint metadata") -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{what} missing: {path}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: {what} is not valid JSON ({exc})") from None


class _Schedule(BaseModel):
    steps: NonNegativeInt
    scale: float


class _Meta(BaseModel):
    """The keys of ``meta.json`` that seqlab reads back, and their types (others may follow)."""

    model_config = ConfigDict(extra="allow", strict=True)
    arch: str
    step: NonNegativeInt
    epoch: NonNegativeInt
    batch: NonNegativeInt
    best: float | None
    evals_since_best: NonNegativeInt
    history: list[dict[str, Any]]
    world_size: PositiveInt = 1
    optimizer: Any
    rank_state: Any
    schedule: _Schedule
    averaged_steps: list[NonNegativeInt] | None = None  # an end-of-training average's steps


def read_meta(ckpt: Path) -> dict[str, Any]:
    """``meta.json`` of a checkpoint folder, checked: a foreign or damaged file is refused."""
    path = ckpt / META
    meta = read_json(path)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a seqlab checkpoint (expected format {FORMAT!r})")
    try:
        _Meta.model_validate(meta)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        key = ".".join(str(p) for p in first["loc"]) or "<top level>"
        raise CheckpointError(
            f"{path}: damaged checkpoint metadata: {key}: {first['msg']} "
            f"(got {str(first.get('input'))[:60]})"
        ) from None
    return meta


def load_model_weights(model: nn.Module, ckpt: Path) -> None:
    """Load ``model.safetensors`` into ``model``, refusing any mismatch of names or shapes."""
    path = ckpt / WEIGHTS
    state = load_safetensors(path)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{path} does not match this model: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{path}: {name} has shape {tuple(tensor.shape)}, "
                f"the model expects {tuple(expected[name].shape)}"
            )
    model.load_state_dict(state)
