"""seqlab's own tasks and architectures by name, and the one place their modules are imported.

Each task's package registers its :class:`~seqlab.catalog.TaskSpec`, and each architecture's
module its :class:`~seqlab.catalog.ModelSpec`, when imported. They are imported here, each when
its name is first asked for (:func:`seqlab.catalog.task`, :func:`seqlab.catalog.model`; all of
them to list them): so ``seqlab train`` of a translation config imports no other task, and a run
of one architecture no other architecture's module. ``import seqlab`` hands the two tables to
the catalog (:func:`seqlab.catalog.provide`), which imports nothing itself; the import graph of
``tests/test_layers.py`` reads the tables as this module's imports.

Datasets, position schemes and cells need no import to be known: their records are plain data
(:mod:`seqlab.builtin_records`). Adding a task or an architecture to seqlab is one new package or
module plus its line here.
"""

from __future__ import annotations

from importlib import import_module

from seqlab import catalog

#: seqlab's own tasks, in the order listings show them, and the package that registers each
TASKS: dict[str, str] = {
    "language_modeling": "seqlab.tasks.language_modeling",
    "translation": "seqlab.tasks.translation",
    "classification": "seqlab.tasks.classification",
    "audio_classification": "seqlab.tasks.audio",
    "forecasting": "seqlab.tasks.forecasting",
}
#: seqlab's own architectures (``model.arch``), in the order listings show them, and the module
#: that registers each
MODELS: dict[str, str] = {
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


def load(module: str) -> None:
    """Import one module of :data:`TASKS` or :data:`MODELS`: it registers its records."""
    import_module(module)  # deferred: torch (every task and model brings it)


catalog.provide(TASKS, MODELS, load)
