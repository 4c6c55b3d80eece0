"""Checkpoints, both sides: writing, reading and verifying them; safetensors + JSON only.

A checkpoint is a folder of the run directory's ``checkpoints/`` (the layout of a whole run
directory is in :mod:`seqlab.storage.rundir`); loading one never executes code. Each folder holds::

    model.safetensors        model weights
    optimizer.safetensors    optimizer tensors (Adam moments, ...)
    rank0.safetensors        per-process state: RNG, carried recurrent state
    meta.json                the training state (seqlab.storage.training_state's schema:
                             step, epoch, position in the epoch, best metric, schedule, ...),
                             the task's facts, format marker, SHA-256 of the files

It is written under a temporary name and renamed when complete, so a killed run leaves either the
whole checkpoint or none of it; the ``latest.json`` and ``best.json`` pointers are then replaced
atomically. ``meta.json`` records the SHA-256 of each tensor file rank 0 wrote (``sha256``);
loading a file checks it, so weights damaged in place (same size, bytes overwritten) are refused
naming the file. Checkpoints written before the checksums were added have none and load as
before. Inference reads only the weights and the metadata; the optimizer and RNG state are read
back only to resume training (:func:`unflatten_tensors`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import Tensor, nn

from seqlab.atomic import atomic_write_json, temporary_folder
from seqlab.errors import CheckpointError

FORMAT = "seqlab.checkpoint/1"
#: the files of a checkpoint folder (one ``rank{N}.safetensors`` per process: :func:`rank_file`)
META = "meta.json"
WEIGHTS = "model.safetensors"
OPTIMIZER = "optimizer.safetensors"
#: the folder of a run directory holding its checkpoints, and the pointers in it
FOLDER = "checkpoints"
LATEST = "latest.json"
BEST = "best.json"


def rank_file(rank: int) -> str:
    """The file of one process's state (RNG, carried recurrent state)."""
    return f"rank{rank}.safetensors"


#: tensor files rank 0 writes before ``meta.json``, whose SHA-256 the metadata records
CHECKSUMMED = (WEIGHTS, OPTIMIZER, rank_file(0))


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


def read_meta(ckpt: Path) -> dict[str, Any]:
    """``meta.json`` of a checkpoint folder as it is, refused unless it is a seqlab checkpoint's.
    The training state in it is read, validated, by :func:`seqlab.storage.training_state.read`."""
    path = ckpt / META
    meta = read_json(path)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a seqlab checkpoint (expected format {FORMAT!r})")
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
    data = safetensors_bytes(tensors)
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


# --------------------------------------------------------------- checkpoints of a run directory
def folder(run_dir: Path) -> Path:
    """The folder of a run's checkpoints and their ``latest``/``best`` pointers."""
    return Path(run_dir) / FOLDER


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def step_dir(run_dir: Path, step: int) -> Path:
    """The folder of the checkpoint saved at ``step`` (it may not exist)."""
    return folder(run_dir) / step_name(step)


def steps(run_dir: Path) -> list[int]:
    """The steps of the complete checkpoints kept, in order."""
    root = folder(run_dir)
    if not root.is_dir():
        return []
    return sorted(
        int(p.name[5:]) for p in root.glob("step-*") if p.name[5:].isdigit() and p.is_dir()
    )


def is_average(run_dir: Path, step: int) -> bool:
    """Whether the checkpoint of ``step`` is an end-of-training average (Vaswani et al. 2017
    §6.1) rather than a state training reached."""
    path = step_dir(run_dir, step) / META
    meta = read_json(path, "checkpoint metadata") if path.is_file() else None
    return isinstance(meta, dict) and bool(meta.get("averaged_steps"))


def trained_steps(run_dir: Path) -> list[int]:
    """The steps of the checkpoints training reached (not an end-of-training average)."""
    return [s for s in steps(run_dir) if not is_average(run_dir, s)]


def pointer(run_dir: Path, which: str) -> int | None:
    """The step ``latest.json`` or ``best.json`` points to, None if there is none.

    Raises:
        CheckpointError: the pointer file is damaged.
    """
    path = folder(run_dir) / f"{which}.json"
    if not path.is_file():
        return None
    data = read_json(path, f"{which} checkpoint pointer")
    step = data.get("step") if isinstance(data, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f'{path}: expected {{"step": <number>}}, got {str(data)[:80]}')
    return step


def find(run_dir: Path, which: str = "best") -> Path:
    """The folder of the ``best`` or ``latest`` checkpoint (``which`` may be a step).

    ``best`` of a run that has not validated yet (stopped before its first evaluation) is the
    latest checkpoint, with a warning. A run that did record a best result but whose
    ``best.json`` is gone is an error: the latest checkpoint is never passed off as the best.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory not found: {run_dir}")
    if isinstance(which, int) and not isinstance(which, bool) and which >= 0:
        which = str(which)  # a step number given as a number (the Python API)
    if not isinstance(which, str) or not which.isdigit() and which not in ("best", "latest"):
        raise CheckpointError(
            f"which checkpoint: best, latest or a step number, not {str(which)[:40]!r}"
        )
    step = int(which) if which.isdigit() else pointer(run_dir, which)
    if step is None and which == "best":
        step = _latest_as_best(run_dir)
    if step is None:
        raise CheckpointError(f"{run_dir} has no checkpoints (no {folder(run_dir) / LATEST})")
    path = step_dir(run_dir, step)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} is missing (available steps: {steps(run_dir)})")
    return path


def _latest_as_best(run_dir: Path) -> int | None:
    """The latest step, when the run has no ``best.json`` because it never validated."""
    latest = pointer(run_dir, "latest")
    if latest is None:
        return None
    path = folder(run_dir) / BEST
    latest_dir = step_dir(run_dir, latest)
    best = read_meta(latest_dir).get("best") if latest_dir.is_dir() else None
    if best is not None:
        raise CheckpointError(
            f"{path} is missing, but the run has validated (its best result: {best:.6g}), "
            "so the best checkpoint is unknown; seqlab will not use another in its place: "
            f"pass --which latest (step {latest}) or a step number (kept: "
            f"{', '.join(map(str, steps(run_dir)))})"
        )
    warnings.warn(
        f"{run_dir} has no validated checkpoint yet (no {path}): using the latest, step {latest}",
        stacklevel=4,
    )
    return latest


def resume_from(run_dir: Path) -> Path:
    """The checkpoint a resumed run continues from: the latest, or, when the latest is the
    average saved at the end of training, the last trained checkpoint it averaged (training
    further continues the trajectory, not the average)."""
    path = find(run_dir, "latest")
    averaged = read_meta(path).get("averaged_steps")
    if not averaged or not isinstance(averaged, list):
        return path
    last = step_dir(run_dir, averaged[-1])
    if not last.is_dir():
        raise CheckpointError(
            f"{path} is the end-of-training average of steps {averaged}; training continues "
            f"from the last of them, but {last} is missing (kept steps: {steps(run_dir)})"
        )
    return last


def latest_with_meta(run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """The latest checkpoint and its ``meta.json`` as it is (unchecked), or None when there is
    none or its metadata is unreadable (resuming from it would fail)."""
    latest = pointer(run_dir, "latest")
    if latest is None:
        return None
    path = step_dir(run_dir, latest)
    try:
        meta = read_json(path / META)
    except CheckpointError:
        return None
    return (path, meta) if isinstance(meta, dict) else (path, {})


# ----------------------------------------------------------------------------- writing
def begin_checkpoint(run_dir: Path, step: int) -> Path:
    """Create the temporary folder a checkpoint is written into (rank 0 only)."""
    root = folder(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    return temporary_folder(root, f".{step_name(step)}.")


def commit_checkpoint(run_dir: Path, tmp: Path, step: int, is_best: bool, keep_last: int) -> Path:
    """Rename the finished temporary folder into place, update pointers, prune old ones."""
    root, final = folder(run_dir), step_dir(run_dir, step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    atomic_write_json(root / LATEST, {"step": step})
    if is_best:
        atomic_write_json(root / BEST, {"step": step})
    prune(run_dir, keep_last)
    return final


def prune(run_dir: Path, keep_last: int) -> None:
    """Remove all but the last ``keep_last`` trained checkpoints (0: keep all), never the best
    one. An end-of-training average counts as none of them (it is kept while it is the best), so
    that the next average (``train.average_last``, see
    :attr:`~seqlab.config.TrainConfig.checkpoints_kept`) finds its checkpoints also in a run
    trained further after its average was kept."""
    trained = trained_steps(run_dir)
    kept = set(trained[-keep_last:] if keep_last else trained) | {pointer(run_dir, "best")}
    for step in steps(run_dir):
        if step not in kept:
            shutil.rmtree(step_dir(run_dir, step), ignore_errors=True)
    remove_temporary(run_dir)


def remove_temporary(run_dir: Path) -> None:
    """Remove unfinished checkpoint folders (``.step-*``), left by a killed or failed save.
    Only the run's one writer (:class:`seqlab.storage.rundir.RunLock`) may call this."""
    for tmp in folder(run_dir).glob(".step-*"):
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


def average(run_dir: Path, steps_: list[int]) -> dict[str, Tensor]:
    """The element-wise mean of the weights of the checkpoints of ``steps_``
    (:func:`average_checkpoints`)."""
    return average_checkpoints([step_dir(run_dir, s) for s in steps_])
