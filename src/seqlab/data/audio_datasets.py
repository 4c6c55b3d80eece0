"""Spoken clips with a category: the Free Spoken Digit Dataset and a user's folder of WAV files.

Both readers return ``{split: [(clip, label), ...]}`` (:class:`seqlab.data.audio.Clip`, samples
resampled to ``data.sample_rate``) with ``train``, the ``val`` that chooses checkpoints — always
taken from the training side — and ``test``.

**FSDD** (Jackson et al., v1.0.10): 3,000 recordings ``{digit}_{speaker}_{index}.wav``, 8 kHz
mono 16-bit, 6 speakers × 10 digits × 50. The recordings are looked for in
``$SEQLAB_DATA_DIR/fsdd/recordings/``, then in the user cache, else downloaded from the tag's
archive (its own checksum is unknown) and extracted into the cache. Every WAV is checked against
the SHA-256 manifest shipped with seqlab (``seqlab/data/manifests/fsdd.sha256``) on the bytes
that are decoded, each time they are read: hashing all 21 MB takes about 20 ms, less than
reading them, so no verification cache can be stale. Two test splits:

- the dataset's own (README: indices 0–4 of every digit and speaker, 300 clips); every speaker
  is on both sides;
- ``data.test_speaker``: all 500 clips of that speaker, who is then never trained on.

Validation is ``data.val_speaker``'s training clips when set (a second held-out speaker), else a
seeded ``data.val_fraction`` of each digit's training clips (stratified). The clips of
``data.exclude_speakers`` are in no split: a further speaker kept out of the run, on whom a choice
made after validation (a calibration rule, say) can be tried.

**audio-folder** (``data.path``): ``LABEL/clip.wav``; the labels are the sorted folder names;
each label's clips are split by a seeded draw into ``data.test_fraction``, ``data.val_fraction``
and the rest for training.

Training clips come in a seeded order that cycles through the labels, so that
``data.num_examples`` (the first N) keeps every label.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import tarfile
import urllib.request
import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from seqlab.atomic import temporary_folder
from seqlab.builtin_records import FSDD_SPEAKERS
from seqlab.data.audio import AudioError, Clip, load_clip
from seqlab.data.parallel import DataWarning
from seqlab.data.registry import DATA_DIR_ENV, OFFLINE_ENV, cache_dir, mirror_dir
from seqlab.errors import DataError

__all__ = [
    "FSDD_SPEAKERS",
    "MAX_SECONDS",
    "AudioError",
    "dataset_folder",
    "download_fsdd",
    "fsdd_manifest",
    "fsdd_recordings",
    "fsdd_split",
    "folder_split",
    "load_fsdd",
    "parse_fsdd_name",
    "read_audio_folder",
    "read_fsdd",
]

Examples = list[tuple[Clip, str]]  # (clip, label name)

FSDD_URL = (
    "https://github.com/Jakobovski/free-spoken-digit-dataset/archive/refs/tags/v1.0.10.tar.gz"
)
#: the dataset's own test split: these indices of every digit and speaker
FSDD_TEST_INDICES = range(5)
_FSDD_NAME = re.compile(r"(\d)_([a-z]+)_(\d+)\.wav")
#: the longest clip a reader accepts (seconds); FSDD's longest is 2.28 s
MAX_SECONDS = 30.0


# ------------------------------------------------------------------------------- FSDD files
def fsdd_manifest() -> dict[str, str]:
    """``{file name: SHA-256}`` of the 3,000 recordings, from the manifest seqlab ships."""
    text = resources.files("seqlab.data").joinpath("manifests/fsdd.sha256").read_text("ascii")
    return {name: digest for digest, name in (line.split() for line in text.splitlines() if line)}


def parse_fsdd_name(name: str) -> tuple[str, str, int]:
    """``7_jackson_32.wav`` -> ``("7", "jackson", 32)``: digit, speaker, index."""
    found = _FSDD_NAME.fullmatch(name)
    if found is None:
        raise DataError(f"fsdd: {name!r} is not named {{digit}}_{{speaker}}_{{index}}.wav")
    return found[1], found[2], int(found[3])


def _offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "") not in ("", "0")


def fsdd_recordings(download: bool = True, url: str = FSDD_URL) -> Path:
    """The folder of FSDD's recordings: ``$SEQLAB_DATA_DIR/fsdd/recordings`` or the cache's,
    whichever exists first, else downloaded into the cache (:func:`download_fsdd`). Its files
    are verified when read (:func:`load_fsdd`)."""
    return dataset_folder(
        "fsdd", "recordings", (lambda: download_fsdd(url)) if download else None, url
    )


def dataset_folder(dataset: str, sub: str, download: Callable[[], Path] | None, url: str) -> Path:
    """``$SEQLAB_DATA_DIR/dataset/sub`` or the cache's, whichever exists first, else what
    ``download()`` returns (not when None or offline); else a :class:`DataError` naming every
    place looked and how to provide the folder."""
    mirror = mirror_dir()
    places = [] if mirror is None else [mirror / dataset / sub]
    places.append(cache_dir() / dataset / sub)
    for place in places:
        if place.is_dir():
            return place
    if download is not None and not _offline():
        try:
            return download()
        except OSError as exc:
            failure = f"the download from {url} failed: {exc}"
    else:
        failure = "downloads are disabled (SEQLAB_OFFLINE=1)" if _offline() else "no download"
    looked = "\n".join(f"  - {p}" for p in places)
    raise DataError(
        f"dataset {dataset} not found: no {sub} folder in\n{looked}\nand {failure}.\n"
        f"To provide it: set {DATA_DIR_ENV} to a folder holding {dataset}/{sub}/*.wav, or put "
        f"the files at {places[-1]}, or run again with network access (source: {url})."
    )


def download_fsdd(url: str = FSDD_URL, manifest: Mapping[str, str] | None = None) -> Path:
    """Download the archive at ``url``, check each recording of ``manifest`` (default the
    shipped one) in it, and move them into ``<cache>/fsdd/recordings`` at once (a folder
    renamed into place). A recording missing or different is an error, and nothing is kept."""
    manifest = fsdd_manifest() if manifest is None else manifest
    target = cache_dir() / "fsdd" / "recordings"
    target.parent.mkdir(parents=True, exist_ok=True)
    work = temporary_folder(target.parent, ".recordings.", ".part")
    try:
        archive = work / "archive.tar.gz"
        with open(archive, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out, 1 << 20)
        folder = work / "recordings"
        folder.mkdir()
        found = set()
        try:
            with tarfile.open(archive, "r:*") as tar:
                for member in tar:
                    parts = PurePosixPath(member.name).parts
                    if len(parts) != 3 or parts[1] != "recordings" or parts[2] not in manifest:
                        continue
                    source = tar.extractfile(member) if member.isfile() else None
                    raw = source.read() if source is not None else b""
                    _check_digest(raw, manifest[parts[2]], f"{url}: {member.name}")
                    (folder / parts[2]).write_bytes(raw)
                    found.add(parts[2])
        except tarfile.TarError as exc:
            raise DataError(
                f"{url}: not a readable tar archive ({exc}); nothing was kept"
            ) from None
        missing = sorted(set(manifest) - found)
        if missing:
            raise DataError(
                f"{url}: the archive lacks {len(missing)} of the {len(manifest)} recordings "
                f"(first {missing[0]}); nothing was kept"
            )
        try:
            os.rename(folder, target)  # atomic; refuses a target that appeared meanwhile
        except OSError:
            if not target.is_dir():
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_digest(raw: bytes, expected: str, where: Any) -> None:
    actual = hashlib.sha256(raw).hexdigest()
    if actual != expected:
        raise DataError(
            f"checksum mismatch for {where}: expected SHA-256 {expected}, got {actual}. The "
            "file is corrupt or not the published one; delete it and fetch again."
        )


def load_fsdd(
    rate: int = 8000, folder: Path | None = None, manifest: Mapping[str, str] | None = None
) -> list[Clip]:
    """Every recording of ``manifest`` (default: all 3,000) in ``folder`` (default
    :func:`fsdd_recordings`), in name order, each checked against its SHA-256 as read and
    resampled to ``rate``; a clip's ``source`` is its file name."""
    manifest = fsdd_manifest() if manifest is None else manifest
    folder = fsdd_recordings() if folder is None else folder
    missing = [name for name in sorted(manifest) if not (folder / name).is_file()]
    if missing:
        raise DataError(
            f"{folder}: {len(missing)} of the {len(manifest)} FSDD recordings are missing (first "
            f"{missing[0]}); restore them, or remove the folder to download them again"
        )
    clips = []
    for name in sorted(manifest):
        path = folder / name
        raw = path.read_bytes()
        _check_digest(raw, manifest[name], path)
        speaker = parse_fsdd_name(name)[1]
        clip = load_clip(raw, rate=rate, max_seconds=MAX_SECONDS, name=str(path), speaker=speaker)
        clips.append(Clip(clip.samples, clip.rate, name, speaker))
    return clips


# ----------------------------------------------------------------------------------- splits
def stratified_pick(labels: Sequence[str], fraction: float, seed: int) -> list[int]:
    """A seeded ``fraction`` of each label's positions in ``labels`` (``round(fraction * n)``
    of ``n``), sorted."""
    rng = random.Random(seed)
    picked: list[int] = []
    for label in sorted(set(labels)):
        where = [i for i, x in enumerate(labels) if x == label]
        rng.shuffle(where)
        picked += where[: int(fraction * len(where) + 0.5)]
    return sorted(picked)


def label_cycle(labels: Sequence[str], seed: int) -> list[int]:
    """Positions of ``labels`` in a seeded order that cycles through the labels (each label's
    own positions shuffled), so every prefix is about balanced."""
    rng = random.Random(seed)
    rank: dict[int, tuple[int, str]] = {}
    for label in sorted(set(labels)):
        where = [i for i, x in enumerate(labels) if x == label]
        rng.shuffle(where)
        rank.update({i: (r, label) for r, i in enumerate(where)})
    return sorted(range(len(labels)), key=rank.__getitem__)


def fsdd_split(
    names: Sequence[str],
    test_speaker: str | None,
    val_speaker: str | None,
    val_fraction: float,
    seed: int,
    exclude_speakers: Sequence[str] = (),
) -> dict[str, list[int]]:
    """Positions in ``names`` (FSDD file names) of ``train``, ``val`` and ``test``: see the
    module. ``train`` is in :func:`label_cycle` order, the others in name order; the clips of
    ``exclude_speakers`` are in none."""
    parsed = [parse_fsdd_name(n) for n in names]
    excluded = {i for i, (_, speaker, _) in enumerate(parsed) if speaker in exclude_speakers}
    if test_speaker is None:
        test = [i for i, (_, _, index) in enumerate(parsed) if index in FSDD_TEST_INDICES]
    else:
        test = [i for i, (_, speaker, _) in enumerate(parsed) if speaker == test_speaker]
    test = [i for i in test if i not in excluded]
    held = set(test) | excluded
    side = [i for i in range(len(names)) if i not in held]  # the training side
    if val_speaker is not None:
        val = [i for i in side if parsed[i][1] == val_speaker]
    else:
        val = [side[j] for j in stratified_pick([parsed[i][0] for i in side], val_fraction, seed)]
    held |= set(val)
    train = [i for i in side if i not in held]
    order = label_cycle([parsed[i][0] for i in train], seed)
    if not train or not val or not test:
        raise DataError(
            f"fsdd: the split leaves train {len(train)}, val {len(val)}, test {len(test)} clips; "
            "each needs some (check data.val_fraction)"
        )
    return {"train": [train[j] for j in order], "val": val, "test": test}


def _examples(clips: Sequence[Clip], labels: Sequence[str], idx: Sequence[int]) -> Examples:
    return [(clips[i], labels[i]) for i in idx]


def read_fsdd(data: Any, seed: int) -> dict[str, Examples]:
    """FSDD's ``train``, ``val`` and ``test`` (see the module), clips at ``data.sample_rate``;
    ``data.num_examples`` keeps the first N training clips."""
    clips = load_fsdd(data.sample_rate)
    names = [c.source for c in clips]
    labels = [parse_fsdd_name(n)[0] for n in names]
    split = fsdd_split(
        names, data.test_speaker, data.val_speaker, data.val_fraction, seed, data.exclude_speakers
    )
    split["train"] = split["train"][: data.num_examples]
    return {name: _examples(clips, labels, idx) for name, idx in split.items()}


# ----------------------------------------------------------------------------- audio-folder
def folder_clips(root: Path) -> tuple[list[Path], list[str]]:
    """The WAV files of ``root/LABEL/*.wav`` and their labels, in (label, name) order; other
    files are skipped with one warning, hidden ones silently."""
    if not root.is_dir():
        raise DataError(
            f"data.path={root}: not a folder; dataset audio-folder reads LABEL/clip.wav files"
        )
    paths, labels, skipped = [], [], []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir():
            skipped.append(entry)
            continue
        wavs = []
        for f in sorted(entry.iterdir()):
            if f.is_file() and f.suffix.lower() == ".wav":
                wavs.append(f)
            elif not f.name.startswith("."):
                skipped.append(f)
        if not wavs:
            raise DataError(f"{entry}: label folder {entry.name!r} holds no .wav file")
        paths += wavs
        labels += [entry.name] * len(wavs)
    if len(set(labels)) < 2:
        raise DataError(
            f"data.path={root}: {len(set(labels))} label folder(s) with .wav files; "
            "need at least 2 (LABEL/clip.wav)"
        )
    if skipped:
        warnings.warn(
            f"{root}: skipped {len(skipped)} file(s) that are not LABEL/clip.wav; first "
            f"{skipped[0]}",
            DataWarning,
            stacklevel=2,
        )
    return paths, labels


def folder_split(
    labels: Sequence[str], val_fraction: float, test_fraction: float, seed: int, where: Any
) -> dict[str, list[int]]:
    """Each label's positions split by a seeded draw: ``round(test_fraction * n)`` for test,
    ``round(val_fraction * n)`` for val, the rest (at least one) for training."""
    rng = random.Random(seed)
    split: dict[str, list[int]] = {"train": [], "val": [], "test": []}
    for label in sorted(set(labels)):
        where_ = [i for i, x in enumerate(labels) if x == label]
        rng.shuffle(where_)
        n_test = int(test_fraction * len(where_) + 0.5)
        n_val = int(val_fraction * len(where_) + 0.5)
        if n_test + n_val >= len(where_):
            raise DataError(
                f"{where}: label {label!r} has {len(where_)} clip(s); data.test_fraction="
                f"{test_fraction:g} and data.val_fraction={val_fraction:g} leave none to train on"
            )
        split["test"] += where_[:n_test]
        split["val"] += where_[n_test : n_test + n_val]
        split["train"] += where_[n_test + n_val :]
    for name in ("val", "test"):
        if not split[name]:
            raise DataError(
                f"{where}: data.{name}_fraction leaves no {name} clip ({len(labels)} clips); "
                "add clips or raise the fraction"
            )
    train = sorted(split["train"])
    order = label_cycle([labels[i] for i in train], seed)
    return {
        "train": [train[j] for j in order],
        "val": sorted(split["val"]),
        "test": sorted(split["test"]),
    }


def read_audio_folder(data: Any, seed: int) -> dict[str, Examples]:
    """A user's folder (``data.path``, ``LABEL/clip.wav``): ``train``, ``val`` and ``test`` by
    :func:`folder_split`, clips at ``data.sample_rate``; a clip's ``source`` is
    ``LABEL/clip.wav``."""
    root = Path(data.path)
    paths, labels = folder_clips(root)
    split = folder_split(labels, data.val_fraction, data.test_fraction, seed, data.path)
    clips = []
    for path in paths:
        name = path.relative_to(root).as_posix()
        clip = load_clip(path, rate=data.sample_rate, max_seconds=MAX_SECONDS, name=str(path))
        clips.append(Clip(clip.samples, clip.rate, name, None))
    split["train"] = split["train"][: data.num_examples]
    return {name: _examples(clips, labels, idx) for name, idx in split.items()}


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "fsdd": read_fsdd,
    "audio-folder": read_audio_folder,
}
#: the datasets that are a folder, and what finds or downloads it
FOLDERS: dict[str, Callable[[], Path]] = {"fsdd": fsdd_recordings}
