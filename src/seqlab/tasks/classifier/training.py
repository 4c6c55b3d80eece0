"""Training any classifier (text, images, audio): the cross-entropy loss of a minibatch's logits
(:func:`cross_entropy_loss`) and validation by loss, accuracy and macro-F1 (:func:`validation`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch.nn.functional as F
from torch import nn

from seqlab.data.classification import ClassBatch
from seqlab.objective import LossFn, LossOutput
from seqlab.runtime.progress import progress
from seqlab.tasks.classifier.base import forward_batches
from seqlab.tasks.classifier.metrics import classification_metrics


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
