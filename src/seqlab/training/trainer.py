"""A training loop that knows nothing about models or tasks.

The task hands the trainer a model, a ``loss_fn(model, batch, state) -> LossOutput``, an
epoch-aware iterable of minibatches and an ``evaluate(model) -> metrics`` function. The trainer
does the rest: optimisation, gradient accumulation, clipping, the learning-rate schedule,
precision, carried recurrent state (truncated BPTT), checkpoints with exact resume, data
parallelism, early stopping and checkpoint averaging. Logging, plots and progress bars attach as
callbacks (:mod:`seqlab.training.callbacks`). Validation is :mod:`seqlab.training.validation`,
the budgets :mod:`seqlab.training.budget`, Ctrl-C :mod:`seqlab.training.interrupts`, and what a
run that diverged says :mod:`seqlab.training.divergence`.

**A step** (:meth:`Trainer.train_step`, taken by :class:`seqlab.training.train_step.TrainStep`,
which owns the loss module) takes ``train.accumulate`` minibatches of this process
(:class:`seqlab.training.distributed.RankBatches`), back-propagates each one's *summed* token loss,
then divides the gradients by the number of tokens of the whole step over all processes: the
update is that of the token-weighted mean loss, whatever the batch sizes, the number of processes
or the accumulation. W processes with accumulation A make exactly the updates of one process with
accumulation W·A. A non-finite loss or gradient norm stops training before the update. Each log
record carries the mean gradient norm before clipping (``grad_norm``, fairseq's ``gnorm``) and,
with ``train.grad_clip``, the fraction of the steps that were clipped (``clipped``).

**Validation and checkpoints** (:meth:`Trainer.validate_and_checkpoint`) happen every
``train.eval_every`` steps, or at the end of each epoch: rank 0 evaluates in the evaluation
precision (the same as ``seqlab evaluate``), one :class:`~seqlab.objective.Selection` rule
decides whether the result is the best so far, and every process writes its part of the
checkpoint. ``train.save_every`` adds checkpoints without validation in between, a finer grid
for averaging the last N (fairseq averages per-epoch checkpoints).

**Exact resume.** The trainer holds the run's state in one object, :attr:`Trainer.state` (a
:class:`~seqlab.storage.training_state.TrainingState`: the position in the epoch, the best
result, the history, the schedule's counters, ...); a checkpoint stores it as it is beside the
weights, the optimizer and every process's RNG and carried state, and :meth:`Trainer.restore`
gets it back as the same type. Minibatches are a pure function of (seed, epoch), so a resumed
run sees the same batches in the same order and reproduces the losses of an uninterrupted one
(bit for bit unless a time budget drives the schedule).

**On a GPU** (``train.device``: ``auto`` picks CUDA when present, :mod:`seqlab.runtime.device`)
the step never waits for the device: batches are copied from pinned memory without blocking, the
optimizer is PyTorch's fused Adam/AdamW, and the loss, token count and gradient norm stay on the
device, summed there and read once per ``train.log_every`` steps. A non-finite loss or gradient
norm still leaves the weights untouched (the fused optimizer skips that update on the device, as
for a gradient scaler's overflow) and stops training at the next log line, naming the step
range. fp16 (``precision: auto`` on a GPU without bf16) scales the loss with
:class:`torch.amp.GradScaler` (its scale restarts on ``--resume``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.config import TrainConfig
from seqlab.errors import TrainingInterrupted
from seqlab.objective import Batches, LossFn, LossOutput, Selection  # noqa: F401 (LossOutput: tests)
from seqlab.runtime.device import resolve_device
from seqlab.runtime.precision import Resolved, resolve_precision
from seqlab.storage import checkpoints as ckpt
from seqlab.storage.training_state import TrainingState
from seqlab.training import distributed as dist
from seqlab.training import divergence
from seqlab.training.budget import Budget
from seqlab.training.checkpointing import Checkpointer
from seqlab.training.divergence import TrainingDiverged  # also imported from here (tutorials)
from seqlab.training.interrupts import CtrlC
from seqlab.training.optim import LRSchedule, Plateau
from seqlab.training.stepping import LogWindow, Update
from seqlab.training.train_step import TrainStep
from seqlab.training.validation import Evaluate, Validator


class Callback:
    """Hooks called on rank 0. ``record`` dicts are what goes into ``metrics.jsonl``."""

    def on_train_start(self, trainer: Trainer) -> None: ...
    def on_step(self, trainer: Trainer, loss: float) -> None: ...
    def on_log(self, trainer: Trainer, record: dict[str, Any]) -> None: ...
    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None: ...
    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None: ...


class Trainer:
    """Train ``model`` with ``loss_fn`` on ``train_data``; see the module docstring.

    Args:
        model: any ``nn.Module``.
        loss_fn: ``(model, batch, state) -> LossOutput``.
        train_data: a :class:`Batches` object.
        cfg: the ``train`` section of the experiment config.
        run_dir: where checkpoints and metrics go (rank 0 writes).
        evaluate: ``model -> {"val_loss": ..., ...}``, called on rank 0 in eval mode under
            ``no_grad`` and the evaluation precision.
        select: the metric choosing the best checkpoint, early stopping and the plateau rule.
        final_evaluate: like ``evaluate``, as the model will be used (a translation run's beam
            search where ``evaluate`` decodes greedily): it alone decides between the average
            of the last checkpoints and the best one at the end. None: ``evaluate`` decides.
        callbacks: logging, plotting, progress (rank 0 only).
        extra_meta: JSON-able facts stored in every checkpoint (e.g. the vocabulary size): the
            extra fields of :attr:`state`.
        eval_precision: ``fp32`` or ``bf16`` for ``evaluate``.
        precision: the training precision already resolved (a resumed run passes the one it
            recorded); None resolves ``cfg.precision`` here. Every process uses rank 0's.
    """

    #: the schema of :attr:`state`: a subclass with one more field makes that field resumable
    State: type[TrainingState] = TrainingState
    #: keep the step's numbers on the device and read them once per log line, with a fused
    #: optimizer (None: on a GPU; True runs that path on a CPU too, as the tests do)
    reads_on_device: bool | None = None
    #: whether the step's numbers stay on the device until the log line (:class:`Update`)
    deferred: bool = False

    def __init__(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        train_data: Batches,
        cfg: TrainConfig,
        run_dir: str | Path,
        evaluate: Evaluate | None = None,
        select: Selection = Selection(),
        final_evaluate: Evaluate | None = None,
        callbacks: Sequence[Callback] = (),
        extra_meta: dict[str, Any] | None = None,
        eval_precision: str = "fp32",
        precision: Resolved | None = None,
    ) -> None:
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.device = device = resolve_device(cfg.device, "train.device")
        if device.index is not None and device.type == "cuda":
            torch.cuda.set_device(device)  # NCCL and the fused kernels use the current device
        self.rank, self.world = dist.setup(self.device)
        self.data = dist.RankBatches(train_data, self.rank, self.world)
        self.model = model.to(self.device)
        if cfg.compile:  # in place: the parameters' names, and so the checkpoints, are unchanged
            self.model.compile()
        self.select, self.callbacks = select, list(callbacks) if dist.is_main() else []
        self.precision: Resolved = dist.same_on_all_ranks(
            precision or resolve_precision(cfg.precision, self.device)
        )
        self.eval_precision: Resolved = resolve_precision(eval_precision, self.device)
        update = Update(self.model, cfg, device, self.world, self.precision, self.reads_on_device)
        self.update, self.optimizer, self.scaler = update, update.optimizer, update.scaler
        self.deferred = update.deferred
        self.steps_per_epoch = -(-len(self.data) // cfg.accumulate)
        self.budget = Budget(cfg, self.steps_per_epoch)
        self.total_steps = self.budget.total_steps
        budget = 60 * cfg.max_minutes if cfg.max_minutes else None
        time_fraction = (lambda: self.elapsed() / budget) if budget else None
        self.schedule = LRSchedule(self.optimizer, cfg, self.total_steps, time_fraction)
        self.plateau = Plateau(self.schedule, select) if cfg.schedule == "plateau" else None
        self.stepper = TrainStep(  # the loss module (DistributedDataParallel) and the steps
            self.model, loss_fn, self.data, update, self.schedule, cfg, self.precision, device
        )
        self.validator = Validator(
            self.model, evaluate, final_evaluate, select, self.plateau, self.eval_precision, device
        )
        self.checkpointer = Checkpointer(
            self.run_dir,
            self.State(world_size=self.world, accumulate=cfg.accumulate, **(extra_meta or {})),
            self.model,
            self.optimizer,
            self.schedule,
            self.plateau,
            keep_last=cfg.checkpoints_kept,  # keep_last, or average_last when that is more
            precision=self.precision,
            rank=self.rank,
            device=self.device,
        )
        self._ctrl_c = CtrlC()  # a first Ctrl-C stops training after the step in progress

    @property
    def state(self) -> TrainingState:
        """The run's state: advanced here, held, saved and restored by the ``checkpointer``."""
        return self.checkpointer.state

    def close(self) -> None:
        """Drop the DistributedDataParallel wrapper: its reducer holds the process group, whose
        gloo threads must stop while Python is fully alive (:func:`dist.teardown` follows)."""
        self.stepper.close()

    # ------------------------------------------------------------------------------ the loop
    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train until the step/epoch budget, the time budget or early stopping ends it."""
        if resume:
            self.restore(ckpt.resume_from(self.run_dir))
        for cb in self.callbacks:
            cb.on_train_start(self)
        window = LogWindow(first_step=self.state.step + 1)
        with self._ctrl_c.after_step(self.run_dir, lambda: self.state.step):
            while not self.state.finished:
                window = self.run_epoch(window)
        if window.tokens:
            self.log(window)
        state, history = self.state, self.state.history
        summary = {
            "step": state.step,
            "epoch": state.epoch,
            "best": state.best,
            "select": self.select.metric,
            # which way "best" goes (min: the lowest), and the last validation's value
            "select_mode": self.select.mode,
            "last": history[-1].get(self.select.metric) if history else None,
            "stopped": state.finished,
            "wall_seconds": round(self.elapsed(), 1),
            "precision": self.precision.precision,
            "device": str(self.device),
        }
        for cb in self.callbacks:
            cb.on_train_end(self, summary)
        dist.barrier()
        return summary

    def run_epoch(self, window: LogWindow) -> LogWindow:
        """Steps until the end of the epoch or of training; the position advances here only."""
        pos = self.state
        groups = self.stepper.groups(pos)  # from pos.batch on: a resumed run skips the others
        carry = self.checkpointer.carry if pos.batch else None
        self.model.train()
        for group in groups:
            loss, tokens, norm, carry = self.train_step(group, carry)
            pos.step += 1
            pos.batch += len(group)
            end_of_epoch = pos.batch >= len(self.data)
            if end_of_epoch:
                pos.epoch, pos.batch = pos.epoch + 1, 0
            self.checkpointer.carry = None if end_of_epoch else carry
            window.add(
                loss, tokens, norm, self.cfg.grad_clip is not None and norm > self.cfg.grad_clip
            )
            for cb in self.callbacks:
                cb.on_step(self, loss)
            if pos.step % self.cfg.log_every == 0 or pos.step == 1:
                self.log(window)
                window = LogWindow(first_step=pos.step + 1)
            pos.finished = self.budget.reason(pos, self.elapsed())
            due = self.cfg.eval_every is not None and pos.step % self.cfg.eval_every == 0
            at_eval = end_of_epoch and self.cfg.eval_every is None
            save = self.cfg.save_every is not None and pos.step % self.cfg.save_every == 0
            if pos.finished or due or at_eval or save:
                paused = time.monotonic()
                if pos.finished or due or at_eval:
                    self.validate_and_checkpoint()
                else:
                    self.save_checkpoint(is_best=False)  # no validation: for average_last
                window.started += time.monotonic() - paused  # tokens/s counts training only
            if dist.broadcast_flag(self._ctrl_c.pressed):
                if window.tokens:
                    self.log(window)
                self.interrupted()
            if pos.finished or end_of_epoch:
                break
        return window

    def train_step(
        self, group: list[tuple[Any, float]], state: Any
    ) -> tuple[float | Tensor, float, float | Tensor, Any]:
        """One optimizer step over ``(batch, weight)`` minibatches, stopped by :meth:`diverged`
        (:meth:`seqlab.training.train_step.TrainStep.take`, which says what it returns)."""
        return self.stepper.take(group, state, self.diverged)

    def elapsed(self) -> float:
        """Seconds trained; 0 while a time budget's schedule is built, before the checkpointer."""
        c = self.__dict__.get("checkpointer")
        return c.elapsed() if c is not None else 0.0

    def log(self, window: LogWindow) -> None:
        window.read()
        bad = window.non_finite(self.state.step) if self.deferred else None
        if bad:
            self.diverged(*bad)
        state, clip = self.state, self.cfg.grad_clip is not None
        epoch = state.epoch + state.batch / max(len(self.data), 1)
        record = window.record(state.step, epoch, self.schedule.lr, self.elapsed(), clip)
        for cb in self.callbacks:
            cb.on_log(self, record)

    def diverged(self, what: str, stopped: str = "") -> None:
        """Stop with :class:`TrainingDiverged`, with the advice of
        :func:`seqlab.training.divergence.advice` (the checkpoint to continue from, if good)."""
        stopped = stopped or (
            f"at step {self.state.step + 1} (epoch {self.state.epoch}); training stopped before "
            "updating the weights"
        )
        raise TrainingDiverged(
            f"{what} {stopped}; {divergence.advice(self.run_dir, self.select.metric)}"
        )

    def interrupted(self) -> None:
        """Save a checkpoint at the step just finished (all processes), then stop and say how to
        resume. The position, RNG and carried state are those after the step: resume is exact."""
        if ckpt.pointer(self.run_dir, "latest") != self.state.step:
            self.save_checkpoint(is_best=False)
        raise TrainingInterrupted(
            f"interrupted; saved a checkpoint at step {self.state.step}. "
            f"Resume: seqlab train --resume {self.run_dir}"
        )

    # ------------------------------------------------------------------ validate, checkpoint
    def validate_and_checkpoint(self) -> None:
        """Validate (:meth:`seqlab.training.validation.Validator.validate`), save a checkpoint,
        and decide on early stopping (all ranks)."""
        state = self.state
        result = self.validator.validate(state, self.elapsed())
        if result.diverged:
            for cb in self.callbacks:
                cb.on_eval(self, result.record)
            self.diverged(
                "validation " + ", ".join(f"{k} = {result.record[k]}" for k in result.bad),
                f"at step {state.step} (epoch {state.epoch}); this checkpoint was not saved",
            )
        early = self.budget.out_of_patience(state, self.select.metric)
        if early and not state.finished:
            state.finished = early
        self.save_checkpoint(result.is_best)
        if self.validator.evaluates:
            for cb in self.callbacks:  # after the checkpoint: a failing plot loses nothing
                cb.on_eval(self, result.record)

    def average_last(self, n: int) -> dict[str, Any]:
        """Average the last ``n`` trained checkpoints: :func:`average_last`."""
        return average_last(self, n)

    def save_checkpoint(self, is_best: bool, averaged_steps: list[int] | None = None) -> None:
        """Save :attr:`state` as the checkpoint of the current step
        (:meth:`seqlab.training.checkpointing.Checkpointer.save`)."""
        self.checkpointer.save(is_best, averaged_steps)

    def restore(self, path: Path) -> None:
        """Continue from the checkpoint at ``path`` (same processes, same accumulation:
        :meth:`seqlab.training.checkpointing.Checkpointer.restore`). A run that has finished is
        refused, naming the ``--resume`` overrides that let it train further
        (:meth:`seqlab.training.budget.Budget.refuse_finished`)."""
        state = self.checkpointer.restore(path)
        self.budget.refuse_finished(state, self.elapsed(), self.select.metric, self.run_dir)
        state.finished = ""  # it goes on


def average_last(trainer: Trainer, n: int) -> dict[str, Any]:
    """Average the last ``n`` trained checkpoints of ``trainer`` (fewer: a ``note``; pruning
    keeps them, :attr:`~seqlab.config.TrainConfig.checkpoints_kept`); keep the average as a new,
    best checkpoint if it is better (:meth:`~seqlab.training.validation.Validator.compare_average`)."""
    steps = ckpt.trained_steps(trainer.run_dir)[-n:]
    if len(steps) < 2:
        return {
            "skipped": f"only {len(steps)} trained checkpoint(s) saved; validate or save "
            "more often (train.eval_every, train.save_every)"
        }
    metrics, better = trainer.validator.compare_average(trainer.run_dir, steps, trainer.state.best)
    if better:
        # the recorded best is the kept checkpoint's value on the history's scale
        trainer.state.best = (
            float(metrics[trainer.select.metric]) if metrics else trainer.state.best
        )
        trainer.state.step += 1  # a new checkpoint name after the last real step
        trainer.save_checkpoint(is_best=True, averaged_steps=steps)
    kept = len(steps)
    note = {"note": f"average of {kept}, not {n}: only {kept} trained checkpoints are there"}
    return {"steps": steps, **(note if kept < n else {}), **metrics, "is_best": better}
