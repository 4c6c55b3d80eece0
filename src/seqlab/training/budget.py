"""When training must stop (:meth:`Budget.reason`): the step, epoch and time budgets
(``train.max_steps``, ``train.epochs``, ``train.max_minutes``) and early stopping's patience
(``train.early_stopping_patience``), and the ``--resume`` overrides that let a run stopped by
them train further (:meth:`Budget.lifted`)."""

from __future__ import annotations

import math
from pathlib import Path

from seqlab.config import TrainConfig
from seqlab.errors import SeqlabError
from seqlab.storage.training_state import TrainingState
from seqlab.training import distributed as dist


class Budget:
    """The limits of ``cfg`` for batches of ``steps_per_epoch`` optimizer steps.

    Attributes:
        total_steps: the steps the run takes at most (``train.max_steps``, else the epochs').
    """

    def __init__(self, cfg: TrainConfig, steps_per_epoch: int) -> None:
        self.cfg, self.steps_per_epoch = cfg, steps_per_epoch
        self.total_steps = cfg.max_steps or cfg.epochs * steps_per_epoch

    def reason(self, state: TrainingState, elapsed: float) -> str:
        """Why training must stop now (the same answer on every process), or ''."""
        cfg = self.cfg
        if state.step >= self.total_steps and cfg.max_steps:
            return f"step budget train.max_steps={cfg.max_steps} reached"
        if state.step >= self.total_steps or state.epoch >= cfg.epochs:
            return f"train.epochs={cfg.epochs} done"
        out_of_time = cfg.max_minutes is not None and elapsed > 60 * cfg.max_minutes
        if dist.broadcast_flag(out_of_time):
            return f"time budget train.max_minutes={cfg.max_minutes:g} reached"
        return ""

    def out_of_patience(self, state: TrainingState, metric: str) -> str:
        """Why early stopping ends training (``metric`` has not improved for
        ``train.early_stopping_patience`` validations), or ''; rank 0 keeps the selection, so its
        answer is every process's."""
        patience = self.cfg.early_stopping_patience
        if dist.broadcast_flag(bool(patience) and state.evals_since_best >= patience):
            return f"no improvement of {metric} in {patience} evaluations"
        return ""

    def lifted(self, state: TrainingState, elapsed: float) -> list[str]:
        """The ``--resume`` overrides that let a stopped run train further: every limit it has
        reached, raised by as much again as it allowed, counted from where the run stands
        (``train.max_steps=20`` reached at step 20: ``train.max_steps=40``; a run at step 20
        resumed with ``train.max_steps=10``: ``train.max_steps=30``). Each value passes
        :meth:`reason` (a step budget must exceed the step reached, an epoch budget the epochs
        done) and :meth:`out_of_patience`."""
        cfg, out = self.cfg, []
        if cfg.max_steps and state.step >= cfg.max_steps:
            out.append(f"train.max_steps={state.step + cfg.max_steps}")
        if state.epoch >= cfg.epochs or (not cfg.max_steps and state.step >= self.total_steps):
            done = max(state.epoch, math.ceil(state.step / max(self.steps_per_epoch, 1)))
            out.append(f"train.epochs={done + cfg.epochs}")
        if cfg.max_minutes is not None and elapsed > 60 * cfg.max_minutes:
            out.append(f"train.max_minutes={math.ceil(elapsed / 60 + cfg.max_minutes)}")
        patience = cfg.early_stopping_patience
        if patience and state.evals_since_best >= patience:
            out.append(f"train.early_stopping_patience={state.evals_since_best + patience}")
        return out

    def refuse_finished(
        self, state: TrainingState, elapsed: float, metric: str, run_dir: Path
    ) -> None:
        """Refuse to continue the run in ``run_dir`` from ``state`` when it has reached a limit
        (:meth:`reason`, :meth:`out_of_patience`), naming the overrides that lift it
        (:meth:`lifted`).

        Raises:
            SeqlabError: the run has finished.
        """
        reason = self.reason(state, elapsed) or self.out_of_patience(state, metric)
        if reason:
            raise SeqlabError(
                f"{run_dir} has finished ({reason}); to train further, raise what it has "
                f"reached: seqlab train --resume {run_dir} {' '.join(self.lifted(state, elapsed))}"
            )
