"""The options of ``seqlab translate`` and ``seqlab evaluate`` for a translation run
(:attr:`~seqlab.tasks.translation.Translator.options`,
:attr:`~seqlab.tasks.translation.Translator.usage`) and their checks (:func:`check_options`,
behind :meth:`~seqlab.tasks.translation.Translator.check`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seqlab.errors import SeqlabError
from seqlab.storage.outputs import FILE_RULE, RULE
from seqlab.tasks.options import Option
from seqlab.tasks.translation.decoding import decode_options
from seqlab.tasks.translation.engines import ENGINES, check_engine

#: ``seqlab translate`` / ``evaluate``'s options for a translation run
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
        "--beam",
        "beam size; 1 = greedy (default: the run's decode section)",
        ("translate", "evaluate"),
        type="positive_int",
    ),
    Option(
        "--nbest",
        "print the K best hypotheses (needs a beam >= K): index, rank, score, text",
        ("translate",),
        type="positive_int",
    ),
    Option(
        "--length-penalty",
        "beam search ranks by log_prob / length^ALPHA: 0 = raw log-probability, 1 = "
        "per-token average (default: the run's decode section)",
        ("translate", "evaluate"),
        type="non_negative_float",
        metavar="ALPHA",
    ),
    Option(
        "--output",
        f"also write the hypotheses into FILE (atomically): {FILE_RULE}",
        ("evaluate",),
        role="output",
        metavar="FILE",
    ),
    Option(
        "--attention-png",
        f"write one source×output heatmap per sentence into DIR: {RULE}",
        ("translate",),
        role="figure_dir",
        metavar="DIR",
        figure="attention heatmaps",
    ),
    Option(
        "--ensemble",
        "decode with these trained runs too (each at --which), averaging the models' "
        "next-token probabilities (their vocabularies and tokenizers must be this run's)",
        ("translate", "evaluate"),
        type="paths",
        role="cli",
        metavar="RUN_DIR",
    ),
    Option(
        "--engine",
        "decode with seqlab's own search (pytorch, or seqlab) or the model exported to "
        "CTranslate2 (see seqlab.tasks.translation.engines)",
        ("translate", "evaluate"),
        choices=ENGINES,
        default="pytorch",
    ),
    Option(
        "--quantize",
        "ctranslate2: quantized weights (e.g. int8); only the types this "
        "CPU runs are accepted (the error lists them)",
        ("translate", "evaluate"),
        choices=("int8", "int16", "bfloat16"),
    ),
)
#: what ``seqlab evaluate`` scores
USAGE: dict[str, str] = {
    "evaluate": "a translation model is scored on --split, or on --src FILE with --ref FILE"
}


def check_options(translator: Any, options: Mapping[str, Any]) -> None:
    """The decoding options (:func:`~seqlab.tasks.translation.decoding.decode_options`), the
    engine (:func:`~seqlab.tasks.translation.engines.check_engine`, and an ensemble's) and
    attention heatmaps, which need a model that attends to the source; ``translator``: a
    :class:`~seqlab.tasks.translation.Translator`
    (:meth:`~seqlab.tasks.translation.Translator.check` calls this)."""
    decode_options(
        translator.cfg.decode,
        options.get("beam"),
        options.get("nbest"),
        options.get("length_penalty"),
    )
    heatmaps = bool(options.get("attention_png"))
    translator.check_ensemble_engine(options.get("engine") or "pytorch")
    check_engine(
        options.get("engine") or "pytorch",
        options.get("quantize"),
        translator.cfg.model.arch,
        need_weights=heatmaps,
    )
    if heatmaps and not translator.has_attention:
        raise SeqlabError(
            f"--attention-png: model.arch={translator.cfg.model.arch} has no attention over the "
            "source to draw (it encodes the source into one vector)"
        )
