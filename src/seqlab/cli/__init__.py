"""The ``seqlab`` command line: parsing and printing only; the work is in the library.

Each module adds its subcommands (``add_commands``). User-facing errors
(:class:`~seqlab.errors.SeqlabError`) are printed as ``seqlab: error: …`` without a traceback
and exit with status 2, as argparse's own errors do.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Sequence

from seqlab.cli import data, export, infer, tools, train
from seqlab.errors import SeqlabError, TrainingInterrupted


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seqlab", description="Sequence models from RNNs to the Transformer."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (data, train, infer, export, tools):
        module.add_commands(sub)
    return parser


def _format_warning(message, category, filename, lineno, line=None) -> str:
    return f"seqlab: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # lines reach a file or pipe as they are written
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    warnings.formatwarning = _format_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except TrainingInterrupted as exc:
        print(f"seqlab: {exc}", file=sys.stderr)
        return 130
    except SeqlabError as exc:
        print(f"seqlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seqlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
