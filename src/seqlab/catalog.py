"""The catalog: one record for each model, dataset, recurrent cell, position scheme and task; the
one source of the lists that configs, the model builder and the command line derive from.

Each record is a plain dataclass written next to the code it describes and registered by one
call there::

    register_model(ModelSpec(RNNLMConfig, lambda cfg, sizes: ...))   # seqlab/models/rnn_lm.py
    register_dataset(DatasetSpec("sst2", "classification", read_sst2))   # seqlab/data/classification.py
    register_cell(CellSpec("lstm", LSTMCell, fused=nn.LSTM))            # seqlab/nn/rnn.py
    register_position(PositionSpec("rope", "...", ctranslate2="rotary"))  # seqlab/nn/attention_positions.py
    register_task(TaskSpec("translation", build_experiment, (Translator,), ...))  # seqlab/tasks/translation/

What derives from them: ``model.arch``, the class that validates the ``model`` section and
:func:`seqlab.models.build_model` (:class:`ModelSpec`); ``data.dataset``, its task, whether it
reads ``data.path``, the reader each task calls, the files it downloads with their checksums and
licence (:class:`DataFile`; :mod:`seqlab.data.registry` finds, verifies, downloads and caches
them) and ``seqlab data list``/``fetch`` (:class:`DatasetSpec`);
``model.cell``, which cells have a fused PyTorch layer, and the cells of
:class:`seqlab.nn.rnn.RNN` (:class:`CellSpec`); ``model.positions`` of every Transformer, which
schemes work with linear attention and which a CTranslate2 export writes (:class:`PositionSpec`);
for each task, what trains it, what loads
its runs (and so the options of the command line), the checks across sections of
:class:`seqlab.config.ExperimentConfig`, and the server's route, request, response and page
panel for it (:class:`TaskSpec`).

Reading a kind (:func:`models`, :func:`datasets`, :func:`cells`, :func:`positions`,
:func:`tasks`) first
imports, once, the package that registers seqlab's own records of that kind (:data:`BUILTIN`;
each architecture's module, :data:`BUILTIN_MODELS`, and each task's package,
:data:`BUILTIN_TASKS`; one architecture or task alone when it is read by name, :func:`model`,
:func:`task`):
adding an architecture or a dataset to seqlab is one new module plus its line in
:data:`BUILTIN_MODELS` or its import line in ``seqlab/data/__init__.py``. Code outside seqlab registers its
records the same way before it loads a config that names them; :func:`registered` does it for the
length of a ``with`` block (``tests/test_plugins.py`` trains, evaluates and loads a model and a
dataset defined in the test file alone; ``tests/test_task_plugin.py`` a whole task, served).

This module imports nothing from seqlab, so every layer can register here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

#: what a model reads, and what a dataset's examples are
Inputs = Literal["text", "image", "series", "audio"]
INPUTS = ("text", "image", "series", "audio")


@dataclass(frozen=True)
class Sizes:
    """What the data decides about a model's shape (vocabularies, classes, window, sample
    rate); a builder takes the ones its architecture needs with :meth:`need`.

    ``input_dim`` asks a classifier of tokens for float frames ``(B, T, input_dim)`` in their
    place (a linear projection instead of its embedding table), and ``input_frames`` a vision
    model for a one-channel ``input_dim × input_frames`` image: how the audio classifier
    (:mod:`seqlab.models.audio`) feeds its log-mel frames to the existing classifiers.
    """

    arch: str
    vocab_size: int | None = None
    src_vocab_size: int | None = None
    tgt_vocab_size: int | None = None
    num_classes: int | None = None
    window: int | None = None
    sample_rate: int | None = None
    input_dim: int | None = None
    input_frames: int | None = None

    def need(self, name: str) -> int:
        """The size called ``name``, which the caller of the builder must have given."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"model.arch={self.arch} needs {name}")
        return value


@dataclass(frozen=True)
class ModelSpec:
    """An architecture.

    Args:
        config: its config class, a :class:`seqlab.config.ModelConfigBase` whose ``arch`` field
            defaults to the architecture's name and whose ``task`` class variable names its task
            (``language_modeling``, ``translation``, ``classification``, ``forecasting``).
        build: ``build(cfg, sizes) -> nn.Module``: a fresh model from a validated config and the
            :class:`Sizes` the data decided.
        inputs: what the model reads: ``text`` (token ids), ``image``, ``series`` or ``audio``;
            a dataset must give the same (:attr:`DatasetSpec.inputs`). Unless given, what the
            config class says (its ``inputs`` class variable; ``text`` when it has none).
    """

    config: type
    build: Callable[[Any, Sizes], Any]
    inputs: Inputs = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.inputs is None:
            object.__setattr__(self, "inputs", getattr(self.config, "inputs", "text"))

    @property
    def arch(self) -> str:
        """``model.arch``: the default of the config class's ``arch`` field."""
        return self.config.model_fields["arch"].default

    @property
    def task(self) -> str:
        return self.config.task


@dataclass(frozen=True)
class DataFile:
    """One downloadable file of a dataset (:attr:`DatasetSpec.files`).

    Args:
        name: path inside the dataset's folder, e.g. ``train.en.gz``.
        url: canonical download address.
        sha256: digests accepted for the local file. The first is the canonical file's; further
            ones are known variants (for fra–eng, the 18,066-line slice kept in ``shared/data``).
        archive_member: when ``url`` is a zip, the member to extract into ``name``.
        archive_sha1: digest of the zip itself, as published by d2l.ai (``None`` if unknown).
        source_sha256: digest of the downloaded file (or archive member) itself, when the local
            copy is a transformation of it (``gzip``).
        gzip: the local file is the download gzip-compressed (mirrors keep ``.gz`` copies; a
            compressor may produce other bytes, so a local copy whose own digest is not in
            ``sha256`` is accepted when its decompressed content has ``source_sha256``).
    """

    name: str
    url: str
    sha256: tuple[str, ...]
    archive_member: str | None = None
    archive_sha1: str | None = None
    source_sha256: str | None = None
    gzip: bool = False


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset, as ``data.dataset`` names it.

    Args:
        name: the value of ``data.dataset``.
        task: the task its examples are for.
        read: ``read(data, seed)``: the examples, from the experiment's ``data`` section (a
            :class:`seqlab.config.DataConfig`) and ``train.seed``. What it returns is the task's
            format: the whole text (``language_modeling``); ``{split: [(source, target), ...]}``
            (``translation``); ``{split: [(text, label), ...]}`` or, for images, ``{split:
            (images (N, C, H, W) in [0, 1], labels (N,))}`` (``classification``), in both with
            ``train`` and the held-out ``val`` that chooses checkpoints; the series, a float
            tensor (N,) (``forecasting``).
        inputs: ``text``, ``image``, ``series`` or ``audio`` (clips,
            :mod:`seqlab.data.audio_datasets`).
        needs_path: the examples are the user's file, ``data.path`` (required with this
            dataset and refused with any other).
        labels: classification: the label names in the dataset's order (else the sorted labels
            of the training split).
        eval_split: classification: the split ``seqlab evaluate`` scores by default (``val``
            when None).
        summary: one line for ``seqlab data list``.
        natural_language: translation: both sides are natural-language sentences in
            ``data.src_lang`` / ``data.tgt_lang``, so the paper-style (Moses-tokenised) BLEU
            applies; False for generated symbol strings (dates), where it does not.
        files: the files ``seqlab data fetch`` downloads and the reader finds through
            :func:`seqlab.data.registry.resolve`, with their checksums (none for a generated
            dataset or the user's file).
        licence: the terms of the files (shown by ``seqlab data list``).
        citation: the work to cite for them.
        speakers: the speakers of a speech dataset, who ``data.test_speaker`` and
            ``data.val_speaker`` may hold out (none: those keys are refused with it).
        fetch: for a folder of files: ``fetch()`` finds or downloads it, returns its path.
    """

    name: str
    task: str
    read: Callable[[Any, int], Any]
    inputs: Inputs = "text"
    needs_path: bool = False
    labels: tuple[str, ...] = ()
    eval_split: str | None = None
    summary: str = ""
    natural_language: bool = True
    files: tuple[DataFile, ...] = ()
    licence: str = ""
    citation: str = ""
    speakers: tuple[str, ...] = ()
    fetch: Callable[[], Any] | None = None


@dataclass(frozen=True)
class TaskSpec:
    """A task, as model configs name it (their ``task`` class variable), declared once: what
    trains it, what loads its runs, how it chooses checkpoints and how it is served.

    Args:
        name: the task's name (``translation``).
        build_experiment: ``build_experiment(cfg, run_dir) -> Experiment``: data, model, loss and
            metric for training (:class:`seqlab.tasks.base.Experiment`; ``run_dir`` when
            resuming, whose artefacts are then reused).
        predictors: its :class:`seqlab.tasks.base.Predictor` classes, one per kind of run (text
            and image classifiers are two kinds of one task); the first whose ``accepts(cfg)``
            is true loads a run. Their declared options make the command line's.
        select: how checkpoints are chosen (:class:`seqlab.objective.Selection`).
        artefacts: the files it writes into a run directory besides config and checkpoints.
        rules: ``rules(cfg)`` raises ``ValueError`` (naming the keys) when an
            :class:`seqlab.config.ExperimentConfig` of this task combines its sections wrongly.
        service: how it is served (:class:`seqlab.serving.service.Service`: route, request,
            response, handler, page panel), or None.
        summary: one line for listings.
    """

    name: str
    build_experiment: Callable[[Any, Any], Any]
    predictors: tuple[type, ...]
    select: Any
    artefacts: frozenset[str] = frozenset()
    rules: Callable[[Any], None] | None = None
    service: Any = None
    summary: str = ""


@dataclass(frozen=True)
class CellSpec:
    """A recurrent cell, as ``model.cell`` names it.

    Args:
        name: the value of ``model.cell``.
        cell: the from-scratch cell class, ``cell(input_size, hidden_size, **options)``; its
            ``state_size`` is the number of state tensors (1 for ``h``, 2 for ``(h, c)``).
        options: keyword arguments of ``cell`` (``nonlinearity="relu"``).
        fused: PyTorch's layer computing the same function, ``fused(input_size, hidden_size,
            num_layers, batch_first=..., dropout=..., bidirectional=...)``, or None.
        why_not_fused: when ``fused`` is None, why PyTorch has none (shown in errors).
    """

    name: str
    cell: type
    options: Mapping[str, Any] = field(default_factory=dict)
    fused: Callable[..., Any] | None = None
    why_not_fused: str = ""


@dataclass(frozen=True)
class PositionSpec:
    """A way a Transformer knows where each token is, as ``model.positions`` names it.

    Args:
        name: the value of ``model.positions``.
        summary: one line: what it computes and the paper.
        absolute: a vector per position added to the embeddings (a table or a formula); the
            others act inside self-attention, on the queries and keys or on the logits.
        bias: enters the attention logits as an additive bias, an ``(h, T_q, T_k)`` tensor per
            forward pass.
        causal_only: carries no order by itself; only a causal mask makes the model see it.
        linear_attention: usable with ``model.attention: linear`` (no logits to bias there).
        ctranslate2: how a CTranslate2 export writes it, or None where it cannot.
        pairs: rotates pairs of each head's dimensions: needs an even ``d_model / num_heads``.
    """

    name: str
    summary: str
    absolute: bool = False
    bias: bool = False
    causal_only: bool = False
    linear_attention: bool = True
    ctranslate2: str | None = None
    pairs: bool = False


#: the package that registers seqlab's own records of each kind, imported on first read
BUILTIN = {
    "datasets": "seqlab.data",
    "cells": "seqlab.nn.cells",
    "positions": "seqlab.nn.attention_positions",
}
#: seqlab's own architectures (``model.arch``), in the order listings show them, and the module
#: that registers each: imported when asked for by name (:func:`model`: a run of one
#: architecture imports that module alone), or all of them by :func:`models`
BUILTIN_MODELS = {
    "rnn_lm": "seqlab.models.rnn_lm",
    "transformer_lm": "seqlab.models.transformer_lm",
    "seq2seq": "seqlab.models.seq2seq",
    "bahdanau": "seqlab.models.bahdanau",
    "transformer": "seqlab.models.transformer_seq2seq",
    "rnn_classifier": "seqlab.models.rnn_classifier",
    "cnn_text": "seqlab.models.cnn_text",
    "transformer_classifier": "seqlab.models.transformer_classifier",
    "vit": "seqlab.models.vit",
    "cnn_image": "seqlab.models.cnn_image",
    "audio_classifier": "seqlab.models.audio",
    "ar": "seqlab.models.forecasters",
    "rnn_forecaster": "seqlab.models.forecasters",
    "transformer_forecaster": "seqlab.models.forecasters",
}
#: seqlab's own tasks, in the order listings show them, and the package that registers each:
#: imported when asked for by name (:func:`task`), or all of them by :func:`tasks`
BUILTIN_TASKS = {
    "language_modeling": "seqlab.tasks.language_modeling",
    "translation": "seqlab.tasks.translation",
    "classification": "seqlab.tasks.classification",
    "audio_classification": "seqlab.tasks.audio",
    "forecasting": "seqlab.tasks.forecasting",
}

_MODELS: dict[str, ModelSpec] = {}
_DATASETS: dict[str, DatasetSpec] = {}
_CELLS: dict[str, CellSpec] = {}
_POSITIONS: dict[str, PositionSpec] = {}
_TASKS: dict[str, TaskSpec] = {}
_loaded: set[str] = set()


def _builtin(kind: str) -> None:
    if kind not in _loaded:
        _loaded.add(kind)
        try:
            by_name = {"tasks": BUILTIN_TASKS, "models": BUILTIN_MODELS}.get(kind)
            for package in dict.fromkeys(by_name.values()) if by_name else [BUILTIN[kind]]:
                importlib.import_module(package)
        except BaseException:
            _loaded.discard(kind)
            raise


def _add(table: dict[str, Any], kind: str, name: str, record: Any) -> Any:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} needs a non-empty name, got {name!r}")
    if name in table:
        raise ValueError(
            f"a {kind} named {name!r} is registered already ({table[name]!r}); pick another name"
        )
    table[name] = record
    return record


# ------------------------------------------------------------------------------ registering
def register_model(spec: ModelSpec) -> ModelSpec:
    """Add an architecture; its name (``spec.arch``) must be new."""
    fields = getattr(spec.config, "model_fields", {})
    if "arch" not in fields or not isinstance(getattr(spec.config, "task", None), str):
        raise ValueError(
            f"{spec.config!r} is not a model config: it needs an 'arch' field whose default is "
            "the architecture's name and a 'task' class variable (see seqlab.config.ModelConfigBase)"
        )
    if spec.inputs not in INPUTS:
        raise ValueError(f"model inputs must be one of {', '.join(INPUTS)}, got {spec.inputs!r}")
    return _add(_MODELS, "model", spec.arch, spec)


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Add a dataset; its name must be new."""
    if spec.inputs not in INPUTS:
        raise ValueError(
            f"dataset {spec.name!r}: inputs must be one of {', '.join(INPUTS)}, got {spec.inputs!r}"
        )
    names = [f.name for f in spec.files]
    if spec.files and (not spec.licence or len(set(names)) != len(names)):
        raise ValueError(
            f"dataset {spec.name!r}: downloadable files need a licence and distinct names, "
            f"got licence={spec.licence!r}, files {names}"
        )
    return _add(_DATASETS, "dataset", spec.name, spec)


def register_cell(spec: CellSpec) -> CellSpec:
    """Add a recurrent cell; its name must be new."""
    return _add(_CELLS, "cell", spec.name, spec)


def register_position(spec: PositionSpec) -> PositionSpec:
    """Add a position scheme; its name must be new."""
    return _add(_POSITIONS, "position scheme", spec.name, spec)


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add a task; its name must be new, and its predictors must say they are of it."""
    wrong = [p.__name__ for p in spec.predictors if getattr(p, "task", None) != spec.name]
    if not spec.predictors or wrong:
        raise ValueError(
            f"task {spec.name!r} needs predictors whose task is {spec.name!r}"
            + (f"; {', '.join(wrong)} say otherwise" if wrong else "")
        )
    routes = {t.service.route: n for n, t in _TASKS.items() if t.service is not None}
    if spec.service is not None and spec.service.route in routes:
        raise ValueError(
            f"task {spec.name!r}: the route {spec.service.route} is task "
            f"{routes[spec.service.route]!r}'s already"
        )
    return _add(_TASKS, "task", spec.name, spec)


_TABLES: dict[type, tuple[str, dict[str, Any]]] = {
    ModelSpec: ("models", _MODELS),
    DatasetSpec: ("datasets", _DATASETS),
    CellSpec: ("cells", _CELLS),
    PositionSpec: ("positions", _POSITIONS),
    TaskSpec: ("tasks", _TASKS),
}
_REGISTER: dict[type, Callable[[Any], Any]] = {
    ModelSpec: register_model,
    DatasetSpec: register_dataset,
    CellSpec: register_cell,
    PositionSpec: register_position,
    TaskSpec: register_task,
}


Record = ModelSpec | DatasetSpec | CellSpec | PositionSpec | TaskSpec


def _name(record: Record) -> str:
    return record.arch if isinstance(record, ModelSpec) else record.name


def unregister(record: Record) -> None:
    """Remove a record that was registered (tests, notebooks)."""
    kind, table = _TABLES[type(record)]
    if table.get(_name(record)) is not record:
        raise ValueError(f"{record!r} is not registered among the {kind}")
    del table[_name(record)]


@contextmanager
def registered(*records: Record) -> Iterator[None]:
    """Register ``records`` for the duration of a ``with`` block, then remove them."""
    for kind in {_TABLES[type(r)][0] for r in records}:
        _builtin(kind)  # the built-in records first, so a clash is found now
    done: list[Any] = []
    try:
        for record in records:
            done.append(_REGISTER[type(record)](record))
        yield
    finally:
        for record in reversed(done):
            unregister(record)


# --------------------------------------------------------------------------------- reading
def models() -> Mapping[str, ModelSpec]:
    """Every architecture, by ``model.arch``: seqlab's own first (:data:`BUILTIN_MODELS`, every
    module of them imported), then the others in the order registered."""
    _builtin("models")
    ordered = {arch: _MODELS[arch] for arch in BUILTIN_MODELS if arch in _MODELS}
    return MappingProxyType({**ordered, **_MODELS})


def model(arch: object) -> ModelSpec | None:
    """The architecture called ``arch`` (None if there is none), importing, of seqlab's own,
    that one's module alone."""
    if not isinstance(arch, str):
        return None
    if arch not in _MODELS and arch in BUILTIN_MODELS:
        importlib.import_module(BUILTIN_MODELS[arch])
    return _MODELS.get(arch)


def datasets() -> Mapping[str, DatasetSpec]:
    """Every dataset, by ``data.dataset``."""
    _builtin("datasets")
    return MappingProxyType(_DATASETS)


def cells() -> Mapping[str, CellSpec]:
    """Every recurrent cell, by ``model.cell``."""
    _builtin("cells")
    return MappingProxyType(_CELLS)


def positions() -> Mapping[str, PositionSpec]:
    """Every position scheme, by ``model.positions``."""
    _builtin("positions")
    return MappingProxyType(_POSITIONS)


def tasks() -> Mapping[str, TaskSpec]:
    """Every task, by name: seqlab's own first (:data:`BUILTIN_TASKS`, every package of them
    imported), then the others in the order registered."""
    _builtin("tasks")
    ordered = {name: _TASKS[name] for name in BUILTIN_TASKS if name in _TASKS}
    return MappingProxyType({**ordered, **_TASKS})


def task(name: str) -> TaskSpec | None:
    """The task called ``name`` (None if there is none), importing, of seqlab's own tasks, that
    one's package alone."""
    if name not in _TASKS and name in BUILTIN_TASKS:
        importlib.import_module(BUILTIN_TASKS[name])
    return _TASKS.get(name)


def choices(names: Any) -> str:
    """``'a', 'b' or 'c'``: registered names for an error message."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
