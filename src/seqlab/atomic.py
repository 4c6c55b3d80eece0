"""Atomic file writes: write to a temporary file in the same folder, fsync, then rename.

A reader (or a resumed run) therefore sees either the old file or the complete new one, never a
partial write, even if the process is killed mid-write. Only a regular file is ever replaced: a
symbolic link, a device, a FIFO or a folder at ``path`` is refused (:func:`check_replaceable`),
never turned into a regular file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from seqlab.errors import CheckpointError, SeqlabError

_UMASK = os.umask(0)
os.umask(_UMASK)

#: errors of writing that the user can act on (a full disk or quota, a read-only or protected
#: folder): reported in one line, never as a traceback
WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}
)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def check_replaceable(path: str | Path, what: str = "") -> Path:
    """``path`` if it is absent or a regular file; anything else would be lost by replacing it.

    Raises:
        SeqlabError: ``path`` is a symbolic link, a directory, a device, a FIFO or a socket.
    """
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path  # nothing there to lose (a missing folder is reported by the write)
    if not stat.S_ISREG(mode):
        raise SeqlabError(
            f"{what + ' ' if what else ''}{path} is {_kind(mode)}; seqlab writes a regular file "
            "and will not replace it: give the name of a new or regular file (nothing was written)"
        )
    return path


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path``; on success it replaces ``path`` atomically.

    Raises:
        SeqlabError: ``path`` exists and is not a regular file (:func:`check_replaceable`).
    """
    path = check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual mode
        check_replaceable(path)  # again: it may have appeared while the file was written
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def temporary_folder(parent: str | Path, prefix: str, suffix: str = "") -> Path:
    """A new folder in ``parent`` to write into before it is renamed into place, with the
    usual mode (``0o777`` less the umask, as ``mkdir`` gives; ``mkdtemp`` makes ``0o700``, so
    a run shared with or served by another account could not be read)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    os.chmod(path, 0o777 & ~_UMASK)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def read_format_json(path: str | Path, fmt: str, what: str) -> dict[str, Any]:
    """A JSON object written with ``"format": fmt``; anything else is a
    :class:`~seqlab.errors.CheckpointError` naming the file (``what``: e.g. "classes file")."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise CheckpointError(f"{path}: not a seqlab {what} (format {fmt})")
    return data
