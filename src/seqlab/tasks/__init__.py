"""Tasks: data + model + loss + metric + inference for one problem.

Each module here is one task (see :mod:`seqlab.tasks.base` for what it provides); ``TASKS`` maps
the task names that model configs declare (``ModelConfigBase.task``) to them. Adding a task means
adding its module here and its model configs and models. Its predictors (``PREDICTORS``) declare
what its trained runs offer: :func:`predictors` lists them for the command line, which builds
its options from their declarations.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from seqlab.config import ExperimentConfig
from seqlab.errors import ConfigError
from seqlab.objective import Selection
from seqlab.runtime.precision import resolve_precision
from seqlab.storage.rundir import RunDir
from seqlab.tasks import classification, forecasting, language_modeling, translation
from seqlab.tasks.base import Experiment, Predictor
from seqlab.tasks.options import Option

TASKS: dict[str, ModuleType] = {
    "language_modeling": language_modeling,
    "translation": translation,
    "classification": classification,
    "forecasting": forecasting,
}


def task_of(cfg: ExperimentConfig) -> ModuleType:
    """The task module of an experiment (named by its model config)."""
    return TASKS[cfg.task]


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Data, model, loss and metric for training ``cfg`` (a run's own artefacts when resuming)."""
    return task_of(cfg).build_experiment(cfg, run_dir)


def load(run_dir: str | Path, which: str = "best", precision: str | None = None) -> Predictor:
    """A trained model from its run directory alone (``best``, ``latest`` or a step number).

    ``precision`` (``fp32`` or ``bf16``) overrides the run's ``decode.precision`` (fp32 unless
    the run's config says otherwise); see :mod:`seqlab.runtime.precision`.
    """
    if precision is not None and precision not in ("fp32", "bf16"):
        raise ConfigError(f"precision must be fp32 or bf16, got {precision!r}")
    run = RunDir(run_dir).open(which)
    predictor = predictor_for(run.cfg).load(run)
    if precision is not None:
        predictor.precision = resolve_precision(precision)
    return predictor


def selection_of(cfg: ExperimentConfig) -> Selection:
    """How a run of ``cfg`` chooses its checkpoints: its task's validation metric, and whether
    lower or higher is better (the metric ``seqlab curves`` draws unless told)."""
    return task_of(cfg).SELECT


def predictors() -> list[type[Predictor]]:
    """Every kind of trained run, task by task (text and image classifiers are two kinds)."""
    return [kind for task in TASKS.values() for kind in task.PREDICTORS]


def predictor_for(cfg: ExperimentConfig) -> type[Predictor]:
    """The kind of run ``cfg`` trains: the first predictor of its task that accepts it."""
    return next(kind for kind in task_of(cfg).PREDICTORS if kind.accepts(cfg))


def declarations(command: str) -> list[tuple[type[Predictor], Option]]:
    """The options of ``command`` as every kind of run declares them (kind, option)."""
    return [(kind, o) for kind in predictors() for o in kind.options_for(command)]


def artefacts() -> set[str]:
    """Every file name a task may write into a run directory (what :class:`~seqlab.storage.rundir.RunDir`
    accepts there besides its own files)."""
    return {name for task in TASKS.values() for name in task.ARTEFACTS}
