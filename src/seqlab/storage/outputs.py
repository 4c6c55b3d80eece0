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
  ``demo NAME --out DIR``, ``bench layers --out DIR``;
  :func:`~seqlab.storage.output_dirs.output_dir`): new, empty, or marked
  as seqlab's by ``DIR/.seqlab-output.json`` (``{"format": "seqlab.output/1", "files": {PATH:
  SHA-256}}``, paths relative to DIR). The manifest is written before the first file, with an
  ``open`` entry (the command's process, host and start, ``started_ns``); while the command runs
  the manifest's modification time is renewed every
  :data:`~seqlab.storage.output_dirs.HEARTBEAT` seconds, and another
  command into the folder is refused, naming the process. A command that ends, by an error or
  Ctrl-C too, lists its files and closes the entry; one killed (SIGKILL, a power cut) leaves it:
  the next command into the folder takes the files modified between the start and the last
  renewal as seqlab's, and replaces them; a file older than the start, or put there after, is
  still the user's. When a command succeeds, seqlab's earlier files there that it did not write
  again are removed, so the folder and its manifest hold exactly its output. Files listed in a
  ``.seqlab-files.json`` are seqlab's but no folder command's: never refused, listed or removed
  by one.

The Python API follows the same rule, by the same checks (:func:`api_output_file`,
:func:`~seqlab.storage.output_dirs.api_output_dir`, called by the predictors' ``evaluate`` and
``predict`` for their file options), with ``force=True`` for ``--force``. A path that a command
already holds (the CLI checks it before loading the model, then calls the predictor) is not
checked or recorded a second time (:func:`held`).
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from seqlab import catalog
from seqlab.atomic import atomic_write_json, check_replaceable
from seqlab.builtin_records import RUN_FILES
from seqlab.config.archs import model_config
from seqlab.errors import SeqlabError

MANIFEST = ".seqlab-output.json"
FORMAT = "seqlab.output/1"
#: the record of the single files seqlab wrote in a folder
FILES = ".seqlab-files.json"
FILES_FORMAT = "seqlab.files/1"

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


#: the output paths (real paths) held by the command running in this context
_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "seqlab_held_outputs", default=frozenset()
)


def _key(path: str | Path) -> str:
    return os.path.realpath(path)


def held(path: str | Path) -> bool:
    """Whether ``path`` is an output that a command in this context checked and will record
    (:func:`holding`), or lies in an output folder it holds (``demo NAME --out DIR``): a
    predictor's method called by it leaves the path to it."""
    paths = _HELD.get()
    full = Path(_key(path))
    return bool(paths) and any(str(p) in paths for p in (full, *full.parents))


@contextlib.contextmanager
def holding(path: str | Path) -> Iterator[None]:
    """Mark ``path`` as checked and recorded by the caller while the block runs."""
    token = _HELD.set(_HELD.get() | {_key(path)})
    try:
        yield
    finally:
        _HELD.reset(token)


def check_writable(path: str | Path, what: str = "--output") -> Path:
    """Fail now, before any long work, if ``path`` cannot be written, or is a symbolic link or
    special file that writing would replace (seqlab replaces only regular files), or a file of a
    training run (:func:`check_not_run_file`)."""
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


def check_not_run_file(path: str | Path, what: str) -> Path:
    """Refuse a file to be written that belongs to a training run: its ``config.yaml``,
    ``run.json``, ``curves.png``, metrics, vocabularies, tokenizers, or anything under its
    ``checkpoints/`` or ``exports/`` (replacing one would break the run). A new file of another
    name in a run directory is allowed.

    Raises:
        SeqlabError: naming the run and its file (nothing is written).
    """
    from seqlab.storage.rundir import RunDir  # deferred: torch (its checkpoints)

    path = Path(path)
    full = Path(os.path.realpath(path.parent)) / path.name
    for folder in full.parents:
        run = RunDir(folder)
        if not (run.holds_training_files() or (folder / RunDir.CONFIG).is_file()):
            continue
        first = full.relative_to(folder).parts[0]
        if (
            first not in RunDir.FILES
            and not first.startswith(".")
            and first not in run_artefacts(folder)
        ):
            return path
        raise SeqlabError(
            f"{what} {path} is a file of the training run {folder} ({first}); seqlab never "
            "replaces a run's own files: give another file name (nothing was written)"
        )
    return path


def run_artefacts(folder: str | Path) -> set[str]:
    """The file names the task of the run in ``folder`` writes there besides the run's own files:
    of seqlab's own tasks, their records (:data:`seqlab.builtin_records.RUN_FILES`; no task is
    imported), of a task from outside seqlab, its registered record (its name from
    ``config.yaml``'s ``model.arch``); every task's when the config is missing, unreadable or
    names no known architecture (refusing more, never less)."""
    try:
        raw = yaml.safe_load((Path(folder) / "config.yaml").read_text(encoding="utf-8"))
        arch = raw["model"]["arch"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError):
        arch = None
    config = model_config(arch)
    if config is not None and config.task in RUN_FILES:
        return set(RUN_FILES[config.task])
    spec = catalog.registered_tasks().get(config.task) if config is not None else None
    if spec is None:
        every = {name for files in RUN_FILES.values() for name in files}
        return every | {n for t in catalog.registered_tasks().values() for n in t.artefacts}
    return set(spec.artefacts)


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


def check_output_file(
    path: str | Path, what: str, force: bool = False, force_flag: str = "--force"
) -> Path:
    """Refuse now, before any work and without writing, to replace a file at ``path`` that
    seqlab did not write, or that changed since (:func:`_ownership`), unless ``force``; and a
    ``.seqlab-files.json`` beside it that is not seqlab's record, which recording would replace.

    Raises:
        SeqlabError: naming the file, and how to replace it (``force_flag``: ``--force`` on the
            command line, ``force=True`` in Python; nothing is written).
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
            f"since: pass {force_flag} to replace it, or choose another name (nothing was written)"
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
def output_file(
    path: str | Path,
    what: str,
    force: bool = False,
    inputs: dict[str, str | Path] | None = None,
    force_flag: str = "--force",
) -> Iterator[Path]:
    """The one check of a single output file, on every surface: check ``path`` now
    (:func:`check_writable`, :func:`check_not_input` against ``inputs``,
    :func:`check_output_file`); when the block ends, whether it succeeds or fails, record the
    file as seqlab's (:func:`record_file`) if the block wrote it. A path already held by the
    command that called this (:func:`held`) is left to it.

    Args:
        what: how messages name the option (``--png``, ``confusion_png``).
        force_flag: how messages say to replace a file (``--force``, ``force=True``).
    """
    path = Path(path)
    if held(path):
        yield path
        return
    _check_file(path, what, force, inputs or {}, force_flag)
    before = _stamp(path)
    try:
        with holding(path):
            yield path
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a full disk: keep the first error
            _record_if_written(path, before)
        raise
    _record_if_written(path, before)


def api_output_file(
    path: str | Path | None,
    keyword: str,
    force: bool,
    inputs: Mapping[str, str | Path] | None = None,
) -> contextlib.AbstractContextManager[Path | None]:
    """:func:`output_file` as a predictor's method calls it for its keyword ``keyword``
    (``confusion_png``): ``path`` is checked now, when called, before any work (messages name
    the keyword and ``force=True``); the block that writes it, later, records it. No file asked
    for (``path`` None or empty): nothing checked (the block gets None)."""
    if not path:
        return contextlib.nullcontext()
    read = dict(inputs or {})
    if not held(path):
        _check_file(Path(path), keyword, force, read, "force=True")
    return output_file(path, keyword, force, read, force_flag="force=True")


def _check_file(
    path: Path, what: str, force: bool, inputs: dict[str, str | Path], force_flag: str
) -> None:
    """Every check of :func:`output_file`, before any work."""
    check_writable(path, what)
    check_not_input(path, inputs, what)
    check_output_file(path, what, force, force_flag)


def _record_if_written(path: Path, before: tuple[int, int, int] | None) -> None:
    now = _stamp(path)
    if now is not None and now != before:
        record_file(path)
