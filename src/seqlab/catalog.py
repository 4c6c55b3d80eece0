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

seqlab's own datasets, cells and position schemes are plain records
(:mod:`seqlab.builtin_records`), registered when this module is imported. seqlab's own tasks and
architectures register themselves when their modules are imported; :mod:`seqlab.builtin` (which
``import seqlab`` runs) hands the catalog their names and what imports each (:func:`provide`), and reading
one by name (:func:`model`, :func:`task`) imports that one module, reading a kind
(:func:`models`, :func:`tasks`) all of them. Code outside seqlab registers its records the same
way before it loads a config that names them; :func:`registered` does it for the length of a
``with`` block (``tests/test_plugins.py`` trains, evaluates and loads a model and a dataset
defined in the test file alone; ``tests/test_task_plugin.py`` a whole task, served).

This module imports nothing from seqlab but its records (:mod:`seqlab.records`,
:mod:`seqlab.builtin_records`), so every layer can register here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from seqlab.builtin_records import CELLS, DATASETS, POSITIONS
from seqlab.records import (  # noqa: F401  (the records, named from the catalog as before)
    INPUTS,
    CellSpec,
    DataFile,
    DatasetSpec,
    Inputs,
    ModelSpec,
    PositionSpec,
    Sizes,
    TaskSpec,
)

#: seqlab's own tasks and architectures by name, each with what imports the module that
#: registers it (:func:`provide`, called by :mod:`seqlab.builtin` when ``import seqlab`` runs)
BUILTIN_TASKS: Mapping[str, Callable[[], Any]] = MappingProxyType({})
BUILTIN_MODELS: Mapping[str, Callable[[], Any]] = MappingProxyType({})

_MODELS: dict[str, ModelSpec] = {}
_DATASETS: dict[str, DatasetSpec] = {}
_CELLS: dict[str, CellSpec] = {}
_POSITIONS: dict[str, PositionSpec] = {}
_TASKS: dict[str, TaskSpec] = {}
_loaded: set[str] = set()


def provide(
    tasks: Mapping[str, Callable[[], Any]], models: Mapping[str, Callable[[], Any]]
) -> None:
    """Where seqlab's own tasks and architectures are: by name, what imports the module that
    registers each (:mod:`seqlab.builtin`, the one caller)."""
    global BUILTIN_TASKS, BUILTIN_MODELS
    BUILTIN_TASKS, BUILTIN_MODELS = MappingProxyType(dict(tasks)), MappingProxyType(dict(models))


def _builtin(kind: str) -> None:
    if kind in ("datasets", "positions", "cells"):
        return  # seqlab's own: registered below, from their records
    if kind not in _loaded:
        _loaded.add(kind)
        try:
            by_name = {"tasks": BUILTIN_TASKS, "models": BUILTIN_MODELS}[kind]
            for load in dict.fromkeys(by_name.values()):
                load()
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
        BUILTIN_MODELS[arch]()
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


def registered_tasks() -> Mapping[str, TaskSpec]:
    """The tasks registered so far, importing none (seqlab's own appear once their package is
    imported)."""
    return MappingProxyType(_TASKS)


def task(name: str) -> TaskSpec | None:
    """The task called ``name`` (None if there is none), importing, of seqlab's own tasks, that
    one's package alone."""
    if name not in _TASKS and name in BUILTIN_TASKS:
        BUILTIN_TASKS[name]()
    return _TASKS.get(name)


def choices(names: Any) -> str:
    """``'a', 'b' or 'c'``: registered names for an error message."""
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


# seqlab's own datasets, position schemes and cells: plain records, no reader and no PyTorch
for _record in DATASETS:
    register_dataset(_record)
for _position in POSITIONS:
    register_position(_position)
for _cell in CELLS:
    register_cell(_cell)
