"""EmoDB, the Berlin Database of Emotional Speech (Burkhardt et al. 2005): an emotion from a voice.

535 utterances by 10 actors, **5 women and 5 men**, each saying some of 10 German sentences in
some of 7 emotions. Everything is in the file name ``SSTTTEv.wav``: speaker ``SS`` (two
digits), text ``TTT`` (``a01``–``a07``, ``b01``–``b03``), emotion ``E`` (the German initial:
W Ärger/anger, L Langeweile/boredom, E Ekel/disgust, A Angst/fear, F Freude/happiness,
T Trauer/sadness, N neutral) and version ``v`` (a letter). The speakers' sex is from the
dataset's documentation (the EmoDB site's list of speakers; the file names do not say it):
women 08, 09, 13, 14, 16; men 03, 10, 11, 12, 15.

**Two copies are read.** The original release (``download.zip`` from emodb.bilderbar.info:
16 kHz, variable length) and a **derived copy** republished elsewhere, 22,050 Hz and every file
cut or padded to exactly 2.0 s, whose SHA-256 per file seqlab ships
(``seqlab/data/manifests/emodb.sha256``). A folder is the derived copy when every file matches
that manifest, the original when every file is a 16 kHz WAV of the expected names; anything else
(a mix of the two, a name missing or extra) is refused naming the file. Results must name the
copy (:func:`emodb_variant`): "EmoDB, derived 22.05 kHz / 2.0 s copy" is not EmoDB.

The WAVs are looked for in ``$SEQLAB_DATA_DIR/emodb/wav/``, then in the cache's
``emodb/wav/``, else the original release is downloaded (its checksum is not pinned: no copy of
it could be had to compute one; each file is checked by name and format instead).

**Splits, always by speaker** (no speaker on two sides): ``data.test_speaker``'s utterances are
the test split and ``data.val_speaker``'s the validation split (default: the speaker after the
test speaker in :data:`EMODB_SPEAKERS`). Without ``data.test_speaker`` the test split is
:data:`DEFAULT_TEST` (a man and a woman) and validation :data:`DEFAULT_VAL` (a woman and a man).
``data.exclude_speakers`` are in no split.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import urllib.request
import zipfile
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from seqlab.atomic import temporary_folder
from seqlab.builtin_records import EMODB_EMOTIONS, EMODB_SPEAKERS
from seqlab.data.audio import Clip, load_clip
from seqlab.data.audio_datasets import dataset_folder, label_cycle
from seqlab.data.registry import cache_dir
from seqlab.data.wav import wav_info
from seqlab.errors import DataError

__all__ = [
    "DEFAULT_TEST",
    "DEFAULT_VAL",
    "EMODB_EMOTIONS",
    "EMODB_SEX",
    "EMODB_SPEAKERS",
    "EMODB_URL",
    "EmoDBName",
    "emodb_split",
    "emodb_variant",
    "emodb_wavs",
    "load_emodb",
    "parse_emodb_name",
    "read_emodb",
]

EMODB_URL = "http://emodb.bilderbar.info/download/download.zip"
#: the emotion of each German initial in a file name
EMODB_CODES = {
    "W": "anger",  # Ärger (Wut)
    "L": "boredom",  # Langeweile
    "E": "disgust",  # Ekel
    "A": "fear",  # Angst
    "F": "happiness",  # Freude
    "T": "sadness",  # Trauer
    "N": "neutral",
}
#: each actor's sex, from the release's documentation
EMODB_SEX = {
    "03": "m", "08": "f", "09": "f", "10": "m", "11": "m",
    "12": "m", "13": "f", "14": "f", "15": "m", "16": "f",
}  # fmt: skip
DEFAULT_TEST = ("03", "08")
DEFAULT_VAL = ("09", "10")
ORIGINAL_RATE = 16000
DERIVED_RATE = 22050
VARIANTS = {
    "original": "EmoDB (original release, 16 kHz)",
    "derived": "EmoDB, derived 22.05 kHz / 2.0 s copy",
}
_NAME = re.compile(r"(\d\d)([ab]\d\d)([WLEAFTN])([a-z])\.wav")


class EmoDBName(tuple):
    """A parsed file name: ``(speaker, text, emotion, version)``."""

    __slots__ = ()

    def __new__(cls, speaker: str, text: str, emotion: str, version: str) -> EmoDBName:
        return super().__new__(cls, (speaker, text, emotion, version))

    speaker = property(lambda self: self[0])
    text = property(lambda self: self[1])
    emotion = property(lambda self: self[2])
    version = property(lambda self: self[3])


def parse_emodb_name(name: str) -> EmoDBName:
    """``03a01Wa.wav`` -> ``EmoDBName("03", "a01", "anger", "a")``; any other name is refused
    by name (a speaker who is not one of the ten included)."""
    found = _NAME.fullmatch(name)
    if found is None or found[1] not in EMODB_SEX:
        raise DataError(
            f"emodb: {name!r} is not named SSTTTEv.wav (speaker "
            f"{'/'.join(EMODB_SPEAKERS)}, text a01-b03, emotion one of "
            f"{''.join(EMODB_CODES)}, version a-z), e.g. 03a01Wa.wav"
        )
    return EmoDBName(found[1], found[2], EMODB_CODES[found[3]], found[4])


def emodb_manifest() -> dict[str, str]:
    """``{file name: SHA-256}`` of the derived copy's 535 files, as seqlab ships it."""
    text = resources.files("seqlab.data").joinpath("manifests/emodb.sha256").read_text("ascii")
    return {name: digest for digest, name in (line.split() for line in text.splitlines() if line)}


def emodb_wavs(download: bool = True, url: str = EMODB_URL) -> Path:
    """The folder of EmoDB's WAVs: ``$SEQLAB_DATA_DIR/emodb/wav`` or the cache's, whichever
    exists first, else the original release downloaded into the cache."""
    return dataset_folder("emodb", "wav", (lambda: download_emodb(url)) if download else None, url)


def download_emodb(url: str = EMODB_URL) -> Path:
    """Download the release's zip, keep its ``wav/`` files (each checked by name and as a
    16 kHz WAV) and move them into ``<cache>/emodb/wav`` at once; otherwise nothing is kept."""
    names = set(emodb_manifest())
    target = cache_dir() / "emodb" / "wav"
    target.parent.mkdir(parents=True, exist_ok=True)
    work = temporary_folder(target.parent, ".wav.", ".part")
    try:
        archive = work / "download.zip"
        with open(archive, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out, 1 << 20)
        folder = work / "wav"
        folder.mkdir()
        try:
            with zipfile.ZipFile(archive) as zipped:
                for member in zipped.namelist():
                    parts = PurePosixPath(member).parts
                    if len(parts) == 2 and parts[0] == "wav" and parts[1] in names:
                        (folder / parts[1]).write_bytes(zipped.read(member))
        except zipfile.BadZipFile as exc:
            raise DataError(
                f"{url}: not a readable zip archive ({exc}); nothing was kept"
            ) from None
        emodb_variant(folder)  # every name there, every file the original's format
        try:
            os.rename(folder, target)  # atomic; refuses a target that appeared meanwhile
        except OSError:
            if not target.is_dir():
                raise
        return target
    finally:
        shutil.rmtree(work, ignore_errors=True)


def emodb_variant(folder: Path) -> Literal["original", "derived"]:
    """Which copy ``folder`` holds (see the module), or a :class:`DataError` naming the first
    file that fits neither, or the names missing or extra."""
    manifest = emodb_manifest()
    present = {p.name for p in folder.glob("*.wav")}
    missing, extra = sorted(set(manifest) - present), sorted(present - set(manifest))
    if missing or extra:
        what = f"{len(missing)} missing (first {missing[0]})" if missing else ""
        what += ", " if missing and extra else ""
        what += f"{len(extra)} not EmoDB's (first {extra[0]})" if extra else ""
        raise DataError(
            f"{folder}: not EmoDB's 535 WAVs: {what}; restore the folder, or remove it to "
            "download the release again"
        )
    kinds = {}
    for name in sorted(manifest):
        path = folder / name
        raw = path.read_bytes()
        if hashlib.sha256(raw).hexdigest() == manifest[name]:
            kinds[name] = "derived"
            continue
        rate = wav_info(io.BytesIO(raw), str(path)).rate
        if rate != ORIGINAL_RATE:
            raise DataError(
                f"{path}: neither the derived copy's file (SHA-256 differs from seqlab's "
                f"manifest) nor the original release's ({rate} Hz, not {ORIGINAL_RATE})"
            )
        kinds[name] = "original"
    found = set(kinds.values())
    if len(found) > 1:
        first = next(n for n, k in kinds.items() if k != kinds[sorted(kinds)[0]])
        raise DataError(
            f"{folder}: a mix of the original release and the derived copy (e.g. {first}); "
            "keep one of them"
        )
    return found.pop()  # type: ignore[return-value]


def load_emodb(rate: int = 16000, folder: Path | None = None) -> list[Clip]:
    """Every utterance in name order, resampled to ``rate``; a clip's ``source`` is its file
    name and ``speaker`` the actor's two digits."""
    folder = emodb_wavs() if folder is None else folder
    emodb_variant(folder)
    clips = []
    for name in sorted(emodb_manifest()):
        speaker = parse_emodb_name(name).speaker
        clip = load_clip(folder / name, rate=rate, max_seconds=30.0, name=str(folder / name))
        clips.append(Clip(clip.samples, clip.rate, name, speaker))
    return clips


def emodb_split(
    names: Sequence[str],
    test_speaker: str | None,
    val_speaker: str | None,
    seed: int,
    exclude_speakers: Sequence[str] = (),
) -> dict[str, list[int]]:
    """Positions in ``names`` of ``train`` (in :func:`label_cycle` order), ``val`` and
    ``test`` (name order), by speaker: see the module."""
    speakers = [parse_emodb_name(n).speaker for n in names]
    test = DEFAULT_TEST if test_speaker is None else (test_speaker,)
    if val_speaker is not None:
        val: tuple[str, ...] = (val_speaker,)
    elif test_speaker is None:
        val = DEFAULT_VAL
    else:
        rest = [s for s in EMODB_SPEAKERS if s != test_speaker and s not in exclude_speakers]
        after = EMODB_SPEAKERS.index(test_speaker)
        val = (min(rest, key=lambda s: (EMODB_SPEAKERS.index(s) - after) % 10),)
    clash = set(val) & (set(test) | set(exclude_speakers))
    if clash:
        raise DataError(
            f"emodb: speaker {sorted(clash)[0]} would be in validation and in test or excluded; "
            "set data.val_speaker to another speaker"
        )
    side = {s: [i for i, x in enumerate(speakers) if x == s] for s in EMODB_SPEAKERS}
    held = set(test) | set(val) | set(exclude_speakers)
    train = [i for s in EMODB_SPEAKERS if s not in held for i in side[s]]
    order = label_cycle([parse_emodb_name(names[i]).emotion for i in train], seed)
    return {
        "train": [train[j] for j in order],
        "val": sorted(i for s in val for i in side[s]),
        "test": sorted(i for s in test for i in side[s]),
    }


def read_emodb(data: Any, seed: int) -> dict[str, list[tuple[Clip, str]]]:
    """EmoDB's ``train``, ``val`` and ``test`` (see the module), clips at ``data.sample_rate``;
    ``data.num_examples`` keeps the first N training clips."""
    clips = load_emodb(data.sample_rate)
    names = [c.source for c in clips]
    split = emodb_split(names, data.test_speaker, data.val_speaker, seed, data.exclude_speakers)
    split["train"] = split["train"][: data.num_examples]
    return {
        part: [(clips[i], parse_emodb_name(names[i]).emotion) for i in idx]
        for part, idx in split.items()
    }


def sex_of(speaker: str | None) -> str | None:
    """``f`` or ``m`` for an EmoDB actor, None for anyone else."""
    return EMODB_SEX.get(speaker) if speaker else None


def per_sex(rows: Mapping[str, float]) -> dict[str, float]:
    """The mean of ``{speaker: value}`` over the women and over the men among them."""
    out = {}
    for sex, name in (("f", "women"), ("m", "men")):
        values = [v for s, v in rows.items() if EMODB_SEX.get(s) == sex]
        if values:
            out[name] = sum(values) / len(values)
    return out


#: the readers of this module's datasets, by name (their records: :mod:`seqlab.builtin_records`)
READERS: dict[str, Callable[[Any, int], Any]] = {
    "emodb": read_emodb,
}
#: the datasets that are a folder, and what finds or downloads it
FOLDERS: dict[str, Callable[[], Path]] = {"emodb": emodb_wavs}
