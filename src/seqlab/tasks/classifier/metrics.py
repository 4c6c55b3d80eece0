"""Classification scores: accuracy, macro-F1 and the confusion matrix, and their report.

Macro-F1 is the unweighted mean over classes of F1 = 2PR / (P + R), over the classes that occur
as a true label or a prediction; the confusion matrix has a row per true class and a column per
predicted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqlab.tasks.report import Report


def classification_metrics(pred: Tensor, gold: Tensor, num_classes: int) -> dict[str, Any]:
    """Accuracy, unweighted average recall (``uar``: the mean of the per-class recalls over the
    classes that occur in ``gold``, the measure of emotion recognition, Schuller et al. 2009),
    macro-F1 and the confusion matrix (rows true, columns predicted)."""
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.long)
    confusion.index_put_((gold, pred), torch.ones_like(gold), accumulate=True)
    tp = confusion.diag().double()
    precision = tp / confusion.sum(0).double().clamp(min=1)
    recall = tp / confusion.sum(1).double().clamp(min=1)
    f1 = torch.where(
        precision + recall > 0, 2 * precision * recall / (precision + recall), torch.zeros_like(tp)
    )
    present = (confusion.sum(1) + confusion.sum(0)) > 0  # classes seen as gold or prediction
    occurs = confusion.sum(1) > 0  # classes seen as gold
    return {
        "accuracy": float(tp.sum() / max(len(gold), 1)),
        "uar": float(recall[occurs].mean()) if occurs.any() else 0.0,
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "confusion": confusion.tolist(),
        "examples": len(gold),
    }


@dataclass
class ClassificationReport(Report):
    """Accuracy, macro-F1, the confusion matrix and the label names it is indexed by."""

    def summary(self) -> str:
        s = self.scores
        return (
            f"{self.where}: accuracy {s['accuracy']:.2%}  UAR {s['uar']:.2%}  "
            f"macro-F1 {s['macro_f1']:.4f}  "
            f"({s['examples']} examples; {self.checkpoint})"
        )

    def draw_confusion(self, path: str | Path, name: str) -> Path:
        """Draw the confusion matrix into ``path`` (titled after the model ``name``)."""
        from seqlab.plotting_heatmaps import plot_confusion  # deferred: matplotlib

        plot_confusion(
            self.scores["confusion"],
            self.scores["labels"],
            path,
            title=f"{name}: {self.where}",
        )
        self.figures["confusion matrix"] = Path(path)
        return Path(path)
