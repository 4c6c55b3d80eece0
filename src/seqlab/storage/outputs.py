"""What seqlab may replace or remove where it writes a command's output.

Every file seqlab writes for a command is recorded as seqlab's with its SHA-256; only a file so
recorded and unchanged since is ever replaced or removed. Anything else at an output path is the
user's: the command is refused before any work, naming it, and nothing is written.

- A single file (``curves --png``, ``data stats --png``, ``evaluate --output/--png``,
  ``forecast --png``; :func:`output_file`): an existing file is replaced only
  if ``.seqlab-files.json`` beside it lists it (``{"format": "seqlab.files/1", "files": {NAME:
  SHA-256}}``, one per folder, merged under a lock on the folder so that commands writing other
  files there at once keep each other's entries) or an output folder's manifest does, or when the
  command is given ``--force``.
- A folder of figures and numbers (``--attention-png DIR``, ``diagnose gradients --out DIR``,
  ``demo NAME --out DIR``, ``bench layers --out DIR``; :func:`output_dir`): new, empty, or marked
  as seqlab's by ``DIR/.seqlab-output.json`` (``{"format": "seqlab.output/1", "files": {PATH:
  SHA-256}}``, paths relative to DIR). The manifest is written before the first file, with an
  ``open`` entry (the command's process, host and start, ``started_ns``); while the command runs
  the manifest's modification time is renewed every :data:`HEARTBEAT` seconds, and another
  command into the folder is refused, naming the process. A command that ends, by an error or
  Ctrl-C too, lists its files and closes the entry; one killed (SIGKILL, a power cut) leaves it:
  the next command into the folder takes the files modified between the start and the last
  renewal as seqlab's, and replaces them; a file older than the start, or put there after, is
  still the user's. When a command succeeds, seqlab's earlier files there that it did not write
  again are removed, so the folder and its manifest hold exactly its output. Files listed in a
  ``.seqlab-files.json`` are seqlab's but no folder command's: never refused, listed or removed
  by one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqlab.errors import SeqlabError
from seqlab.storage.atomic import atomic_write_json

MANIFEST = ".seqlab-output.json"
FORMAT = "seqlab.output/1"
#: the record of the single files seqlab wrote in a folder
FILES = ".seqlab-files.json"
FILES_FORMAT = "seqlab.files/1"
#: seconds between the renewals of an open manifest's modification time
HEARTBEAT = 2.0
#: seconds without a renewal after which an open manifest's command is taken as gone
STALE = 60.0

#: the rule, as the ``--help`` of each command that writes an output folder says it
RULE = (
    "a new or empty directory, or one seqlab wrote before: seqlab replaces only its own files "
    "there (removing those it does not write again) and refuses a directory holding anything "
    "else"
)
#: the rule, as the ``--help`` of each option that writes a single file says it
FILE_RULE = (
    "a new file, or one seqlab wrote and nobody changed since (listed in .seqlab-files.json "
    "beside it); any other file is refused unless --force (a symbolic link or device always)"
)


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_not_run_file(path: str | Path, what: str) -> Path:
    """Refuse a file to be written that belongs to a training run: its ``config.yaml``,
    ``run.json``, ``curves.png``, metrics, vocabularies, tokenizers, or anything under its
    ``checkpoints/`` or ``exports/`` (replacing one would break the run). A new file of another
    name in a run directory is allowed.

    Raises:
        SeqlabError: naming the run and its file (nothing is written).
    """
    from seqlab.storage.rundir import RunDir

    path = Path(path)
    full = Path(os.path.realpath(path.parent)) / path.name
    for folder in full.parents:
        run = RunDir(folder)
        if not (run.holds_training_files() or (folder / RunDir.CONFIG).is_file()):
            continue
        first = full.relative_to(folder).parts[0]
        if first not in RunDir.FILES and not first.startswith(".") and first not in _artefacts():
            return path
        raise SeqlabError(
            f"{what} {path} is a file of the training run {folder} ({first}); seqlab never "
            "replaces a run's own files: give another file name (nothing was written)"
        )
    return path


def _artefacts() -> set[str]:
    from seqlab.tasks import artefacts

    return artefacts()


def check_not_input(path: str | Path, inputs: dict[str, str | Path], what: str) -> Path:
    """Refuse an output file that is one of the command's own inputs (``{"--src": FILE}``):
    writing it would replace what is being read.

    Raises:
        SeqlabError: naming both options (nothing is written).
    """
    path = Path(path)
    for flag, given in inputs.items():
        other = Path(given)
        same = os.path.realpath(path) == os.path.realpath(other)
        if not same and path.exists() and other.exists():
            same = os.path.samefile(path, other)
        if same:
            raise SeqlabError(
                f"{what} {path} is also the input {flag} {given}: writing it would replace the "
                "input; give another file name (nothing was written)"
            )
    return path


# ----------------------------------------------------------------------------- records
@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``folder`` (or its nearest existing parent) while the block
    runs, so that commands updating seqlab's records there take turns and none loses another's
    entries. Where the filesystem offers no such lock, the block runs unlocked."""
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _read(path: Path, fmt: str) -> dict[str, Any] | None:
    """A record seqlab wrote at ``path`` (a JSON object of format ``fmt`` with ``files``), or
    None: absent, or not seqlab's."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != fmt:
        return None
    return data if isinstance(data.get("files"), dict) else None


def _listed(data: dict[str, Any] | None) -> dict[str, str] | None:
    return None if data is None else {str(k): str(v) for k, v in data["files"].items()}


def _manifest(directory: Path) -> dict[str, str] | None:
    """The files seqlab recorded in ``directory`` (relative path -> SHA-256), or None: unmarked."""
    return _listed(_read(directory / MANIFEST, FORMAT))


def recorded_files(folder: str | Path) -> dict[str, str]:
    """The single files seqlab wrote in ``folder`` (name -> SHA-256): its ``.seqlab-files.json``."""
    return _listed(_read(Path(folder) / FILES, FILES_FORMAT)) or {}


def _unchanged(path: Path, digest: str | None) -> bool:
    """Whether ``path`` is a regular file whose bytes have the SHA-256 ``digest``."""
    try:
        regular = digest is not None and stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
    return regular and sha256_file(path) == digest


def _is_record(rel: str, path: Path) -> bool:
    """Whether the entry ``rel`` of an output folder is one of seqlab's valid records."""
    if rel == MANIFEST:
        return _read(path, FORMAT) is not None
    return path.name == FILES and _read(path, FILES_FORMAT) is not None


# ------------------------------------------------------------------------- single files
def _ownership(path: Path) -> str:
    """``"seqlab's"``: a record lists ``path`` with its bytes as they are (its folder's
    ``.seqlab-files.json``, or the manifest of an output folder holding it); ``"changed"``: a
    record lists it, but it changed since; ``"user's"``: no record lists it."""
    digest = recorded_files(path.parent).get(path.name)
    if _unchanged(path, digest):
        return "seqlab's"
    named = digest is not None
    full = Path(os.path.realpath(path.parent)) / path.name
    for folder in full.parents:
        listed = _manifest(folder)
        if listed is not None:
            digest = listed.get(str(full.relative_to(folder)))
            if _unchanged(path, digest):
                return "seqlab's"
            named = named or digest is not None
            break
    return "changed" if named else "user's"


def check_output_file(path: str | Path, what: str, force: bool = False) -> Path:
    """Refuse now, before any work and without writing, to replace a file at ``path`` that
    seqlab did not write, or that changed since (:func:`_ownership`), unless ``force``; and a
    ``.seqlab-files.json`` beside it that is not seqlab's record, which recording would replace.

    Raises:
        SeqlabError: naming the file, and ``--force`` (nothing is written).
    """
    path = Path(path)
    record = path.parent / FILES
    if os.path.lexists(record) and _read(record, FILES_FORMAT) is None:
        raise SeqlabError(
            f"{what} {path}: {record} is not seqlab's record of the files it wrote there, and "
            "seqlab would replace it: move it away or choose another folder (nothing was written)"
        )
    if force or not os.path.lexists(path):
        return path
    owner = _ownership(path)
    if owner != "seqlab's":
        why = "changed since seqlab wrote it" if owner == "changed" else "seqlab did not write it"
        raise SeqlabError(
            f"{what} {path} exists and {why}; seqlab replaces only a file it wrote, unchanged "
            "since: pass --force to replace it, or choose another name (nothing was written)"
        )
    return path


def record_file(path: str | Path) -> None:
    """List ``path`` in ``.seqlab-files.json`` beside it as seqlab's, with its SHA-256 now
    (merged under the folder's lock with what other commands listed; entries whose file is gone
    are dropped)."""
    path = Path(path)
    folder = path.parent
    with _locked(folder):
        files = recorded_files(folder) | {path.name: sha256_file(path)}
        kept = {name: files[name] for name in sorted(files) if (folder / name).is_file()}
        atomic_write_json(folder / FILES, {"format": FILES_FORMAT, "files": kept})


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """(inode, modification time, size) of a regular file at ``path``, or None."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size) if stat.S_ISREG(info.st_mode) else None


@contextlib.contextmanager
def output_file(path: str | Path, what: str, force: bool = False) -> Iterator[Path]:
    """Check ``path`` now (:func:`check_output_file`); when the block ends, whether it succeeds
    or fails, record the file as seqlab's (:func:`record_file`) if the block wrote it."""
    path = check_output_file(path, what, force)
    before = _stamp(path)
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a full disk: keep the first error
            _record_if_written(path, before)
        raise
    _record_if_written(path, before)


def _record_if_written(path: Path, before: tuple[int, int, int] | None) -> None:
    now = _stamp(path)
    if now is not None and now != before:
        record_file(path)


# ------------------------------------------------------------------------ output folders
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
    file and renewed while the command runs (see the module's docstring)."""

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
    """Check ``path`` now (:func:`check_output_dir`) and open its manifest before anything is
    written; when the block ends, list what it wrote (and, if it succeeded, remove seqlab's
    earlier files it did not write again): see the module's docstring."""
    path = Path(path)
    with _locked(path.parent):  # two commands starting at once: one opens, the other is refused
        writing = _Writing(path, _check_dir(path, what))
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a full disk: keep the first error
            writing.close(succeeded=False)
        raise
    writing.close(succeeded=True)
