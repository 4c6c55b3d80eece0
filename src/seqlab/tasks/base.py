"""What every task provides: an :class:`Experiment` to train, a :class:`Predictor` to use.

A task (language modelling, translation, …) is a package of :mod:`seqlab.tasks` that declares
itself once (:class:`seqlab.catalog.TaskSpec`): the files it writes into a run directory besides
the config and checkpoints (vocabularies, tokenizers, label lists); ``build_experiment(cfg,
run_dir) -> Experiment``: data, model, loss and metric for training (``run_dir`` when resuming:
the run's own artefacts are then reused, never rebuilt); its :class:`Predictor` classes, one per
kind of run it loads (text and image classifiers are two kinds of one task), each saying which
configs it takes (``accepts``), ``load(run)`` giving the trained model from the run directory
alone; and how it is served (:class:`seqlab.serving.service.Service`).

**The interface.** A :class:`Predictor` declares once what a trained model offers, and every
consumer (the command line, the server, Python code) goes through it:

- ``load(run)`` (a class method): the model, its artefacts and weights;
- ``predict(inputs, **options)`` -> :class:`~seqlab.tasks.report.Prediction`: outputs for inputs
  (translations, labels, a forecast, generated text), printed by its ``lines()``;
- ``evaluate(split=None, files=None, **options)`` -> :class:`~seqlab.tasks.report.Report`: scores
  on a split of the run's dataset or on the user's files, with ``format()`` for a terminal and
  ``to_json()``;
- ``options``: the command-line options of its commands and the figures it draws
  (:class:`~seqlab.tasks.options.Option`); each one is a keyword argument of ``predict`` or ``evaluate``;
- ``command_options``: a command's options model (:class:`~seqlab.tasks.options.CommandOptions`),
  whose fields are flags, keyword arguments and request fields at once; ``run_options``: a
  second model of how the command runs (translation's engine), flags and keyword arguments;
- ``check(command, options)``: option combinations refused before any work (the engine of a
  translation, attention of a model that has none).

Each task adds the methods of its own Python API (``translate``, ``classify``, ``generate``, …).

A run directory is a complete model: :meth:`seqlab.storage.rundir.RunDir.open` and a predictor's ``load``
read only ``config.yaml``, the artefacts and a checkpoint — never the training data, and nothing
of :mod:`seqlab.training`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, ClassVar

import torch
from torch import nn

from seqlab.config import ExperimentConfig
from seqlab.errors import SeqlabError
from seqlab.objective import Batches, LossFn, Selection
from seqlab.runtime.device import model_device
from seqlab.runtime.precision import Resolved, resolve_precision
from seqlab.storage.checkpoints import load_model_weights
from seqlab.storage.rundir import Run
from seqlab.tasks.options import COMMON, CommandOptions, Option
from seqlab.tasks.report import Prediction, Report


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
    # validation as the model will be used (beam search where ``evaluate`` decodes greedily):
    # the end-of-training choice between the average and the best checkpoint; None: evaluate
    final_evaluate: Callable[[nn.Module], dict[str, float]] | None = None
    # after training, on the main process, given the run directory: a last step on the finished
    # run (an audio run's calibration on validation); what it returns joins the summary
    finish: Callable[[Path], dict[str, Any]] | None = None
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


class Predictor(ABC):
    """A trained model loaded from its run directory: what every task offers (module docstring).

    Args:
        model: the ``nn.Module`` (put in eval mode).
        cfg: its experiment config.
        run: the run directory it was loaded from, if any (a model being trained has none).

    Attributes:
        precision: evaluation/decoding precision (``decode.precision`` resolved).
    """

    #: the task of the run's model config (``translation``), which :mod:`seqlab.tasks` maps to
    #: the task's module
    task: ClassVar[str] = ""
    #: how messages name a run of this kind (``text classification``)
    kind: ClassVar[str] = ""
    #: the ``seqlab`` commands that use this kind of run (``evaluate`` calls :meth:`evaluate`,
    #: the others :meth:`predict`)
    commands: ClassVar[tuple[str, ...]] = ("evaluate",)
    #: the command-line options of those commands, beyond :data:`~seqlab.tasks.options.COMMON`
    options: ClassVar[tuple[Option, ...]] = ()
    #: each command's options model (:class:`~seqlab.tasks.options.CommandOptions`), whose
    #: fields are options of that command too: flags, keyword arguments, request fields
    command_options: ClassVar[dict[str, type[CommandOptions]]] = {}
    #: each command's options of how it runs (translation's engine, cores, figures): a second
    #: model whose fields are flags and keyword arguments too, but no request's (the server sets
    #: them once for itself)
    run_options: ClassVar[dict[str, type[CommandOptions]]] = {}
    #: per command, how a run of this kind is used (appended to the message refusing an option)
    usage: ClassVar[dict[str, str]] = {}
    #: the public methods, listed when a wrong one is asked for
    capabilities: ClassVar[tuple[str, ...]] = ("predict", "evaluate")

    def __init__(self, model: nn.Module, cfg: ExperimentConfig, run: Run | None = None) -> None:
        self.model, self.cfg, self.run = model.eval(), cfg, run
        self.device: torch.device = model_device(model)
        self.precision: Resolved = resolve_precision(cfg.decode.precision, self.device)

    def to(self, device: torch.device | str) -> Predictor:
        """Move the model to ``device`` (what :func:`seqlab.load`'s ``device=`` does); every
        method then computes there, its inputs moved to it and its outputs back to the CPU."""
        self.device = torch.device(device)
        self.model.to(self.device)
        if self.precision.precision != "fp32":  # the same request, resolved for the new device
            self.precision = resolve_precision(self.precision.precision, self.device)
        return self

    # ----------------------------------------------------------------- written by each task
    @classmethod
    @abstractmethod
    def load(cls, run: Run) -> Predictor:
        """The trained model of ``run``, from the run directory alone (its config, artefacts
        and checkpoint; never the training data)."""

    @abstractmethod
    def predict(self, inputs: Any, **options: Any) -> Prediction:
        """The model's outputs for ``inputs``; ``options`` are the declared ones of the task's
        own command (``translate``, ``classify``, ``forecast``, ``generate``)."""

    @abstractmethod
    def evaluate(
        self,
        split: str | None = None,
        files: Mapping[str, str | Path] | None = None,
        **options: Any,
    ) -> Report:
        """Scores on a ``split`` of the run's dataset (default: the task's evaluation split), or
        on the user's ``files`` (keyed by the declared ``file`` options: ``{"src": …, "ref":
        …}``); ``options`` are the declared ones of ``evaluate``."""

    @classmethod
    def before_load(cls, command: str, options: Mapping[str, Any]) -> None:
        """Set up the process for ``command`` before any run is loaded, from the command line's
        values of the options this kind declares (``{dest: value}``): what must come before
        PyTorch's first work, such as a layout of the cores. The command line calls it on each
        kind of run that declares an option given. Nothing by default."""
        return None

    def for_command(
        self, command: str, options: Mapping[str, Any], load: Callable[[str], Predictor]
    ) -> Predictor:
        """The predictor that runs ``command``, once this run is loaded and the options given
        are ones it declares: ``options`` holds the command line's values of every option this
        kind declares for it (those the method is not called with too), and ``load(run_dir)``
        loads another run as the command line loaded this one. ``self`` by default."""
        return self

    def check(self, command: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """Refuse a combination of ``options`` (``{dest: value}``) of ``command`` before any
        work, and return the keyword arguments to call ``command``'s method with (a task may
        hand them on as the one options model it validated here, so that the call does not
        validate them again); the command line calls it right after loading. By default:
        ``options`` as they are."""
        return dict(options)

    @classmethod
    def accepts(cls, cfg: ExperimentConfig) -> bool:
        """Whether runs of ``cfg`` are of this kind (a task with one kind takes all of its own)."""
        return True

    # --------------------------------------------------------------------- derived, shared
    @classmethod
    def options_for(cls, command: str) -> tuple[Option, ...]:
        """The options ``command`` takes for this kind of run (the common ones first)."""
        models = (cls.command_options.get(command), cls.run_options.get(command))
        derived = tuple(o for m in models if m is not None for o in m.declarations(command))
        return tuple(o for o in (*COMMON, *derived, *cls.options) if command in o.commands)

    def options_of(
        self, command: str, options: CommandOptions | Mapping[str, Any] | None, keywords: Any
    ) -> Any:
        """The options of a call of ``command``'s method: ``options`` (a model already validated,
        taken as it is) or the keyword arguments, validated by the command's model
        (:meth:`~seqlab.tasks.options.CommandOptions.of`): the one check of each value."""
        model, runs = self.command_options[command], self.run_options.get(command)
        if isinstance(options, model) and not keywords:
            return options
        unknown = sorted(set(keywords) - set(model.model_fields))
        if unknown and runs is not None:  # name the run options too (those taken out already)
            raise SeqlabError(
                f"unknown option {unknown[0]!r}; the options are "
                + ", ".join([*model.model_fields, *runs.called()])
            )
        given = options.given() if isinstance(options, CommandOptions) else dict(options or {})
        return model.of({**given, **keywords})

    def evaluate_split(self, split: str | None = None, **options: Any) -> Report:
        """Older name of :meth:`evaluate` on a split (kept for existing code)."""
        return self.evaluate(split, **options)

    def _source(
        self, split: str | None, files: Mapping[str, str | Path] | None, default: str
    ) -> tuple[str | None, dict[str, str]]:
        """The split to score (``default`` when neither it nor files are given) and the files
        (checked against the declared ``file`` options of ``evaluate``)."""
        files = {k: str(v) for k, v in (files or {}).items() if v}
        if split is not None and files:
            raise SeqlabError("score either a dataset --split or your own files, not both")
        roles = [o for o in self.options_for("evaluate") if o.role == "file"]
        unknown = sorted(set(files) - {o.dest for o in roles})
        if unknown:
            takes = ", ".join(o.dest for o in roles) or "none"
            raise SeqlabError(
                f"a {self.kind} run scores files {takes}, not {', '.join(unknown)}"
                + (f" ({self.usage['evaluate']})" if "evaluate" in self.usage else "")
            )
        return (None if files else split or default), files

    @property
    def checkpoint(self) -> str | None:
        """The checkpoint file the weights come from (None for a model being trained)."""
        return str(self.run.checkpoint) if self.run is not None else None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        where = self.run.run_dir if self.run is not None else "this"
        raise WrongTask(
            f"{where} holds a {self.kind or self.task.replace('_', ' ')} model "
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
