"""The engines that decode a translation model, behind one protocol (:class:`Engine`).

**Names** — one name per engine, here and nowhere else (the CLI's ``--engine``, ``seqlab serve
--engine``, ``/models``, the responses and the Python API all use it):

========================  =====================================================================
``seqlab``                seqlab's own search (:class:`SeqlabSearch`): every architecture and
                          position scheme, attention weights; ``pytorch`` is its deprecated
                          name, still read, with a warning (:data:`~seqlab.deprecation.RENAMED_VALUES`)
``ctranslate2``           the Transformer exported to CTranslate2
                          (:mod:`seqlab.tasks.translation.ctranslate2_engine`), when the export
                          can hold its scheme (:func:`~seqlab.export.ctranslate2.scheme_problem`)
``auto``                  ``seqlab serve`` only: CTranslate2 for the models it decodes when it is
                          installed, seqlab's own search otherwise
========================  =====================================================================

:func:`engine_name` reads a name (the deprecated one too); :func:`check_engine` holds the rules an
engine setting must follow; :func:`ctranslate2_refusal` says why CTranslate2 cannot decode a model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

import torch

from seqlab.builtin_records import ENGINE_NAMES, SERVER_ENGINE_NAMES
from seqlab.config import DecodeConfig
from seqlab.data.translation_batching import pad_sequences
from seqlab.deprecation import renamed_value
from seqlab.errors import SeqlabError
from seqlab.export.ctranslate2 import check_compute_type, require_ctranslate2, scheme_problem
from seqlab.models.search import Hypothesis, beam_search, greedy_search
from seqlab.runtime.precision import autocast
from seqlab.runtime.progress import progress

#: seqlab's own search and CTranslate2, by their one name
#: (:data:`seqlab.builtin_records.EngineName`, the field ``engine`` of
#: :class:`~seqlab.tasks.translation.options.EngineOptions`)
SEQLAB, CTRANSLATE2 = ENGINE_NAMES
#: ``seqlab serve --engine auto``: CTranslate2 where it decodes the model and is installed
AUTO = SERVER_ENGINE_NAMES[0]
#: the engines that decode a translation model (the choices of ``seqlab translate --engine``)
ENGINES = ENGINE_NAMES
#: every name an engine setting accepts, and the engine it names: ``pytorch`` is deprecated
ENGINE_SPELLINGS = {SEQLAB: SEQLAB, CTRANSLATE2: CTRANSLATE2, "pytorch": SEQLAB}
#: ``seqlab serve --engine``'s choices
SERVER_ENGINES = SERVER_ENGINE_NAMES


def engine_name(spelling: str) -> str:
    """The engine ``spelling`` names: ``seqlab`` or ``ctranslate2``; ``pytorch`` is read as
    ``seqlab`` with a deprecation warning (:func:`~seqlab.deprecation.renamed_value`)."""
    name = renamed_value("engine", spelling)
    if name not in ENGINES:
        raise SeqlabError(f"--engine must be {' or '.join(ENGINES)}, not {spelling!r}")
    return str(name)


def engine_argument(text: str) -> str:
    """``--engine``'s argument type: the engine's name, ``pytorch`` read as ``seqlab`` with its
    deprecation warning (any other value is left to the parser's choices)."""
    return str(renamed_value("engine", text))


def ctranslate2_refusal(model: Any) -> str | None:
    """Why CTranslate2 cannot decode a translation model of config ``model`` (a run's
    ``cfg.model``), or None when it can: a Transformer whose attention and position scheme the
    export can write (:func:`~seqlab.export.ctranslate2.scheme_problem`)."""
    if model.arch != "transformer":
        return f"CTranslate2 runs Transformer translation models, not model.arch={model.arch}"
    problem = scheme_problem(model)
    return None if problem is None else f"CTranslate2 cannot hold {problem}"


def engine_decodes(engine: str, model: Any) -> bool:
    """Whether ``engine`` decodes translation models of config ``model`` (a run's ``cfg.model``;
    a ``model.arch`` string is judged by its architecture alone): seqlab's own search every one,
    CTranslate2 the Transformers it can hold (:func:`ctranslate2_refusal`)."""
    name = ENGINE_SPELLINGS.get(engine)
    if name != CTRANSLATE2:
        return name == SEQLAB
    if isinstance(model, str):
        return model == "transformer"
    return ctranslate2_refusal(model) is None


def check_engine(
    engine: str, quantize: str | None, model: Any, need_weights: bool = False, device: str = "cpu"
) -> None:
    """Refuse an engine setting before any work: the one place these rules are written (the
    command line, the Python API and the server go through it). ``model``: the run's
    ``cfg.model``.

    ``ctranslate2`` runs the Transformer models whose scheme the export can hold
    (:func:`ctranslate2_refusal`; the error names ``--engine seqlab``), in a compute type this CPU
    supports (``quantize``), and returns no attention weights.
    """
    name = engine_name(engine)
    if quantize and name != CTRANSLATE2:
        raise SeqlabError("--quantize applies to --engine ctranslate2")
    if name == CTRANSLATE2:
        refusal = ctranslate2_refusal(model)
        if refusal is not None:
            raise SeqlabError(
                f"--engine ctranslate2: {refusal}; use --engine seqlab (seqlab serve: --engine "
                "auto or seqlab), which decodes every model"
            )
        require_ctranslate2()
        check_compute_type(quantize, device)  # on the device the model computes on
        if need_weights:
            raise SeqlabError(
                "--attention-png needs --engine seqlab (CTranslate2 returns no attention)"
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


#: batches seqlab's own search decodes at once in this process (:func:`give_cores_to_seqlab`)
_SEQLAB_WORKERS = 1


def give_cores_to_seqlab(threads: int = 0, workers: int = 0) -> None:
    """Lay out the process's cores for seqlab's own search: ``workers`` batches decoded at once
    from as many threads, each batch by ``threads / workers`` PyTorch threads (``threads`` 0:
    PyTorch's count; ``workers`` 0: one per thread). Several single-threaded workers keep the
    cores busier than one batch with several threads (between its small products a batch leaves
    the other cores idle), as CTranslate2's ``inter_threads`` do: on 2 cores, 1.2–1.4× faster
    (``benchmarks/translation_decoding.py`` times both layouts). ``seqlab translate`` and
    ``seqlab evaluate`` call it (``--threads``, ``--workers``); the Python API decodes one batch
    at a time with every thread unless a program calls it.

    Raises:
        SeqlabError: more workers than threads.
    """
    global _SEQLAB_WORKERS
    threads = threads or torch.get_num_threads()
    workers = workers or threads
    if workers > threads:
        raise SeqlabError(f"{workers} workers need at least {workers} threads, not {threads}")
    torch.set_num_threads(threads // workers)
    _SEQLAB_WORKERS = workers


@contextmanager
def cores_for_seqlab(workers: int = 0) -> Iterator[None]:
    """For the duration, seqlab's own search decodes ``workers`` batches at once (0: one per
    thread) on the process's threads (:func:`give_cores_to_seqlab`); then the thread count and
    the layout are restored. Training's validation decodes so between its steps."""
    global _SEQLAB_WORKERS
    threads, before = torch.get_num_threads(), _SEQLAB_WORKERS
    give_cores_to_seqlab(threads, min(workers or threads, threads))
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        _SEQLAB_WORKERS = before


class SeqlabSearch:
    """seqlab's own search (:func:`~seqlab.models.search.greedy_search`,
    :func:`~seqlab.models.search.beam_search`) on ``model``, in ``precision``, decoding as many
    batches at once as :func:`give_cores_to_seqlab` set (one by default)."""

    def __init__(self, model: torch.nn.Module, precision: str | None) -> None:
        self.model, self.precision = model, precision
        self.workers = _SEQLAB_WORKERS

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
