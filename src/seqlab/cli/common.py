"""Argument types and file helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

from seqlab.errors import SeqlabError


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


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text[:40]}")
    return value


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
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SeqlabError(f"{path}:{line}: not valid UTF-8 ({exc.reason})") from None
    return text.splitlines()


def check_writable(path: str | Path, what: str = "--output") -> Path:
    """Fail now, before any long work, if ``path`` cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise SeqlabError(f"{what} {path} is a directory; give a file name")
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
