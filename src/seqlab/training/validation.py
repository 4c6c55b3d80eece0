"""Validation during training (:class:`Validator`): the model evaluated on rank 0 in eval mode
and the evaluation precision (the same as ``seqlab evaluate``), one
:class:`~seqlab.objective.Selection` rule deciding whether a result is the best so far (the
selection fields of the :class:`~seqlab.storage.training_state.TrainingState`) and driving the
plateau rule, and the comparison of an average of the last checkpoints with the best one
(:meth:`Validator.compare_average`). The trainer saves the checkpoints
(:meth:`seqlab.training.trainer.Trainer.validate_and_checkpoint`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from seqlab.objective import Selection
from seqlab.runtime.precision import Resolved, autocast
from seqlab.storage import checkpoints as ckpt
from seqlab.storage.training_state import TrainingState
from seqlab.training import distributed as dist
from seqlab.training.divergence import non_finite
from seqlab.training.optim import Plateau

Evaluate = Callable[[nn.Module], dict[str, float]]


@dataclass
class Validation:
    """One validation: its ``record`` (what ``metrics.jsonl`` gets), whether it is the best so
    far (every process), and the metrics that were not finite (``diverged`` on every process,
    the names on rank 0)."""

    record: dict[str, Any]
    is_best: bool
    diverged: bool = False
    bad: list[str] = field(default_factory=list)


class Validator:
    """Evaluates ``model`` with ``evaluate`` (rank 0) and keeps the best result by ``select``.

    Args:
        evaluate: ``model -> {"val_loss": ..., ...}``; None: every checkpoint is the best.
        final_evaluate: the evaluation as the model will be used, which alone decides between
            an average of the last checkpoints and the best one; None: ``evaluate`` decides.
        plateau: the plateau rule fed every validation, if the schedule has one.
        precision, device: the precision ``evaluate`` runs in, and where.
    """

    def __init__(
        self,
        model: nn.Module,
        evaluate: Evaluate | None,
        final_evaluate: Evaluate | None,
        select: Selection,
        plateau: Plateau | None,
        precision: Resolved,
        device: torch.device,
    ) -> None:
        self.model, self.evaluate_fn, self.final_evaluate_fn = model, evaluate, final_evaluate
        self.select, self.plateau = select, plateau
        self.precision, self.device = precision, device

    @property
    def evaluates(self) -> bool:
        """Whether this process evaluates (rank 0, with an ``evaluate`` function)."""
        return dist.is_main() and self.evaluate_fn is not None

    def evaluate(self, fn: Evaluate | None = None) -> dict[str, float]:
        """``fn(model)`` (default ``evaluate``) in eval mode, without gradients, in the
        evaluation precision."""
        fn = fn or self.evaluate_fn
        assert fn is not None
        self.model.eval()
        with torch.no_grad(), autocast(self.precision, self.device):
            metrics = fn(self.model)
        self.model.train()
        return metrics

    def validate(self, state: TrainingState, elapsed: float) -> Validation:
        """Evaluate (rank 0) and record the result in ``state`` (best, validations since the
        best, history) unless a metric is not finite; every process calls it."""
        record: dict[str, Any] = {"step": state.step, "epoch": state.epoch}
        bad: list[str] = []
        if self.evaluates:
            start = time.perf_counter()
            record.update(self.evaluate())
            record["validation_s"] = round(time.perf_counter() - start, 2)  # its wall time
            bad = non_finite(record, self.select.metric)
        if dist.broadcast_flag(bool(bad)):
            # the weights give NaN/inf: never a best or a checkpoint to resume from
            return Validation({**record, "best": state.best}, False, True, bad)
        is_best = self.evaluate_fn is None
        if self.evaluates:
            value = record.get(self.select.metric)
            if self.select.better(value, state.best):
                state.best, state.evals_since_best, is_best = float(value), 0, True
            else:
                state.evals_since_best += 1
            if self.plateau is not None and value is not None:
                self.plateau.step(float(value))
            record["best"] = state.best
            record["elapsed_s"] = round(elapsed, 2)
            state.history.append(record)
        return Validation(record, dist.broadcast_flag(is_best))

    def compare_average(
        self, run_dir: Path, steps: list[int], best: float | None
    ) -> tuple[dict[str, Any], bool]:
        """Load the average of the weights of the checkpoints of ``steps`` into the model (every
        process) and say whether it beats the best checkpoint (value ``best``), with its
        metrics (Vaswani et al. 2017, §6.1).

        With ``final_evaluate``, the average and the best checkpoint are both evaluated by it
        and it alone decides (``"final"`` in the metrics holds both); ``evaluate`` still
        records the average's metrics on the scale of the training history.
        """
        state = ckpt.average(run_dir, steps)
        metrics: dict[str, Any] = {}
        better, metric = False, self.select.metric
        if self.evaluates:
            final: dict[str, Any] = {}
            if self.final_evaluate_fn is not None:
                ckpt.load_model_weights(self.model, ckpt.find(run_dir, "best"))
                final["best"] = self.evaluate(self.final_evaluate_fn)
            self.model.load_state_dict(state)
            metrics = self.evaluate()
            if final:
                final["average"] = self.evaluate(self.final_evaluate_fn)
                better = self.select.better(final["average"].get(metric), final["best"].get(metric))
                metrics["final"] = final
            else:
                better = self.select.better(metrics.get(metric), best)
        self.model.load_state_dict(state)  # every rank holds the average (rank 0 looked at best)
        return metrics, dist.broadcast_flag(better)
