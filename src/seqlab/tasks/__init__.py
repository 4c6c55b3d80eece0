"""Tasks: data + model + loss + metric + inference for one problem, each one package.

Each task declares itself once, as a :class:`seqlab.catalog.TaskSpec` registered by its package
(:data:`seqlab.tasks.translation.TASK`, …): what trains it, the kinds of run it loads (its
:class:`~seqlab.tasks.base.Predictor` classes, whose declared options make the command line's), how
it chooses checkpoints, its config rules, and how it is served
(:class:`seqlab.serving.service.Service`: route, request, response, handler, page panel).
Everything here is read from those records; a run of one task imports that task's package alone
(:func:`seqlab.catalog.task`). So a task defined outside seqlab and registered with
:func:`seqlab.catalog.register_task` is trained, evaluated, loaded and served like these
(``tests/test_task_plugin.py``).
"""

from __future__ import annotations

from pathlib import Path

from seqlab import catalog
from seqlab.catalog import TaskSpec
from seqlab.config import ExperimentConfig
from seqlab.errors import ConfigError
from seqlab.objective import Selection
from seqlab.runtime.device import resolve_device
from seqlab.runtime.precision import resolve_precision
from seqlab.storage.rundir import RunDir
from seqlab.tasks.base import Experiment, Predictor
from seqlab.tasks.options import Option


def tasks() -> list[TaskSpec]:
    """Every task: seqlab's own (:data:`seqlab.builtin.TASKS`, each package imported),
    then the others in the order registered."""
    return list(catalog.tasks().values())


def task_of(cfg: ExperimentConfig) -> TaskSpec:
    """The task of an experiment (named by its model config): of seqlab's own, only its package
    is imported (:func:`seqlab.catalog.task`)."""
    spec = catalog.task(cfg.task)
    if spec is None:
        raise ConfigError(
            f"model.arch={cfg.model.arch} is a model of task {cfg.task!r}, which is not "
            f"registered; registered: {catalog.choices(catalog.tasks())}"
        )
    return spec


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Data, model, loss and metric for training ``cfg`` (a run's own artefacts when resuming)."""
    return task_of(cfg).build_experiment(cfg, run_dir)


def load(
    run_dir: str | Path,
    which: str = "best",
    precision: str | None = None,
    device: str | None = None,
) -> Predictor:
    """A trained model from its run directory alone (``best``, ``latest`` or a step number).

    ``precision`` (``fp32`` or ``bf16``) overrides the run's ``decode.precision`` (fp32 unless
    the run's config says otherwise); see :mod:`seqlab.runtime.precision`. ``device``
    (``auto``, the default: a CUDA GPU when present; ``cpu``; ``cuda``) is where it computes,
    whatever device the run trained on (:mod:`seqlab.runtime.device`).
    """
    if precision is not None and precision not in ("fp32", "bf16"):
        raise ConfigError(f"precision must be fp32 or bf16, got {precision!r}")
    where = resolve_device(device, "device")
    run = RunDir(run_dir).open(which)
    predictor = predictor_for(run.cfg).load(run)
    if predictor.device != where:
        predictor.to(where)
    if precision is not None:
        predictor.precision = resolve_precision(precision, where)
    return predictor


def selection_of(cfg: ExperimentConfig) -> Selection:
    """How a run of ``cfg`` chooses its checkpoints: its task's validation metric, and whether
    lower or higher is better (the metric ``seqlab curves`` draws unless told)."""
    return task_of(cfg).select


def predictors() -> list[type[Predictor]]:
    """Every kind of trained run, task by task (text and image classifiers are two kinds)."""
    return [kind for task in tasks() for kind in task.predictors]


def predictor_for(cfg: ExperimentConfig) -> type[Predictor]:
    """The kind of run ``cfg`` trains: the first predictor of its task that accepts it."""
    return next(kind for kind in task_of(cfg).predictors if kind.accepts(cfg))


def declarations(command: str) -> list[tuple[type[Predictor], Option]]:
    """The options of ``command`` as every kind of run declares them (kind, option)."""
    return [(kind, o) for kind in predictors() for o in kind.options_for(command)]


def artefacts() -> set[str]:
    """Every file name a task may write into a run directory (what
    :class:`~seqlab.storage.rundir.RunDir` accepts there besides its own files)."""
    return {name for task in tasks() for name in task.artefacts}
