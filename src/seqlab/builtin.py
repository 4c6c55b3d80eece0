"""seqlab's own tasks and architectures by name, and the one place their modules are imported.

Each task's package registers its :class:`~seqlab.catalog.TaskSpec`, and each architecture's
module its :class:`~seqlab.catalog.ModelSpec`, when imported. Each is imported here by its own
function, a plain ``import`` the layer test sees, called when its name is first asked for
(:func:`seqlab.catalog.task`, :func:`seqlab.catalog.model`; all of them to list them): so
``seqlab train`` of a translation config imports no other task, and a run of one architecture no
other architecture's module. ``import seqlab`` hands the two tables to the catalog
(:func:`seqlab.catalog.provide`), which imports nothing itself.

Datasets, position schemes and cells need no import to be known: their records are plain data
(:mod:`seqlab.builtin_records`). Adding a task or an architecture to seqlab is one new package or
module plus its function and line here.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from seqlab import catalog


# ------------------------------------------------------------------------------------ tasks
def _language_modeling_task() -> ModuleType:
    import seqlab.tasks.language_modeling as module  # deferred: torch

    return module


def _translation_task() -> ModuleType:
    import seqlab.tasks.translation as module  # deferred: torch

    return module


def _classification_task() -> ModuleType:
    import seqlab.tasks.classification as module  # deferred: torch

    return module


def _audio_task() -> ModuleType:
    import seqlab.tasks.audio as module  # deferred: torch

    return module


def _forecasting_task() -> ModuleType:
    import seqlab.tasks.forecasting as module  # deferred: torch

    return module


# ---------------------------------------------------------------------------- architectures
def _rnn_lm() -> ModuleType:
    import seqlab.models.rnn_lm as module  # deferred: torch

    return module


def _transformer_lm() -> ModuleType:
    import seqlab.models.transformer_lm as module  # deferred: torch

    return module


def _seq2seq() -> ModuleType:
    import seqlab.models.seq2seq as module  # deferred: torch

    return module


def _bahdanau() -> ModuleType:
    import seqlab.models.bahdanau as module  # deferred: torch

    return module


def _transformer_seq2seq() -> ModuleType:
    import seqlab.models.transformer_seq2seq as module  # deferred: torch

    return module


def _rnn_classifier() -> ModuleType:
    import seqlab.models.rnn_classifier as module  # deferred: torch

    return module


def _cnn_text() -> ModuleType:
    import seqlab.models.cnn_text as module  # deferred: torch

    return module


def _transformer_classifier() -> ModuleType:
    import seqlab.models.transformer_classifier as module  # deferred: torch

    return module


def _vit() -> ModuleType:
    import seqlab.models.vit as module  # deferred: torch

    return module


def _cnn_image() -> ModuleType:
    import seqlab.models.cnn_image as module  # deferred: torch

    return module


def _audio() -> ModuleType:
    import seqlab.models.audio as module  # deferred: torch

    return module


def _forecasters() -> ModuleType:
    import seqlab.models.forecasters as module  # deferred: torch

    return module


#: seqlab's own tasks, in the order listings show them: what imports the package of each
#: (and returns it)
TASKS: dict[str, Callable[[], ModuleType]] = {
    "language_modeling": _language_modeling_task,
    "translation": _translation_task,
    "classification": _classification_task,
    "audio_classification": _audio_task,
    "forecasting": _forecasting_task,
}
#: seqlab's own architectures (``model.arch``), in the order listings show them: what imports
#: the module of each (and returns it)
MODELS: dict[str, Callable[[], ModuleType]] = {
    "rnn_lm": _rnn_lm,
    "transformer_lm": _transformer_lm,
    "seq2seq": _seq2seq,
    "bahdanau": _bahdanau,
    "transformer": _transformer_seq2seq,
    "rnn_classifier": _rnn_classifier,
    "cnn_text": _cnn_text,
    "transformer_classifier": _transformer_classifier,
    "vit": _vit,
    "cnn_image": _cnn_image,
    "audio_classifier": _audio,
    "ar": _forecasters,
    "rnn_forecaster": _forecasters,
    "transformer_forecaster": _forecasters,
}

catalog.provide(TASKS, MODELS)
