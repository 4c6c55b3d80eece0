"""The audio task end to end on tiny runs trained on tones (tests/tiny_runs.py: ``audio``, a CNN
over log-mel frames, and ``audio-transformer``): the command line, the Python API and the server
answer the same for the same file; a recording in another format classifies as the original;
every bad recording is one line naming it, everywhere, and nothing is written."""

from __future__ import annotations

import base64
import json
import warnings

import numpy as np
import pytest
import soundfile
import torch

import seqlab
from cli_checks import fails, succeeds
from precision_helpers import PRECISIONS, resolved
from seqlab.data.audio import AudioError
from seqlab.errors import SeqlabError
from seqlab.serve import Limits, create_app
from tiny_runs import TONES, tone

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


@pytest.fixture(scope="module")
def audio(tiny_runs):
    return tiny_runs["audio"]


@pytest.fixture
def wav(tmp_path):
    """An 8 kHz mono 16-bit recording of the high tone."""
    path = tmp_path / "high.wav"
    soundfile.write(path, tone(TONES["high"], 0.5), 8000, subtype="PCM_16")
    return path


@pytest.fixture(scope="module")
def client(tiny_runs):
    models = {
        "tones": seqlab.load(tiny_runs["audio"]),
        "att": seqlab.load(tiny_runs["audio-transformer"]),
    }
    limits = Limits(max_audio_seconds=5.0, max_sample_rate=48_000, max_channels=2)
    with TestClient(create_app(models, limits=limits)) as c:
        yield c


def _b64(path):
    return base64.b64encode(path.read_bytes()).decode()


def test_cli_api_and_server_agree_on_one_file(audio, wav, client, capsys):
    label, prob, shown = succeeds(capsys, ["classify", "--run", audio, wav]).out.split("\t")
    assert shown.strip() == str(wav) and label == "high"
    model = seqlab.load(audio)
    probs = model.probabilities(str(wav))
    assert model.classify(str(wav)) == ("high", pytest.approx(float(probs.max()), abs=1e-6))
    assert float(prob) == pytest.approx(float(probs.max()), abs=5e-5)
    body = client.post("/classify-audio", json={"model": "tones", "audio": _b64(wav)}).json()
    (heard,) = body["results"]
    assert heard["label"] == "high" and heard["sample_rate"] == 8000
    assert heard["seconds"] == pytest.approx(0.5)
    for name, p in zip(model.labels, probs.tolist(), strict=True):
        assert heard["probabilities"][name] == pytest.approx(p, abs=1e-6)
    samples, rate = soundfile.read(wav, dtype="float32")
    assert model.classify((samples, rate)) == model.classify(str(wav))  # raw (samples, rate)


def test_other_formats_of_a_recording_classify_as_the_original(audio, tmp_path):
    """44.1 kHz stereo 24-bit and 16 kHz float copies, made here from the same tone."""
    model = seqlab.load(audio)
    seconds = 0.5
    original = tmp_path / "original.wav"
    soundfile.write(original, tone(TONES["low"], seconds, 8000), 8000, subtype="PCM_16")
    stereo = tmp_path / "stereo.wav"
    left = tone(TONES["low"], seconds, 44100)
    soundfile.write(stereo, np.stack([left, left], axis=1), 44100, subtype="PCM_24")
    floats = tmp_path / "float.wav"
    soundfile.write(floats, tone(TONES["low"], seconds, 16000), 16000, subtype="FLOAT")
    base = model.probabilities(str(original))
    for copy in (stereo, floats):
        probs = model.probabilities(str(copy))
        assert model.classify(str(copy))[0] == model.classify(str(original))[0] == "low"
        torch.testing.assert_close(probs, base, atol=0.02, rtol=0)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_one_recording_alone_and_in_a_padded_batch(tiny_runs, tmp_path, precision):
    model = seqlab.load(tiny_runs["audio-transformer"])
    model.precision = resolved(precision)
    clips = [(tone(f, s), 8000) for f, s in ((TONES["low"], 0.3), (TONES["high"], 0.9))]
    together = model.probabilities(clips)
    for i, clip in enumerate(clips):
        alone = model.probabilities(clip)
        torch.testing.assert_close(
            alone, together[i], atol=1e-5 if precision == "fp32" else 0.02, rtol=0
        )


def _bad_files(tmp_path):
    """Each bad recording and what its error must say."""
    good = tmp_path / "good.wav"
    soundfile.write(good, tone(TONES["low"], 0.5), 8000, subtype="PCM_16")
    files = {}
    (tmp_path / "notes.wav").write_text("not audio at all\n")
    files["notes.wav"] = "not a WAV"
    (tmp_path / "cut.wav").write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    files["cut.wav"] = "truncated"
    soundfile.write(tmp_path / "empty.wav", np.zeros(0, np.float32), 8000, subtype="PCM_16")
    files["empty.wav"] = "empty"
    nan = tone(TONES["low"], 0.2)
    nan[100] = np.nan
    soundfile.write(tmp_path / "nan.wav", nan, 8000, subtype="FLOAT")
    files["nan.wav"] = "NaN"
    inf = tone(TONES["low"], 0.2)
    inf[5] = np.inf
    soundfile.write(tmp_path / "inf.wav", inf, 8000, subtype="FLOAT")
    files["inf.wav"] = "infinite"
    return files


def test_every_bad_recording_is_one_line_naming_it(tiny_runs, tmp_path, client, capsys):
    files = _bad_files(tmp_path)
    audio = tiny_runs["audio-transformer"]
    model = seqlab.load(audio)
    figures = tmp_path / "figures"
    for name, says in files.items():
        path = tmp_path / name
        # the command line: one line naming the file, and no figure folder made
        err = fails(capsys, ["classify", "--run", audio, path, "--attention-png", figures]).err
        assert len(err.strip().splitlines()) == 1 and name in err and says in err, err
        assert not figures.exists()
        # the Python API
        with pytest.raises(AudioError, match=says) as raised:
            model.classify(str(path))
        assert name in str(raised.value)
        # the server: 422 naming the recording
        answer = client.post("/classify-audio", json={"model": "att", "audio": _b64(path)})
        assert answer.status_code == 422, answer.text
        assert "audio" in answer.json()["error"], answer.json()


def test_a_long_recording_is_refused_by_its_limit(audio, tmp_path, client, capsys):
    """An hour of audio: the server's max_audio_seconds (413) from the header alone; the command
    line's and the API's limit (the model's longest), both naming the file."""
    hour = tmp_path / "hour.wav"
    with soundfile.SoundFile(hour, "w", 8000, 1, subtype="PCM_16") as f:
        block = np.zeros(8000 * 60, np.int16)
        for _ in range(60):
            f.write(block)
    answer = client.post("/classify-audio", json={"model": "tones", "audio": _b64(hour)})
    # 57 MB as base64: the body's own limit answers first
    assert answer.status_code == 413 and answer.json()["limit"] == "max_body_bytes"
    short_enough = tmp_path / "six.wav"
    soundfile.write(short_enough, np.zeros(8000 * 6, np.float32), 8000, subtype="PCM_16")
    answer = client.post("/classify-audio", json={"model": "tones", "audio": _b64(short_enough)})
    assert answer.status_code == 413 and answer.json()["limit"] == "max_audio_seconds"
    assert "6.0 s long" in answer.json()["error"]
    err = fails(capsys, ["classify", "--run", audio, hour]).err
    assert "hour.wav" in err and "3600.00 s long" in err
    with pytest.raises(AudioError, match="hour.wav: 3600.00 s long"):
        seqlab.load(audio).classify(str(hour))


def test_the_servers_limits_on_rate_and_channels_are_named(tmp_path, client):
    fast = tmp_path / "fast.wav"
    soundfile.write(fast, tone(TONES["low"], 0.2, 96000), 96000, subtype="PCM_16")
    answer = client.post("/classify-audio", json={"model": "tones", "audio": _b64(fast)})
    assert answer.status_code == 422 and answer.json()["limit"] == "max_sample_rate"
    wide = tmp_path / "wide.wav"
    soundfile.write(wide, np.zeros((800, 4), np.float32), 8000, subtype="PCM_16")
    answer = client.post("/classify-audio", json={"model": "tones", "audio": _b64(wide)})
    assert answer.status_code == 422 and answer.json()["limit"] == "max_channels"
    junk = client.post("/classify-audio", json={"model": "tones", "audio": "@@@"})
    assert junk.status_code == 422 and "not valid base64" in junk.json()["error"]


def test_attention_over_time_comes_back_and_is_drawn(tiny_runs, wav, client, capsys, tmp_path):
    run = tiny_runs["audio-transformer"]
    model = seqlab.load(run)
    feats, received = model.over_time(str(wav))
    assert feats.shape == (len(received), 16) and float(received.sum()) == pytest.approx(1.0)
    answer = client.post(
        "/classify-audio", json={"model": "att", "audio": _b64(wav), "attention": True}
    ).json()["results"][0]
    assert len(answer["attention"]) == len(answer["features"]) == len(received)
    assert answer["attention"] == pytest.approx(received.tolist(), abs=1e-4)
    figures = tmp_path / "att"
    succeeds(capsys, ["classify", "--run", run, wav, "--attention-png", figures])
    assert (figures / "attention-0001.png").stat().st_size > 1000
    refused = client.post(
        "/classify-audio", json={"model": "tones", "audio": _b64(wav), "attention": True}
    )
    assert refused.status_code == 422 and "no self-attention" in refused.json()["error"]


def test_models_lists_the_audio_route_and_panel(client):
    info = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert info["tones"]["route"] == "/classify-audio"
    assert info["tones"]["panel"] == "/panels/audio_classification.js"
    assert info["tones"]["labels"] == ["high", "low"] and info["tones"]["sample_rate"] == 8000
    assert info["att"]["attention"] == ["self"] and info["tones"]["attention"] == []


def test_evaluate_scores_the_test_split_with_a_confusion_matrix(audio, tmp_path, capsys):
    png = tmp_path / "confusion.png"
    out = succeeds(capsys, ["evaluate", "--run", audio, "--json", "--png", png]).out
    report = json.loads(out)
    assert report["split"] == "test" and report["accuracy"] == 1.0
    assert png.stat().st_size > 1000


def test_an_audio_dataset_needs_an_audio_model_and_says_so():
    from seqlab.config import config_from_dict
    from seqlab.errors import ConfigError

    with pytest.raises(ConfigError, match="fsdd is an audio classification dataset, but "):
        config_from_dict({"data": {"dataset": "fsdd"}, "model": {"arch": "cnn_text"}})
    with pytest.raises(ConfigError, match="is a classification dataset, but model.arch=audio"):
        config_from_dict({"data": {"dataset": "sst2"}, "model": {"arch": "audio_classifier"}})


def test_the_python_api_never_draws_over_a_users_files(tiny_runs, tmp_path):
    """``predict(..., attention_png=DIR)`` follows --attention-png's rule (seqlab.storage.outputs):
    a folder holding the user's ``attention-0001.png`` is refused before any work, naming it."""
    model = seqlab.load(tiny_runs["audio-transformer"])
    out = tmp_path / "maps"
    out.mkdir()
    (out / "attention-0001.png").write_text("my figure")
    clip = (tone(TONES["high"], 0.5), 8000)
    with pytest.raises(SeqlabError, match="attention-0001.png") as caught:
        model.predict([clip], attention_png=out)
    assert "attention_png" in str(caught.value) and "did not write" in str(caught.value)
    assert [p.name for p in out.iterdir()] == ["attention-0001.png"]
    assert (out / "attention-0001.png").read_text() == "my figure"
    fresh = tmp_path / "fresh"
    assert model.predict([clip], attention_png=fresh).figures == [fresh / "attention-0001.png"]
