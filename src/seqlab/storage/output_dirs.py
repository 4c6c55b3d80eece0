"""Output folders (``--attention-png DIR``, ``diagnose gradients --out DIR``, ``demo NAME --out
DIR``, ``bench layers --out DIR``): checked before any work (:func:`check_output_dir`), and
written under an open manifest that lists what the command wrote (:func:`output_dir`). The
rule, and what the manifest holds, are :mod:`seqlab.storage.outputs`'s; its records (the
manifest, ``.seqlab-files.json``) are read with its functions.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqlab.atomic import atomic_write_json
from seqlab.errors import SeqlabError
from seqlab.storage.outputs import (
    FORMAT,
    MANIFEST,
    _is_record,
    _locked,
    _manifest,
    _read,
    _unchanged,
    held,
    holding,
    recorded_files,
    sha256_file,
)

#: seconds between the renewals of an open manifest's modification time
HEARTBEAT = 2.0
#: seconds without a renewal after which an open manifest's command is taken as gone
STALE = 60.0


@dataclass(frozen=True)
class _Open:
    """The ``open`` entry of a manifest: a command writing into the folder, or killed doing so.

    Attributes:
        pid, host: its process.
        started: the manifest's modification time (ns) when the command began writing.
        beat: the manifest's modification time now (ns): the command's last sign of life.
    """

    pid: int
    host: str
    started: int
    beat: int

    @classmethod
    def read(cls, directory: Path) -> _Open | None:
        data = _read(directory / MANIFEST, FORMAT)
        entry = data.get("open") if data is not None else None
        try:
            beat = os.stat(directory / MANIFEST).st_mtime_ns
            return cls(int(entry["pid"]), str(entry["host"]), int(entry["started_ns"]), beat)
        except (OSError, TypeError, KeyError, ValueError):
            return None

    def running(self) -> bool:
        """Whether the command may still be writing: renewed within :data:`STALE` seconds and,
        on this host, its process alive."""
        if time.time_ns() - self.beat > STALE * 1e9:
            return False
        if self.host != socket.gethostname():
            return True
        if self.pid == os.getpid():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # alive, another user's
        return True

    def wrote(self, mtime_ns: int) -> bool:
        """Whether a file modified at ``mtime_ns`` was written while the command ran."""
        return self.started <= mtime_ns <= self.beat + 2 * HEARTBEAT * 1e9


def _entries(directory: Path) -> Iterator[tuple[str, Path]]:
    """Every entry under ``directory`` but folders: (relative path, path)."""
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        for name in dirs:  # a link to a folder is listed here and never walked into
            if (here / name).is_symlink():
                yield str((here / name).relative_to(directory)), here / name
        for name in files:
            yield str((here / name).relative_to(directory)), here / name


def _survey(directory: Path, limit: int | None = None) -> tuple[dict[str, str], list[str]]:
    """(the folder's files that are seqlab's, relative path -> SHA-256; the files that are not).

    seqlab's: listed unchanged in the manifest, or written by a command killed while writing
    there (:meth:`_Open.wrote`). Files a ``.seqlab-files.json`` lists unchanged, and the records
    themselves, are in neither. At most ``limit`` others are found in a folder seqlab never
    marked (``--out ~``: the whole home folder is not walked to say no)."""
    listed = _manifest(directory)
    opened = _Open.read(directory) if listed is not None else None
    singles: dict[Path, dict[str, str]] = {}
    ours: dict[str, str] = {}
    foreign: list[str] = []
    for rel, path in _entries(directory):
        if _is_record(rel, path):
            continue
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            single = singles.setdefault(path.parent, recorded_files(path.parent)).get(path.name)
            want = (listed or {}).get(rel)
            claimed = opened is not None and opened.wrote(info.st_mtime_ns)
            digest = sha256_file(path) if single or want or claimed else None
            if digest is not None and digest == single:
                continue
            if digest is not None and (digest == want or claimed):
                ours[rel] = digest
                continue
        foreign.append(rel)
        if listed is None and limit is not None and len(foreign) >= limit:
            break
    return ours, sorted(foreign)


def foreign_files(directory: str | Path, limit: int | None = None) -> list[str]:
    """Files under ``directory`` that seqlab did not write there (or that changed since), as
    relative paths; at most ``limit`` of them in a folder seqlab never marked."""
    return _survey(Path(directory), limit)[1]


def check_output_dir(path: str | Path, what: str) -> Path:
    """Refuse now, before any work and without writing, an output folder seqlab may not use.

    Raises:
        SeqlabError: ``path`` is a file, is being written by another command, holds files seqlab
            did not write (named), or cannot be written into.
    """
    path = Path(path)
    _check_dir(path, what)
    return path


def _check_dir(path: Path, what: str) -> dict[str, str]:
    """:func:`check_output_dir`; the folder's files that are seqlab's (:func:`_survey`)."""
    if path.exists() and not path.is_dir():
        raise SeqlabError(f"{what} {path} exists and is not a directory; give a directory")
    ours: dict[str, str] = {}
    if path.is_dir():
        opened = _Open.read(path)
        if opened is not None and opened.running():
            where = "" if opened.host == socket.gethostname() else f" on {opened.host}"
            raise SeqlabError(
                f"{what} {path} is being written by another seqlab command (pid {opened.pid}"
                f"{where}): wait for it to finish, or stop it, or choose another {what} (nothing "
                "was written)"
            )
        ours, foreign = _survey(path, limit=6)
        if foreign:
            shown = ", ".join(str(path / rel) for rel in foreign[:5])
            more = ", ..." if len(foreign) > 5 else ""
            changed = "" if _manifest(path) is None else " (or changed since)"
            raise SeqlabError(
                f"{what} {path} holds files seqlab did not write there{changed}: {shown}{more}; "
                "seqlab writes only into a new or empty directory, or one it wrote before, and "
                f"never replaces your files: move them away or choose another {what} (nothing "
                "was written, nothing was deleted)"
            )
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK):
        raise SeqlabError(f"{what} {path}: cannot write into {probe}")
    return ours


class _Writing:
    """A command writing into an output folder: its open manifest, written before the first
    file and renewed while the command runs (see :mod:`seqlab.storage.outputs`)."""

    def __init__(self, path: Path, ours: dict[str, str]) -> None:
        self.path, self.ours = path, ours
        self.had_manifest = _manifest(path) is not None
        self.created: Path | None = None  # the outermost folder made here
        missing = path
        while not missing.exists():
            self.created, missing = missing, missing.parent
        path.mkdir(parents=True, exist_ok=True)
        # the start is the manifest's own modification time: the clock that stamps the files
        self._write(ours)
        self.started = os.stat(path / MANIFEST).st_mtime_ns
        pid, host = os.getpid(), socket.gethostname()
        self._write(ours, {"pid": pid, "host": host, "started_ns": self.started})
        self._done = threading.Event()
        self._renewer = threading.Thread(target=self._renew, name="seqlab-output", daemon=True)
        self._renewer.start()

    def _write(self, files: dict[str, str], opened: dict[str, Any] | None = None) -> None:
        record: dict[str, Any] = {"format": FORMAT, "files": dict(sorted(files.items()))}
        atomic_write_json(self.path / MANIFEST, record | ({"open": opened} if opened else {}))

    def _renew(self) -> None:
        while not self._done.wait(HEARTBEAT):
            with contextlib.suppress(OSError):
                os.utime(self.path / MANIFEST)

    def close(self, succeeded: bool) -> None:
        """List the files the command wrote (modified since it began) in the manifest, closing
        it; if it succeeded, remove seqlab's earlier files it did not write again, else keep
        them listed. A command that wrote nothing leaves the folder as it found it."""
        self._done.set()
        self._renewer.join()
        written: dict[str, str] = {}
        for rel, path in _entries(self.path):
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or info.st_mtime_ns < self.started:
                continue
            if _is_record(rel, path):
                continue
            digest = sha256_file(path)
            if digest != recorded_files(path.parent).get(path.name):  # not a single file's
                written[rel] = digest
        kept = {}
        for rel, digest in self.ours.items():
            if rel in written or not _unchanged(self.path / rel, digest):
                continue
            if succeeded:
                self._remove(rel)
            else:
                kept[rel] = digest
        if written or self.had_manifest:
            self._write(kept | written)
            return
        (self.path / MANIFEST).unlink()
        folder = self.path
        while self.created is not None and folder != self.created.parent:
            with contextlib.suppress(OSError):  # not empty: the command made it, and kept it
                folder.rmdir()
            folder = folder.parent

    def _remove(self, rel: str) -> None:
        """Remove seqlab's earlier file ``rel``, and the folders under the output folder that
        this leaves empty."""
        path = self.path / rel
        path.unlink()
        for folder in path.parents:
            if folder == self.path or not folder.is_relative_to(self.path):
                break
            try:
                folder.rmdir()
            except OSError:  # not empty
                break


@contextlib.contextmanager
def output_dir(path: str | Path, what: str) -> Iterator[Path]:
    """The one check of an output folder, on every surface (``--attention-png DIR`` and a
    predictor's ``attention_png=DIR``): check ``path`` now (:func:`check_output_dir`) and open
    its manifest before anything is written; when the block ends, list what it wrote (and, if it
    succeeded, remove seqlab's earlier files it did not write again): see
    :mod:`seqlab.storage.outputs`. A folder already held by the command that called this
    (:func:`seqlab.storage.outputs.held`) is left to it."""
    path = Path(path)
    if held(path):
        yield path
        return
    with _locked(path.parent):  # two commands starting at once: one opens, the other is refused
        writing = _Writing(path, _check_dir(path, what))
    try:
        with holding(path):
            yield path
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a full disk: keep the first error
            writing.close(succeeded=False)
        raise
    writing.close(succeeded=True)


def api_output_dir(path: str | Path | None, keyword: str) -> contextlib.AbstractContextManager[Any]:
    """:func:`output_dir` as a predictor's method calls it for its keyword ``keyword``
    (``attention_png``): the folder is checked now, when called, before any work; the block
    that writes into it, later, opens and closes its manifest. No folder asked for: nothing
    checked (the block gets None). As on the command line, a folder holding the user's files
    is refused: they are never replaced or removed."""
    if not path:
        return contextlib.nullcontext()
    if not held(path):
        check_output_dir(path, keyword)
    return output_dir(path, keyword)
