"""Optimizers and learning-rate schedules, built from :class:`seqlab.config.TrainConfig`.

Schedules are multipliers of ``train.lr`` as a function of the optimizer step s (counted from 1):

- ``constant``: linear warm-up over W steps, then 1.
- ``cosine``: warm-up, then cosine decay to ``min_lr_ratio`` at the last step.
- ``inverse_sqrt``: the Transformer schedule (Vaswani et al. 2017, eq. 3) rescaled so that its
  peak, reached at s = W, equals ``train.lr``: min(s / W, sqrt(W / s)).
- ``plateau``: constant; the rate is halved when the validation metric stops improving.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from seqlab.config import TrainConfig


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay)


def lr_multiplier(
    cfg: TrainConfig, total_steps: int, time_fraction: Callable[[], float] | None = None
) -> Callable[[int], float]:
    """The schedule as a function of the number of steps taken so far (0-based).

    With ``time_fraction`` (the share of ``train.max_minutes`` used so far), the cosine decay
    follows whichever runs out first, steps or time, so a time-budgeted run ends annealed.
    """
    warmup = cfg.warmup_steps

    def factor(step: int) -> float:
        s = step + 1
        if cfg.schedule == "inverse_sqrt":
            w = max(warmup, 1)
            return min(s / w, math.sqrt(w / s))
        if warmup and s <= warmup:
            return s / warmup
        if cfg.schedule == "cosine":
            span = max(total_steps - warmup, 1)
            progress = min((s - warmup) / span, 1.0)
            if time_fraction is not None:
                progress = min(max(progress, time_fraction()), 1.0)
            return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (
                1 + math.cos(math.pi * progress)
            )
        return 1.0

    return factor


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    cfg: TrainConfig,
    total_steps: int,
    time_fraction: Callable[[], float] | None = None,
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_multiplier(cfg, total_steps, time_fraction)
    )


class PlateauHalver:
    """Multiply the learning rate by ``factor`` after ``patience`` validations without improvement.

    It scales the base rates of the step scheduler, so warm-up and the plateau rule compose, and
    the scaled base rates are saved with the scheduler's own state.
    """

    def __init__(
        self,
        scheduler: torch.optim.lr_scheduler.LambdaLR,
        mode: str,
        patience: int = 1,
        factor: float = 0.5,
    ) -> None:
        self.scheduler, self.mode, self.patience, self.factor = scheduler, mode, patience, factor
        self.best: float | None = None
        self.bad = 0

    def step(self, metric: float) -> None:
        better = self.best is None or (
            metric < self.best if self.mode == "min" else metric > self.best
        )
        if better:
            self.best, self.bad = metric, 0
            return
        self.bad += 1
        if self.bad > self.patience:
            self.bad = 0
            sched = self.scheduler
            sched.base_lrs = [lr * self.factor for lr in sched.base_lrs]
            for group, lr in zip(sched.optimizer.param_groups, sched.get_last_lr(), strict=True):
                group["lr"] = lr * self.factor
            sched._last_lr = [g["lr"] for g in sched.optimizer.param_groups]

    def state_dict(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad = state["best"], state["bad"]
