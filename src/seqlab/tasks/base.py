"""What every task provides: an :class:`Experiment` to train, a :class:`Predictor` to use.

A task (language modelling, translation, …) is one module of :mod:`seqlab.tasks` with

- ``ARTEFACTS``: the files it writes into a run directory besides the config and checkpoints
  (vocabularies, tokenizers, label lists);
- ``build_experiment(cfg, run_dir) -> Experiment``: data, model, loss and metric for training
  (``run_dir`` when resuming: the run's own artefacts are then reused, never rebuilt);
- ``load(run) -> Predictor``: the trained model, from the run directory alone.

A run directory is a complete model: :func:`open_run` and a task's ``load`` read only
``config.yaml``, the artefacts and a checkpoint — never the training data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from torch import nn

from seqlab.config import ExperimentConfig, load_config
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.training import checkpoint as ckpt
from seqlab.training.precision import Resolved, resolve_precision
from seqlab.training.selection import Selection
from seqlab.training.trainer import Batches, LossFn


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


@dataclass(frozen=True)
class Run:
    """A trained run directory: its config and the checkpoint chosen."""

    run_dir: Path
    cfg: ExperimentConfig
    checkpoint: Path
    meta: dict[str, Any]

    def file(self, name: str) -> Path:
        """A file the run must hold; a clear error if it is missing."""
        path = self.run_dir / name
        if not path.is_file():
            raise CheckpointError(
                f"{path} is missing: {self.run_dir} is not a complete run directory (a run needs "
                "its own vocabularies and tokenizers; they are never rebuilt from data)"
            )
        return path

    def check_size(self, key: str, value: int) -> None:
        """The checkpoint was trained with the same ``key`` (e.g. vocabulary size)."""
        stored = self.meta.get(key)
        if stored is not None and stored != value:
            raise CheckpointError(
                f"{self.checkpoint}: trained with {key}={stored}, but the run's files give "
                f"{value}; the run directory's artefacts do not belong to this checkpoint"
            )


def open_run(run_dir: str | Path, which: str = "best") -> Run:
    """Read a run directory's config and find its ``best``/``latest``/numbered checkpoint."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run directory not found: {run_dir}")
    if not (run_dir / "config.yaml").is_file():
        raise CheckpointError(f"{run_dir} is not a seqlab run directory (no config.yaml)")
    cfg = load_config(run_dir / "config.yaml")
    path = ckpt.find_checkpoint(run_dir, which)
    meta = ckpt.read_meta(path)
    if meta.get("arch") != cfg.model.arch:
        raise CheckpointError(
            f"{path}: written for model.arch={meta.get('arch')!r}, but "
            f"{run_dir / 'config.yaml'} says {cfg.model.arch!r}"
        )
    return Run(run_dir, cfg, path, meta)


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
    ckpt.load_model_weights(model, run.checkpoint)
    return model.eval()
