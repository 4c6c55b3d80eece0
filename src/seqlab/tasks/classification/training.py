"""Training a classifier of text or images: batches, the model, the cross-entropy loss and
validation by accuracy (:mod:`seqlab.tasks.classifier.training`) (:func:`build_experiment`).

The kind of run (text or images) gives its encoded examples and artefacts
(:meth:`~seqlab.tasks.classifier.base.Classifier.training_data`); everything else is the
same for both.
"""

from __future__ import annotations

from pathlib import Path

import torch

from seqlab.config import ExperimentConfig
from seqlab.data.classification import ClassificationBatches
from seqlab.models import build_model
from seqlab.objective import Selection
from seqlab.tasks.base import Experiment
from seqlab.tasks.classification.image import ImageClassifier
from seqlab.tasks.classification.text import TextClassifier
from seqlab.tasks.classifier.base import Classifier
from seqlab.tasks.classifier.training import cross_entropy_loss, validation

#: a classifier chooses checkpoints by validation accuracy, higher is better
SELECT = Selection("val_acc", "max")


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    """Examples, labels, vocabulary (the run's own when resuming), batches and the model."""
    kinds: tuple[type[Classifier], ...] = (TextClassifier, ImageClassifier)
    kind = next(k for k in kinds if k.accepts(cfg))  # by the dataset's inputs: text or images
    data = kind.training_data(cfg, run_dir)
    d = cfg.data
    batches = ClassificationBatches(*data.train, d.batch_size, shuffle=True, seed=cfg.train.seed)
    val_batches = ClassificationBatches(*data.val, max(d.batch_size, 256), shuffle=False)
    num_classes = len(data.classes.labels)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, **data.sizes)

    return Experiment(
        model=model,
        train_batches=batches,
        loss_fn=cross_entropy_loss(cfg.train.label_smoothing),
        evaluate=validation(val_batches, num_classes),
        select=SELECT,
        save_artefacts=data.save,
        predictor=data.predictor(model),
        meta=dict(data.sizes),
        unit="ex",
        perplexity=False,
    )
