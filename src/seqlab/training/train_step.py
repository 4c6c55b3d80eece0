"""The trainer's optimizer steps (:class:`TrainStep`): which minibatches of this process each
step takes (:meth:`TrainStep.groups`) and the step itself (:meth:`TrainStep.take`), for
:class:`~seqlab.training.trainer.Trainer`, whose module docstring says what a step computes.

A step takes ``train.accumulate`` minibatches of this process
(:class:`~seqlab.training.distributed.RankBatches`), back-propagates each one's *summed* token
loss through the loss module (under DistributedDataParallel when several processes train, its
gradients all-reduced once, after the last minibatch), then hands the gradients to the update
(:class:`~seqlab.training.stepping.Update`), which divides them by the number of tokens of the
whole step over all processes, and steps the learning-rate schedule.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from seqlab.config import TrainConfig
from seqlab.objective import LossFn, LossOutput
from seqlab.runtime.precision import Resolved, autocast
from seqlab.storage.training_state import TrainingState
from seqlab.training import distributed as dist
from seqlab.training.optim import LRSchedule
from seqlab.training.stepping import Update


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


class TrainStep:
    """Owns the loss module (``loss_fn`` on ``model``, wrapped in DistributedDataParallel when
    several processes train together) and takes the optimizer steps over this process's batches
    ``data`` (which know how many processes share the batches), ``cfg.accumulate`` minibatches a
    step, in ``precision`` on ``device``; ``update`` applies each step's gradients and
    ``schedule`` steps after it.

    Attributes:
        loss_module: what computes a minibatch's loss (the DistributedDataParallel wrapper when
            several processes train, until :meth:`close`).
    """

    def __init__(
        self,
        model: nn.Module,
        loss_fn: LossFn,
        data: dist.RankBatches,
        update: Update,
        schedule: LRSchedule,
        cfg: TrainConfig,
        precision: Resolved,
        device: torch.device,
    ) -> None:
        self.model, self.data, self.update, self.schedule = model, data, update, schedule
        self.accumulate, self.precision, self.device = cfg.accumulate, precision, device
        self.world = data.world
        self.loss_module: nn.Module = _LossModule(model, loss_fn)
        if self.world > 1:
            self.loss_module = torch.nn.parallel.DistributedDataParallel(self.loss_module)

    def close(self) -> None:
        """Drop the DistributedDataParallel wrapper (its reducer holds the process group)."""
        if isinstance(self.loss_module, torch.nn.parallel.DistributedDataParallel):
            self.loss_module = self.loss_module.module

    def groups(self, pos: TrainingState) -> Iterator[list[tuple[Any, float]]]:
        """The ``(batch, weight)`` minibatches of each step of epoch ``pos.epoch``, from
        minibatch ``pos.batch`` on (those before were trained on already: a resumed run skips
        them), ``accumulate`` a step (fewer at the end of the epoch), for as long as the caller
        asks; the caller advances ``pos``.

        Raises:
            RuntimeError: the batches ended before the number of minibatches their ``len()``
                announced.
        """
        self.data.set_epoch(pos.epoch)
        items = iter(self.data)
        for _ in range(pos.batch):  # resuming mid-epoch: these were already trained on
            next(items)
        while True:
            group = [item for _, item in zip(range(self.accumulate), items, strict=False)]
            if not group:
                raise RuntimeError(
                    f"the training batches ended after {pos.batch} of the {len(self.data)} "
                    f"minibatches their len() announced (epoch {pos.epoch})"
                )
            yield group

    def take(
        self, group: list[tuple[Any, float]], state: Any, diverged: Callable[[str], None]
    ) -> tuple[float | Tensor, float, float | Tensor, Any]:
        """One optimizer step over ``(batch, weight)`` minibatches, from the recurrent
        ``state`` (where the batches carry one); ``diverged(message)`` stops training when the
        loss or the gradient norm is not finite (read at once, unless ``update.deferred``).

        Returns the step's token-weighted mean loss over all processes, its tokens, the gradient
        norm before clipping (both 0-d device tensors when ``update.deferred``), and the
        recurrent state after the last minibatch (detached).
        """
        deferred, scaler = self.update.deferred, self.update.scaler
        self.update.optimizer.zero_grad(set_to_none=True)
        loss_sum: float | Tensor = 0.0
        tokens = 0.0
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
                summed = loss * (out.num_tokens * weight)
                (scaler.scale(summed) if scaler else summed).backward()
            if weight:
                part = loss.detach() * (out.num_tokens * weight)
                loss_sum = loss_sum + (part if deferred else part.item())
                tokens += out.num_tokens * weight
            state = detach_state(out.state)
        if not deferred:
            loss_sum, tokens = dist.all_sum([float(loss_sum), tokens])
        mean = loss_sum / max(tokens, 1.0)
        if not deferred and not math.isfinite(mean):
            diverged(f"loss became {mean}")
        norm = self.update.apply(self.model, self.world / max(tokens, 1.0), mean, diverged)
        self.schedule.step()
        return mean, tokens, norm, state
