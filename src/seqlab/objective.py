"""What a task hands the trainer to optimise, and the rule that picks its best checkpoint.

A task (:mod:`seqlab.tasks`) gives the trainer (:mod:`seqlab.training.trainer`) minibatches
(:class:`Batches`), a loss function (:data:`LossFn`, returning :class:`LossOutput`) and a
:class:`Selection` rule. Both sides import these from here, so a task module (and with it
:func:`seqlab.load`) never imports the trainer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from torch import Tensor, nn


@dataclass
class LossOutput:
    """What a loss function returns for one minibatch.

    Attributes:
        loss: scalar mean loss over the ``num_tokens`` predicted tokens.
        num_tokens: tokens the mean is taken over (weights the minibatch in its step).
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


#: ``loss_fn(model, batch, state) -> LossOutput``
LossFn = Callable[[nn.Module, Any, Any], LossOutput]


@dataclass(frozen=True)
class Selection:
    """Choose checkpoints by ``metric``, lower (``min``) or higher (``max``) is better: the one
    rule behind best checkpoints, early stopping, the plateau schedule and checkpoint averaging.

    A non-finite value is never better than anything, and nothing is better than it.
    """

    metric: str = "val_loss"
    mode: Literal["min", "max"] = "min"

    def better(self, value: float | None, best: float | None) -> bool:
        """Whether ``value`` improves on ``best`` (None: nothing yet)."""
        if value is None or not math.isfinite(value):
            return False
        if best is None or not math.isfinite(best):
            return True
        return value < best if self.mode == "min" else value > best


#: metrics (by name, without ``val_``/``train_`` and any suffix) of which higher is better
HIGHER_IS_BETTER = ("bleu", "chrf", "acc", "accuracy", "f1", "exact")
#: metrics of which lower is better: losses, perplexities, errors
LOWER_IS_BETTER = ("loss", "ppl", "perplexity", "rmse", "mae", "mse")


def direction(metric: str) -> Literal["min", "max"] | None:
    """Whether a lower (``min``) or a higher (``max``) value of ``metric`` is better, from its
    name (``val_bleu``, ``val_bleu_paper``: max; ``val_loss``, ``val_rmse``: min); None for a
    name that is neither, of which no value may be called the best."""
    base = metric.removeprefix("val_").removeprefix("train_").split("_")[0]
    if base in HIGHER_IS_BETTER:
        return "max"
    if base in LOWER_IS_BETTER:
        return "min"
    return None


def best_of(metric: str, values: list[float]) -> tuple[int, str] | None:
    """The index of the best of ``values`` of ``metric`` (the first, on a tie) and the direction
    in words (``lowest`` or ``highest``); None when the direction is unknown
    (:func:`direction`) or no value is finite."""
    mode = direction(metric)
    finite = [i for i, v in enumerate(values) if math.isfinite(v)]
    if mode is None or not finite:
        return None
    pick = min if mode == "min" else max
    return pick(finite, key=values.__getitem__), "lowest" if mode == "min" else "highest"
