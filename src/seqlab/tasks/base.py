"""What every task provides: an :class:`Experiment` to train, a :class:`Predictor` to use.

A task (language modelling, translation, …) is one module of :mod:`seqlab.tasks` with

- ``ARTEFACTS``: the files it writes into a run directory besides the config and checkpoints
  (vocabularies, tokenizers, label lists);
- ``build_experiment(cfg, run_dir) -> Experiment``: data, model, loss and metric for training
  (``run_dir`` when resuming: the run's own artefacts are then reused, never rebuilt);
- ``load(run) -> Predictor``: the trained model, from the run directory alone.

A run directory is a complete model: :meth:`seqlab.rundir.RunDir.open` and a task's ``load`` read
only ``config.yaml``, the artefacts and a checkpoint — never the training data, and nothing of
:mod:`seqlab.training`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, ClassVar

from torch import nn

from seqlab.checkpoints import load_model_weights
from seqlab.config import ExperimentConfig
from seqlab.errors import SeqlabError
from seqlab.objective import Batches, LossFn, Selection
from seqlab.precision import Resolved, resolve_precision
from seqlab.rundir import Run


@dataclass
class Experiment:
    """Everything the trainer needs for one run, and a :class:`Predictor` of the model being
    trained (for benchmarks and demos)."""

    model: nn.Module
    train_batches: Batches
    loss_fn: LossFn
    evaluate: Callable[[nn.Module], dict[str, float]]
    select: Selection
    save_artefacts: Callable[[Path], None]
    predictor: Predictor
    meta: dict[str, Any] = field(default_factory=dict)  # stored in every checkpoint (sizes)
    unit: str = "tok"  # what LossOutput.num_tokens counts, for progress lines
    perplexity: bool = True  # the loss is a per-token cross-entropy: show exp(loss)


def as_batch(items: Any, what: str = "sentence") -> tuple[list[Any], bool]:
    """``items`` as a list, and whether a single item was given instead of one: a string (or
    path) is one ``what``, never a sequence of characters.

    Raises:
        SeqlabError: anything that is neither one item nor a list (or other iterable) of them.
    """
    if isinstance(items, str | PurePath):
        return [items], True
    if isinstance(items, bytes | dict) or not isinstance(items, Iterable):
        raise SeqlabError(
            f"expected a {what} (a string) or a list of them, got {type(items).__name__}"
        )
    return list(items), False


class WrongTask(SeqlabError, AttributeError):
    """A predictor was asked for something its task cannot do (``generate`` on a translator)."""


class Predictor:
    """A trained model loaded from its run directory; each task adds its methods.

    Args:
        model: the ``nn.Module`` (put in eval mode).
        cfg: its experiment config.
        run: the run directory it was loaded from, if any (a model being trained has none).

    Attributes:
        precision: evaluation/decoding precision (``decode.precision`` resolved).
    """

    task: ClassVar[str] = ""
    #: the public methods of this task, listed when a wrong one is asked for
    capabilities: ClassVar[tuple[str, ...]] = ()
    #: the ``seqlab`` commands that use this task's runs
    commands: ClassVar[tuple[str, ...]] = ("evaluate",)

    def __init__(self, model: nn.Module, cfg: ExperimentConfig, run: Run | None = None) -> None:
        self.model, self.cfg, self.run = model.eval(), cfg, run
        self.precision: Resolved = resolve_precision(cfg.decode.precision)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        where = self.run.run_dir if self.run is not None else "this"
        raise WrongTask(
            f"{where} holds a {self.task.replace('_', ' ')} model "
            f"(model.arch={self.cfg.model.arch}), which has no {name!r}; it offers: "
            + ", ".join(self.capabilities)
        )

    def __repr__(self) -> str:
        where = str(self.run.run_dir) if self.run is not None else None
        return f"{type(self).__name__}({where!r}, arch={self.cfg.model.arch})"


def load_weights(model: nn.Module, run: Run) -> nn.Module:
    """Load the run's checkpoint into ``model`` (names and shapes must match); eval mode."""
    load_model_weights(model, run.checkpoint)
    return model.eval()
