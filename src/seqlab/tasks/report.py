"""What a trained model's ``evaluate`` and ``predict`` return: numbers that print themselves.

:class:`Report` (``evaluate``) holds the scores of one evaluation: the numbers, the metric
signatures, what was scored and the checkpoint. Each task subclasses it with its terminal
summary (:meth:`Report.summary`); :meth:`Report.to_json` is the same for every task: the
checkpoint, what was scored, then the scores. :class:`Prediction` (``predict``) holds the
outputs for some inputs, as the lines a command prints and as JSON.

Both are consumed alike by the command line (:mod:`seqlab.cli.infer`), the server and Python
code; none of them knows a task's numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seqlab.errors import SeqlabError


def _numbers(value: Any, key: str) -> list[tuple[str, float]]:
    if isinstance(value, float):
        return [(key, value)]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _numbers(v, f"{key}.{k}".lstrip("."))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _numbers(v, f"{key}[{i}]")]
    return []


@dataclass
class Report:
    """The scores of one evaluation (a task's subclass prints them).

    Attributes:
        checkpoint: the checkpoint evaluated (None for a model being trained).
        source: what was scored, e.g. ``{"split": "val"}`` or ``{"src": FILE, "ref": FILE}``.
        scores: the numbers and signatures (JSON values).
        figures: what each figure drawn shows -> its file.
    """

    checkpoint: str | None
    source: dict[str, str]
    scores: dict[str, Any]
    figures: dict[str, Path] = field(default_factory=dict)
    #: the device the model computed on (``cpu``, ``cuda:0``): :mod:`seqlab.runtime.device`
    device: str | None = field(default=None, kw_only=True)

    @property
    def where(self) -> str:
        """What was scored, in one word: the split or the first file."""
        return next(iter(self.source.values()), "")

    def summary(self) -> str:
        """The scores for a terminal (one or more lines); each task writes its own."""
        return ", ".join(f"{k} {v}" for k, v in self.scores.items())

    def format(self) -> str:
        """The summary, then one line per figure drawn."""
        lines = [self.summary()]
        lines += [f"  {what}: {path}" for what, path in self.figures.items()]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The checkpoint, the device, what was scored, then the scores (figures are not part
        of it)."""
        device = {"device": self.device} if self.device is not None else {}
        return {"checkpoint": self.checkpoint, **device, **self.source, **self.scores}

    def check_finite(self) -> None:
        """Refuse to report a score that is NaN or infinite (JSON has no such numbers, and a
        model that yields them is broken, not scored): name the values and the checkpoint."""
        bad = [(k, v) for k, v in _numbers(self.scores, "") if not math.isfinite(v)]
        if bad:
            shown = ", ".join(f"{k} = {v}" for k, v in bad[:4]) + (", ..." if len(bad) > 4 else "")
            raise SeqlabError(
                f"the model of {self.checkpoint or 'this run'} gives non-finite scores ({shown}): "
                "its outputs hold NaN or infinity, so there is no score to report (did its "
                "training diverge? try another checkpoint with --which)"
            )

    # the scores read like the dictionary that evaluation used to return
    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.to_json()

    def keys(self) -> Any:
        return self.to_json().keys()


@dataclass
class Prediction:
    """The outputs of ``predict`` for some inputs (a task's subclass prints them).

    Attributes:
        notes: what was changed in the inputs to read them (printed as notes, not output).
        figures: the figure files written.
    """

    notes: list[str] = field(default_factory=list, kw_only=True)
    figures: list[Path] = field(default_factory=list, kw_only=True)

    def lines(self) -> list[str]:
        """The output lines of a command (one or more per input)."""
        raise NotImplementedError

    def format(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError
