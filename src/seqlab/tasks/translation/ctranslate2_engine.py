"""The CTranslate2 engine (:class:`~seqlab.tasks.translation.engines.Engine`): a Transformer
translation model exported to CTranslate2, and the export cache it decodes from.

CTranslate2 is an optional dependency (the ``export`` extra): nothing here imports it, or
:mod:`seqlab.export.ctranslate2` (which imports it when asked), until an engine is opened, so
seqlab runs without it and says what to install when it is asked for
(:func:`~seqlab.export.ctranslate2.require_ctranslate2`).

**The export cache** (:func:`cached_export`): decoding with CTranslate2 needs the model in
CTranslate2's format. ``seqlab export --format ctranslate2 --out DIR`` writes one for other
programs; seqlab's own ``--engine ctranslate2`` (``seqlab translate``, ``evaluate``, ``serve``
and ``translate(..., engine="ctranslate2")``) exports the checkpoint it decodes once into the
run directory, ``RUN/exports/ctranslate2-<checkpoint>/``
(:meth:`~seqlab.storage.rundir.RunDir.export_dir`), and reuses it afterwards: a cache of what
``seqlab export`` would write, derived from the checkpoint alone, in seqlab's own folder of the
run. A read-only run directory gets a temporary folder instead. Deleting ``RUN/exports/`` loses
nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from seqlab.config import DecodeConfig
from seqlab.export.ctranslate2 import (
    check_compute_type,
    engine_threads,
    engine_workers,
    export_ctranslate2,
)
from seqlab.export.ctranslate2_engine import CTranslate2Engine
from seqlab.runtime.device import model_device
from seqlab.storage.rundir import RunDir
from seqlab.tasks.base import Run


def cached_export(model: nn.Module, sizes: tuple[int, int], run: Run | None) -> Path:
    """The CTranslate2 export of ``model`` (vocabulary sizes ``sizes``, source and target) that
    ``--engine ctranslate2`` decodes from: the cache ``RUN/exports/ctranslate2-<checkpoint>/`` of
    ``run`` (see the module docstring), written on first use; a temporary folder for a model
    without a run, or when the run directory is read-only."""
    origin = {"checkpoint": str(run.checkpoint)} if run else {}
    if run is not None:
        where = RunDir(run.run_dir).export_dir("ctranslate2", run.checkpoint)
        if (where / "seqlab.json").is_file():
            return where
        try:
            export_ctranslate2(model, *sizes, where, origin)
            return where
        except OSError:  # a read-only run directory: export elsewhere
            pass
    where = Path(tempfile.mkdtemp(prefix="seqlab-ct2-")) / "model"
    export_ctranslate2(model, *sizes, where, origin)
    return where


class CTranslate2Search:
    """:class:`~seqlab.export.ctranslate2_engine.CTranslate2Engine` on the export of ``model``
    (:func:`cached_export`), in ``compute_type`` ``quantize`` (fp32 when None), with as many
    threads as PyTorch, or those and the workers kept by
    :func:`~seqlab.export.ctranslate2.give_cores_to_ctranslate2`.

    Attributes:
        engine: the CTranslate2 engine; ``workers``: batches it decodes at once.
    """

    def __init__(
        self, model: nn.Module, sizes: tuple[int, int], run: Run | None, quantize: str | None
    ) -> None:
        device = model_device(model).type  # CTranslate2 decodes where the model is
        check_compute_type(quantize, device)  # before any export
        self.max_decode_len = getattr(model, "max_decode_len", None)
        self.engine: Any = CTranslate2Engine(
            cached_export(model, sizes, run),
            compute_type=quantize or "float32",
            threads=engine_threads(),
            workers=engine_workers(),
            device=device,
        )
        self.workers = int(self.engine.workers)

    @staticmethod
    def key(quantize: str | None) -> tuple[str, int, int]:
        """What tells two engines apart: compute type, threads and workers."""
        return (quantize or "float32", engine_threads(), engine_workers())

    def hypotheses(
        self, batch: Sequence[Sequence[int]], decode: DecodeConfig, need_weights: bool
    ) -> list[list[Any]]:
        return self.engine.search(
            batch,
            beam_size=decode.beam_size if decode.strategy == "beam" else 1,
            nbest=decode.nbest,
            length_penalty=decode.length_penalty,
            max_decode_len=self.max_decode_len,
            max_len_a=decode.max_len_a,
            max_len_b=decode.max_len_b,
        )
