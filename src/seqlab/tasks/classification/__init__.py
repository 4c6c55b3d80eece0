"""Classification: one label per sentence or image — two kinds of run on one base.

- :mod:`seqlab.tasks.classifier` (shared with audio classification, not part of this task): the
  run's classes, the forward pass, the predictor (classify, probabilities, scores, evaluation,
  attention maps), the splits, the metrics, calibration, the loss and validation;
- :mod:`~seqlab.tasks.classification.text`: text classifiers (Transformer, BiLSTM, CNN);
- :mod:`~seqlab.tasks.classification.image`: image classifiers (the Vision Transformer of
  Dosovitskiy et al. 2021, a ConvNet);
- :mod:`~seqlab.tasks.classification.training`: training either kind;
- :mod:`~seqlab.tasks.classification.service`: ``POST /classify``, and ``panel.js`` the page's
  panel; the task is declared once, in this module (:data:`TASK`).

Whether a run reads text or images is decided once, by its dataset's inputs
(:meth:`~seqlab.tasks.classifier.base.Classifier.accepts`).

**Splits.** The validation split that chooses checkpoints is always held out of the training
data (``data.val_examples``, a seeded choice); the dataset's evaluation split is never used to
choose anything. SST-2: ``train`` / ``val`` / ``dev`` (GLUE's labelled evaluation split; its
test labels are not public). SST-2's training file holds every phrase of each sentence's parse
tree as its own example, so a random hold-out would validate on phrases whose sentence is in
training; ``val`` is instead ``data.val_examples`` whole sentences, and every phrase contained in
one of them is left out of training (:func:`seqlab.data.classification.sentence_holdout`).
MNIST and AG News: ``train`` / ``val`` / ``test``. A user's file (``data.dataset:
text-classification``): ``train`` / ``val``. Each dataset's reader makes its splits
(:class:`seqlab.catalog.DatasetSpec`).

A run directory holds ``classes.json`` (label names; for images the input size and the training
set's mean and standard deviation) and, for text, ``vocab.json`` and ``tokenizer.json``; a
classifier's ``load`` needs nothing else.
"""

from __future__ import annotations

from seqlab import catalog
from seqlab.config.experiment import TASK_RULES
from seqlab.tasks.classification.image import ImageClassifier
from seqlab.tasks.classification.service import SERVICE
from seqlab.tasks.classification.text import TextClassifier
from seqlab.tasks.classification.training import SELECT, build_experiment
from seqlab.tasks.classifier.base import ARTEFACTS, Classes, Classifier
from seqlab.tasks.classifier.metrics import ClassificationReport, classification_metrics

TASK = catalog.register_task(
    catalog.TaskSpec(
        "classification",
        build_experiment,
        (TextClassifier, ImageClassifier),
        SELECT,
        frozenset(ARTEFACTS),
        rules=TASK_RULES["classification"],  # config checks, with the config (seqlab.config)
        service=SERVICE,
        summary="a label for a text or an image",
    )
)

__all__ = [
    "ARTEFACTS",
    "SELECT",
    "SERVICE",
    "TASK",
    "Classes",
    "ClassificationReport",
    "Classifier",
    "ImageClassifier",
    "TextClassifier",
    "build_experiment",
    "classification_metrics",
]
