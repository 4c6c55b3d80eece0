"""A training run's state, one schema from memory to disk and back: :class:`TrainingState`.

The trainer holds a :class:`TrainingState` (:attr:`seqlab.training.trainer.Trainer.state`) and
changes it as it trains; :func:`save` writes it, as it is, as the ``meta.json`` of a checkpoint
beside the tensors (weights, optimizer, per-process RNG and carried state, in safetensors files);
:func:`read` and :func:`restore` give it back as the same type, validated. A new resumable field
is one field of :class:`TrainingState` (or of a subclass the trainer is given,
:attr:`seqlab.training.trainer.Trainer.State`): nothing else converts it.

``meta.json`` is the state's fields, the task's facts (``arch``, vocabulary sizes: the extra
fields of the state) and four keys that describe the checkpoint's files, not the run
(:data:`FILE_KEYS`). Checkpoints written before this schema have the same layout and load as
they are. The files, their names and their checks are :mod:`seqlab.storage.checkpoints`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, ValidationError
from torch import Tensor, nn

from seqlab.errors import CheckpointError
from seqlab.storage.checkpoints import (
    META,
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

#: the keys of ``meta.json`` that describe the checkpoint's files rather than the run: the
#: format marker, the JSON skeletons of the optimizer's and the processes' tensor trees, and the
#: SHA-256 of the tensor files (:func:`seqlab.storage.checkpoints.write_meta`)
FILE_KEYS = frozenset({"format", "optimizer", "rank_state", "sha256"})


class ScheduleState(BaseModel):
    """The learning-rate schedule's counters (:class:`seqlab.training.optim.LRSchedule`)."""

    model_config = ConfigDict(strict=True)
    steps: NonNegativeInt = 0
    scale: float = 1.0


class PlateauState(BaseModel):
    """The plateau rule's counters (:class:`seqlab.training.optim.Plateau`)."""

    model_config = ConfigDict(strict=True)
    best: float | None = None
    bad: NonNegativeInt = 0


class TrainingState(BaseModel):
    """Where a training run stands and what it has seen: what a checkpoint records besides its
    tensors, the same object in the trainer and in ``meta.json``.

    The extra fields (``TrainingState(arch="gru", vocab_size=28)``) are the facts a task stores
    with every checkpoint (:attr:`facts`); inference checks them against the run's files.
    Reading is strict: a damaged ``meta.json`` is refused naming the key.
    """

    model_config = ConfigDict(extra="allow", strict=True)

    #: optimizer steps taken
    step: NonNegativeInt = 0
    #: the epoch in progress, and the minibatches of it already trained on
    epoch: NonNegativeInt = 0
    batch: NonNegativeInt = 0
    #: the best value of the selection metric so far, and the validations since it
    best: float | None = None
    evals_since_best: NonNegativeInt = 0
    #: every validation's record (``metrics.jsonl``'s ``eval`` lines)
    history: list[dict[str, Any]] = Field(default_factory=list)
    schedule: ScheduleState = Field(default_factory=ScheduleState)
    plateau: PlateauState | None = None
    #: processes and accumulation: a resumed run must use the same, or the batches shift
    world_size: PositiveInt = 1
    accumulate: PositiveInt = 1
    #: training time spent so far (``train.max_minutes`` counts it across restarts)
    elapsed_s: float = 0.0
    #: why training stopped ('' while it goes on)
    finished: str = ""
    #: the training precision (``run.json`` records it too)
    precision: str | None = None
    #: an end-of-training average of these steps' weights (Vaswani et al. 2017, §6.1)
    averaged_steps: list[NonNegativeInt] | None = None

    @property
    def facts(self) -> dict[str, Any]:
        """The task's facts stored with the checkpoint (``arch``, vocabulary sizes, ...)."""
        return dict(self.model_extra or {})


State = TypeVar("State", bound=TrainingState)


def read(path: Path, into: type[State] = TrainingState) -> State:  # type: ignore[assignment]
    """The state recorded in the checkpoint folder ``path`` (its ``meta.json``), as ``into``.

    Raises:
        CheckpointError: not a seqlab checkpoint, or a key of the state is missing or of the
            wrong type (named, with the value found).
    """
    meta = read_meta(path)
    try:
        return into.model_validate({k: v for k, v in meta.items() if k not in FILE_KEYS})
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        key = ".".join(str(p) for p in first["loc"]) or "<top level>"
        raise CheckpointError(
            f"{path / META}: damaged checkpoint metadata: {key}: {first['msg']} "
            f"(got {str(first.get('input'))[:60]})"
        ) from None


def torch_rng_state() -> dict[str, Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_torch_rng_state(state: dict[str, Tensor]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


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
    ``meta.json`` (``state`` as it is, and :data:`FILE_KEYS`), and after ``barrier`` rank 0
    renames the complete folder into place.
    """
    tmp = begin_checkpoint(run_dir, state.step) if rank == 0 else None
    tmp = Path(share(str(tmp) if tmp else ""))
    rank_state = {"rng": torch_rng_state(), "carry": carry}
    save_tree(rank_state, tmp / rank_file(rank))
    if rank == 0:
        save_model_weights(model, tmp / WEIGHTS)
        files = {
            "optimizer": save_tree(optimizer.state_dict(), tmp / OPTIMIZER),
            "rank_state": flatten_tensors(rank_state)[1],
        }
        write_meta(tmp, {**state.model_dump(), **files})
    barrier()
    if rank == 0:
        commit_checkpoint(run_dir, tmp, state.step, is_best, keep_last)
    barrier()


def restore(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    into: type[State] = TrainingState,  # type: ignore[assignment]
    run_dir: Path,
    rank: int = 0,
    world_size: int = 1,
    accumulate: int = 1,
) -> tuple[State, Any]:
    """Load the checkpoint at ``path`` into ``model`` and ``optimizer``, set this process's RNG
    state, and return the recorded state (as ``into``, :func:`read`) and the carried recurrent
    state.

    When the ``best`` of ``run_dir`` (the run being trained) is an end-of-training average saved
    after ``path`` (the average a resumed run does not continue from), the returned ``best`` is
    the average's: later checkpoints must beat it.

    Raises:
        CheckpointError: the checkpoint is damaged, or was written with another number of
            processes or another accumulation (the minibatches would not line up).
    """
    state = read(path, into)
    for key, recorded, mine in (
        ("world_size", state.world_size, world_size),
        ("accumulate", state.accumulate, accumulate),
    ):
        if recorded != mine:
            raise CheckpointError(
                f"{path} was written with {key}={recorded}; resume with the same "
                f"(this run has {mine}) so that the minibatches line up"
            )
    meta = read_meta(path)
    for key in ("optimizer", "rank_state"):
        if key not in meta:
            raise CheckpointError(f"{path / META}: damaged checkpoint metadata: {key} missing")
    load_model_weights(model, path)
    optimizer.load_state_dict(
        unflatten_tensors(meta["optimizer"], load_safetensors(path / OPTIMIZER))
    )
    rank_state = unflatten_tensors(meta["rank_state"], load_safetensors(path / rank_file(rank)))
    set_torch_rng_state(rank_state["rng"])
    best = pointer(run_dir, "best")
    if best is not None and best > state.step and is_average(run_dir, best):
        state.best = read(step_dir(run_dir, best)).best
    return state, rank_state["carry"]
