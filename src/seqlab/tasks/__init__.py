"""Tasks: data + model + loss + metric + inference for one problem.

Each module here is one task (see :mod:`seqlab.tasks.base` for what it provides); ``TASKS`` maps
the task names that model configs declare (``ModelConfig.task``) to them. Adding a task means
adding its module here and its model configs and models.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from seqlab.config import ExperimentConfig
from seqlab.errors import ConfigError
from seqlab.precision import resolve_precision
from seqlab.rundir import RunDir
from seqlab.tasks import classification, forecasting, language_modeling, translation
from seqlab.tasks.base import Experiment, Predictor

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
    the run's config says otherwise); see :mod:`seqlab.precision`.
    """
    if precision is not None and precision not in ("fp32", "bf16"):
        raise ConfigError(f"precision must be fp32 or bf16, got {precision!r}")
    run = RunDir(run_dir).open(which)
    predictor = task_of(run.cfg).load(run)
    if precision is not None:
        predictor.precision = resolve_precision(precision)
    return predictor


def artefacts() -> set[str]:
    """Every file name a task may write into a run directory (what :class:`~seqlab.rundir.RunDir`
    accepts there besides its own files)."""
    return {name for task in TASKS.values() for name in task.ARTEFACTS}
