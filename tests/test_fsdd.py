"""Spoken-digit data (seqlab.data.audio_datasets): FSDD's shipped manifest and its splits, the
checks of every recording, the download, and a user's folder of clips. The splits are computed
from the shipped file names; only the tests marked so read the recordings
($SEQLAB_DATA_DIR/fsdd)."""

import hashlib
import io
import os
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from pydantic import ValidationError

from seqlab.config import DataConfig
from seqlab.data import audio_datasets as ad
from seqlab.errors import DataError

NAMES = sorted(ad.fsdd_manifest())
REAL = Path(os.environ.get("SEQLAB_DATA_DIR", "/nonexistent")) / "fsdd" / "recordings"
needs_fsdd = pytest.mark.skipif(not REAL.is_dir(), reason="no fsdd/ in $SEQLAB_DATA_DIR")


def parsed(idx):
    return [ad.parse_fsdd_name(NAMES[i]) for i in idx]


def speakers(idx):
    return {speaker for _, speaker, _ in parsed(idx)}


def wav(seconds=0.2, rate=8000, freq=440.0):
    t = np.arange(int(rate * seconds)) / rate
    buf = io.BytesIO()
    sf.write(buf, 0.3 * np.sin(2 * np.pi * freq * t), rate, subtype="PCM_16", format="WAV")
    return buf.getvalue()


# ------------------------------------------------------------------------ manifest, splits
def test_the_shipped_manifest_lists_every_recording():
    assert len(NAMES) == 3000
    cells = Counter((digit, speaker) for digit, speaker, _ in parsed(range(3000)))
    assert set(cells.values()) == {50} and len(cells) == 60
    assert sorted({s for _, s in cells}) == list(ad.FSDD_SPEAKERS)
    assert all(len(d) == 64 for d in ad.fsdd_manifest().values())


def test_the_datasets_own_split():
    split = ad.fsdd_split(NAMES, None, None, 0.1, seed=0)
    assert {k: len(v) for k, v in split.items()} == {"train": 2430, "val": 270, "test": 300}
    assert {index for _, _, index in parsed(split["test"])} == set(range(5))
    assert min(index for _, _, index in parsed(split["train"] + split["val"])) == 5
    assert set(Counter(d for d, _, _ in parsed(split["val"])).values()) == {27}  # stratified
    assert len(set().union(*map(set, split.values()))) == 3000  # disjoint, complete
    assert speakers(split["test"]) == speakers(split["train"]) == set(ad.FSDD_SPEAKERS)
    again, other = (
        ad.fsdd_split(NAMES, None, None, 0.1, 0),
        ad.fsdd_split(NAMES, None, None, 0.1, 1),
    )
    assert again == split and set(other["val"]) != set(split["val"])
    first = Counter(d for d, _, _ in parsed(split["train"][:100]))  # data.num_examples=100
    assert set(first.values()) == {10}


@pytest.mark.parametrize("test_speaker", ad.FSDD_SPEAKERS)
def test_a_held_out_speaker_is_only_in_test(test_speaker):
    split = ad.fsdd_split(NAMES, test_speaker, None, 0.1, seed=0)
    assert {k: len(v) for k, v in split.items()} == {"train": 2250, "val": 250, "test": 500}
    assert speakers(split["test"]) == {test_speaker}
    assert test_speaker not in speakers(split["train"]) | speakers(split["val"])


def test_a_validation_speaker_comes_from_the_training_side():
    split = ad.fsdd_split(NAMES, "theo", "george", 0.1, seed=0)
    assert {k: len(v) for k, v in split.items()} == {"train": 2000, "val": 500, "test": 500}
    assert speakers(split["val"]) == {"george"} and speakers(split["test"]) == {"theo"}
    assert speakers(split["train"]) == {"jackson", "lucas", "nicolas", "yweweler"}
    own = ad.fsdd_split(NAMES, None, "george", 0.1, seed=0)  # the dataset's test split
    assert {k: len(v) for k, v in own.items()} == {"train": 2250, "val": 450, "test": 300}
    assert not set(own["val"]) & set(own["test"]) and "george" not in speakers(own["train"])


def test_an_excluded_speaker_is_in_no_split():
    split = ad.fsdd_split(NAMES, "theo", "george", 0.1, seed=0, exclude_speakers=["lucas"])
    assert {k: len(v) for k, v in split.items()} == {"train": 1500, "val": 500, "test": 500}
    assert speakers(split["train"]) == {"jackson", "nicolas", "yweweler"}
    kept = ad.fsdd_split(NAMES, "theo", "george", 0.1, seed=0)
    assert split["val"] == kept["val"] and split["test"] == kept["test"]
    own = ad.fsdd_split(NAMES, None, None, 0.1, seed=0, exclude_speakers=["lucas"])  # own test
    assert {k: len(v) for k, v in own.items()} == {"train": 2020, "val": 230, "test": 250}
    assert "lucas" not in speakers(own["train"]) | speakers(own["val"]) | speakers(own["test"])


@pytest.mark.parametrize(
    "data, message",
    [
        ({"dataset": "sst2", "test_speaker": "theo"}, "data.test_speaker holds out a speaker"),
        ({"dataset": "mnist", "val_speaker": "theo"}, "data.val_speaker holds out a speaker"),
        (
            {"dataset": "fsdd", "test_speaker": "bob"},
            "data.test_speaker='bob' is not a speaker of fsdd; choose one of george, jackson, lucas, "
            "nicolas, theo, yweweler",
        ),
        (
            {"dataset": "fsdd", "test_speaker": "theo", "val_speaker": "theo"},
            "data.val_speaker and data.test_speaker are both 'theo'",
        ),
        (
            {"dataset": "fsdd", "exclude_speakers": ["theo", "ann"]},
            "data.exclude_speakers='ann' is not a speaker of fsdd",
        ),
        (
            {"dataset": "fsdd", "test_speaker": "theo", "exclude_speakers": ["theo"]},
            "data.test_speaker='theo' is also in data.exclude_speakers",
        ),
        (
            {"dataset": "sst2", "exclude_speakers": ["theo"]},
            "data.exclude_speakers holds out a speaker",
        ),
    ],
)
def test_speaker_keys_are_checked(data, message):
    with pytest.raises(ValidationError) as err:
        DataConfig(**data)
    assert message in str(err.value)
    DataConfig(dataset="fsdd", test_speaker="theo", val_speaker="lucas", sample_rate=16000)


# ------------------------------------------------------------------------ checks, download
def _recordings(folder, names=("0_george_5.wav", "1_theo_0.wav", "2_lucas_7.wav")):
    folder.mkdir(parents=True)
    manifest = {}
    for i, name in enumerate(names):
        raw = wav(freq=300.0 + 100 * i)
        (folder / name).write_bytes(raw)
        manifest[name] = hashlib.sha256(raw).hexdigest()
    return manifest


def test_a_changed_recording_is_refused(tmp_path):
    folder = tmp_path / "recordings"
    manifest = _recordings(folder)
    clips = ad.load_fsdd(8000, folder, manifest)
    assert [c.source for c in clips] == sorted(manifest) and clips[1].speaker == "theo"
    assert clips[0].rate == 8000 and len(clips[0].samples) == 1600  # 0.2 s
    path = folder / "1_theo_0.wav"
    raw = bytearray(path.read_bytes())
    raw[2000] ^= 1  # one bit of one sample
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=f"checksum mismatch for {path}: expected SHA-256"):
        ad.load_fsdd(8000, folder, manifest)
    path.unlink()
    with pytest.raises(DataError, match=r"1 of the 3 FSDD recordings are missing \(first 1_theo"):
        ad.load_fsdd(8000, folder, manifest)


@needs_fsdd
def test_a_changed_copy_of_real_recordings_is_refused(tmp_path):
    folder = tmp_path / "recordings"
    folder.mkdir()
    manifest = {n: d for n, d in ad.fsdd_manifest().items() if n.startswith("3_nicolas_1")}
    for name in manifest:
        (folder / name).write_bytes((REAL / name).read_bytes())
    assert len(ad.load_fsdd(8000, folder, manifest)) == 11
    victim = folder / "3_nicolas_17.wav"
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0x80
    victim.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=f"checksum mismatch for {victim}"):
        ad.load_fsdd(8000, folder, manifest)


def _archive(tmp_path, manifest_folder, tamper=None):
    path = tmp_path / "fsdd.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(tmp_path / "README.md", "free-spoken-digit-dataset-1.0.10/README.md")
        for f in sorted(manifest_folder.iterdir()):
            raw = f.read_bytes() if f.name != tamper else f.read_bytes()[:-2] + b"\0\0"
            info = tarfile.TarInfo(f"free-spoken-digit-dataset-1.0.10/recordings/{f.name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path.as_uri()


def test_the_download_checks_every_recording_and_keeps_nothing_on_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "README.md").write_text("FSDD\n")
    manifest = _recordings(tmp_path / "src")
    bad = _archive(tmp_path, tmp_path / "src", tamper="2_lucas_7.wav")
    with pytest.raises(DataError, match="checksum mismatch for .*recordings/2_lucas_7.wav"):
        ad.download_fsdd(bad, manifest)
    assert list((tmp_path / "cache" / "fsdd").iterdir()) == []  # no folder, no leftovers
    more = {**manifest, "9_jackson_9.wav": "0" * 64}
    with pytest.raises(DataError, match="lacks 1 of the 4 recordings"):
        ad.download_fsdd(_archive(tmp_path, tmp_path / "src"), more)
    folder = ad.download_fsdd(_archive(tmp_path, tmp_path / "src"), manifest)
    assert folder == tmp_path / "cache" / "fsdd" / "recordings"
    assert sorted(p.name for p in folder.iterdir()) == sorted(manifest)
    assert len(ad.load_fsdd(8000, folder, manifest)) == 3


def test_missing_recordings_say_where_they_were_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLAB_DATA_DIR", str(tmp_path / "mirror"))
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEQLAB_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        ad.fsdd_recordings()
    text = str(err.value)
    assert str(tmp_path / "mirror" / "fsdd" / "recordings") in text
    assert "downloads are disabled (SEQLAB_OFFLINE=1)" in text
    assert not (tmp_path / "cache").exists()


@needs_fsdd
def test_the_real_recordings_read_into_every_split(monkeypatch):
    monkeypatch.setenv("SEQLAB_DATA_DIR", str(REAL.parents[1]))
    data = DataConfig(dataset="fsdd", test_speaker="yweweler", val_speaker="jackson")
    splits = ad.read_fsdd(data, seed=0)
    assert {k: len(v) for k, v in splits.items()} == {"train": 2000, "val": 500, "test": 500}
    assert {c.speaker for c, _ in splits["test"]} == {"yweweler"}
    train = {c.speaker for c, _ in splits["train"]}
    assert train.isdisjoint({"yweweler", "jackson"}) and len(train) == 4
    clips = [c for v in splits.values() for c, _ in v]
    assert {c.rate for c in clips} == {8000} and len({c.source for c in clips}) == 3000
    assert max(c.seconds for c in clips) < 2.3 and min(c.seconds for c in clips) > 0.1
    assert all(label == c.source[0] for v in splits.values() for c, label in v)


# -------------------------------------------------------------------------- audio-folder
def _folder(root, counts):
    for label, n in counts.items():
        (root / label).mkdir(parents=True)
        for i in range(n):
            (root / label / f"clip{i}.wav").write_bytes(wav(0.1, 16000, 200.0 + 50 * i))


def test_a_folder_of_labelled_clips(tmp_path):
    _folder(tmp_path / "clips", {"yes": 10, "no": 10, "maybe": 7})
    (tmp_path / "clips" / "yes" / "notes.txt").write_text("not audio")
    data = DataConfig(dataset="audio-folder", path=str(tmp_path / "clips"), sample_rate=8000)
    with pytest.warns(UserWarning, match="skipped 1 file"):
        splits = ad.read_audio_folder(data, seed=3)
    count = {k: Counter(label for _, label in v) for k, v in splits.items()}
    assert count["test"] == {"yes": 2, "no": 2, "maybe": 1}  # round(0.15 n)
    assert count["val"] == {"yes": 1, "no": 1, "maybe": 1}  # round(0.1 n)
    assert count["train"] == {"yes": 7, "no": 7, "maybe": 5}
    sources = [c.source for v in splits.values() for c, _ in v]
    assert len(set(sources)) == 27 and all(
        s.split("/")[0] in {"yes", "no", "maybe"} for s in sources
    )
    clip = splits["train"][0][0]
    assert clip.rate == 8000 and len(clip.samples) == 800 and clip.speaker is None
    assert [label for _, label in splits["train"][:3]] == ["maybe", "no", "yes"]  # cycling


def test_a_folder_that_cannot_be_split_is_refused(tmp_path):
    one = tmp_path / "one"
    _folder(one, {"yes": 5})
    with pytest.raises(DataError, match=r"1 label folder\(s\) with .wav files; need at least 2"):
        ad.read_audio_folder(DataConfig(dataset="audio-folder", path=str(one)), 0)
    small = tmp_path / "small"
    _folder(small, {"yes": 5, "no": 1})
    with pytest.raises(DataError, match="label 'no' has 1 clip"):
        ad.read_audio_folder(
            DataConfig(dataset="audio-folder", path=str(small), val_fraction=0.5), 0
        )
    (tmp_path / "empty" / "yes").mkdir(parents=True)
    with pytest.raises(DataError, match="label folder 'yes' holds no .wav file"):
        ad.read_audio_folder(DataConfig(dataset="audio-folder", path=str(tmp_path / "empty")), 0)
    with pytest.raises(DataError, match="not a folder"):
        ad.read_audio_folder(DataConfig(dataset="audio-folder", path=str(tmp_path / "x.wav")), 0)
