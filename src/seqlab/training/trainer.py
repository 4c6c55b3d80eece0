"""A training loop that knows nothing about architectures.

The experiment hands the trainer a model, a ``loss_fn(model, batch, state) -> LossOutput``, an
epoch-aware iterable of minibatches and an ``evaluate(model) -> metrics`` function. The trainer
does the rest: optimisation, gradient clipping, schedules, bf16 autocast, carried recurrent state
(truncated BPTT), checkpoints with exact resume, distributed data parallelism, early stopping.
Logging, plots and progress bars attach as callbacks (:mod:`seqlab.training.callbacks`).

Exact resume: a checkpoint stores the weights, the optimizer and scheduler, every process's RNG
and carried state, and the position in the epoch. Minibatches are a pure function of
(seed, epoch), so a resumed run sees the same batches in the same order and reproduces the
losses of an uninterrupted one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from seqlab.config import TrainConfig
from seqlab.errors import SeqlabError
from seqlab.training import checkpoint as ckpt
from seqlab.training import distributed as dist
from seqlab.training.optim import PlateauHalver, build_optimizer, build_scheduler


@dataclass
class LossOutput:
    """What a loss function returns for one minibatch.

    Attributes:
        loss: scalar mean loss over the ``num_tokens`` predicted tokens (back-propagated).
        num_tokens: tokens the mean is taken over (weights logging and distributed averaging).
        state: recurrent state to carry into the next minibatch, or ``None``.
    """

    loss: Tensor
    num_tokens: int
    state: Any = None


class Batches(Protocol):
    """Minibatches for one epoch at a time, a pure function of (seed, epoch)."""

    carries_state: bool

    def set_epoch(self, epoch: int) -> None: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...


LossFn = Callable[[nn.Module, Any, Any], LossOutput]


class TrainingDiverged(SeqlabError):
    """The loss became NaN or infinite."""


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
    """Where training stands: optimizer steps taken and the next minibatch to run."""

    step: int = 0
    epoch: int = 0
    batch: int = 0
    best: float | None = None
    evals_since_best: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)


class Trainer:
    """Train ``model`` with ``loss_fn`` on ``train_data``; see the module docstring.

    Args:
        model: any ``nn.Module``.
        loss_fn: ``(model, batch, state) -> LossOutput``.
        train_data: a :class:`Batches` object.
        cfg: the ``train`` section of the experiment config.
        run_dir: where checkpoints and metrics go (rank 0 writes).
        evaluate: ``model -> {"val_loss": ..., ...}``, called in eval mode under ``no_grad``.
        select: (metric, "min" | "max") choosing the best checkpoint and early stopping.
        callbacks: logging, plotting, progress (rank 0 only).
        extra_meta: JSON-able facts stored in every checkpoint (e.g. the vocabulary size).
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        train_data: Batches,
        cfg: TrainConfig,
        run_dir: str | Path,
        evaluate: Callable[[nn.Module], dict[str, float]] | None = None,
        select: tuple[str, str] = ("val_loss", "min"),
        callbacks: Sequence[Callback] = (),
        extra_meta: dict[str, Any] | None = None,
    ) -> None:
        self.cfg, self.run_dir, self.train_data = cfg, Path(run_dir), train_data
        self.device = resolve_device(cfg.device)
        self.rank, self.world = dist.setup(self.device)
        self.model = model.to(self.device)
        self.loss_module: nn.Module = _LossModule(self.model, loss_fn)
        if self.world > 1:
            self.loss_module = torch.nn.parallel.DistributedDataParallel(self.loss_module)
        self.evaluate_fn, self.select = evaluate, select
        self.callbacks = list(callbacks) if dist.is_main() else []
        self.extra_meta = extra_meta or {}
        self.optimizer = build_optimizer(self.model, cfg)
        self.total_steps = cfg.max_steps or cfg.epochs * len(train_data)
        # a time budget also drives the cosine decay (then a resumed run is not bit-exact)
        budget = 60 * cfg.max_minutes if cfg.max_minutes else None
        time_fraction = (lambda: self.elapsed() / budget) if budget else None
        self.started = time.monotonic()
        self.scheduler = build_scheduler(self.optimizer, cfg, self.total_steps, time_fraction)
        mode = select[1]
        self.plateau = PlateauHalver(self.scheduler, mode) if cfg.schedule == "plateau" else None
        self.pos = Position()
        self.carry: Any = None
        self.stop_reason = ""

    # ---------------------------------------------------------------------------- the loop
    def fit(self, resume: bool = False) -> dict[str, Any]:
        if resume:
            self.restore(ckpt.find_checkpoint(self.run_dir, "latest"))
        for cb in self.callbacks:
            cb.on_train_start(self)
        autocast = torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.cfg.precision == "bf16"
        )
        window_loss, window_tokens, window_start = 0.0, 0, time.monotonic()
        stop = self.pos.step >= self.total_steps
        while not stop and self.pos.epoch < self.cfg.epochs:
            self.train_data.set_epoch(self.pos.epoch)
            state = self.carry if self.pos.batch else None
            self.model.train()
            for index, batch in enumerate(self.train_data):
                if index < self.pos.batch:  # resuming mid-epoch: these were already trained on
                    continue
                batch = dist.to_device(dist.shard(batch, self.rank, self.world), self.device)
                if not self.train_data.carries_state:
                    state = None
                with autocast:
                    out = self.loss_module(batch, state)
                loss = out.loss.float()
                scale = 1.0
                if self.world > 1:  # weight each process by its share of the tokens
                    total_tokens, bad = dist.all_sum(
                        [float(out.num_tokens), float(not math.isfinite(loss.item()))]
                    )
                    scale = out.num_tokens * self.world / max(total_tokens, 1.0)
                    finite = bad == 0
                else:
                    finite = math.isfinite(loss.item())
                if not finite:
                    self.diverged(loss.item(), index)
                self.optimizer.zero_grad(set_to_none=True)
                (loss * scale).backward()
                if self.cfg.grad_clip is not None:
                    nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
                self.optimizer.step()
                self.scheduler.step()
                state = detach_state(out.state)
                self.pos.step += 1
                self.pos.batch = index + 1
                window_loss += loss.item() * out.num_tokens
                window_tokens += out.num_tokens
                for cb in self.callbacks:
                    cb.on_step(self, loss.item())
                if self.pos.step % self.cfg.log_every == 0:
                    self.log_window(window_loss, window_tokens, time.monotonic() - window_start)
                    window_loss, window_tokens, window_start = 0.0, 0, time.monotonic()
                out_of_time = (
                    self.cfg.max_minutes is not None and self.elapsed() > 60 * self.cfg.max_minutes
                )
                stop = self.pos.step >= self.total_steps or dist.broadcast_flag(out_of_time)
                at_end_of_epoch = self.pos.batch == len(self.train_data)
                due = self.cfg.eval_every is not None and self.pos.step % self.cfg.eval_every == 0
                if stop or due or (at_end_of_epoch and self.cfg.eval_every is None):
                    self.carry = state if not at_end_of_epoch else None
                    if at_end_of_epoch:
                        self.pos.epoch, self.pos.batch = self.pos.epoch + 1, 0
                    paused = time.monotonic()
                    stop = self.validate_and_checkpoint() or stop
                    window_start += time.monotonic() - paused  # tokens/s counts training time only
                    if out_of_time:
                        self.stop_reason = f"time budget of {self.cfg.max_minutes} min reached"
                    if stop or at_end_of_epoch:
                        break
            else:  # an epoch with fewer batches than expected: move on
                self.pos.epoch, self.pos.batch = self.pos.epoch + 1, 0
        if self.pos.step % self.cfg.log_every:  # every process joins the reduction
            self.log_window(window_loss, window_tokens, time.monotonic() - window_start)
        summary = {
            "step": self.pos.step,
            "epoch": self.pos.epoch,
            "best": self.pos.best,
            "select": self.select[0],
            "stopped": self.stop_reason or "finished",
            "wall_seconds": round(self.elapsed(), 1),
        }
        for cb in self.callbacks:
            cb.on_train_end(self, summary)
        dist.barrier()
        return summary

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log_window(self, loss_sum: float, tokens: int, seconds: float) -> None:
        loss_sum, tokens = dist.all_sum([loss_sum, float(tokens)])
        mean = loss_sum / max(tokens, 1)
        record = {
            "step": self.pos.step,
            "epoch": self.pos.epoch + (self.pos.batch / max(len(self.train_data), 1)),
            "loss": mean,
            "ppl": math.exp(min(mean, 50.0)),
            "lr": self.scheduler.get_last_lr()[0],
            "tokens_per_s": tokens / max(seconds, 1e-9),
            "elapsed_s": round(self.elapsed(), 2),
        }
        for cb in self.callbacks:
            cb.on_log(self, record)

    def diverged(self, value: float, index: int) -> None:
        latest = ckpt.pointer(self.run_dir, "latest")
        where = (
            f"last good checkpoint: {ckpt.checkpoint_dir(self.run_dir) / ckpt.step_name(latest)}"
            if latest is not None
            else "no checkpoint was written yet"
        )
        raise TrainingDiverged(
            f"loss became {value} at step {self.pos.step + 1} (epoch {self.pos.epoch}, batch {index}); "
            f"training stopped before updating the weights; {where}. Lower train.lr or set "
            f"train.grad_clip, then resume with --resume {self.run_dir}."
        )

    # ------------------------------------------------------------------ validate, checkpoint
    def validate_and_checkpoint(self) -> bool:
        """Evaluate (rank 0), save a checkpoint, and decide on early stopping (all ranks)."""
        record: dict[str, Any] = {"step": self.pos.step, "epoch": self.pos.epoch}
        is_best = False
        if dist.is_main() and self.evaluate_fn is not None:
            self.model.eval()
            with (
                torch.no_grad(),
                torch.autocast(
                    self.device.type, dtype=torch.bfloat16, enabled=self.cfg.precision == "bf16"
                ),
            ):
                record.update(self.evaluate_fn(self.model))
            self.model.train()
            metric, mode = self.select
            value = record.get(metric)
            if value is not None:
                better = self.pos.best is None or (
                    value < self.pos.best if mode == "min" else value > self.pos.best
                )
                if better:
                    self.pos.best, self.pos.evals_since_best, is_best = float(value), 0, True
                else:
                    self.pos.evals_since_best += 1
                if self.plateau is not None:
                    self.plateau.step(float(value))
            record["best"] = self.pos.best
            record["elapsed_s"] = round(self.elapsed(), 2)
            self.pos.history.append(record)
            for cb in self.callbacks:
                cb.on_eval(self, record)
        elif self.evaluate_fn is None:
            is_best = True
        self.save_checkpoint(is_best)
        patience = self.cfg.early_stopping_patience
        early = bool(patience) and self.pos.evals_since_best >= patience
        if early:
            self.stop_reason = f"no improvement of {self.select[0]} in {patience} evaluations"
        return dist.broadcast_flag(early)

    def save_checkpoint(self, is_best: bool) -> None:
        tmp = ckpt.begin_checkpoint(self.run_dir, self.pos.step) if dist.is_main() else None
        tmp_name = [str(tmp) if tmp else ""]
        if self.world > 1:
            torch.distributed.broadcast_object_list(tmp_name, src=0)
        tmp = Path(tmp_name[0])
        ckpt.save_tree(
            {"rng": ckpt.torch_rng_state(), "carry": self.carry},
            tmp / f"rank{self.rank}.safetensors",
        )
        if dist.is_main():
            ckpt.save_model_weights(self.model, tmp / "model.safetensors")
            opt_skeleton = ckpt.save_tree(
                self.optimizer.state_dict(), tmp / "optimizer.safetensors"
            )
            carry_skeleton = ckpt.flatten_tensors(
                {"rng": ckpt.torch_rng_state(), "carry": self.carry}
            )[1]
            ckpt.write_meta(
                tmp,
                {
                    "step": self.pos.step,
                    "epoch": self.pos.epoch,
                    "batch": self.pos.batch,
                    "best": self.pos.best,
                    "evals_since_best": self.pos.evals_since_best,
                    "history": self.pos.history,
                    "world_size": self.world,
                    "elapsed_s": self.elapsed(),
                    "optimizer": opt_skeleton,
                    "rank_state": carry_skeleton,
                    "scheduler": self.scheduler.state_dict(),
                    "plateau": self.plateau.state_dict() if self.plateau else None,
                    **self.extra_meta,
                },
            )
        dist.barrier()
        if dist.is_main():
            ckpt.commit_checkpoint(self.run_dir, tmp, self.pos.step, is_best, self.cfg.keep_last)
        dist.barrier()

    def restore(self, path: Path) -> None:
        meta = ckpt.read_meta(path)
        if meta.get("world_size", 1) != self.world:
            raise ckpt.CheckpointError(
                f"{path} was written by {meta.get('world_size')} processes; resume with the same number "
                f"(this run has {self.world}) so that every process finds its state"
            )
        ckpt.load_model_weights(self.model, path)
        opt_state = ckpt.unflatten_tensors(
            meta["optimizer"], ckpt.load_safetensors(path / "optimizer.safetensors")
        )
        self.optimizer.load_state_dict(opt_state)
        self.scheduler.load_state_dict(meta["scheduler"])
        if self.plateau is not None and meta.get("plateau"):
            self.plateau.load_state_dict(meta["plateau"])
        rank_state = ckpt.unflatten_tensors(
            meta["rank_state"], ckpt.load_safetensors(path / f"rank{self.rank}.safetensors")
        )
        ckpt.set_torch_rng_state(rank_state["rng"])
        self.carry = dist.to_device(rank_state["carry"], self.device)
        # the time budget (train.max_minutes) counts the time already spent before the restart
        self.started = time.monotonic() - float(meta.get("elapsed_s", 0.0))
        self.pos = Position(
            step=meta["step"],
            epoch=meta["epoch"],
            batch=meta["batch"],
            best=meta["best"],
            evals_since_best=meta["evals_since_best"],
            history=list(meta["history"]),
        )


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise SeqlabError("train.device=cuda but no CUDA device is available; use cpu or auto")
    return torch.device(name)
