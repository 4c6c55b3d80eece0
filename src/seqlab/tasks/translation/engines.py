"""The engines that decode a translation model, behind one protocol (:class:`Engine`).

**Names** — the one vocabulary, here and nowhere else (the CLI's ``--engine``, ``seqlab serve
--engine`` and the Python API all read it):

========================  =====================================================================
``seqlab``                seqlab's own search (:class:`SeqlabSearch`): every architecture,
                          attention weights; ``pytorch`` is its older spelling, still accepted
                          (``seqlab translate/evaluate --engine``'s default)
``ctranslate2``           the Transformer exported to CTranslate2
                          (:mod:`seqlab.tasks.translation.ctranslate2_engine`)
``auto``                  ``seqlab serve`` only: CTranslate2 for the models it decodes when it is
                          installed, seqlab's own search otherwise
========================  =====================================================================

:func:`engine_name` maps every accepted spelling (:data:`ENGINE_SPELLINGS`) to its engine;
:func:`check_engine` holds the rules an engine setting must follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any, Protocol

import torch

from seqlab.config import DecodeConfig
from seqlab.data.translation_batching import pad_sequences
from seqlab.errors import SeqlabError
from seqlab.export.ctranslate2 import check_compute_type, require_ctranslate2
from seqlab.models.search import Hypothesis, beam_search, greedy_search
from seqlab.runtime.precision import autocast
from seqlab.runtime.progress import progress

#: seqlab's own search and CTranslate2, by the names seqlab reports (``/models``, responses)
SEQLAB, CTRANSLATE2 = "seqlab", "ctranslate2"
#: ``seqlab serve --engine auto``: CTranslate2 where it decodes the model and is installed
AUTO = "auto"
#: every spelling ``--engine`` accepts (``seqlab translate``/``evaluate``), and what it names:
#: ``pytorch`` is the older name of seqlab's own search, kept working
ENGINE_SPELLINGS = {"pytorch": SEQLAB, SEQLAB: SEQLAB, CTRANSLATE2: CTRANSLATE2}
#: the engines that decode a translation model (the choices of ``seqlab translate --engine``)
ENGINES = tuple(ENGINE_SPELLINGS)
#: ``seqlab serve --engine``'s choices
SERVER_ENGINES = (AUTO, SEQLAB, CTRANSLATE2)


def engine_name(spelling: str) -> str:
    """The engine ``spelling`` names (:data:`ENGINE_SPELLINGS`): ``seqlab`` or ``ctranslate2``."""
    if spelling not in ENGINE_SPELLINGS:
        raise SeqlabError(
            f"--engine must be {', '.join(ENGINES[:-1])} or {ENGINES[-1]}, not {spelling!r}"
        )
    return ENGINE_SPELLINGS[spelling]


def engine_decodes(engine: str, arch: str) -> bool:
    """Whether ``engine`` decodes translation models of ``model.arch`` ``arch``: seqlab's own
    search (``seqlab``, ``pytorch``) every one, CTranslate2 the Transformer (the one seqlab
    exports to it)."""
    name = ENGINE_SPELLINGS.get(engine)
    return name == SEQLAB or (name == CTRANSLATE2 and arch == "transformer")


def check_engine(engine: str, quantize: str | None, arch: str, need_weights: bool = False) -> None:
    """Refuse an engine setting before any work: the one place these rules are written (the
    command line, :meth:`~seqlab.tasks.translation.Translator.hypotheses` and every other caller
    go through it).

    ``ctranslate2`` runs Transformer models exported to CTranslate2, in a compute type this CPU
    supports (``quantize``), and returns no attention weights.
    """
    name = engine_name(engine)
    if quantize and name != CTRANSLATE2:
        raise SeqlabError("--quantize applies to --engine ctranslate2")
    if name == CTRANSLATE2:
        require_ctranslate2()
        check_compute_type(quantize)
        if not engine_decodes(name, arch):
            raise SeqlabError(
                f"--engine ctranslate2 runs Transformer translation models, not model.arch={arch}"
            )
        if need_weights:
            raise SeqlabError(
                "--attention-png needs --engine pytorch (CTranslate2 returns no attention)"
            )


class Engine(Protocol):
    """What decodes batches of source ids for
    :meth:`~seqlab.tasks.translation.Translator.hypotheses`."""

    #: batches it decodes at once, from that many threads (1: one after the other, in this one)
    workers: int

    def hypotheses(
        self, batch: Sequence[Sequence[int]], decode: DecodeConfig, need_weights: bool
    ) -> list[list[Hypothesis]]:
        """The ``decode.nbest`` best hypotheses of each source (token ids ending in ``<eos>``),
        in input order, by ``decode`` (greedy or beam search, its length penalty and limits)."""
        ...


class SeqlabSearch:
    """seqlab's own search (:func:`~seqlab.models.search.greedy_search`,
    :func:`~seqlab.models.search.beam_search`) on ``model``, in ``precision``."""

    workers = 1

    def __init__(self, model: torch.nn.Module, precision: str | None) -> None:
        self.model, self.precision = model, precision

    @torch.no_grad()
    def hypotheses(
        self, batch: Sequence[Sequence[int]], decode: DecodeConfig, need_weights: bool
    ) -> list[list[Hypothesis]]:
        device = next(self.model.parameters()).device
        limits = {"max_len_a": decode.max_len_a, "max_len_b": decode.max_len_b}
        with autocast(self.precision, device):
            src, src_len = pad_sequences([list(ids) for ids in batch])
            src, src_len = src.to(device), src_len.to(device)
            if decode.strategy == "beam":
                return beam_search(
                    self.model,
                    src,
                    src_len,
                    beam_size=decode.beam_size,
                    length_penalty=decode.length_penalty,
                    nbest=decode.nbest,
                    need_weights=need_weights,
                    **limits,
                )
            best = greedy_search(self.model, src, src_len, need_weights=need_weights, **limits)
            return [[h] for h in best]


def decode_batches(
    engine: Engine,
    sources: Sequence[Sequence[int]],
    decode: DecodeConfig,
    need_weights: bool,
    batch_size: int,
) -> list[list[Hypothesis]]:
    """``engine``'s hypotheses of ``sources`` (sorted by length by the caller), ``batch_size``
    at a time, in input order; an engine with several workers decodes that many batches at once
    from as many threads."""
    starts = range(0, len(sources), batch_size)

    def search(start: int) -> list[list[Hypothesis]]:
        return engine.hypotheses(sources[start : start + batch_size], decode, need_weights)

    results: list[list[Hypothesis]] = []
    with ExitStack() as stack:
        found_all: Any = map(search, starts)
        if engine.workers > 1 and len(starts) > 1:
            pool = stack.enter_context(ThreadPoolExecutor(min(engine.workers, len(starts))))
            found_all = pool.map(search, starts)
        for found in progress(found_all, "decoding", total=len(starts), unit="batch"):
            results.extend(found)
    return results
