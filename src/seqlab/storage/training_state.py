"""A training run's state in its checkpoints: :class:`TrainingState` (what ``meta.json`` records
besides the tensors), :func:`save` of a whole checkpoint (weights, optimizer, per-process RNG and
carried state, pointers, pruning) and :func:`restore` of one to resume a run exactly.

The files, their names and their checks are :mod:`seqlab.storage.checkpoints`'s; this module
only decides what goes in them when the trainer saves and what it gets back when it resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.errors import CheckpointError
from seqlab.storage.checkpoints import (
    OPTIMIZER,
    WEIGHTS,
    begin_checkpoint,
    commit_checkpoint,
    flatten_tensors,
    is_average,
    load_model_weights,
    load_safetensors,
    pointer,
    rank_file,
    read_meta,
    save_model_weights,
    save_tree,
    step_dir,
    unflatten_tensors,
    write_meta,
)


def torch_rng_state() -> dict[str, Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_torch_rng_state(state: dict[str, Tensor]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


# ------------------------------------------------------------------- a training run's state
@dataclass
class TrainingState:
    """What a checkpoint records of a training run besides its tensors (``meta.json``).

    The trainer fills it in (:meth:`seqlab.training.trainer.Trainer.save_checkpoint`) and gets it
    back from :func:`restore`; ``extra`` holds the facts a task stores with every checkpoint (the
    vocabulary size, the architecture), written at the top level of ``meta.json``.
    """

    step: int
    epoch: int
    batch: int
    best: float | None
    evals_since_best: int
    history: list[dict[str, Any]]
    schedule: dict[str, Any]
    plateau: dict[str, Any] | None = None
    world_size: int = 1
    accumulate: int = 1
    elapsed_s: float = 0.0
    finished: str = ""
    precision: str | None = None
    averaged_steps: list[int] | None = None  #: an end-of-training average of these steps
    extra: dict[str, Any] = field(default_factory=dict)


_STATE_KEYS = frozenset(f.name for f in fields(TrainingState)) - {"extra"}
_TREE_KEYS = frozenset({"format", "optimizer", "rank_state", "sha256"})


def save(
    run_dir: Path,
    state: TrainingState,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    carry: Any,
    *,
    is_best: bool,
    keep_last: int,
    rank: int = 0,
    share: Callable[[str], str] = lambda name: name,
    barrier: Callable[[], None] = lambda: None,
) -> None:
    """Save ``state`` with the weights of ``model``, the state of ``optimizer`` and this
    process's RNG and carried recurrent state ``carry``, as the checkpoint of ``state.step``;
    then point ``latest`` (and, if ``is_best``, ``best``) at it and prune to ``keep_last``.

    Every process calls it: rank 0 creates the temporary folder (``share`` gives its name to the
    others), each writes its ``rank{N}.safetensors``, rank 0 the weights, the optimizer and
    ``meta.json``, and after ``barrier`` rank 0 renames the complete folder into place.
    """
    tmp = begin_checkpoint(run_dir, state.step) if rank == 0 else None
    tmp = Path(share(str(tmp) if tmp else ""))
    rank_state = {"rng": torch_rng_state(), "carry": carry}
    save_tree(rank_state, tmp / rank_file(rank))
    if rank == 0:
        save_model_weights(model, tmp / WEIGHTS)
        opt_skeleton = save_tree(optimizer.state_dict(), tmp / OPTIMIZER)
        meta = {
            "step": state.step,
            "epoch": state.epoch,
            "batch": state.batch,
            "best": state.best,
            "evals_since_best": state.evals_since_best,
            "history": state.history,
            "world_size": state.world_size,
            "accumulate": state.accumulate,
            "elapsed_s": state.elapsed_s,
            "finished": state.finished,
            "precision": state.precision,
            "optimizer": opt_skeleton,
            "rank_state": flatten_tensors(rank_state)[1],
            "schedule": state.schedule,
            "plateau": state.plateau,
            **({"averaged_steps": state.averaged_steps} if state.averaged_steps else {}),
            **state.extra,
        }
        write_meta(tmp, meta)
    barrier()
    if rank == 0:
        commit_checkpoint(run_dir, tmp, state.step, is_best, keep_last)
    barrier()


def restore(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    run_dir: Path,
    rank: int = 0,
    world_size: int = 1,
    accumulate: int = 1,
) -> tuple[TrainingState, Any]:
    """Load the checkpoint at ``path`` into ``model`` and ``optimizer``, set this process's RNG
    state, and return the recorded :class:`TrainingState` and the carried recurrent state.

    When the ``best`` of ``run_dir`` (the run being trained) is an end-of-training average saved
    after ``path`` (the average a resumed run does not continue from), the returned ``best`` is
    the average's: later checkpoints must beat it.

    Raises:
        CheckpointError: the checkpoint is damaged, or was written with another number of
            processes or another accumulation (the minibatches would not line up).
    """
    meta = read_meta(path)
    for key, mine in (("world_size", world_size), ("accumulate", accumulate)):
        if meta.get(key, 1) != mine:
            raise CheckpointError(
                f"{path} was written with {key}={meta.get(key, 1)}; resume with the same "
                f"(this run has {mine}) so that the minibatches line up"
            )
    load_model_weights(model, path)
    optimizer.load_state_dict(
        unflatten_tensors(meta["optimizer"], load_safetensors(path / OPTIMIZER))
    )
    rank_state = unflatten_tensors(meta["rank_state"], load_safetensors(path / rank_file(rank)))
    set_torch_rng_state(rank_state["rng"])
    state = TrainingState(
        step=meta["step"],
        epoch=meta["epoch"],
        batch=meta["batch"],
        best=meta["best"],
        evals_since_best=meta["evals_since_best"],
        history=list(meta["history"]),
        schedule=meta["schedule"],
        plateau=meta.get("plateau"),
        world_size=meta.get("world_size", 1),
        accumulate=meta.get("accumulate", 1),
        elapsed_s=float(meta.get("elapsed_s", 0.0)),
        finished=meta.get("finished", ""),
        precision=meta.get("precision"),
        averaged_steps=meta.get("averaged_steps"),
        extra={k: v for k, v in meta.items() if k not in _STATE_KEYS | _TREE_KEYS},
    )
    best = pointer(run_dir, "best")
    if best is not None and best > state.step and is_average(run_dir, best):
        state.best = read_meta(step_dir(run_dir, best))["best"]
    return state, rank_state["carry"]
