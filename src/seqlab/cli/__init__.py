"""The ``seqlab`` command line: parsing and printing only; the work is in the library.

Each module adds its subcommands (``add_commands``). User-facing errors
(:class:`~seqlab.errors.SeqlabError`) are printed as ``seqlab: error: …`` without a traceback
and exit with status 2, as argparse's own errors do. So are the streams' failures: a closed stdin
asked for input, stdout closed or on a full device, and files that cannot be written (a full
disk, a read-only folder). A reader that stops early (``seqlab translate … | head -1``) ends the
command quietly, as it ends ``cat``: no traceback, exit status 141 (128 + SIGPIPE). Only a closed
standard output or error counts as that reader (:class:`ReaderGone`): any other broken pipe or
socket is a failure, never a quiet end (``seqlab serve`` is not stopped by a client that leaves;
uvicorn ends that connection alone).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from seqlab.atomic import WRITE_ERRNOS
from seqlab.cli import data, demo, export, infer, serve, tools, train
from seqlab.cli.common import Parser
from seqlab.errors import SeqlabError, TrainingInterrupted
from seqlab.runtime.allocator import keep_freed_memory, use_huge_pages


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(  # its class is every subcommand's (old flags read as new ones)
        prog="seqlab", description="Sequence models from RNNs to the Transformer."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (data, train, infer, export, serve, tools, demo):
        module.add_commands(sub)
    return parser


def _format_warning(message, category, filename, lineno, line=None) -> str:
    return f"seqlab: warning: {message}\n"


class OutputError(SeqlabError):
    """Standard output cannot be written (closed, or a full device)."""


class ReaderGone(BrokenPipeError):
    """The reader of standard output or error stopped early (``| head -1``): the command ends
    quietly. Any other broken pipe (a socket, a subprocess's pipe) is not this."""


class _Stderr:
    """``sys.stderr`` whose closed pipe is a :class:`ReaderGone` (``seqlab … 2>&1 | head``)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError as exc:
            raise ReaderGone(*exc.args) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError as exc:
            raise ReaderGone(*exc.args) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Stdout:
    """``sys.stdout`` whose write failures are an :class:`OutputError` (a closed pipe is a
    :class:`ReaderGone`: the reader stopped early, which is not an error)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _fail(self, exc: OSError | None) -> OutputError:
        why = "it is closed" if exc is None else exc.strerror or str(exc)
        return OutputError(f"cannot write to standard output: {why}")

    def write(self, text: str) -> int:
        if self._stream is None:
            raise self._fail(None)
        try:
            return self._stream.write(text)
        except BrokenPipeError as exc:
            raise ReaderGone(*exc.args) from None
        except OSError as exc:
            raise self._fail(exc) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError as exc:
            raise ReaderGone(*exc.args) from None
        except OSError as exc:
            raise self._fail(exc) from None

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        if self._stream is None:
            raise self._fail(None)
        return getattr(self._stream, name)


class _ClosedStdin:
    """``sys.stdin`` when the shell closed it (``<&-``): reading it is a clear error."""

    def isatty(self) -> bool:
        return False

    def _fail(self) -> SeqlabError:
        return SeqlabError(
            "standard input is closed; give the input with --input FILE, or pipe it in"
        )

    def __iter__(self) -> Any:
        raise self._fail()

    def __getattr__(self, name: str) -> Any:
        raise self._fail()


def _silence_stdout(stream: Any) -> None:
    """Point the process's stdout at /dev/null, so that the output still buffered is not
    written again (and does not fail again) when Python exits."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _not_override(arg: str) -> bool:
    return arg.startswith("-") or "=" not in arg


def main(argv: Sequence[str] | None = None) -> int:
    use_huge_pages()  # before any command allocates a tensor (seqlab.runtime.allocator)
    keep_freed_memory()  # large freed buffers reused, not returned to the system and faulted in
    for stream in (sys.stdout, sys.stderr):  # lines reach a file or pipe as they are written
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    warnings.formatwarning = _format_warning
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # `seqlab train CONFIG --out RUN key=value`: overrides may come after the options
        if getattr(args, "overrides", None) is None or any(_not_override(a) for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides += extra
    func: Callable[[argparse.Namespace], int] = args.func
    stdout, stdin, stderr = sys.stdout, sys.stdin, sys.stderr
    sys.stdout = _Stdout(stdout)  # type: ignore[assignment]
    if stderr is not None:
        sys.stderr = _Stderr(stderr)  # type: ignore[assignment]
    if stdin is None:
        sys.stdin = _ClosedStdin()  # type: ignore[assignment]
    try:
        return _run(func, args, stdout)
    finally:
        sys.stdout, sys.stdin, sys.stderr = stdout, stdin, stderr


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, stdout: Any) -> int:
    try:
        return func(args)
    except TrainingInterrupted as exc:
        print(f"seqlab: {exc}", file=sys.stderr)
        return 130
    except OutputError as exc:
        _silence_stdout(stdout)
        print(f"seqlab: error: {exc}", file=sys.stderr)
        return 2
    except SeqlabError as exc:
        print(f"seqlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seqlab: interrupted", file=sys.stderr)
        return 130
    except ReaderGone:  # only standard output's or error's reader: any other pipe is a failure
        _silence_stdout(stdout)
        return 141
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            raise
        if exc.filename is None:  # a stream, perhaps stdout's buffer: do not fail again at exit
            _silence_stdout(stdout)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"seqlab: error: {where}{exc.strerror}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as exc:
        why = out_of_memory(exc)
        if why is None:
            raise
        print(f"seqlab: error: {why}", file=sys.stderr)
        return 2


#: what PyTorch says when a tensor cannot be allocated (too large for memory, or for its sizes)
_NO_MEMORY = ("can't allocate memory", "Storage size calculation overflowed", "out of memory")


def out_of_memory(exc: BaseException) -> str | None:
    """The one-line error for a tensor too large to allocate (sizes the user asked for: a model's
    width, a sequence length, a batch), or None if ``exc`` is another failure."""
    text = str(exc)
    if not isinstance(exc, MemoryError) and not any(s in text for s in _NO_MEMORY):
        return None
    wanted = text.split("you tried to allocate ")[-1].split(".")[0] if "tried" in text else ""
    return (
        "not enough memory for the sizes asked for"
        + (f" (a tensor of {wanted})" if wanted else "")
        + ": choose smaller sizes (model width or layers, lengths, batch size)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
