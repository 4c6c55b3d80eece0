"""Optimizers and learning-rate schedules, built from :class:`seqlab.config.TrainConfig`.

The rate at optimizer step s (counted from 1) is ``train.lr · scale · f(s)``: ``scale`` is changed
only by the plateau rule, and f is the schedule:

- ``constant``: linear warm-up, then 1.
- ``cosine``: warm-up, then cosine decay to ``min_lr_ratio`` at the end of training.
- ``inverse_sqrt``: the Transformer schedule (Vaswani et al. 2017, eq. 3) rescaled so that its
  peak, reached at s = W, equals ``train.lr``: min(s / W, sqrt(W / s)).
- ``plateau``: constant after warm-up; :class:`Plateau` halves the rate when the validation
  metric stops improving.

**Progress.** Warm-up and decay follow the *progress* of training p ∈ [0, 1]: the share of the
step budget taken (``max_steps``, or ``epochs`` × steps per epoch), or, when ``max_minutes`` is
set and time runs out first, the share of the time budget used. Warm-up is either a number of
steps (``warmup_steps``) or a share of the progress (``warmup_fraction``); the latter keeps a
recipe's shape on any machine: on a CPU three times slower, a time-budgeted run still warms up
for the same share of its budget and still ends annealed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from seqlab.config import TrainConfig
from seqlab.objective import Selection
from seqlab.storage.training_state import PlateauState, ScheduleState


def build_optimizer(
    model: nn.Module, cfg: TrainConfig, fused: bool | None = None
) -> torch.optim.Optimizer:
    """The optimizer of ``cfg`` over ``model``'s trainable parameters. ``fused`` (None: when
    every parameter is on a GPU) takes PyTorch's fused implementation: one kernel for all
    parameters, and it can skip a non-finite update on the device
    (:mod:`seqlab.training.trainer`); else the default one."""
    params = [p for p in model.parameters() if p.requires_grad]
    if fused is None:
        fused = bool(params) and all(p.is_cuda for p in params)
    fused = {"fused": True} if fused else {}
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, **fused
        )
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay, **fused)


def lr_multiplier(
    cfg: TrainConfig, total_steps: int, time_fraction: Callable[[], float] | None = None
) -> Callable[[int], float]:
    """f as a function of the number of steps taken so far (0-based); see the module docstring.

    ``time_fraction`` returns the share of ``train.max_minutes`` used so far.
    """

    def factor(step: int) -> float:
        s = step + 1
        if cfg.schedule == "inverse_sqrt":
            w = max(cfg.warmup_steps, 1)
            return min(s / w, math.sqrt(w / s))
        if cfg.warmup_fraction is not None:
            p = s / max(total_steps, 1)
            if time_fraction is not None:
                p = max(p, time_fraction())
            warm = cfg.warmup_fraction
            if p < warm:
                return p / warm
            decay = (p - warm) / (1.0 - warm)
        else:
            warm = cfg.warmup_steps
            if warm and s <= warm:
                return s / warm
            decay = (s - warm) / max(total_steps - warm, 1)
            if time_fraction is not None:
                decay = max(decay, time_fraction())
        if cfg.schedule == "cosine":
            decay = min(decay, 1.0)
            return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * decay))
        return 1.0

    return factor


class LRSchedule:
    """Sets ``lr = train.lr · scale · f(steps)`` on every parameter group after each step."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        cfg: TrainConfig,
        total_steps: int,
        time_fraction: Callable[[], float] | None = None,
    ) -> None:
        self.optimizer = optimizer
        self.factor = lr_multiplier(cfg, total_steps, time_fraction)
        self.base_lr = cfg.lr
        self.scale = 1.0
        self.steps = 0
        self._apply()

    @property
    def lr(self) -> float:
        return self.base_lr * self.scale * self.factor(self.steps)

    def _apply(self) -> None:
        lr = self.lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def step(self) -> None:
        """Call after each optimizer step."""
        self.steps += 1
        self._apply()

    def scale_by(self, factor: float) -> None:
        """Multiply every later rate by ``factor`` (the plateau rule)."""
        self.scale *= factor
        self._apply()

    def state_dict(self) -> ScheduleState:
        return ScheduleState(steps=self.steps, scale=self.scale)

    def load_state_dict(self, state: ScheduleState) -> None:
        self.steps, self.scale = state.steps, state.scale
        self._apply()


class Plateau:
    """Multiply the rate by ``factor`` after more than ``patience`` validations without improvement."""

    def __init__(
        self, schedule: LRSchedule, selection: Selection, patience: int = 1, factor: float = 0.5
    ) -> None:
        self.schedule, self.selection = schedule, selection
        self.patience, self.factor = patience, factor
        self.best: float | None = None
        self.bad = 0

    def step(self, metric: float) -> None:
        if self.selection.better(metric, self.best):
            self.best, self.bad = metric, 0
            return
        self.bad += 1
        if self.bad > self.patience:
            self.bad = 0
            self.schedule.scale_by(self.factor)

    def state_dict(self) -> PlateauState:
        return PlateauState(best=self.best, bad=self.bad)

    def load_state_dict(self, state: PlateauState) -> None:
        self.best, self.bad = state.best, state.bad
