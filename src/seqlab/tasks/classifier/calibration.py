"""Probabilities that mean what they say: temperature scaling and the expected calibration error.

**Temperature scaling** (Guo et al. 2017, "On Calibration of Modern Neural Networks", §4.2):
one scalar ``T > 0`` divides every logit, ``softmax(z / T)``; ``T`` minimises the negative
log-likelihood of a held-out split (here the run's validation split, never its test split). The
argmax, and so accuracy, does not move; an overconfident model gets ``T > 1``.

**Expected calibration error** (Naeini et al. 2015; Guo et al. 2017, eq. 3): the predictions are
put in ``bins`` equal-width bins of their confidence (the top probability), and ECE is the
average over bins, weighted by their share of predictions, of ``|accuracy − mean
confidence|``. A reliability diagram draws each bin's accuracy against its confidence.

A calibrated run keeps its temperature in ``calibration.json`` (:data:`CALIBRATION`), which the
predictor reads when the run is loaded; the weights are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from seqlab.atomic import atomic_write_json, read_format_json
from seqlab.errors import CheckpointError

__all__ = [
    "CALIBRATION",
    "Calibration",
    "expected_calibration_error",
    "fit_temperature",
    "reliability",
]

#: the run file holding the temperature
CALIBRATION = "calibration.json"
FORMAT = "seqlab.calibration/1"
#: the search range of log T: T from about 0.05 to 20
_LOG_T_RANGE = (-3.0, 3.0)


def _nll(logits: Tensor, labels: Tensor, log_t: float) -> float:
    return float(torch.nn.functional.cross_entropy(logits / math.exp(log_t), labels))


def fit_temperature(logits: Tensor, labels: Tensor, tol: float = 1e-4) -> float:
    """The ``T`` minimising the mean negative log-likelihood of ``softmax(logits / T)``.

    The NLL is convex in ``1 / T``, hence unimodal in ``log T``: a golden-section search over
    ``log T`` in [-3, 3] finds it to ``tol`` without a learning rate. Computed in float64.

    Shape: logits ``(N, C)``, labels ``(N,)``.
    """
    if len(logits) == 0:
        raise ValueError("fit_temperature: no examples")
    z, y = logits.double(), labels.long()
    lo, hi = _LOG_T_RANGE
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = _nll(z, y, a), _nll(z, y, b)
    while hi - lo > tol:
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = _nll(z, y, a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = _nll(z, y, b)
    return math.exp((lo + hi) / 2)


def reliability(probs: Tensor, labels: Tensor, bins: int = 15) -> dict[str, list[float]]:
    """Per confidence bin ``[k / bins, (k + 1) / bins)`` (the last one closed): the number of
    predictions, their accuracy and mean confidence (0 for an empty bin). Shape: probs ``(N,
    C)``, labels ``(N,)``."""
    conf, pred = probs.double().max(dim=1)
    right = (pred == labels).double()
    which = torch.clamp((conf * bins).long(), max=bins - 1)
    count = torch.bincount(which, minlength=bins).double()
    acc = torch.bincount(which, right, minlength=bins) / count.clamp(min=1)
    mean = torch.bincount(which, conf, minlength=bins) / count.clamp(min=1)
    return {"count": count.tolist(), "accuracy": acc.tolist(), "confidence": mean.tolist()}


def expected_calibration_error(probs: Tensor, labels: Tensor, bins: int = 15) -> float:
    """ECE (module docstring) of predictions ``probs`` ``(N, C)`` with true ``labels`` ``(N,)``:
    0 for a perfectly calibrated model, at most 1."""
    r = reliability(probs, labels, bins)
    n = sum(r["count"])
    if n == 0:
        raise ValueError("expected_calibration_error: no examples")
    return sum(
        c / n * abs(a - m)
        for c, a, m in zip(r["count"], r["accuracy"], r["confidence"], strict=True)
    )


@dataclass(frozen=True)
class Calibration:
    """A run's temperature and what it did on the split that chose it."""

    temperature: float
    split: str
    examples: int
    nll_before: float
    nll_after: float
    ece_before: float
    ece_after: float
    #: the checkpoint folder whose logits chose it (another checkpoint is not calibrated)
    checkpoint: str = ""

    @classmethod
    def fit(
        cls, logits: Tensor, labels: Tensor, split: str = "val", checkpoint: str = ""
    ) -> Calibration:
        """Choose ``T`` on ``logits`` ``(N, C)`` and ``labels`` ``(N,)`` of ``split``."""
        t = fit_temperature(logits, labels)
        z, y = logits.double(), labels.long()
        return cls(
            temperature=t,
            split=split,
            checkpoint=checkpoint,
            examples=len(y),
            nll_before=_nll(z, y, 0.0),
            nll_after=_nll(z, y, math.log(t)),
            ece_before=expected_calibration_error(z.softmax(-1), y),
            ece_after=expected_calibration_error((z / t).softmax(-1), y),
        )

    def save(self, path: Path) -> None:
        atomic_write_json(path, {"format": FORMAT, **asdict(self)})

    @classmethod
    def load(cls, path: Path) -> Calibration:
        data = read_format_json(path, FORMAT, "calibration file")
        data.pop("format", None)
        t = data.get("temperature")
        if not isinstance(t, int | float) or not 0 < t < math.inf:
            raise CheckpointError(f"{path}: 'temperature' must be a positive number, got {t!r}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise CheckpointError(f"{path}: {exc}") from None

    def summary(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}
