"""seqlab: sequence models from RNNs to the Transformer, readable, tested and fast on a CPU.

The Python API for trained models::

    from seqlab import load
    m = load("runs/m30-en-de-transformer")        # the run directory alone
    m.translate(["A man rides a bike."], beam=5)  # translation runs
    m.score(sources, references)                  # BLEU, chrF
    m.generate("time traveller", tokens=100)      # language-model runs
    m.evaluate("test").format()                   # any run: a Report (also .to_json())

Every run offers ``predict`` and ``evaluate`` (:class:`seqlab.tasks.base.Predictor`); the methods
of its task come on top (``translate``, ``classify``, ``generate``, ``forecast``, …).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from seqlab import builtin  # noqa: F401  (the catalog learns where seqlab's own tasks and models are)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from seqlab.tasks.base import Predictor


def load(
    run_dir: str | Path,
    which: str = "best",
    precision: str | None = None,
    device: str | None = None,
) -> Predictor:
    """Load a trained model from its run directory (``best``, ``latest`` or a step number).

    Inference runs in fp32 unless ``precision="bf16"`` (faster where the CPU has native bf16;
    outputs agree with fp32 up to near-tied tokens): see :mod:`seqlab.runtime.precision`. It
    runs on ``device``: ``auto`` (the default: a CUDA GPU when present, else the CPU), ``cpu``
    or ``cuda``, whatever the run trained on: see :mod:`seqlab.runtime.device`.
    """
    from seqlab.tasks import load as load_run  # deferred: torch (import seqlab stays light)

    return load_run(run_dir, which, precision, device)
