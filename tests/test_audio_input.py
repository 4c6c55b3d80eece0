"""Audio input, read right or refused (seqlab.data.audio, seqlab.data.wav, seqlab.data.speech):
each doubtful input gives the canonical recording's answer or one line naming it, and the
command line, the Python API and the server say the same; no speech is an answer, on every
surface; a rate below the model's warns, naming both rates, on every surface."""

from __future__ import annotations

import base64
import io
import os
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest
import soundfile
import torch

import seqlab
from cli_checks import fails, succeeds
from seqlab.audio_limits import LOCAL_LIMITS, SERVER_LIMITS
from seqlab.data.audio import AudioError, AudioWarning, LowRateWarning, load_clip
from seqlab.data.audio_batching import pad_waves
from seqlab.data.speech import SPEECH_DBFS, detect_speech, loudest_frames
from seqlab.serve import Limits, create_app
from seqlab.tasks.audio.predictor import NoSpeech
from tiny_runs import TONES, tone

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

HIGH = tone(TONES["high"], 0.5)  # the canonical recording: 8 kHz mono float, peak 0.5


@pytest.fixture(scope="module")
def run(tiny_runs):
    return tiny_runs["audio-transformer"]


@pytest.fixture(scope="module")
def model(run):
    return seqlab.load(run)


@pytest.fixture(scope="module")
def client(run):
    with TestClient(create_app({"att": seqlab.load(run)}, limits=Limits())) as c:
        yield c


def wav_bytes(samples, rate, subtype="PCM_16"):
    buf = io.BytesIO()
    soundfile.write(buf, samples, rate, subtype=subtype, format="WAV")
    return buf.getvalue()


def post(client, raw):
    data = base64.b64encode(raw).decode()
    return client.post("/classify-audio", json={"model": "att", "audio": data})


def _noise(dbfs, n=4000):
    return np.random.default_rng(0).normal(0, 10 ** (dbfs / 20), n).astype(np.float32)


# ------------------------------------------------------------------------- arrays: the rules
def test_channels_first_and_last_give_the_same_probabilities(model):
    base = model.probabilities((HIGH, 8000))
    both = np.stack([HIGH, HIGH])  # (2, N): torchaudio's layout
    torch.testing.assert_close(model.probabilities((both, 8000)), base, atol=1e-6, rtol=0)
    torch.testing.assert_close(model.probabilities((both.T, 8000)), base, atol=1e-6, rtol=0)
    tensor = torch.from_numpy(both)
    torch.testing.assert_close(model.probabilities((tensor, 8000)), base, atol=1e-6, rtol=0)


@pytest.mark.parametrize("shape", [(300, 20), (50, 2), (2, 50), (1, 1), (2, 3, 4000)])
def test_a_shape_that_cannot_tell_channels_from_samples_is_refused(model, shape):
    with pytest.raises(AudioError, match=r"^array 1: samples of shape .*C ≤ 8 channels and N"):
        model.classify((np.zeros(shape, np.float32), 8000))


def test_int16_and_its_float_form_agree_and_wider_types_are_refused(model):
    pcm = np.round(HIGH * 32767).astype(np.int16)
    torch.testing.assert_close(
        model.probabilities((pcm, 8000)),
        model.probabilities((pcm / 32768, 8000)),
        atol=1e-6,
        rtol=0,
    )
    for wide in (np.int32, np.int64):
        with pytest.raises(AudioError, match=f"^array 1: {wide.__name__} samples .*cast to int16"):
            model.classify((pcm.astype(wide), 8000))
    full = pcm.astype(np.int32) << 16  # real 32-bit PCM: scaled by 2**31
    torch.testing.assert_close(
        model.probabilities((full, 8000)), model.probabilities((pcm, 8000)), atol=1e-6, rtol=0
    )
    with pytest.raises(AudioError, match="int64 is no PCM type: cast to int32"):
        model.classify((full.astype(np.int64), 8000))
    assert model.classify((np.zeros(4000, np.int64), 8000)) == (None, 0.0)  # silence either way


@pytest.mark.parametrize(
    "peak, says", [(16384.0, "divide by 32768"), (1.5, "clip them"), (3e5, "divide by 2\\*\\*31")]
)
def test_floats_outside_the_unit_range_are_refused_with_the_conversion(model, client, peak, says):
    loud = HIGH / 0.5 * peak
    with pytest.raises(AudioError, match=f"float samples reach {peak:.6g}, outside .*{says}"):
        model.classify((loud, 8000))
    answer = post(client, wav_bytes(loud, 8000, "FLOAT"))  # a float WAV written so
    assert answer.status_code == 422 and says.replace("\\", "") in answer.json()["error"]


def test_rates_and_source_types_are_read_or_refused_by_type(model, tmp_path):
    expected = model.classify((HIGH, 8000))
    assert model.classify((HIGH, 8000.0)) == model.classify((HIGH, np.int64(8000))) == expected
    raw = wav_bytes(HIGH, 8000)
    path = tmp_path / "high.wav"
    path.write_bytes(raw)
    from_file = model.classify(str(path))
    assert from_file[0] == expected[0]
    with open(path, "rb") as fh:
        assert model.classify(fh) == from_file
    assert model.classify(memoryview(raw)) == model.classify(bytearray(raw)) == from_file
    refused = {
        "sample rate 8000.5; expected a whole number of Hz": (HIGH, 8000.5),
        "without a sample rate; pass \\(samples, rate\\)": HIGH,
        "shape \\(4000,\\) without a sample rate; pass": torch.from_numpy(HIGH),
        "recording 1: None; expected a WAV file \\(a path, its bytes": None,
        "sample rate 0 Hz; expected 1,000 to 768,000 Hz": (HIGH, 0),
    }
    for says, item in refused.items():
        with pytest.raises(AudioError, match=says):
            model.classify(item)
    with open(path) as text, pytest.raises(AudioError, match="text mode; open it in binary"):
        model.classify(text)


# ------------------------------------------------------------------- files: the header's word
def _with_data_size(raw, size):
    out = bytearray(raw)
    assert out[36:40] == b"data"  # soundfile's canonical 44-byte header
    out[40:44] = struct.pack("<I", size)
    return bytes(out)


def test_a_header_that_hides_part_of_the_file_is_refused_everywhere(
    run, model, client, tmp_path, capsys
):
    """35 s whose header says 5 s: read as 5 s it would slip under the server's 30 s."""
    raw = _with_data_size(wav_bytes(np.tile(HIGH, 70), 8000), 5 * 8000 * 2)
    path = tmp_path / "hidden.wav"
    path.write_bytes(raw)
    says = "the header disagrees with the file: its data chunk declares 80,000 bytes"
    with pytest.raises(AudioError, match=f"^{path}: {says}"):
        model.classify(str(path))
    fails(capsys, ["classify", "--run", run, path], f"{path}: {says}")
    answer = post(client, raw)
    assert answer.status_code == 422 and answer.json()["error"].startswith(f"audio: {says}")


def test_what_a_wav_may_hold_besides_its_samples(model):
    raw = wav_bytes(HIGH, 8000)
    expected = model.classify(raw)
    for streaming in (0, 0xFFFFFFFF):  # the sizes writers leave when the length is unknown
        assert model.classify(_with_data_size(raw, streaming))[0] == expected[0]
    listed = bytearray(raw + b"LIST" + struct.pack("<I", 5) + b"INFOx\x00")  # odd, padded
    listed[4:8] = struct.pack("<I", len(listed) - 8)
    assert model.classify(bytes(listed)) == expected
    odd = wav_bytes(np.zeros(1001), 8000, "PCM_U8")  # 1,001 bytes of samples, a pad byte
    for pad in (odd, odd[:-1]):  # the pad byte there, or missing
        assert load_clip(pad).samples.shape == (1001,)
    with pytest.raises(AudioError, match="truncated WAV: its header promises 8,000 bytes"):
        model.classify(raw[:-10])


@pytest.mark.parametrize("rate", [0, 1])
def test_a_corrupt_header_rate_is_named_alike_by_the_cli_and_the_server(
    run, client, tmp_path, capsys, rate
):
    raw = bytearray(wav_bytes(HIGH, 8000))
    raw[24:28] = struct.pack("<I", rate)
    path = tmp_path / "rate.wav"
    path.write_bytes(raw)
    says = f"sample rate {rate} Hz; expected 1,000 to 768,000 Hz"
    fails(capsys, ["classify", "--run", run, path], f"{path}: {says}")
    answer = post(client, bytes(raw))
    assert answer.status_code == 422 and answer.json()["error"].startswith(f"audio: {says}")


# ------------------------------------------------------------------------------- a low rate
def test_a_rate_below_the_models_warns_naming_both_rates_everywhere(run, model, client, tmp_path):
    low = tone(TONES["high"], 0.5, 4000)
    path = tmp_path / "low.wav"
    soundfile.write(path, low, 4000, subtype="PCM_16")
    says = "recorded at 4,000 Hz, below the 8,000 Hz the model reads"
    with pytest.warns(LowRateWarning, match=says):
        assert model.classify((low, 4000))[0] == "high"
    (heard,) = post(client, path.read_bytes()).json()["results"]
    assert heard["label"] == "high" and len(heard["warnings"]) == 1
    assert heard["warnings"][0].startswith(f"audio: {says}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model's own rate: no warning
        model.classify((HIGH, 8000))
        assert post(client, wav_bytes(HIGH, 8000)).json()["results"][0]["warnings"] == []
    # the command line, as a user runs it: the warning on standard error
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cli = [sys.executable, "-m", "seqlab", "classify", "--run", str(run), str(path)]
    done = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("high\t"), done.stderr
    assert f"seqlab: warning: {path}: {says}" in done.stderr


# ------------------------------------------------------------------------- no speech: answers
def _silent_cases():
    """Clips that are no speech, and what the reason says."""
    return {
        "silence": ((np.zeros(4000, np.float32), 8000), "the loudest: digital silence"),
        "noise at -80 dBFS": ((_noise(-80.0), 8000), "reaches -60 dBFS"),
        "antiphase stereo": ((np.stack([HIGH, -HIGH], axis=1), 8000), "digital silence"),
        "one sample": ((np.array([0.5], np.float32), 8000), "1 sample(s)"),
        "100 samples": ((HIGH[:100], 8000), "shorter than one 25 ms analysis window"),
    }


def test_no_speech_is_an_answer_in_the_python_api(model):
    cases = _silent_cases()
    items = [item for item, _ in cases.values()] + [(HIGH, 8000)]
    with pytest.warns(AudioWarning, match="2 channels cancel out when averaged"):
        found = model.classify(items)
        probs = model.probabilities(items)
        speech = model.speech(items)
    assert found[:-1] == [(None, 0.0)] * len(cases) and found[-1][0] == "high"
    assert probs[:-1].abs().sum() == 0 and float(probs[-1].sum()) == pytest.approx(1.0)
    for (name, (_, says)), heard in zip(cases.items(), speech, strict=False):
        assert not heard.heard and says in heard.reason, name
    assert speech[-1].heard and speech[-1].reason is None
    with pytest.raises(NoSpeech, match="^array 1: no speech .*no attention to show"):
        model.over_time(cases["one sample"][0])


def test_no_speech_on_the_command_line_and_no_attention_drawn(run, tmp_path, capsys):
    one = tmp_path / "one.wav"
    soundfile.write(one, np.array([0.5]), 8000, subtype="PCM_16")
    quiet = tmp_path / "quiet.wav"
    soundfile.write(quiet, np.zeros(4000), 8000, subtype="PCM_16")
    good = tmp_path / "good.wav"
    soundfile.write(good, HIGH, 8000, subtype="PCM_16")
    figures = tmp_path / "figures"
    argv = ["classify", "--run", run, one, quiet, good, "--attention-png", figures]
    done = succeeds(capsys, argv)
    lines = [line.split("\t") for line in done.out.splitlines()]
    assert lines[0] == ["no speech", "0.0000", str(one)]
    assert lines[1] == ["no speech", "0.0000", str(quiet)] and lines[2][0] == "high"
    assert f"seqlab: note: {one}: no speech: 1 sample(s)" in done.err
    assert f"{one}: no attention figure: no speech" in done.err
    assert sorted(p.name for p in figures.glob("*.png")) == ["attention-0003.png"]


def test_no_speech_from_the_server(client):
    (item, _), (says_item, says) = (
        _silent_cases()["antiphase stereo"],
        _silent_cases()["one sample"],
    )
    answer = post(client, wav_bytes(item[0], 8000, "FLOAT"))
    (heard,) = answer.json()["results"]
    assert heard["label"] is None and heard["speech"] is False and heard["probability"] == 0
    assert "digital silence" in heard["reason"] and "cancel out" in heard["warnings"][0]
    body = {"model": "att", "audio": base64.b64encode(wav_bytes(says_item[0], 8000)).decode()}
    (heard,) = client.post("/classify-audio", json={**body, "attention": True}).json()["results"]
    assert heard["speech"] is False and says in heard["reason"]
    assert heard["attention"] is None and heard["features"] is None


def test_scoring_refuses_a_recording_with_no_speech(model):
    with pytest.raises(AudioError, match="no speech .*1 of 2 recording\\(s\\) have none"):
        model.score([(HIGH, 8000), (np.zeros(4000, np.float32), 8000)], ["high", "low"])


# ------------------------------------------------------------------------ the detector itself
def test_the_detector_answers_alike_alone_and_in_a_padded_batch():
    clips = [
        torch.from_numpy(x)
        for x in (HIGH, np.zeros(3000, np.float32), _noise(-80.0, 2345), HIGH[:150], _noise(-55.0))
    ]
    together = detect_speech(*pad_waves(clips), 8000, 200, 80)
    padded, lengths = pad_waves(clips)
    noisy = padded + 0.9 * (torch.arange(padded.shape[1]) >= lengths[:, None])  # loud padding
    assert detect_speech(noisy, lengths, 8000, 200, 80) == together
    for clip, answer in zip(clips, together, strict=True):
        assert detect_speech(*pad_waves([clip]), 8000, 200, 80) == [answer]
    assert [s.heard for s in together] == [True, False, False, False, True]


def test_the_threshold_sits_below_fsdds_quietest_recording():
    """FSDD's quietest recording's loudest frame is -48.0 dBFS (seqlab.data.speech); a clip
    whose loudest frame is there is speech, 15 dB under the threshold is not."""
    for level, heard in ((-48.0, True), (SPEECH_DBFS + 0.5, True), (SPEECH_DBFS - 15, False)):
        x = torch.full((1, 800), 10 ** (level / 20))  # constant: its RMS is its value
        assert float(loudest_frames(x, torch.tensor([800]), 200, 80)[0]) == pytest.approx(level)
        assert detect_speech(x, torch.tensor([800]), 8000, 200, 80)[0].heard == heard


# ------------------------------------------------------------------------------ the limits
def test_each_surfaces_limits_are_named_in_one_place(model):
    limits = Limits()
    assert limits.max_audio_seconds == SERVER_LIMITS.max_seconds == 30.0
    assert limits.max_sample_rate == SERVER_LIMITS.max_sample_rate
    assert limits.max_channels == SERVER_LIMITS.max_channels
    assert model.max_seconds <= LOCAL_LIMITS.max_seconds == 600.0
    assert "shared server" in SERVER_LIMITS.why


def test_infinite_samples_and_overlong_clips_are_named():
    """An infinite sample is named as such (its index and time), not as a level to scale; a clip
    over the length limit is refused with its length and the limit (issue 62's planted bugs)."""
    x = np.zeros(8000, dtype=np.float32)
    x[100] = np.inf
    with pytest.raises(
        AudioError, match=r"0 NaN and 1 infinite sample\(s\), the first at sample 100"
    ):
        load_clip((x, 8000))
    with pytest.raises(AudioError, match=r"3\.00 s long .* over the limit of 2 s"):
        load_clip((np.zeros(24000, dtype=np.float32), 8000), max_seconds=2)


class _Stop(Exception):
    """Raised in place of reading the clips: the check comes before."""


@pytest.mark.parametrize(
    ("dataset", "rate", "native"), [("fsdd", 16000, 8000), ("emodb", 22050, 16000)]
)
def test_training_above_a_datasets_own_rate_warns_before_reading(
    monkeypatch, dataset, rate, native
):
    """``data.sample_rate`` above the rate a speech dataset was recorded at (FSDD 8 kHz, EmoDB
    16 kHz) upsamples every clip: training says so, naming both rates and the key to set, before
    a clip is read; at the dataset's own rate it says nothing."""
    import warnings

    from seqlab.config import load_config
    from seqlab.data.parallel import DataWarning
    from seqlab.tasks.audio import task

    def stop(data, seed):
        raise _Stop

    monkeypatch.setattr(task.readers, "read", stop)
    config = "fsdd-cnn" if dataset == "fsdd" else "emodb-cnn"
    cfg = load_config(config, [f"data.sample_rate={rate}"])
    said = rf"data.sample_rate={rate} is above {dataset}'s recordings, made at {native} Hz"
    warned = pytest.warns(DataWarning, match=said + rf".*set data.sample_rate={native}")
    with warned, pytest.raises(_Stop):
        task.build_experiment(cfg)
    cfg = load_config(config, [f"data.sample_rate={native}"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        with pytest.raises(_Stop):
            task.build_experiment(cfg)
