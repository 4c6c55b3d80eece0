"""Training a classifier, of either kind: batches, the cross-entropy loss, validation by
accuracy (:func:`build_experiment`).

The kind of run (text or images) gives its encoded examples and artefacts
(:meth:`~seqlab.tasks.classification.base.Classifier.training_data`); everything else is the
same for both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from seqlab.config import ExperimentConfig
from seqlab.data.classification import ClassBatch, ClassificationBatches
from seqlab.models import build_model
from seqlab.objective import LossFn, LossOutput, Selection
from seqlab.runtime.progress import progress
from seqlab.tasks.base import Experiment
from seqlab.tasks.classification.base import Classifier, forward_batches
from seqlab.tasks.classification.image import ImageClassifier
from seqlab.tasks.classification.metrics import classification_metrics
from seqlab.tasks.classification.text import TextClassifier

#: a classifier chooses checkpoints by validation accuracy, higher is better
SELECT = Selection("val_acc", "max")


def cross_entropy_loss(label_smoothing: float) -> LossFn:
    """``loss_fn(model, batch, state)``: mean cross-entropy of a minibatch's logits."""

    def loss_fn(model: nn.Module, batch: ClassBatch, state: Any) -> LossOutput:
        logits = model(batch.inputs, batch.lengths)  # (B, C)
        loss = F.cross_entropy(logits.float(), batch.labels, label_smoothing=label_smoothing)
        return LossOutput(loss, len(batch.labels), None)

    return loss_fn


def validation(
    batches: Iterable[ClassBatch], num_classes: int
) -> Callable[[nn.Module], dict[str, float]]:
    """``evaluate(model)``: loss, accuracy and macro-F1 on the validation ``batches``."""

    def evaluate(m: nn.Module) -> dict[str, float]:
        logits, gold = forward_batches(m, progress(batches, "validating", unit="batch"))
        scores = classification_metrics(logits.argmax(-1), gold, num_classes)
        return {
            "val_loss": F.cross_entropy(logits, gold, reduction="sum").item() / max(len(gold), 1),
            "val_acc": scores["accuracy"],
            "val_f1": scores["macro_f1"],
        }

    return evaluate


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
