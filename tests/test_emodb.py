"""EmoDB, an emotion from a voice (seqlab.data.emodb): names parsed and a malformed one refused,
the folds keep each speaker on one side, a folder told original or derived, the emotion model
the same alone and in a batch, and the same answer on the command line, in Python and on the
server (a tiny run on the real files: skipped where ``$SEQLAB_DATA_DIR/emodb`` is missing)."""

from __future__ import annotations

import base64
import importlib.util
import warnings
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

import seqlab
from cli_checks import fails, succeeds
from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.config import load_config
from seqlab.data.emodb import (
    DEFAULT_TEST,
    DEFAULT_VAL,
    EMODB_EMOTIONS,
    EMODB_SEX,
    EMODB_SPEAKERS,
    emodb_manifest,
    emodb_split,
    emodb_variant,
    parse_emodb_name,
)
from seqlab.errors import ConfigError, DataError
from seqlab.models import build_model
from seqlab.serve import Limits, create_app
from tiny_runs import EMODB_WAVS

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

needs_data = pytest.mark.skipif(not EMODB_WAVS.is_dir(), reason="no emodb/ in $SEQLAB_DATA_DIR")
NAMES = sorted(emodb_manifest())


def test_a_name_gives_speaker_text_emotion_and_version():
    parsed = parse_emodb_name("03a01Wa.wav")
    assert parsed == ("03", "a01", "anger", "a")
    assert (parsed.speaker, parsed.text, parsed.emotion, parsed.version) == parsed
    assert parse_emodb_name("16b10Tb.wav").emotion == "sadness"


@pytest.mark.parametrize(
    "name",
    ["04a01Wa.wav", "03c01Wa.wav", "03a01Xa.wav", "03a01Wa.WAV", "3a01Wa.wav", "03a01WA.wav", ""],
)
def test_a_malformed_name_is_refused_by_name(name):
    with pytest.raises(DataError, match=rf"emodb: '{name}' is not named SSTTTEv\.wav"):
        parse_emodb_name(name)


def test_the_manifest_holds_the_documented_counts():
    """535 utterances, 302 by women and 233 by men, the emotions as the copy's README counts."""
    parsed = [parse_emodb_name(n) for n in NAMES]
    assert len(parsed) == 535 and {p.speaker for p in parsed} == set(EMODB_SPEAKERS)
    sexes = Counter(EMODB_SEX[p.speaker] for p in parsed)
    assert sexes == {"f": 302, "m": 233}
    assert Counter(p.emotion for p in parsed) == {
        "anger": 127, "boredom": 81, "neutral": 79, "happiness": 71,
        "fear": 69, "sadness": 62, "disgust": 46,
    }  # fmt: skip
    assert sorted(EMODB_EMOTIONS) == list(EMODB_EMOTIONS)
    assert sum(s == "f" for s in EMODB_SEX.values()) == 5


@pytest.mark.parametrize("test", [None, *EMODB_SPEAKERS])
def test_every_fold_keeps_each_speaker_on_one_side(test):
    split = emodb_split(NAMES, test, None, seed=0)
    sides = {k: {parse_emodb_name(NAMES[i]).speaker for i in v} for k, v in split.items()}
    assert not (sides["train"] & sides["val"]) and not (sides["train"] & sides["test"])
    assert not sides["val"] & sides["test"]
    assert sides["train"] | sides["val"] | sides["test"] == set(EMODB_SPEAKERS)
    assert sum(map(len, split.values())) == 535
    if test is None:
        assert sides["test"] == set(DEFAULT_TEST) and sides["val"] == set(DEFAULT_VAL)
    else:  # the next actor validates
        after = EMODB_SPEAKERS[(EMODB_SPEAKERS.index(test) + 1) % 10]
        assert sides["test"] == {test} and sides["val"] == {after}
    # training comes cycling through the emotions: the first 7 are all different
    first = [parse_emodb_name(NAMES[i]).emotion for i in split["train"][:7]]
    assert sorted(first) == list(EMODB_EMOTIONS)


def test_an_excluded_speaker_is_in_no_split_and_validation_skips_them():
    split = emodb_split(NAMES, "03", None, seed=0, exclude_speakers=["08"])
    speakers = {k: {parse_emodb_name(NAMES[i]).speaker for i in v} for k, v in split.items()}
    assert speakers["val"] == {"09"} and "08" not in set().union(*speakers.values())
    with pytest.raises(DataError, match="speaker 08 would be in validation and in test"):
        emodb_split(NAMES, "08", "08", seed=0)


def test_a_speaker_written_as_a_number_is_refused_saying_to_quote_it():
    with pytest.raises(ConfigError, match=r"data.test_speaker: speaker names are text.*\"03\""):
        load_config("emodb-cnn", ["data.test_speaker=03"])
    with pytest.raises(ConfigError, match=r"data.val_speaker='04' is not a speaker of emodb"):
        load_config("emodb-cnn", ['data.val_speaker="04"'])
    cfg = load_config("emodb-cnn", ['data.test_speaker="03"'])
    assert cfg.data.test_speaker == "03"


def _fake_original(folder: Path, rate: int = 16000) -> Path:
    folder.mkdir()
    wave = (0.1 * np.sin(np.arange(160) / 3)).astype(np.float32)
    for name in NAMES:
        soundfile.write(folder / name, wave, rate, subtype="PCM_16")
    return folder


def test_a_folder_is_read_as_the_original_release_or_refused_naming_the_file(tmp_path):
    folder = _fake_original(tmp_path / "wav")
    assert emodb_variant(folder) == "original"
    soundfile.write(folder / "09a01Fa.wav", np.zeros(80, np.float32), 8000, subtype="PCM_16")
    with pytest.raises(
        DataError, match=r"09a01Fa\.wav: neither the derived copy's file .*\(8000 Hz"
    ):
        emodb_variant(folder)
    (folder / "09a01Fa.wav").unlink()
    (folder / "notes.wav").write_bytes(b"")
    with pytest.raises(
        DataError, match=r"1 missing \(first 09a01Fa\.wav\), 1 not EmoDB's \(first notes"
    ):
        emodb_variant(folder)


@needs_data
def test_the_given_copy_is_the_derived_one_and_a_mix_is_refused(tmp_path):
    assert emodb_variant(EMODB_WAVS) == "derived"
    folder = _fake_original(tmp_path / "wav")
    (folder / NAMES[0]).write_bytes((EMODB_WAVS / NAMES[0]).read_bytes())
    with pytest.raises(DataError, match="a mix of the original release and the derived copy"):
        emodb_variant(folder)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_emotion_model_is_the_same_alone_and_in_a_padded_batch(precision):
    """The recipe's own model (emodb-cnn, untrained): 2.0 s, 1.3 s and 0.4 s clips at 16 kHz."""
    cfg = load_config("emodb-cnn")
    torch.manual_seed(0)
    model = build_model(cfg.model, num_classes=7, sample_rate=cfg.data.sample_rate).eval()
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([32000, 20800, 6400])
    waves = 0.1 * torch.randn(3, 32000, generator=g)
    waves[torch.arange(32000)[None, :] >= lengths[:, None]] = 0.0
    with computing_in(precision):
        batch = model(waves, lengths)
        alone = [
            model(waves[i : i + 1, : int(n)], lengths[i : i + 1]) for i, n in enumerate(lengths)
        ]
    assert batch.shape == (3, 7)
    assert_close_in(precision, batch, torch.cat(alone))


def test_uar_is_the_mean_recall_over_the_emotions_present():
    spec = importlib.util.spec_from_file_location(
        "emodb_speakers", Path(__file__).resolve().parents[1] / "benchmarks" / "emodb_speakers.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    truth, pred = torch.tensor([0, 0, 0, 0, 1, 1]), torch.tensor([0, 0, 0, 1, 1, 0])
    confusion = bench.confusion_of(truth, pred, 3)  # class 2 absent: not averaged in
    assert confusion.tolist() == [[3, 1, 0], [1, 1, 0], [0, 0, 0]]
    assert bench.uar(confusion) == pytest.approx((3 / 4 + 1 / 2) / 2)


@needs_data
def test_cli_api_and_server_give_the_same_emotion(tiny_runs, capsys):
    run = tiny_runs["emodb"]
    wav = EMODB_WAVS / "16b10Tb.wav"  # a woman's sentence, said sadly (the test speaker)
    model = seqlab.load(run)
    assert tuple(model.labels) == EMODB_EMOTIONS
    probs = model.probabilities(str(wav))
    label, prob = model.classify(str(wav))
    assert label == EMODB_EMOTIONS[int(probs.argmax())]
    assert prob == pytest.approx(float(probs.max()), abs=1e-6)
    shown, p, where = succeeds(capsys, ["classify", "--run", run, wav]).out.split("\t")
    assert (shown, where.strip()) == (label, str(wav))
    assert float(p) == pytest.approx(prob, abs=5e-5)
    limits = Limits(max_audio_seconds=5.0, max_sample_rate=48_000, max_channels=2)
    with TestClient(create_app({"emotion": model}, limits=limits)) as client:
        body = {"model": "emotion", "audio": base64.b64encode(wav.read_bytes()).decode()}
        (heard,) = client.post("/classify-audio", json=body).json()["results"]
    assert heard["label"] == label and heard["sample_rate"] == 22050
    for name, q in zip(model.labels, probs.tolist(), strict=True):
        assert heard["probabilities"][name] == pytest.approx(q, abs=1e-6)


@needs_data
def test_data_fetch_names_the_folder_and_a_missing_one_says_where_to_put_it(
    capsys, monkeypatch, tmp_path
):
    assert succeeds(capsys, ["data", "fetch", "emodb"]).out.strip() == f"emodb: {EMODB_WAVS}"
    monkeypatch.setenv("SEQLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEQLAB_OFFLINE", "1")
    err = fails(capsys, ["data", "fetch", "emodb"]).err
    assert "dataset emodb not found" in err and "downloads are disabled" in err
    assert "emodb.bilderbar.info/download/download.zip" in err


@needs_data
def test_evaluate_scores_the_test_actor_as_its_files_do(tiny_runs):
    """The split's clips, resampled from 22.05 kHz (a few samples overshoot full scale), are
    scored as read, and as the same files given by path."""
    model = seqlab.load(tiny_runs["emodb"])
    report = model.evaluate("test").scores
    mine = [n for n in NAMES if parse_emodb_name(n).speaker == "16"]
    by_path = model.score(
        [str(EMODB_WAVS / n) for n in mine], [parse_emodb_name(n).emotion for n in mine]
    )
    assert report["examples"] == len(mine) == 71
    assert report["confusion"] == by_path["confusion"] and report["uar"] == by_path["uar"]


def test_the_release_is_downloaded_into_the_cache_and_a_bad_archive_keeps_nothing(
    tmp_path, monkeypatch
):
    """``download_emodb`` on a local zip laid out as the release (``wav/NAME``, 16 kHz; a
    ``file://`` URL, offline): its WAVs land in the cache's ``emodb/wav`` at once."""
    from seqlab.data.emodb import download_emodb

    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    originals = _fake_original(tmp_path / "release")
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for name in NAMES:
            out.write(originals / name, f"wav/{name}")
        out.writestr("erkennung.txt", "not a wav")
    folder = download_emodb(archive.as_uri())
    assert folder == tmp_path / "cache" / "emodb" / "wav" and emodb_variant(folder) == "original"
    assert sorted(p.name for p in folder.iterdir()) == NAMES
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "other"))
    with pytest.raises(DataError, match="not a readable zip archive.*nothing was kept"):
        download_emodb((tmp_path / "bad.zip").as_uri())
    assert not (tmp_path / "other" / "emodb" / "wav").exists()
    with zipfile.ZipFile(tmp_path / "short.zip", "w") as out:  # a file missing
        for name in NAMES[1:]:
            out.write(originals / name, f"wav/{name}")
    with pytest.raises(DataError, match=rf"1 missing \(first {NAMES[0]}\)"):
        download_emodb((tmp_path / "short.zip").as_uri())
    assert not (tmp_path / "other" / "emodb" / "wav").exists()
    assert [p.name for p in (tmp_path / "other" / "emodb").iterdir()] == []  # no work folder
