"""Training that diverged: :class:`TrainingDiverged`, the validation values that are not finite
(:func:`non_finite`), and the advice on where to go on from (:func:`advice`): the checkpoint a
resume would continue from when it is good (:func:`last_good_checkpoint`), else a new start.

:meth:`seqlab.training.trainer.Trainer.diverged` raises it with that advice.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from seqlab.errors import SeqlabError
from seqlab.storage import checkpoints as ckpt


class TrainingDiverged(SeqlabError):
    """The loss or the gradient became NaN or infinite."""


def non_finite(record: dict[str, Any], metric: str) -> list[str]:
    """The validation loss and the selection metric of ``record`` that are NaN or infinite (or
    missing as ``null``, how a non-finite value is stored)."""
    keys = [k for k in dict.fromkeys(("val_loss", metric)) if k in record]
    return [
        k for k in keys if not (isinstance(record[k], int | float) and math.isfinite(record[k]))
    ]


def last_good_checkpoint(run_dir: Path, metric: str) -> Path | None:
    """The checkpoint ``--resume`` continues from (the latest), if its validation metrics (the
    validation loss and ``metric``) were finite (or it was not validated: a checkpoint's weights
    are always finite)."""
    found = ckpt.latest_with_meta(run_dir)
    if found is None:
        return None  # none, or unreadable: resuming from it would fail
    path, meta = found
    latest = ckpt.pointer(run_dir, "latest")
    history = meta.get("history")
    for record in history if isinstance(history, list) else []:
        bad = isinstance(record, dict) and non_finite(record, metric)
        if bad and record.get("step") == latest:
            return None
    return path


def advice(run_dir: Path, metric: str) -> str:
    """What to do after diverging: continue from the last good checkpoint with a lower learning
    rate if there is one (:func:`last_good_checkpoint`), else start again."""
    good = last_good_checkpoint(run_dir, metric)
    if good is not None:
        return (
            f"last good checkpoint: {good}. Lower the learning rate (or set "
            f"train.grad_clip) and continue from that checkpoint: seqlab train --resume "
            f"{run_dir} train.lr=<lower>"
        )
    if ckpt.pointer(run_dir, "latest") is None:
        return (
            "no checkpoint was written yet. Start again with a lower train.lr (or set "
            "train.grad_clip)"
        )
    return (
        "no good checkpoint to resume from (the latest one's validation is not finite). "
        "Start a new run with a lower train.lr (or set train.grad_clip)"
    )
