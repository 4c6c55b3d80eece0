"""Dataset registry: where each public dataset comes from, its checksums, and how to find it.

A file is looked for, in this order:

1. a mirror directory named by ``SEQLAB_DATA_DIR`` (laid out as ``<dataset>/<file>``; the
   Makefile and the tests point it at ``../shared/data`` when that exists);
2. the user cache, ``SEQLAB_CACHE_DIR`` or ``$XDG_CACHE_HOME/seqlab`` or ``~/.cache/seqlab``;
3. a download from the canonical URL, streamed to a temporary file, checked against its
   SHA-256 and only then moved into the cache (atomically). ``SEQLAB_OFFLINE=1`` forbids it.

A file whose checksum does not match is refused, showing the expected and actual digests. The
digests in this registry are the only authority: nothing found next to a file (a ``.sha256``
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
from dataclasses import dataclass, field
from pathlib import Path

from seqlab.errors import DataError

DATA_DIR_ENV = "SEQLAB_DATA_DIR"
CACHE_DIR_ENV = "SEQLAB_CACHE_DIR"
OFFLINE_ENV = "SEQLAB_OFFLINE"

D2L_DATA = "http://d2l-data.s3-accelerate.amazonaws.com/"
MULTI30K_RAW = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset.

    Args:
        name: path inside the dataset's folder, e.g. ``train.en.gz``.
        url: canonical download address.
        sha256: digests accepted for the local file. The first is the canonical file's; further
            ones are known variants (for fra–eng, the 18,066-line slice kept in ``shared/data``).
        archive_member: when ``url`` is a zip, the member to extract into ``name``.
        archive_sha1: digest of the zip itself, as published by d2l.ai (``None`` if unknown).
        source_sha256: digest of the downloaded file (or archive member) itself, when the local
            copy is a transformation of it (``gzip``).
        gzip: the local file is the download gzip-compressed (mirrors keep ``.gz`` copies; a
            compressor may produce other bytes, so a local copy whose own digest is not in
            ``sha256`` is accepted when its decompressed content has ``source_sha256``).
    """

    name: str
    url: str
    sha256: tuple[str, ...]
    archive_member: str | None = None
    archive_sha1: str | None = None
    source_sha256: str | None = None
    gzip: bool = False


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    licence: str
    citation: str
    files: tuple[DataFile, ...] = field(default_factory=tuple)

    def file(self, name: str) -> DataFile:
        for f in self.files:
            if f.name == name:
                return f
        raise DataError(
            f"dataset {self.name!r} has no file {name!r}; its files are: "
            + ", ".join(f.name for f in self.files)
        )


_MULTI30K_SHA256 = {
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # torchvision's mirror of LeCun's
_MNIST_SHA256 = {
    "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
AG_NEWS_URL = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"
MULTI30K_LANGS = ("en", "de", "fr")

DATASETS: dict[str, Dataset] = {
    "timemachine": Dataset(
        name="timemachine",
        description="H. G. Wells, The Time Machine (the text of d2l.ai's RNN chapters)",
        licence="public domain (Project Gutenberg #35)",
        citation="Wells, H. G. (1895). The Time Machine.",
        files=(
            DataFile(
                "timemachine.txt",
                D2L_DATA + "timemachine.txt",
                ("4149e15a170aa94068969282e8b2cee7aaab0d889bf1c0d684378177040267dd",),
            ),
        ),
    ),
    "tinyshakespeare": Dataset(
        name="tinyshakespeare",
        description="Tiny Shakespeare, the standard character-level language-modelling corpus",
        licence="public domain text",
        citation="Karpathy, A. (2015). char-rnn.",
        files=(
            DataFile(
                "input.txt",
                "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
                ("86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",),
            ),
        ),
    ),
    "fra-eng": Dataset(
        name="fra-eng",
        description="English–French sentence pairs from Tatoeba (manythings.org Anki export)",
        licence="CC-BY 2.0; attribution: tatoeba.org and manythings.org/anki",
        citation="Tatoeba Project; manythings.org/anki",
        files=(
            DataFile(
                "fra.txt",
                D2L_DATA + "fra-eng.zip",
                # the full file as in the d2l zip (the 2019-04-07 export, 167,130 lines; a copy is
                # kept in shared/data/fra-eng-full), then the 18,066-line slice in shared/data
                (
                    "0bb85dbaa1c896844649094d7eaf2e34bee34e84fe362b26ce7e8f2e12aae104",
                    "83c52c40b50fc3e2c8fdaeda0e71b9beee889547b745822b7574dc88ad4f9b76",
                ),
                archive_member="fra-eng/fra.txt",
                archive_sha1="94646ad1522d915e7b0f9296181140edcf86a4f5",
            ),
        ),
    ),
    "multi30k": Dataset(
        name="multi30k",
        description="Multi30k task 1: image-caption translation, en/de/fr, raw untokenised",
        licence="research use; cite Elliott et al. 2016",
        citation="Elliott, D., Frank, S., Sima'an, K., Specia, L. (2016). Multi30K.",
        files=tuple(
            DataFile(name, MULTI30K_RAW + name, (digest,))
            for name, digest in sorted(_MULTI30K_SHA256.items())
        ),
    ),
    "sst2": Dataset(
        name="sst2",
        description="GLUE SST-2: binary sentiment of movie-review sentences and phrases",
        licence="no explicit licence (GLUE: each task under its source's terms)",
        citation="Socher et al. (2013), SST; Wang et al. (2018), GLUE.",
        files=tuple(
            DataFile(
                f"{split}.tsv.gz",
                "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip",
                (gz,),
                archive_member=f"SST-2/{split}.tsv",
                source_sha256=raw,
                gzip=True,
            )
            for split, gz, raw in (
                (
                    "train",
                    "1c4843303462f8f93e006ff618a9e61d207468cafd030046d7d7fd6b78af342b",
                    "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
                ),
                (
                    "dev",
                    "19553efc6f7bac0b7fdd37d4e29dc37c15e9e779767249a16f857fbfcedb23fa",
                    "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
                ),
            )
        ),
    ),
    "ag_news": Dataset(
        name="ag_news",
        description="AG's News topic classification: World, Sports, Business, Sci/Tech",
        licence="research / non-commercial use (the dataset's readme)",
        citation="Zhang, X., Zhao, J., LeCun, Y. (2015). Character-level ConvNets.",
        files=(
            DataFile(
                "train.csv.gz",
                AG_NEWS_URL + "train.csv",
                (),
                source_sha256="76a0a2d2f92b286371fe4d4044640910a04a803fdd2538e0f3f29a5c6f6b672e",
                gzip=True,
            ),
            DataFile(
                "test.csv.gz",
                AG_NEWS_URL + "test.csv",
                ("3c277beb6ce3dd635407635cb90a7c5ceaf87168fabb3be218e39aa2b097f706",),
                source_sha256="521465c2428ed7f02f8d6db6ffdd4b5447c1c701962353eb2c40d548c3c85699",
                gzip=True,
            ),
        ),
    ),
    "sunspots": Dataset(
        name="sunspots",
        description="Monthly mean sunspot numbers 1749-1983 (Zurich series, version 1)",
        licence="SILSO data: CC BY-NC 4.0 (Source: WDC-SILSO, Royal Observatory of Belgium)",
        citation="SILSO World Data Center; Andrews & Herzberg (1985), Data.",
        files=(
            DataFile(
                "monthly-sunspots.csv",
                "https://raw.githubusercontent.com/jbrownlee/Datasets/master/monthly-sunspots.csv",
                ("c4ec8cc57d9f6fb6ecdb3e1f37f25b6f4badd5124c55931052b0cd2fc3bc71f3",),
            ),
        ),
    ),
    "mnist": Dataset(
        name="mnist",
        description="MNIST handwritten digits, the original IDX files (28×28 grey, 10 classes)",
        licence="CC BY-SA 3.0 (Yann LeCun and Corinna Cortes)",
        citation="LeCun, Y., Cortes, C., Burges, C. J. C. The MNIST database.",
        files=tuple(
            DataFile(name, MNIST_URL + name, (digest,))
            for name, digest in sorted(_MNIST_SHA256.items())
        ),
    ),
}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}") from None


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
    """Raise :class:`DataError` unless ``path`` has one of the registry's SHA-256 digests (for a
    re-compressed file: or its decompressed content has the published file's, ``source_sha256``).
    Only the registry decides: files beside ``path`` are never consulted."""
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
    entry = get_dataset(dataset).file(name)
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


def fetch(dataset: str) -> list[Path]:
    """Resolve every file of a dataset (downloading what is missing)."""
    return [resolve(dataset, f.name) for f in get_dataset(dataset).files]


def status(dataset: str) -> list[tuple[str, Path | None]]:
    """For each file: the first local place it is found, or ``None``; nothing is downloaded."""
    out = []
    for f in get_dataset(dataset).files:
        found = next((p for p in candidates(dataset, f.name) if p.is_file()), None)
        out.append((f.name, found))
    return out
