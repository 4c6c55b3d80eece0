"""``seqlab export``: a trained run for another inference engine."""

from __future__ import annotations

import argparse

import seqlab
from seqlab.cli.common import add_renamed_flags, check_writable_dir
from seqlab.errors import SeqlabError


def cmd_export(args: argparse.Namespace) -> int:
    from seqlab.export.ctranslate2 import (  # deferred: torch
        check_export_dir,
        export_ctranslate2,
        require_ctranslate2,
    )

    require_ctranslate2()
    check_export_dir(args.out, args.run)
    check_writable_dir(args.out, "--out")
    model = seqlab.load(args.run, args.which)
    if model.task != "translation" or model.cfg.model.arch != "transformer":
        raise SeqlabError(
            f"CTranslate2 export supports Transformer translation runs (model.arch: transformer); "
            f"{args.run} holds model.arch={model.cfg.model.arch}"
        )
    sizes = (len(model.vocabs.src_vocab), len(model.vocabs.tgt_vocab))
    origin = {"checkpoint": str(model.run.checkpoint)}
    out = export_ctranslate2(model.model, *sizes, args.out, origin, quantization=args.quantize)
    print(f"wrote {out}: a CTranslate2 model ({args.quantize or 'float32'} weights)")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a trained run to another inference engine")
    p.add_argument("--format", choices=["ctranslate2"], required=True)
    p.add_argument("--run", required=True, metavar="RUN_DIR", help="a trained run's directory")
    p.add_argument("--which", default="best", help="best | latest | a step number")
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="the exported model directory: a new or empty folder, or an earlier export by "
        "seqlab, which is replaced as a whole (a folder holding anything else is refused)",
    )
    p.add_argument(
        "--quantize",
        choices=["int8", "int16", "bfloat16"],
        help="a note: CTranslate2 quantizes at load",
    )
    add_renamed_flags(p, "export")
    p.set_defaults(func=cmd_export)
