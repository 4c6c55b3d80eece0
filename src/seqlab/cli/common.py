"""Argument types and file helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqlab.deprecation import RENAMED_FLAGS, flags_given_together, renamed_flag
from seqlab.errors import SeqlabError
from seqlab.storage.output_dirs import output_dir
from seqlab.storage.outputs import RULE, output_file
from seqlab.storage.outputs import check_writable as check_writable  # the commands' check
from seqlab.storage.text import decode_lines
from seqlab.storage.text import read_lines as read_lines  # the commands read files by one rule

#: the help of an ``--out`` folder of a command that writes one
OUT_HELP = f"output folder: {RULE}"


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


class Parser(argparse.ArgumentParser):
    """seqlab's parsers (every subcommand's: argparse gives subparsers their parent's class): an
    old flag of the command (:data:`seqlab.deprecation.RENAMED_FLAGS`, added by
    :func:`add_renamed_flags`) is read as the new one before parsing, so that a required new flag
    (``--run``) is satisfied by its old name too."""

    renamed: dict[str, str]

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        renamed = getattr(self, "renamed", None)
        if renamed:
            args = _rename_flags(list(sys.argv[1:] if args is None else args), renamed, self)
        return super().parse_known_args(args, namespace)


def _rename_flags(args: list[str], renamed: dict[str, str], parser: Parser) -> list[str]:
    """``args`` with each old flag spelled as its new one (one warning each); an option given
    by two of its names (``--horizon 4 --steps 3``) is an error naming them
    (:func:`seqlab.deprecation.flags_given_together`), where argparse would keep the last."""
    command = getattr(parser, "renamed_command", "")
    flags = args[: args.index("--")] if "--" in args else args  # then arguments, never flags
    spelled: dict[str, list[str]] = {}  # new flag -> its names given
    for token in flags:
        name = _full_flag(parser, token.partition("=")[0])
        new = renamed.get(name, name)
        if new in renamed.values():
            spelled.setdefault(new, []).append(name)
    for new, names in spelled.items():
        if len(set(names)) > 1:
            parser.error(flags_given_together(new, names))
    out = []
    for i, token in enumerate(args):
        if token == "--":
            return out + args[i:]
        name, eq, value = token.partition("=")
        if name in renamed:
            token = renamed_flag(command, name) + eq + value
        out.append(token)
    return out


def _full_flag(parser: argparse.ArgumentParser, name: str) -> str:
    """The option string that ``name`` gives (itself, or what argparse reads an unambiguous
    abbreviation as: ``--hor`` for ``--horizon``); ``name`` itself when it names none."""
    if not name.startswith("--") or name in parser._option_string_actions:
        return name
    found = [flag for flag in parser._option_string_actions if flag.startswith(name)]
    return found[0] if len(found) == 1 and parser.allow_abbrev else name


class _RenamedFlag(argparse.Action):
    """An old flag, hidden from ``--help``: given as it is spelled, :class:`Parser` has already
    read it as the new one; this action takes the rest (an abbreviation of it)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        self.command, self.new_dest = kwargs.pop("command"), kwargs.pop("new_dest")
        super().__init__(option_strings, argparse.SUPPRESS, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        renamed_flag(self.command, self.option_strings[0])
        setattr(namespace, self.new_dest, values)


def add_renamed_flags(p: argparse.ArgumentParser, command: str) -> None:
    """The old flags of ``seqlab <command>`` (:data:`seqlab.deprecation.RENAMED_FLAGS`), once its
    new flags are added: each parses as its new flag, with one warning per process, and is hidden
    from ``--help`` (the docs may name it in the changelog only)."""
    renamed = RENAMED_FLAGS.get(command, {})
    for old, new in renamed.items():
        action = p._option_string_actions[new]
        p.add_argument(
            old,
            action=_RenamedFlag,
            command=command,
            new_dest=action.dest,
            type=action.type,
            metavar=action.metavar,
            help=argparse.SUPPRESS,
        )
    p.renamed, p.renamed_command = dict(renamed), command  # type: ignore[attr-defined]


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
    :mod:`seqlab.storage.outputs`: checked before any work (:func:`check_writable`, then replaced
    only if seqlab wrote it, or with ``--force``), recorded as seqlab's once written
    (:func:`seqlab.storage.outputs.output_file`, the check the Python API makes too)."""
    what = what or "--" + option.replace("_", "-")

    def run(args: argparse.Namespace) -> int:
        path = getattr(args, option, None)
        if not path:
            return func(args)
        with output_file(path, what, force=getattr(args, "force", False)):
            return func(args)

    return run


def writes_into(
    option: str, func: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """``func``, with the output folder ``args.<option>`` (when given) held to the rule of
    :mod:`seqlab.storage.outputs`: checked before any work, its files recorded as seqlab's after."""
    what = "--" + option.replace("_", "-")

    def run(args: argparse.Namespace) -> int:
        folder = getattr(args, option, None)
        if not folder:
            return func(args)
        with output_dir(folder, what):
            return func(args)

    return run
