"""Dataset files: finding, verifying, downloading and caching the files that a dataset's catalog
record declares (:attr:`seqlab.catalog.DatasetSpec.files`: URLs and checksums).

A file is looked for, in this order:

1. a mirror directory named by ``SEQLAB_DATA_DIR`` (laid out as ``<dataset>/<file>``; the
   Makefile and the tests point it at ``../shared/data`` when that exists);
2. the user cache, ``SEQLAB_CACHE_DIR`` or ``$XDG_CACHE_HOME/seqlab`` or ``~/.cache/seqlab``;
3. a download from the canonical URL, streamed to a temporary file, checked against its
   SHA-256 and only then moved into the cache (atomically). ``SEQLAB_OFFLINE=1`` forbids it.

A file whose checksum does not match is refused, showing the expected and actual digests. The
digests of the catalog record are the only authority: nothing found next to a file (a ``.sha256``
sidecar, say) can make a file acceptable.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from seqlab import catalog
from seqlab.catalog import DataFile, DatasetSpec
from seqlab.errors import DataError

__all__ = ["DataFile", "downloadable", "get_dataset", "resolve", "status", "verify"]

DATA_DIR_ENV = "SEQLAB_DATA_DIR"
CACHE_DIR_ENV = "SEQLAB_CACHE_DIR"
OFFLINE_ENV = "SEQLAB_OFFLINE"


def downloadable() -> dict[str, DatasetSpec]:
    """Every dataset of the catalog with files or a folder to fetch (:attr:`DatasetSpec.files`,
    :attr:`DatasetSpec.folder`), by name."""
    return {name: spec for name, spec in catalog.datasets().items() if spec.files or spec.folder}


def __getattr__(name: str) -> object:
    # ``DATASETS``, read when asked: the catalog's downloadable datasets (records registered
    # later, a plugin's, are included)
    if name == "DATASETS":
        return downloadable()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_dataset(name: str) -> DatasetSpec:
    """The catalog record of ``name``, which must have files to fetch."""
    known = downloadable()
    if name in known:
        return known[name]
    record = catalog.datasets().get(name)
    if record is not None:
        what = "reads your file (data.path)" if record.needs_path else "is generated"
        raise DataError(f"dataset {name!r} {what}: it has no files to fetch")
    raise DataError(f"unknown dataset {name!r}; known: {', '.join(known)}")


def data_file(dataset: DatasetSpec, name: str) -> DataFile:
    """The file ``name`` of ``dataset``."""
    for f in dataset.files:
        if f.name == name:
            return f
    raise DataError(
        f"dataset {dataset.name!r} has no file {name!r}; its files are: "
        + ", ".join(f.name for f in dataset.files)
    )


def cache_dir() -> Path:
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "seqlab"


def mirror_dir() -> Path | None:
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value).expanduser() if value else None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_of_gunzipped(path: Path) -> str | None:
    """SHA-256 of a gzip file's decompressed content (None if it is not a readable gzip file)."""
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except (OSError, EOFError):
        return None
    return digest.hexdigest()


def verify(path: Path, entry: DataFile) -> None:
    """Raise :class:`DataError` unless ``path`` has one of the record's SHA-256 digests (for a
    re-compressed file: or its decompressed content has the published file's, ``source_sha256``).
    Only the record decides: files beside ``path`` are never consulted."""
    actual = sha256_of(path)
    if actual in entry.sha256:
        return
    gunzipped = entry.gzip and entry.source_sha256 is not None
    if gunzipped and sha256_of_gunzipped(path) == entry.source_sha256:
        return
    wanted = " or ".join(entry.sha256)
    if gunzipped:
        wanted = (wanted + " (or" if wanted else "a file whose") + (
            f" decompressed content has SHA-256 {entry.source_sha256}" + (")" if wanted else "")
        )
    raise DataError(
        f"checksum mismatch for {path}: expected SHA-256 {wanted}, "
        f"got {actual}. The file is corrupt or not the published one; delete it and fetch again."
    )


def candidates(dataset: str, name: str) -> list[Path]:
    """Every local place where ``dataset/name`` is looked for, in order."""
    places = []
    mirror = mirror_dir()
    if mirror is not None:
        places.append(mirror / dataset / name)
    places.append(cache_dir() / dataset / name)
    return places


def resolve(dataset: str, name: str, download: bool = True) -> Path:
    """Path of a verified local copy of ``dataset/name``, downloading it into the cache if needed."""
    entry = data_file(get_dataset(dataset), name)
    places = candidates(dataset, name)
    for path in places:
        if path.is_file():
            verify(path, entry)
            return path
    offline = os.environ.get(OFFLINE_ENV, "") not in ("", "0")
    if download and not offline:
        try:
            return _download(dataset, entry)
        except OSError as exc:
            failure = f"download from {entry.url} failed: {exc}"
        else:  # pragma: no cover - returned above
            raise AssertionError
    else:
        failure = (
            "downloads are disabled (SEQLAB_OFFLINE=1)" if offline else "download not requested"
        )
    looked = "\n".join(f"  - {p}" for p in places)
    raise DataError(
        f"dataset file {dataset}/{name} not found. Looked in:\n{looked}\n"
        f"and {failure}.\n"
        f"To provide it: set {DATA_DIR_ENV} to a folder holding {dataset}/{name}, "
        f"or place the file at {places[-1]}, or run `seqlab data fetch {dataset}` with network access "
        f"(source: {entry.url})."
    )


def _download(dataset: str, entry: DataFile) -> Path:
    """Stream the URL to a temporary file, verify, and move it into the cache atomically."""
    target = cache_dir() / dataset / entry.name
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{entry.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        sha1 = hashlib.sha1()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(entry.url, timeout=60) as response:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                out.write(chunk)
                sha1.update(chunk)
        if entry.archive_member is not None:
            if entry.archive_sha1 and sha1.hexdigest() != entry.archive_sha1:
                raise DataError(
                    f"checksum mismatch for {entry.url}: expected SHA-1 {entry.archive_sha1}, "
                    f"got {sha1.hexdigest()}"
                )
            member = tmp.with_suffix(".member")
            with (
                zipfile.ZipFile(tmp) as zf,
                zf.open(entry.archive_member) as src,
                open(member, "wb") as dst,
            ):
                shutil.copyfileobj(src, dst)
            os.replace(member, tmp)
        if entry.source_sha256 is not None and sha256_of(tmp) != entry.source_sha256:
            raise DataError(
                f"checksum mismatch for {entry.url}: expected SHA-256 {entry.source_sha256}, "
                f"got {sha256_of(tmp)}"
            )
        if entry.gzip:
            packed = tmp.with_suffix(".gz")
            with open(tmp, "rb") as src, gzip.GzipFile(packed, "wb", 9, mtime=0) as dst:
                shutil.copyfileobj(src, dst)
            os.replace(packed, tmp)
        verify(tmp, entry)
        os.replace(tmp, target)
        return target
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_suffix(".member").unlink(missing_ok=True)


def status(dataset: str) -> list[tuple[str, Path | None]]:
    """For each file: the first local place it is found, or ``None``; nothing is downloaded."""
    out = []
    for f in get_dataset(dataset).files:
        found = next((p for p in candidates(dataset, f.name) if p.is_file()), None)
        out.append((f.name, found))
    return out
