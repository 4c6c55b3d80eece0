"""A training loop that knows nothing about models or tasks.

The task hands the trainer a model, a ``loss_fn(model, batch, state) -> LossOutput``, an
epoch-aware iterable of minibatches and an ``evaluate(model) -> metrics`` function. The trainer
does the rest: optimisation, gradient accumulation, clipping, the learning-rate schedule,
precision, carried recurrent state (truncated BPTT), checkpoints with exact resume, data
parallelism, early stopping and checkpoint averaging. Logging, plots and progress bars attach as
callbacks (:mod:`seqlab.training.callbacks`). Validation and checkpoints are
:mod:`seqlab.training.checkpointing`, Ctrl-C :mod:`seqlab.training.interrupts`, and what a run
that diverged says :mod:`seqlab.training.divergence`.

**A step** (:meth:`Trainer.train_step`) takes ``train.accumulate`` minibatches of this process
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

**Exact resume.** A checkpoint stores the weights, the optimizer and schedule, every process's RNG
and carried state, and the position in the epoch. Minibatches are a pure function of
(seed, epoch), so a resumed run sees the same batches in the same order and reproduces the
losses of an uninterrupted one (bit for bit unless a time budget drives the schedule).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.config import TrainConfig
from seqlab.errors import SeqlabError, TrainingInterrupted
from seqlab.nn.losses import perplexity
from seqlab.objective import Batches, LossFn, LossOutput, Selection
from seqlab.runtime.precision import Resolved, autocast, resolve_precision
from seqlab.storage import checkpoints as ckpt
from seqlab.training import checkpointing, divergence
from seqlab.training import distributed as dist
from seqlab.training.divergence import TrainingDiverged  # also imported from here (tutorials)
from seqlab.training.interrupts import CtrlC
from seqlab.training.optim import LRSchedule, Plateau, build_optimizer


class Callback:
    """Hooks called on rank 0. ``record`` dicts are what goes into ``metrics.jsonl``."""

    def on_train_start(self, trainer: Trainer) -> None: ...
    def on_step(self, trainer: Trainer, loss: float) -> None: ...
    def on_log(self, trainer: Trainer, record: dict[str, Any]) -> None: ...
    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None: ...
    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None: ...


class _LossModule(nn.Module):
    """Routes the loss through ``forward`` so DistributedDataParallel sees every step."""

    def __init__(self, model: nn.Module, loss_fn: LossFn) -> None:
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, batch: Any, state: Any) -> LossOutput:
        return self.loss_fn(self.model, batch, state)


def detach_state(state: Any) -> Any:
    """Cut the graph at a minibatch boundary (truncated BPTT) without changing values."""
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, tuple | list):
        return type(state)(detach_state(s) for s in state)
    return state


@dataclass
class Position:
    """Where training stands: optimizer steps taken and the minibatches of this epoch consumed.

    Only the trainer changes it.
    """

    step: int = 0
    epoch: int = 0
    batch: int = 0
    best: float | None = None
    evals_since_best: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Window:
    """Training loss, tokens and gradient norms since the last log line."""

    loss_sum: float = 0.0
    tokens: float = 0.0
    steps: int = 0
    grad_norm_sum: float = 0.0  # before clipping
    clipped: int = 0  # steps whose gradient norm exceeded train.grad_clip
    started: float = field(default_factory=time.monotonic)


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
        extra_meta: JSON-able facts stored in every checkpoint (e.g. the vocabulary size).
        eval_precision: ``fp32`` or ``bf16`` for ``evaluate``.
        precision: the training precision already resolved (a resumed run passes the one it
            recorded); None resolves ``cfg.precision`` here. Every process uses rank 0's.
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        train_data: Batches,
        cfg: TrainConfig,
        run_dir: str | Path,
        evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
        select: Selection = Selection(),
        final_evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
        callbacks: Sequence[Callback] = (),
        extra_meta: dict[str, Any] | None = None,
        eval_precision: str = "fp32",
        precision: Resolved | None = None,
    ) -> None:
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.device = resolve_device(cfg.device)
        self.rank, self.world = dist.setup(self.device)
        self.data = dist.RankBatches(train_data, self.rank, self.world)
        self.model = model.to(self.device)
        self.loss_module: nn.Module = _LossModule(self.model, loss_fn)
        if self.world > 1:
            self.loss_module = torch.nn.parallel.DistributedDataParallel(self.loss_module)
        self.evaluate_fn, self.select = evaluate, select
        self.final_evaluate_fn = final_evaluate
        self.callbacks = list(callbacks) if dist.is_main() else []
        self.extra_meta = extra_meta or {}
        self.precision: Resolved = dist.same_on_all_ranks(
            precision or resolve_precision(cfg.precision, self.device)
        )
        self.eval_precision: Resolved = resolve_precision(eval_precision, self.device)
        self.optimizer = build_optimizer(self.model, cfg)
        self.steps_per_epoch = -(-len(self.data) // cfg.accumulate)
        self.total_steps = cfg.max_steps or cfg.epochs * self.steps_per_epoch
        budget = 60 * cfg.max_minutes if cfg.max_minutes else None
        time_fraction = (lambda: self.elapsed() / budget) if budget else None
        self.started = time.monotonic()
        self.schedule = LRSchedule(self.optimizer, cfg, self.total_steps, time_fraction)
        self.plateau = Plateau(self.schedule, select) if cfg.schedule == "plateau" else None
        self.pos = Position()
        self.carry: Any = None  # recurrent state after the last step, when batches carry it
        self.stop_reason = ""
        self._ctrl_c = CtrlC()  # a first Ctrl-C stops training after the step in progress

    def close(self) -> None:
        """Drop the DistributedDataParallel wrapper: its reducer holds the process group, whose
        gloo threads must stop while Python is fully alive (:func:`dist.teardown` follows)."""
        if isinstance(self.loss_module, torch.nn.parallel.DistributedDataParallel):
            self.loss_module = self.loss_module.module

    # ------------------------------------------------------------------------------ the loop
    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train until the step/epoch budget, the time budget or early stopping ends it."""
        if resume:
            self.restore(ckpt.resume_from(self.run_dir))
        for cb in self.callbacks:
            cb.on_train_start(self)
        window = _Window()
        with self._ctrl_c.after_step(self.run_dir, lambda: self.pos.step):
            while not self.stop_reason:
                window = self.run_epoch(window)
        if window.tokens:
            self.log(window)
        history = self.pos.history
        summary = {
            "step": self.pos.step,
            "epoch": self.pos.epoch,
            "best": self.pos.best,
            "select": self.select.metric,
            # which way "best" goes (min: the lowest), and the last validation's value
            "select_mode": self.select.mode,
            "last": history[-1].get(self.select.metric) if history else None,
            "stopped": self.stop_reason,
            "wall_seconds": round(self.elapsed(), 1),
            "precision": self.precision.precision,
        }
        for cb in self.callbacks:
            cb.on_train_end(self, summary)
        dist.barrier()
        return summary

    def run_epoch(self, window: _Window) -> _Window:
        """Steps until the end of the epoch or of training; the position advances here only."""
        self.data.set_epoch(self.pos.epoch)
        items = iter(self.data)
        for _ in range(self.pos.batch):  # resuming mid-epoch: these were already trained on
            next(items)
        state = self.carry if self.pos.batch else None
        self.model.train()
        while True:
            group = [item for _, item in zip(range(self.cfg.accumulate), items, strict=False)]
            if not group:
                raise RuntimeError(
                    f"the training batches ended after {self.pos.batch} of the {len(self.data)} "
                    f"minibatches their len() announced (epoch {self.pos.epoch})"
                )
            loss, tokens, norm, state = self.train_step(group, state)
            self.pos.step += 1
            self.pos.batch += len(group)
            end_of_epoch = self.pos.batch >= len(self.data)
            if end_of_epoch:
                self.pos.epoch, self.pos.batch = self.pos.epoch + 1, 0
            self.carry = None if end_of_epoch else state
            window.loss_sum += loss * tokens
            window.tokens += tokens
            window.steps += 1
            window.grad_norm_sum += norm
            window.clipped += self.cfg.grad_clip is not None and norm > self.cfg.grad_clip
            for cb in self.callbacks:
                cb.on_step(self, loss)
            if self.pos.step % self.cfg.log_every == 0 or self.pos.step == 1:
                self.log(window)
                window = _Window()
            self.stop_reason = self.budget_reason()
            due = self.cfg.eval_every is not None and self.pos.step % self.cfg.eval_every == 0
            at_eval = end_of_epoch and self.cfg.eval_every is None
            save = self.cfg.save_every is not None and self.pos.step % self.cfg.save_every == 0
            if self.stop_reason or due or at_eval or save:
                paused = time.monotonic()
                if self.stop_reason or due or at_eval:
                    self.validate_and_checkpoint()
                else:
                    self.save_checkpoint(is_best=False)  # no validation: for average_last
                window.started += time.monotonic() - paused  # tokens/s counts training only
            if dist.broadcast_flag(self._ctrl_c.pressed):
                if window.tokens:
                    self.log(window)
                self.interrupted()
            if self.stop_reason or end_of_epoch:
                return window

    def budget_reason(self) -> str:
        """Why training must stop now (the same answer on every process), or ''."""
        if self.pos.step >= self.total_steps and self.cfg.max_steps:
            return f"step budget train.max_steps={self.cfg.max_steps} reached"
        if self.pos.step >= self.total_steps or self.pos.epoch >= self.cfg.epochs:
            return f"train.epochs={self.cfg.epochs} done"
        out_of_time = (
            self.cfg.max_minutes is not None and self.elapsed() > 60 * self.cfg.max_minutes
        )
        if dist.broadcast_flag(out_of_time):
            return f"time budget train.max_minutes={self.cfg.max_minutes:g} reached"
        return ""

    def lifted_limits(self) -> list[str]:
        """The ``--resume`` overrides that let a finished run train further: every limit it has
        reached (the steps, the epochs, the time, early stopping's patience), doubled (the time:
        as much again as it had, counted from the time already spent)."""
        cfg, pos, out = self.cfg, self.pos, []
        if cfg.max_steps and pos.step >= cfg.max_steps:
            out.append(f"train.max_steps={2 * cfg.max_steps}")
        if pos.epoch >= cfg.epochs or (not cfg.max_steps and pos.step >= self.total_steps):
            out.append(f"train.epochs={2 * cfg.epochs}")
        if cfg.max_minutes is not None and self.elapsed() > 60 * cfg.max_minutes:
            out.append(f"train.max_minutes={math.ceil(self.elapsed() / 60 + cfg.max_minutes)}")
        patience = cfg.early_stopping_patience
        if patience and pos.evals_since_best >= patience:
            out.append(f"train.early_stopping_patience={2 * patience}")
        return out

    def train_step(
        self, group: list[tuple[Any, float]], state: Any
    ) -> tuple[float, float, float, Any]:
        """One optimizer step over ``(batch, weight)`` minibatches; see the module docstring.

        Returns the step's token-weighted mean loss over all processes, its tokens, the gradient
        norm before clipping, and the recurrent state after the last minibatch (detached).
        """
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum, tokens = 0.0, 0.0
        for i, (batch, weight) in enumerate(group):
            batch = dist.to_device(batch, self.device)
            if not self.data.carries_state:
                state = None
            last = i == len(group) - 1
            sync = contextlib.nullcontext()
            if self.world > 1 and not last:
                sync = self.loss_module.no_sync()  # all-reduce once, after the last minibatch
            with sync:
                with autocast(self.precision, self.device):
                    out = self.loss_module(batch, state)
                loss = out.loss.float()
                (loss * (out.num_tokens * weight)).backward()
            if weight:
                loss_sum += loss.item() * out.num_tokens * weight
                tokens += out.num_tokens * weight
            state = detach_state(out.state)
        loss_sum, tokens = dist.all_sum([loss_sum, tokens])
        mean = loss_sum / max(tokens, 1.0)
        if not math.isfinite(mean):
            self.diverged(f"loss became {mean}")
        scale = self.world / max(tokens, 1.0)  # DDP averaged over processes: undo, then per token
        for p in self.model.parameters():
            if p.grad is not None:
                p.grad.mul_(scale)
        clip = self.cfg.grad_clip if self.cfg.grad_clip is not None else math.inf
        norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        if not math.isfinite(norm):
            self.diverged(f"gradient norm became {norm}")
        self.optimizer.step()
        self.schedule.step()
        return mean, tokens, norm, state

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, window: _Window) -> None:
        mean = window.loss_sum / max(window.tokens, 1.0)
        seconds = max(time.monotonic() - window.started, 1e-9)
        record = {
            "step": self.pos.step,
            "epoch": self.pos.epoch + self.pos.batch / max(len(self.data), 1),
            "loss": mean,
            "ppl": perplexity(mean),  # meaningful for a per-token cross-entropy only
            "lr": self.schedule.lr,
            "tokens_per_s": window.tokens / seconds,
            "grad_norm": window.grad_norm_sum / max(window.steps, 1),  # mean, before clipping
            "elapsed_s": round(self.elapsed(), 2),
        }
        if self.cfg.grad_clip is not None:
            record["clipped"] = window.clipped / max(window.steps, 1)  # fraction of the steps
        for cb in self.callbacks:
            cb.on_log(self, record)

    def diverged(self, what: str, stopped: str = "") -> None:
        """Stop with :class:`TrainingDiverged`, with the advice of
        :func:`seqlab.training.divergence.advice` (the checkpoint to continue from, if good)."""
        stopped = stopped or (
            f"at step {self.pos.step + 1} (epoch {self.pos.epoch}); training stopped before "
            "updating the weights"
        )
        raise TrainingDiverged(
            f"{what} {stopped}; {divergence.advice(self.run_dir, self.select.metric)}"
        )

    def last_good_checkpoint(self) -> Path | None:
        """The checkpoint ``--resume`` continues from, if its validation was finite
        (:func:`seqlab.training.divergence.last_good_checkpoint`)."""
        return divergence.last_good_checkpoint(self.run_dir, self.select.metric)

    def interrupted(self) -> None:
        """Save a checkpoint at the step just finished (all processes), then stop and say how to
        resume. The position, RNG and carried state are those after the step: resume is exact."""
        if ckpt.pointer(self.run_dir, "latest") != self.pos.step:
            self.save_checkpoint(is_best=False)
        raise TrainingInterrupted(
            f"interrupted; saved a checkpoint at step {self.pos.step}. "
            f"Resume: seqlab train --resume {self.run_dir}"
        )

    # ------------------------------------------------------------------ validate, checkpoint
    def evaluate(self, fn: Callable[[nn.Module], dict[str, float]] | None = None) -> dict:
        """``fn(model)`` (default ``evaluate``) on rank 0, in eval mode and the evaluation
        precision."""
        fn = fn or self.evaluate_fn
        assert fn is not None
        self.model.eval()
        with torch.no_grad(), autocast(self.eval_precision, self.device):
            metrics = fn(self.model)
        self.model.train()
        return metrics

    def validate_and_checkpoint(self) -> None:
        """Evaluate (rank 0), save a checkpoint, and decide on early stopping (all ranks):
        :func:`seqlab.training.checkpointing.validate_and_checkpoint`."""
        checkpointing.validate_and_checkpoint(self)

    def average_last(self, n: int) -> dict[str, Any]:
        """Average the last ``n`` trained checkpoints; keep the average as the best checkpoint
        if it evaluates better (:func:`seqlab.training.checkpointing.average_last`)."""
        return checkpointing.average_last(self, n)

    def save_checkpoint(self, is_best: bool, averaged_steps: list[int] | None = None) -> None:
        """Save the training state as the checkpoint of the current step
        (:func:`seqlab.training.checkpointing.save_checkpoint`)."""
        checkpointing.save_checkpoint(self, is_best, averaged_steps)

    def restore(self, path: Path) -> None:
        """Continue from the checkpoint at ``path`` (same processes, same accumulation):
        :func:`seqlab.training.checkpointing.restore`."""
        checkpointing.restore(self, path)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SeqlabError("train.device=cuda but no CUDA device is available; use cpu or auto")
    return torch.device(name)
