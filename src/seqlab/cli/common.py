"""Argument types and file helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqlab.errors import SeqlabError
from seqlab.textio import decode_lines
from seqlab.textio import read_lines as read_lines  # the commands read files by one rule


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
    return value


#: the largest seed: a 32-bit one (PyTorch's generators take 64 bits, but a seed is also mixed
#: with epoch numbers, and must stay inside them)
MAX_SEED = 2**32 - 1


def seed_int(text: str) -> int:
    """An argparse type: a random seed, an integer from 0 to :data:`MAX_SEED`."""
    value = _int_at_least(text, 0)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed is at most {MAX_SEED} (2**32 - 1), got {value}")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a finite number (not nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text[:40]}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text[:40]}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text[:40]}")
    return value


#: how standard input is named in messages
STDIN = "<stdin>"


def read_stdin_lines() -> list[str]:
    """Every line of standard input, read by the rule of files (:func:`decode_lines`)."""
    return decode_lines(_stdin_bytes(_stdin_stream().read()), STDIN)


def read_stdin_line(number: int) -> str | None:
    """The next line of standard input (line ``number``, for messages), or None at its end."""
    raw = _stdin_stream().readline()
    if not raw:
        return None
    return (decode_lines(_stdin_bytes(raw), STDIN, number) or [""])[0]


def _stdin_stream() -> Any:
    # the bytes under sys.stdin; a text stream put in its place (tests, embedding) has none
    stream = sys.stdin
    return stream.buffer if hasattr(stream, "buffer") else stream


def _stdin_bytes(data: bytes | str) -> bytes:
    # text from a text stream is turned back into its bytes (surrogate escapes included), so
    # that decode_lines refuses undecodable input from it as well
    if isinstance(data, bytes):
        return data
    try:
        return data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return data.encode("utf-8", "surrogatepass")


def check_writable(path: str | Path, what: str = "--output") -> Path:
    """Fail now, before any long work, if ``path`` cannot be written, or is a symbolic link or
    special file that writing would replace (seqlab replaces only regular files), or a file of a
    training run (:func:`seqlab.outputs.check_not_run_file`)."""
    from seqlab.io import check_replaceable
    from seqlab.outputs import check_not_run_file

    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise SeqlabError(f"{what} {path} is a directory; give a file name")
    check_replaceable(path, what)
    check_not_run_file(path, what)
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise SeqlabError(f"{what} {path}: cannot write into {parent}")
    if path.exists() and not os.access(path, os.W_OK):
        raise SeqlabError(f"{what} {path}: the file is not writable")
    return path


def check_writable_dir(path: str | Path, what: str) -> Path:
    """Fail now if directory ``path`` cannot be created or written into."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SeqlabError(f"{what} {path} exists and is not a directory")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SeqlabError(f"{what} {path}: cannot write into {probe}")
    return path


#: ``--force``, as every command that writes a single file offers it (:func:`add_force`)
FORCE_HELP = (
    "replace a file at an output path that seqlab did not write, or that changed since "
    "(without --force it is refused before any work; a symbolic link or device, a training "
    "run's own file or an input of the command is refused even so)"
)


def add_force(p: argparse.ArgumentParser) -> None:
    """The ``--force`` of a command that writes a single file (:func:`writes_file`)."""
    p.add_argument("--force", action="store_true", help=FORCE_HELP)


def writes_file(
    option: str, func: Callable[[argparse.Namespace], int], what: str | None = None
) -> Callable[[argparse.Namespace], int]:
    """``func``, with the file ``args.<option>`` (when given) held to the rule of
    :mod:`seqlab.outputs`: checked before any work (:func:`check_writable`, then replaced only if
    seqlab wrote it, or with ``--force``), recorded as seqlab's once written."""
    what = what or "--" + option.replace("_", "-")

    def run(args: argparse.Namespace) -> int:
        path = getattr(args, option, None)
        if not path:
            return func(args)
        from seqlab.outputs import output_file

        check_writable(path, what)
        with output_file(path, what, force=getattr(args, "force", False)):
            return func(args)

    return run


def writes_into(
    option: str, func: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """``func``, with the output folder ``args.<option>`` (when given) held to the rule of
    :mod:`seqlab.outputs`: checked before any work, its files recorded as seqlab's after."""
    what = "--" + option.replace("_", "-")

    def run(args: argparse.Namespace) -> int:
        folder = getattr(args, option, None)
        if not folder:
            return func(args)
        from seqlab.outputs import output_dir

        with output_dir(folder, what):
            return func(args)

    return run
