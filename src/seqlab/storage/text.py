"""Reading the user's text, line by line, by one rule: UTF-8, strict, ``.gz`` allowed.

The command line reads its inputs and standard input with it, and a task reads the files it
scores (``seqlab evaluate --src FILE``) with it, so a byte that is not UTF-8 is the same error,
naming the file and line, wherever it is met.

Lines end at ``\\n`` (or ``\\r\\n``) and nowhere else. The other characters that Python's
``str.splitlines`` (and other tools) end a line at — a lone ``\\r`` (old Mac files), ``\\x0b``,
``\\x0c``, ``\\x1c``–``\\x1e``, ``\\x85``, U+2028, U+2029 (:data:`ODD_LINE_BREAKS`) — would make
one line of seqlab's two of theirs, merging sentences: a file or standard input holding one is
refused, naming the line and the character, and so is a text given to the Python API or the
server (:func:`check_line_breaks`).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from seqlab.errors import SeqlabError

#: line breaks other than ``\\n`` and ``\\r\\n`` (those of ``str.splitlines``), by name
ODD_LINE_BREAKS = {
    "\r": "CARRIAGE RETURN",
    "\x0b": "LINE TABULATION",
    "\x0c": "FORM FEED",
    "\x1c": "FILE SEPARATOR",
    "\x1d": "GROUP SEPARATOR",
    "\x1e": "RECORD SEPARATOR",
    "\x85": "NEXT LINE",
    "\u2028": "LINE SEPARATOR",
    "\u2029": "PARAGRAPH SEPARATOR",
}
# a \\r is odd unless a \\n follows it (or it ends the text: the line end of an old Mac file's
# only line)
_ODD = re.compile("\r(?!\n|\\Z)|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def odd_line_break(text: str) -> tuple[int, str] | None:
    """The first line break of ``text`` other than ``\\n`` and ``\\r\\n`` (its index, and a
    description such as ``U+2028 (LINE SEPARATOR)``), or None."""
    found = _ODD.search(text)
    if found is None:
        return None
    char = found.group()
    return found.start(), f"U+{ord(char):04X} ({ODD_LINE_BREAKS[char]})"


def _fix(text: str, index: int) -> str:
    hint = " (old Mac line ends? `tr '\\r' '\\n'` converts them)" if text[index] == "\r" else ""
    return (
        "a line break that seqlab does not split at: lines end at \\n (or \\r\\n) only; make it "
        f"\\n to start a new line, or a space to keep one line{hint}"
    )


#: set inside :func:`own_data` (per thread and per asyncio task)
_OWN_DATA: ContextVar[bool] = ContextVar("seqlab_own_data", default=False)


@contextmanager
def own_data() -> Iterator[None]:
    """Inside this block (this thread or asyncio task only) :func:`check_line_breaks` lets
    every text pass: the texts are a run's own dataset (validation, ``evaluate --split``), read
    by its dataset's rules when the run trained, not what a user gives."""
    token = _OWN_DATA.set(True)
    try:
        yield
    finally:
        _OWN_DATA.reset(token)


def check_line_breaks(text: str, where: str) -> None:
    """Refuse ``text`` (given to the API or the server, named ``where``, e.g. ``sentence 2``)
    holding a line break other than ``\\n`` and ``\\r\\n`` (:data:`ODD_LINE_BREAKS`); inside
    :func:`own_data`, nothing.

    Raises:
        SeqlabError: naming ``where``, the character and where it is.
    """
    if _OWN_DATA.get():
        return
    found = odd_line_break(text)
    if found is not None:
        index, name = found
        raise SeqlabError(f"{where} holds {name} at character {index + 1}, {_fix(text, index)}")


def read_lines(path: str | Path, what: str = "input") -> list[str]:
    """Lines of a UTF-8 text file (``.gz`` allowed), without line ends.

    Raises:
        SeqlabError: missing file, a directory, or bytes that are not UTF-8 (with the line).
    """
    path = Path(path)
    if not path.exists():
        raise SeqlabError(f"{what} file not found: {path}")
    if path.is_dir():
        raise SeqlabError(
            f"{what} {path} is a directory; expected a text file, one sentence a line"
        )
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise SeqlabError(f"{path}: not a readable gzip file ({exc})") from None
    return decode_lines(raw, str(path))


def decode_lines(raw: bytes, where: str, first_line: int = 1) -> list[str]:
    """Lines of UTF-8 bytes (strict: an undecodable byte is an error naming ``where:line``,
    counting from ``first_line``), split at ``\\n`` (a ``\\r`` before it and a leading byte-order
    mark are removed); any other line break (:data:`ODD_LINE_BREAKS`) is an error naming the line,
    the column and the character. The one reading rule of files and standard input."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + first_line
        raise SeqlabError(
            f"{where}:{line}: not valid UTF-8 ({exc.reason}); expected UTF-8 text"
        ) from None
    text = text.removeprefix("\ufeff")
    found = odd_line_break(text)
    if found is not None:
        index, name = found
        line = text.count("\n", 0, index) + first_line
        column = index - (text.rfind("\n", 0, index) + 1) + 1
        raise SeqlabError(
            f"{where}:{line}: {name} at column {column}, {_fix(text, index)}; nothing was read"
        )
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the line end of the last line
    return [line.removesuffix("\r") for line in lines]
