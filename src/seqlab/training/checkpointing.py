"""A training run's state and its checkpoints (:class:`Checkpointer`): the one
:class:`~seqlab.storage.training_state.TrainingState` the trainer changes as it trains, the
carried recurrent state and the training clock, saved with the weights, the optimizer and the
schedule's counters (:meth:`Checkpointer.save`) and restored from them exactly
(:meth:`Checkpointer.restore`).

The files are written and read by :mod:`seqlab.storage.training_state` and
:mod:`seqlab.storage.checkpoints`; what a checkpoint records is the state's schema, nothing is
copied field by field.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from seqlab.runtime.precision import Resolved
from seqlab.storage import training_state
from seqlab.storage.training_state import TrainingState
from seqlab.training import distributed as dist
from seqlab.training.divergence import TrainingDiverged
from seqlab.training.optim import LRSchedule, Plateau


class Checkpointer:
    """Holds a run's :attr:`state`, its carried recurrent state (:attr:`carry`) and its clock
    (:meth:`elapsed`), and saves and restores them with ``model``, ``optimizer``, ``schedule``
    and ``plateau`` in the checkpoints of ``run_dir``.

    Args:
        state: the state to start from (its type is the schema :meth:`restore` reads into).
        keep_last: the trained checkpoints kept (:attr:`~seqlab.config.TrainConfig.checkpoints_kept`).
        precision: the training precision, recorded in every checkpoint.
        rank, device: this process and its device (the carried state is moved there).

    Attributes:
        state: where the run stands; the trainer advances it, this object saves and replaces it.
        carry: the recurrent state after the last step, when batches carry it (else None).
    """

    state: TrainingState
    carry: Any

    def __init__(
        self,
        run_dir: Path,
        state: TrainingState,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        schedule: LRSchedule,
        plateau: Plateau | None,
        *,
        keep_last: int,
        precision: Resolved,
        rank: int = 0,
        device: torch.device | None = None,
    ) -> None:
        self.run_dir, self.state = run_dir, state
        self.model, self.optimizer = model, optimizer
        self.schedule, self.plateau = schedule, plateau
        self.keep_last, self.precision = keep_last, precision
        self.rank, self.device = rank, device or torch.device("cpu")
        self.carry: Any = None
        self.started = time.monotonic()

    def elapsed(self) -> float:
        """Seconds of training so far, across restarts (``train.max_minutes`` counts them)."""
        return time.monotonic() - self.started

    def save(self, is_best: bool, averaged_steps: list[int] | None = None) -> None:
        """Save :attr:`state` (with the schedule's and the plateau rule's counters, the time spent
        and the precision) as the checkpoint of its step; every process calls it
        (:func:`seqlab.storage.training_state.save`). ``averaged_steps`` marks it as the average
        of those steps' weights (with the last one's optimizer and data position), which a
        resumed run does not continue from.

        Raises:
            TrainingDiverged: the weights hold NaN or infinite values (never saved).
        """
        state = self.state
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise TrainingDiverged(
                f"the weights hold NaN or infinite values at step {state.step}; not saved"
            )
        state.schedule = self.schedule.state_dict()
        state.plateau = self.plateau.state_dict() if self.plateau else None
        state.elapsed_s, state.precision = self.elapsed(), self.precision.precision
        training_state.save(
            self.run_dir,
            state.model_copy(update={"averaged_steps": averaged_steps}),
            self.model,
            self.optimizer,
            self.carry,
            is_best=is_best,
            keep_last=self.keep_last,
            rank=self.rank,
            share=dist.same_on_all_ranks,
            barrier=dist.barrier,
        )

    def restore(self, path: Path) -> TrainingState:
        """Continue from the checkpoint at ``path``: the weights, the optimizer, :attr:`state`
        (as the type it has), the schedule's counters, the carried state and the time already
        spent (:func:`seqlab.storage.training_state.restore`, which refuses a checkpoint of
        another number of processes or accumulation). Returns the new :attr:`state`."""
        self.state, carry = training_state.restore(
            path,
            self.model,
            self.optimizer,
            into=type(self.state),
            run_dir=self.run_dir,
            rank=self.rank,
            world_size=self.state.world_size,
            accumulate=self.state.accumulate,
        )
        self.schedule.load_state_dict(self.state.schedule)
        if self.plateau is not None and self.state.plateau:
            self.plateau.load_state_dict(self.state.plateau)
        self.carry = dist.to_device(carry, self.device)
        # the time budget (train.max_minutes) counts the time already spent before the restart
        self.started = time.monotonic() - self.state.elapsed_s
        return self.state
