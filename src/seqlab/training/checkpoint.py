"""Checkpoints as safetensors + JSON: loading one never executes code.

A run directory looks like::

    RUN_DIR/
      config.yaml                  resolved experiment config
      vocab*.json, tokenizer*      written once by the experiment
      metrics.jsonl                one JSON object per log line
      checkpoints/
        step-00001200/
          model.safetensors        model weights
          optimizer.safetensors    optimizer tensors (Adam moments, ...)
          rank0.safetensors        per-process state: RNG, carried recurrent state
          meta.json                step, epoch, position in the epoch, optimizer/scheduler
                                   hyper-parameters, best metric, format marker
        latest.json, best.json     {"step": ...} pointers, replaced atomically

Each checkpoint folder is written under a temporary name and renamed when complete, so a
killed run leaves either the whole checkpoint or none of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt, ValidationError
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from seqlab.errors import CheckpointError
from seqlab.io import atomic_write_json

FORMAT = "seqlab.checkpoint/1"


# ------------------------------------------------------------------------- tensors and trees
def flatten_tensors(tree: Any, prefix: str = "") -> tuple[dict[str, Tensor], Any]:
    """Split a nested structure into named tensors and a JSON skeleton that refers to them."""
    tensors: dict[str, Tensor] = {}

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, Tensor):
            tensors[path] = node.detach().cpu().contiguous()
            return {"__tensor__": path}
        if isinstance(node, dict):
            return {
                "__dict__": [
                    [walk(k, f"{path}.k{i}"), walk(v, f"{path}.{i}")]
                    for i, (k, v) in enumerate(node.items())
                ]
            }
        if isinstance(node, list | tuple):
            items = [walk(v, f"{path}.{i}") for i, v in enumerate(node)]
            return {"__tuple__": items} if isinstance(node, tuple) else items
        if node is None or isinstance(node, bool | int | float | str):
            return node
        raise TypeError(f"cannot store {type(node).__name__} in a checkpoint at {path}")

    return tensors, walk(tree, prefix or "t")


def unflatten_tensors(skeleton: Any, tensors: dict[str, Tensor]) -> Any:
    """Inverse of :func:`flatten_tensors`."""
    if isinstance(skeleton, dict):
        if "__tensor__" in skeleton:
            return tensors[skeleton["__tensor__"]]
        if "__tuple__" in skeleton:
            return tuple(unflatten_tensors(v, tensors) for v in skeleton["__tuple__"])
        if "__dict__" in skeleton:
            return {
                unflatten_tensors(k, tensors): unflatten_tensors(v, tensors)
                for k, v in skeleton["__dict__"]
            }
        raise CheckpointError(f"unknown entry in checkpoint metadata: {sorted(skeleton)}")
    if isinstance(skeleton, list):
        return [unflatten_tensors(v, tensors) for v in skeleton]
    return skeleton


def save_tree(tree: Any, tensor_path: Path) -> Any:
    """Write the tensors of ``tree`` to a safetensors file; return the JSON skeleton."""
    tensors, skeleton = flatten_tensors(tree)
    save_file(tensors, str(tensor_path))
    return skeleton


def load_safetensors(path: Path) -> dict[str, Tensor]:
    if not path.is_file():
        raise CheckpointError(f"checkpoint file missing: {path}")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: corrupt or not a safetensors file ({exc})") from None


def read_json(path: Path, what: str = "checkpoint metadata") -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{what} missing: {path}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: {what} is not valid JSON ({exc})") from None


# ----------------------------------------------------------------------------- checkpoints
def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def begin_checkpoint(run_dir: Path, step: int) -> Path:
    """Create the temporary folder a checkpoint is written into (rank 0 only)."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{step_name(step)}.", dir=root))


def commit_checkpoint(run_dir: Path, tmp: Path, step: int, is_best: bool, keep_last: int) -> Path:
    """Rename the finished temporary folder into place, update pointers, prune old ones."""
    root = checkpoint_dir(run_dir)
    final = root / step_name(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_json(root / "latest.json", {"step": step})
    if is_best:
        atomic_write_json(root / "best.json", {"step": step})
    prune(run_dir, keep_last)
    return final


def list_steps(run_dir: Path) -> list[int]:
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    return sorted(
        int(p.name[5:]) for p in root.glob("step-*") if p.name[5:].isdigit() and p.is_dir()
    )


def pointer(run_dir: Path, which: str) -> int | None:
    path = checkpoint_dir(run_dir) / f"{which}.json"
    if not path.is_file():
        return None
    data = read_json(path, f"{which} checkpoint pointer")
    step = data.get("step") if isinstance(data, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f'{path}: expected {{"step": <number>}}, got {str(data)[:80]}')
    return step


def prune(run_dir: Path, keep_last: int) -> None:
    steps = list_steps(run_dir)
    best = pointer(run_dir, "best")
    for step in steps[:-keep_last] if keep_last else steps:
        if step != best:
            shutil.rmtree(checkpoint_dir(run_dir) / step_name(step), ignore_errors=True)
    for tmp in checkpoint_dir(run_dir).glob(".step-*"):  # left by a killed run
        shutil.rmtree(tmp, ignore_errors=True)


def find_checkpoint(run_dir: str | Path, which: str = "best") -> Path:
    """The folder of the ``best`` or ``latest`` checkpoint of a run (``which`` may be a step)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory not found: {run_dir}")
    if not which.isdigit() and which not in ("best", "latest"):
        raise CheckpointError(
            f"which checkpoint: best, latest or a step number, not {which[:40]!r}"
        )
    step = int(which) if which.isdigit() else pointer(run_dir, which)
    if step is None and which == "best":
        step = pointer(run_dir, "latest")
    if step is None:
        raise CheckpointError(
            f"{run_dir} has no checkpoints (no {checkpoint_dir(run_dir) / 'latest.json'})"
        )
    path = checkpoint_dir(run_dir) / step_name(step)
    if not path.is_dir():
        raise CheckpointError(
            f"checkpoint {path} is missing (available steps: {list_steps(run_dir)})"
        )
    return path


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


def read_meta(ckpt: Path) -> dict[str, Any]:
    """``meta.json`` of a checkpoint folder, checked: a foreign or damaged file is refused."""
    path = ckpt / "meta.json"
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
    state = load_safetensors(ckpt / "model.safetensors")
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{ckpt / 'model.safetensors'} does not match this model: "
            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{ckpt / 'model.safetensors'}: {name} has shape {tuple(tensor.shape)}, "
                f"the model expects {tuple(expected[name].shape)}"
            )
    model.load_state_dict(state)


def save_model_weights(model: nn.Module, path: Path) -> None:
    # tied weights share storage: safetensors refuses shared tensors, so store clones
    state = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path))


def average_checkpoints(paths: list[Path]) -> dict[str, Tensor]:
    """Element-wise mean of the model weights of several checkpoints (Vaswani et al. 2017 §6.1)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for path in paths:
        state = load_safetensors(path / "model.safetensors")
        if total and set(state) != set(total):
            raise CheckpointError(f"{path}: parameter names differ from {paths[0]}")
        for k, v in state.items():
            dtypes.setdefault(k, v.dtype)
            total[k] = total[k] + v.double() if k in total else v.double()
    return {k: (v / len(paths)).to(dtypes[k]) for k, v in total.items()}


def write_meta(tmp: Path, meta: dict[str, Any]) -> None:
    atomic_write_json(tmp / "meta.json", {"format": FORMAT, **meta})


def torch_rng_state() -> dict[str, Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_torch_rng_state(state: dict[str, Tensor]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
