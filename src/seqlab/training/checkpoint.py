"""Writing checkpoints: safetensors + JSON, each folder complete or absent.

Where checkpoints go in a run directory is :class:`seqlab.rundir.RunDir`; reading one back (its
metadata, weights and checksums) is :mod:`seqlab.checkpoints`, which inference uses without this
module. Each checkpoint folder holds::

    model.safetensors        model weights
    optimizer.safetensors    optimizer tensors (Adam moments, ...)
    rank0.safetensors        per-process state: RNG, carried recurrent state
    meta.json                step, epoch, position in the epoch, optimizer/scheduler
                             hyper-parameters, best metric, format marker, SHA-256 of the files

It is written under a temporary name and renamed when complete, so a killed run leaves either the
whole checkpoint or none of it; the ``latest.json`` and ``best.json`` pointers are then replaced
atomically. The optimizer and RNG state are read back only to resume training (:func:`unflatten_tensors`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save
from torch import Tensor, nn

from seqlab.checkpoints import CHECKSUMMED, FORMAT, META, WEIGHTS, load_safetensors, sha256_of
from seqlab.errors import CheckpointError
from seqlab.io import atomic_write_json
from seqlab.rundir import RunDir


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


def write_safetensors(tensors: dict[str, Tensor], path: Path) -> None:
    """Write ``tensors`` as a safetensors file with Python's own file I/O, so that a full disk or
    a read-only folder is an ``OSError`` naming the errno, not a serialisation error."""
    data = save(tensors)
    try:
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None  # name the file


def save_tree(tree: Any, tensor_path: Path) -> Any:
    """Write the tensors of ``tree`` to a safetensors file; return the JSON skeleton."""
    tensors, skeleton = flatten_tensors(tree)
    write_safetensors(tensors, tensor_path)
    return skeleton


# ----------------------------------------------------------------------------- checkpoints
def begin_checkpoint(run_dir: Path, step: int) -> Path:
    """Create the temporary folder a checkpoint is written into (rank 0 only)."""
    root = RunDir(run_dir).checkpoints
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{RunDir.step_name(step)}.", dir=root))


def commit_checkpoint(run_dir: Path, tmp: Path, step: int, is_best: bool, keep_last: int) -> Path:
    """Rename the finished temporary folder into place, update pointers, prune old ones."""
    run = RunDir(run_dir)
    root, final = run.checkpoints, run.step_dir(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_json(root / "latest.json", {"step": step})
    if is_best:
        atomic_write_json(root / "best.json", {"step": step})
    prune(run_dir, keep_last)
    return final


def prune(run_dir: Path, keep_last: int) -> None:
    """Remove all but the last ``keep_last`` trained checkpoints (0: keep all), never the best
    one. An end-of-training average counts as none of them (it is kept while it is the best), so
    that the next average (``train.average_last``, see
    :attr:`~seqlab.config.TrainConfig.checkpoints_kept`) finds its checkpoints also in a run
    trained further after its average was kept."""
    run = RunDir(run_dir)
    steps = run.steps()
    trained = [s for s in steps if not run.is_average(s)]
    kept = set(trained[-keep_last:] if keep_last else trained) | {run.pointer("best")}
    for step in steps:
        if step not in kept:
            shutil.rmtree(run.step_dir(step), ignore_errors=True)
    remove_temporary(run_dir)


def remove_temporary(run_dir: Path) -> None:
    """Remove unfinished checkpoint folders (``.step-*``), left by a killed or failed save.
    Only the run's one writer (:class:`seqlab.rundir.RunLock`) may call this."""
    for tmp in RunDir(run_dir).checkpoints.glob(".step-*"):
        shutil.rmtree(tmp, ignore_errors=True)


def save_model_weights(model: nn.Module, path: Path) -> None:
    # tied weights share storage: safetensors refuses shared tensors, so store clones
    state = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    write_safetensors(state, path)


def average_checkpoints(paths: list[Path]) -> dict[str, Tensor]:
    """Element-wise mean of the model weights of several checkpoints (Vaswani et al. 2017 §6.1)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, Tensor] = {}
    dtypes: dict[str, torch.dtype] = {}
    for path in paths:
        state = load_safetensors(path / WEIGHTS)
        if total and set(state) != set(total):
            raise CheckpointError(f"{path}: parameter names differ from {paths[0]}")
        for k, v in state.items():
            dtypes.setdefault(k, v.dtype)
            total[k] = total[k] + v.double() if k in total else v.double()
    return {k: (v / len(paths)).to(dtypes[k]) for k, v in total.items()}


def write_meta(tmp: Path, meta: dict[str, Any]) -> None:
    """``meta.json``, with the SHA-256 of the tensor files already in ``tmp`` (rank 0's)."""
    sums = {name: sha256_of(tmp / name) for name in CHECKSUMMED if (tmp / name).is_file()}
    atomic_write_json(tmp / META, {"format": FORMAT, **meta, "sha256": sums})


def torch_rng_state() -> dict[str, Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_torch_rng_state(state: dict[str, Tensor]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])
