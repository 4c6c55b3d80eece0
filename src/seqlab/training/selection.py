"""Which of two validation results is better: the one rule behind best checkpoints, early
stopping, the plateau schedule and checkpoint averaging."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Selection:
    """Choose checkpoints by ``metric``, lower (``min``) or higher (``max``) is better.

    A non-finite value is never better than anything, and nothing is better than it.
    """

    metric: str = "val_loss"
    mode: Literal["min", "max"] = "min"

    def better(self, value: float | None, best: float | None) -> bool:
        """Whether ``value`` improves on ``best`` (None: nothing yet)."""
        if value is None or not math.isfinite(value):
            return False
        if best is None or not math.isfinite(best):
            return True
        return value < best if self.mode == "min" else value > best
