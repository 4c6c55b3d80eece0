"""Output folders of figures and numbers, and what seqlab may replace in them.

``--attention-png DIR`` (translate, classify), ``diagnose gradients --out DIR``, ``demo NAME --out
DIR`` and ``bench layers --out DIR`` write their PNG and JSON files only into a directory that is
new, empty, or one seqlab has marked as its own. The mark is a manifest, ``DIR/.seqlab-output.json``,
listing every file seqlab wrote there with its SHA-256. A later command may replace those files;
a file that is not listed, or that changed since seqlab wrote it, is the user's, and the command
is refused before it writes anything, naming the file. Nothing is ever deleted that seqlab did not
write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from seqlab.errors import SeqlabError
from seqlab.io import atomic_write_json

MANIFEST = ".seqlab-output.json"
FORMAT = "seqlab.output/1"

#: the rule, as the ``--help`` of each command that writes an output folder says it
RULE = (
    "a new or empty directory, or one seqlab wrote before: seqlab replaces only its own files "
    "there and refuses a directory holding anything else"
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
    from seqlab.rundir import RunDir

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


def _manifest(directory: Path) -> dict[str, str] | None:
    """The files seqlab recorded in ``directory`` (relative path -> SHA-256), or None: unmarked."""
    path = directory / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(files, dict):
        return None
    return {str(k): str(v) for k, v in files.items()}


def _entries(directory: Path) -> Iterator[tuple[str, Path]]:
    """Every entry under ``directory`` but the manifest and folders: (relative path, path)."""
    for root, dirs, files in os.walk(directory):
        here = Path(root)
        for name in dirs:  # a link to a folder is listed here and never walked into
            if (here / name).is_symlink():
                yield str((here / name).relative_to(directory)), here / name
        for name in files:
            rel = str((here / name).relative_to(directory))
            if rel != MANIFEST:
                yield rel, here / name


def _is_ours(path: Path, recorded: str | None) -> bool:
    if recorded is None:
        return False
    mode = os.lstat(path).st_mode
    return stat.S_ISREG(mode) and sha256_file(path) == recorded


def foreign_files(directory: str | Path, limit: int | None = None) -> list[str]:
    """Files under ``directory`` that seqlab did not write there (or that changed since), as
    relative paths; at most ``limit`` of them in a folder seqlab never marked."""
    directory = Path(directory)
    recorded = _manifest(directory)
    found = []
    for rel, path in _entries(directory):
        if recorded is None or not _is_ours(path, recorded.get(rel)):
            found.append(rel)
            if recorded is None and limit is not None and len(found) >= limit:
                break  # e.g. --out ~: do not walk the whole home folder to say no
    return sorted(found)


def check_output_dir(path: str | Path, what: str) -> Path:
    """Refuse now, before any work and without writing, an output folder seqlab may not use.

    Raises:
        SeqlabError: ``path`` is a file, holds files seqlab did not write (named), or cannot be
            written into.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SeqlabError(f"{what} {path} exists and is not a directory; give a directory")
    if path.is_dir():
        foreign = foreign_files(path, limit=6)
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
    return path


def record(directory: str | Path) -> None:
    """List every file now in ``directory`` in its manifest (they are seqlab's: the folder held
    nothing else when the command began)."""
    directory = Path(directory)
    files = {
        rel: sha256_file(path)
        for rel, path in sorted(_entries(directory))
        if stat.S_ISREG(os.lstat(path).st_mode)
    }
    atomic_write_json(directory / MANIFEST, {"format": FORMAT, "files": files})


@contextlib.contextmanager
def output_dir(path: str | Path, what: str) -> Iterator[Path]:
    """Check ``path`` now (:func:`check_output_dir`); when the block ends, whether it succeeds
    or fails, record what was written there (:func:`record`), marking the folder as seqlab's."""
    path = check_output_dir(path, what)
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a full disk: keep the first error
            _record_if_written(path)
        raise
    _record_if_written(path)


def _record_if_written(path: Path) -> None:
    if path.is_dir() and (_manifest(path) is not None or any(path.iterdir())):
        record(path)
