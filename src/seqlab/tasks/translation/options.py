"""The options of ``seqlab translate`` and ``seqlab evaluate`` for a translation run, declared
once: the decoding options are two frozen models (:class:`DecodeOptions` for ``evaluate``,
:class:`TranslateOptions` for ``translate``), from which the command line's flags, the keyword
arguments of :class:`~seqlab.tasks.translation.Translator`'s methods, ``POST /translate``'s
request body and the reference pages derive (:class:`~seqlab.tasks.options.CommandOptions`).
How the commands run (the engine, its compute type, the cores, an ensemble, the heatmaps) is a
third model, :class:`EngineOptions` (:class:`TranslateEngineOptions` for ``translate``), whose
fields are flags and keyword arguments but no request's; the files read and written are
:data:`OPTIONS`.

**Decoding options** (:meth:`DecodeOptions.decode`): the run's ``decode`` section, changed by
``beam``, ``nbest`` and ``length_penalty``. ``beam=1`` is greedy search, ``beam=K > 1`` beam search
of width K; ``nbest`` hypotheses per sentence need a beam at least that wide (greedy has one); the
length penalty α ranks beam hypotheses by ``log_prob / length^α`` (Wu et al. 2016 use a smoothed
variant; fairseq's ``--lenpen`` is this one), so it needs a beam. Anything else is refused, never
silently adjusted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BeforeValidator, Field, PositiveInt

from seqlab.builtin_records import EngineName, QuantizeType
from seqlab.config import DecodeConfig
from seqlab.deprecation import renamed_value
from seqlab.errors import SeqlabError
from seqlab.storage.outputs import FILE_RULE, RULE
from seqlab.tasks.options import CommandOptions, Option, Role
from seqlab.tasks.translation.engines import SEQLAB

#: the largest length penalty accepted (``decode.length_penalty``'s bound)
MAX_LENGTH_PENALTY = 10.0


class DecodeOptions(CommandOptions):
    """How to decode (``seqlab evaluate``, :meth:`~seqlab.tasks.translation.Translator.translate`,
    ``score``, ``evaluate``): None keeps the run's ``decode`` section."""

    metavars: ClassVar[dict[str, str]] = {"length_penalty": "ALPHA"}

    beam: PositiveInt | None = Field(
        None,
        title="beam size",
        description="beam size; 1 = greedy (default: the run's decode section)",
    )
    length_penalty: float | None = Field(
        None,
        ge=0.0,
        le=MAX_LENGTH_PENALTY,
        allow_inf_nan=False,
        title="length penalty",
        description="beam search ranks by log_prob / length^ALPHA: 0 = raw log-probability, 1 = "
        "per-token average (needs a beam; default: the run's decode section)",
    )

    def decode(self, run: DecodeConfig) -> DecodeConfig:
        """The run's decoding (``run``) changed by these options, or a
        :class:`~seqlab.errors.SeqlabError` saying which option needs which other (see the module
        docstring): what the options mean for this run, worked out once per request."""
        d = run.model_copy()
        if self.beam is not None:
            d.strategy = "greedy" if self.beam == 1 else "beam"
            d.beam_size = self.beam if self.beam > 1 else d.beam_size
        width = d.beam_size if d.strategy == "beam" else 1
        if self.length_penalty is not None:
            if width == 1:
                raise SeqlabError(
                    "a length penalty ranks the hypotheses of a beam search, but decoding is "
                    "greedy search; ask for a beam too (e.g. --beam 5 --length-penalty "
                    f"{self.length_penalty:g})"
                )
            d.length_penalty = float(self.length_penalty)
        nbest: int | None = getattr(self, "nbest", None)
        want = nbest if nbest is not None else min(d.nbest, width)
        if want > width:
            now = f"beam {width}" if width > 1 else "greedy search"
            raise SeqlabError(
                f"nbest {want} needs a beam of at least {want}, but decoding is {now}; "
                f"ask for a beam too (e.g. --beam {max(want, 5)} --nbest {want})"
            )
        d.nbest = want
        return d


class TranslateOptions(DecodeOptions):
    """``seqlab translate``'s decoding, ``POST /translate``'s, and that of
    :meth:`~seqlab.tasks.translation.Translator.predict` and ``hypotheses``: a
    :class:`DecodeOptions` with ``nbest``."""

    nbest: PositiveInt | None = Field(
        None,
        description="hypotheses per sentence, best first (needs a beam at least this wide); "
        "seqlab translate prints index, rank, score, text",
    )


def _engine_spelling(value: object) -> object:
    """``pytorch``, the deprecated name of ``seqlab``, read as it with its warning (at each edge:
    a flag, a keyword argument)."""
    return renamed_value("engine", value)


class EngineOptions(CommandOptions):
    """How ``seqlab translate`` and ``evaluate`` run, besides the decoding: the engine and its
    compute type (keyword arguments of :class:`~seqlab.tasks.translation.Translator`'s methods
    too), and what the command line alone reads (role ``cli``): the cores and the ensemble.
    ``seqlab serve`` sets the engine, compute type and cores once for the server
    (:mod:`seqlab.cli.serve`), so no request carries them."""

    metavars: ClassVar[dict[str, str]] = {"threads": "N", "workers": "N", "ensemble": "RUN_DIR"}
    roles: ClassVar[dict[str, Role]] = {"threads": "cli", "workers": "cli", "ensemble": "cli"}
    in_python: ClassVar[dict[str, str]] = {
        "threads": "torch.set_num_threads(N)",
        "workers": "seqlab.tasks.translation.engines.give_cores_to_seqlab(threads, workers)",
        "ensemble": "translator.ensemble_with(run_dirs)",
    }

    engine: Annotated[EngineName, BeforeValidator(_engine_spelling)] = Field(
        SEQLAB,
        description="decode with seqlab's own search or the model exported to CTranslate2 (see "
        "seqlab.tasks.translation.engines); pytorch: the deprecated name of seqlab",
    )
    quantize: QuantizeType | None = Field(
        None,
        description="ctranslate2: quantized weights (e.g. int8); only the types this CPU runs "
        "are accepted (the error lists them)",
    )
    threads: PositiveInt | None = Field(
        None, description="decoding threads (default: every core PyTorch uses)"
    )
    workers: PositiveInt | None = Field(
        None,
        description="batches decoded at once, from as many threads sharing --threads "
        "(CTranslate2's inter_threads; default: one per thread)",
    )
    ensemble: tuple[str, ...] | None = Field(
        None,
        description="decode with these trained runs too (each at --which), averaging the "
        "models' next-token probabilities (their vocabularies and tokenizers must be this run's)",
    )


class TranslateEngineOptions(EngineOptions):
    """``seqlab translate``'s :class:`EngineOptions` and its figures."""

    metavars: ClassVar[dict[str, str]] = {**EngineOptions.metavars, "attention_png": "DIR"}
    roles: ClassVar[dict[str, Role]] = {**EngineOptions.roles, "attention_png": "figure_dir"}
    figures: ClassVar[dict[str, str]] = {"attention_png": "attention heatmaps"}

    attention_png: str | Path | None = Field(
        None, description=f"write one source×output heatmap per sentence into DIR: {RULE}"
    )


#: ``seqlab translate`` / ``evaluate``'s options for a translation run besides the decoding and
#: engine ones: the files read and written
OPTIONS: tuple[Option, ...] = (
    Option(
        "--input",
        "one sentence a line (default: stdin)",
        ("translate",),
        role="cli",
        metavar="FILE",
    ),
    Option(
        "--src",
        "your source sentences (text or .gz)",
        ("evaluate",),
        role="file",
        metavar="FILE",
    ),
    Option("--ref", "their references, line by line", ("evaluate",), role="file", metavar="FILE"),
    Option(
        "--output",
        f"also write the hypotheses into FILE (atomically): {FILE_RULE}",
        ("evaluate",),
        role="output",
        metavar="FILE",
    ),
)
#: what ``seqlab evaluate`` scores
USAGE: dict[str, str] = {
    "evaluate": "a translation model is scored on --split, or on --src FILE with --ref FILE"
}
