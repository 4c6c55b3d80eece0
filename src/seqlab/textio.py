"""Reading the user's text, line by line, by one rule: UTF-8, strict, ``.gz`` allowed.

The command line reads its inputs and standard input with it, and a task reads the files it
scores (``seqlab evaluate --src FILE``) with it, so a byte that is not UTF-8 is the same error,
naming the file and line, wherever it is met.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from seqlab.errors import SeqlabError


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
    counting from ``first_line``), split at ``\n`` (a ``\r`` before it and a leading byte-order
    mark are removed). The one reading rule of files and standard input."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + first_line
        raise SeqlabError(
            f"{where}:{line}: not valid UTF-8 ({exc.reason}); expected UTF-8 text"
        ) from None
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()  # the line end of the last line
    return [line.removesuffix("\r") for line in lines]
