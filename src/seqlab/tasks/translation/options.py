"""The options of ``seqlab translate`` and ``seqlab evaluate`` for a translation run
(:attr:`~seqlab.tasks.translation.Translator.options`,
:attr:`~seqlab.tasks.translation.Translator.usage`)."""

from __future__ import annotations

from seqlab.storage.outputs import FILE_RULE, RULE
from seqlab.tasks.options import Option
from seqlab.tasks.translation.engines import ENGINES

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
