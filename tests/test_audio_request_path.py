"""One path per request (issue "One path per request"): a ``POST /classify-audio`` asking for
attention, a ``seqlab classify --attention-png`` and the Python API's ``over_time`` parse each
WAV header once, hear each clip once (the no-speech detector), compute each heard clip's log-mel
once and run the model's body over it once, whatever outputs were asked; the answers are those
of the plain request (probabilities) and of the Python API (frames, attention over time).

Calls are counted where they are made: the log-mel front end (:class:`seqlab.nn.audio.LogMel`),
the detector (:func:`seqlab.data.speech.detect_speech`), the WAV header's check
(:func:`seqlab.data.wav.wav_info`) and every layer of the body (its encoder blocks), each
counted in clips (rows of the batches it was given)."""

from __future__ import annotations

import base64
import io
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import soundfile
import torch
from torch import Tensor

import seqlab
from seqlab.config import config_from_dict
from seqlab.data import speech, wav
from seqlab.data.audio_batching import pad_waves
from seqlab.nn.audio import LogMel
from seqlab.nn.transformer import EncoderBlock
from seqlab.serve import Limits, create_app
from seqlab.tasks.audio.predictor import ClipClassifier, model_of
from seqlab.tasks.audio.reader import Reading
from seqlab.tasks.classifier.base import Classes
from tiny_runs import TONES, tone

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


class Calls:
    """Clips seen by each counted step, call by call (``rows["log-mel"] == [2]``: one call over
    a batch of two clips)."""

    def __init__(self) -> None:
        self.rows: dict[str, list[int]] = {}

    def add(self, what: str, clips: int) -> None:
        self.rows.setdefault(what, []).append(clips)

    def clips(self, what: str) -> int:
        return sum(self.rows.get(what, []))

    def calls(self, what: str) -> int:
        return len(self.rows.get(what, []))


def _everywhere(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., Any], new: Any) -> None:
    """``fn`` replaced by ``new`` in every seqlab module that holds it (``from x import fn``)."""
    for name, module in list(sys.modules.items()):
        if name == "seqlab" or name.startswith("seqlab."):
            for attr, value in list(vars(module).items()):
                if value is fn:
                    monkeypatch.setattr(module, attr, new)


def counting(monkeypatch: pytest.MonkeyPatch, *models: ClipClassifier) -> Calls:
    """Count, from now on, the log-mel, the detector, the WAV header's check and each layer of
    the bodies of ``models``, in clips."""
    calls = Calls()
    log_mel = LogMel.forward

    def counted_log_mel(self, waves, *args, **kwargs):
        calls.add("log-mel", waves.shape[0])
        return log_mel(self, waves, *args, **kwargs)

    monkeypatch.setattr(LogMel, "forward", counted_log_mel)
    detect = speech.detect_speech

    def counted_detect(waves, lengths, *args, **kwargs):
        calls.add("speech", len(lengths))
        return detect(waves, lengths, *args, **kwargs)

    _everywhere(monkeypatch, detect, counted_detect)
    info = wav.wav_info

    def counted_info(fh, name):
        calls.add("wav header", 1)
        return info(fh, name)

    _everywhere(monkeypatch, info, counted_info)
    for p in models:
        blocks = [m for m in p.model.body.modules() if isinstance(m, EncoderBlock)]
        for layer, block in enumerate(blocks):
            handle = block.register_forward_hook(
                lambda _m, args, _out, layer=layer: calls.add(f"layer {layer}", args[0].shape[0])
            )
            _REMOVE.append(handle)
    return calls


_REMOVE: list[Any] = []


@pytest.fixture(autouse=True)
def _remove_hooks():
    yield
    while _REMOVE:
        _REMOVE.pop().remove()


def _wav_bytes(samples: np.ndarray, rate: int = 8000) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, samples, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


#: two tones of different lengths (a padded batch) and a clip of silence (no speech), as WAVs
WAVS = {
    "high": _wav_bytes(tone(TONES["high"], 0.5)),
    "low": _wav_bytes(tone(TONES["low"], 0.3)),
    "silence": _wav_bytes(np.zeros(2400, np.float32)),
}
#: their samples, as read back
CLIPS = {name: soundfile.read(io.BytesIO(data), dtype="float32")[0] for name, data in WAVS.items()}


def _reference(p: ClipClassifier, samples: np.ndarray) -> tuple[Tensor, Tensor]:
    """A clip's frames and attention over time from the model's own ``features`` and
    ``attention`` (each its own pass, the clip alone: the path requests took before)."""
    waves, lengths = pad_waves([torch.from_numpy(samples)])
    with torch.no_grad():
        feats, frames = p.model.features(waves, lengths)
        weights = [w[0] for w in p.model.attention(waves, lengths)]
    reading = Reading(speech.Speech(True, 0.0), torch.zeros(2), feats[0, : int(frames[0])], weights)
    return reading.feats, p.reader.over_time(reading)


@pytest.fixture(scope="module")
def att(tiny_runs):
    return seqlab.load(tiny_runs["audio-transformer"])


@pytest.fixture(scope="module")
def client(att):
    with TestClient(create_app({"att": att}, limits=Limits(max_audio_seconds=5.0))) as c:
        yield c


def _post(client, **fields):
    audio = [base64.b64encode(data).decode() for data in WAVS.values()]
    answer = client.post("/classify-audio", json={"model": "att", "audio": audio, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()["results"]


def test_a_request_with_attention_reads_each_clip_once(att, client, monkeypatch):
    calls = counting(monkeypatch, att)
    results = _post(client, attention=True, features=True)
    layers = len([m for m in att.model.body.modules() if isinstance(m, EncoderBlock)])
    print("per request of 3 clips (2 with speech):", calls.rows)
    assert calls.clips("wav header") == 3  # each recording's header: once
    assert calls.clips("speech") == 3  # each clip heard once
    assert calls.clips("log-mel") == 2 and calls.calls("log-mel") == 1  # the 2 heard, batched
    for layer in range(layers):  # the body: once over each heard clip
        assert calls.clips(f"layer {layer}") == 2 and calls.calls(f"layer {layer}") == 1
    assert [r["speech"] for r in results] == [True, True, False]
    assert results[2]["attention"] is None and results[2]["features"] is None


def test_attention_and_features_change_no_answer(att, client):
    plain = _post(client)
    with_features = _post(client, features=True)
    with_attention = _post(client, attention=True)
    for a, f, b in zip(plain, with_features, with_attention, strict=True):
        assert a["label"] == f["label"] == b["label"]
        assert a["probabilities"] == f["probabilities"]  # the same pass, the frames kept
        for label, p in a["probabilities"].items():
            assert b["probabilities"][label] == pytest.approx(p, abs=1e-6)
        assert a["features"] is None and a["attention"] is None
        assert f["features"] == b["features"]
    for name, r in zip(CLIPS, with_attention[:2], strict=False):
        feats, received = _reference(att, CLIPS[name])
        np.testing.assert_allclose(r["features"], feats.numpy(), rtol=0, atol=1e-4)
        np.testing.assert_allclose(r["attention"], received.numpy(), rtol=0, atol=1e-4)
        api = att.over_time((CLIPS[name], 8000))  # the Python API: the same numbers, unrounded
        torch.testing.assert_close(api, (feats, received), rtol=0, atol=1e-6)


def test_the_python_api_reads_a_clip_once_for_its_attention(att, monkeypatch, tmp_path):
    clip = (CLIPS["high"], 8000)
    calls = counting(monkeypatch, att)
    feats, received = att.over_time(clip)
    print("over_time of one clip:", calls.rows)
    assert calls.clips("speech") == calls.clips("log-mel") == calls.clips("layer 0") == 1
    names, weights = att.attention(clip)
    assert len(names) == weights[0].shape[-1] == len(feats)
    assert calls.clips("speech") == calls.clips("log-mel") == calls.clips("layer 0") == 2
    calls.rows.clear()
    paths = [tmp_path / f"{name}.wav" for name in CLIPS]
    for path, data in zip(paths, WAVS.values(), strict=True):
        path.write_bytes(data)
    out = att.predict([str(p) for p in paths], attention_png=tmp_path / "figures")
    print("seqlab classify --attention-png of 3 files (2 with speech):", calls.rows)
    assert calls.clips("wav header") == calls.clips("speech") == 3
    assert calls.clips("log-mel") == calls.clips("layer 0") == 2
    assert [f.name for f in out.figures] == ["attention-0001.png", "attention-0002.png"]
    assert [label for label, _ in out.found] == [
        label for label, _ in att.classify([str(p) for p in paths])
    ]


def _vit() -> ClipClassifier:
    cfg = config_from_dict(
        {
            "data": {"dataset": "audio-folder", "path": "unused"},
            "model": {
                "arch": "audio_classifier",
                "features": {"n_mels": 16},
                "max_frames": 64,
                "body": {
                    "arch": "vit",
                    "patch_size": 8,
                    "d_model": 16,
                    "num_heads": 2,
                    "num_layers": 2,
                    "d_ff": 32,
                    "dropout": 0.0,
                },
            },
        }
    )
    torch.manual_seed(0)
    return ClipClassifier(model_of(cfg, 2).eval(), cfg, Classes(["high", "low"]))


def test_a_vit_reads_each_clip_once_and_answers_as_alone(monkeypatch):
    vit = _vit()
    clips = [(CLIPS["high"], 8000), (CLIPS["low"], 8000)]
    alone = [_reference(vit, x) for x, _ in clips]
    probs = vit.probabilities(clips)
    calls = counting(monkeypatch, vit)
    with TestClient(create_app({"vit": vit}, limits=Limits(max_audio_seconds=5.0))) as c:
        audio = [base64.b64encode(WAVS[name]).decode() for name in ("high", "low")]
        answer = c.post("/classify-audio", json={"model": "vit", "audio": audio, "attention": True})
    assert answer.status_code == 200, answer.text
    assert calls.clips("speech") == calls.clips("log-mel") == calls.clips("layer 1") == 2
    assert Counter(calls.calls(k) for k in calls.rows if k != "wav header") == Counter({1: 4})
    for r, (feats, received), row in zip(answer.json()["results"], alone, probs, strict=True):
        np.testing.assert_allclose(r["features"], feats.numpy(), rtol=0, atol=1e-4)
        np.testing.assert_allclose(r["attention"], received.numpy(), rtol=0, atol=1e-4)
        assert list(r["probabilities"].values()) == pytest.approx(row.tolist(), abs=1e-6)


def test_scoring_recordings_reads_each_once(att, monkeypatch, tmp_path):
    """``score`` (and so ``evaluate`` on files) parses each WAV header once, hears each clip
    once and runs the log-mel and the body once per clip; a clip with no speech is refused by
    name, after that one reading."""
    paths = []
    for name in ("high", "low"):
        paths.append(tmp_path / f"{name}.wav")
        paths[-1].write_bytes(WAVS[name])
    expected = [label for label, _ in att.classify([str(p) for p in paths])]
    calls = counting(monkeypatch, att)
    scores = att.score([str(p) for p in paths], expected)
    print("score of 2 files:", calls.rows)
    assert scores["accuracy"] == 1.0
    assert calls.clips("wav header") == calls.clips("speech") == 2
    assert calls.clips("log-mel") == calls.clips("layer 0") == 2
    calls.rows.clear()
    (tmp_path / "silence.wav").write_bytes(WAVS["silence"])
    with pytest.raises(Exception, match=r"silence\.wav: no speech .*1 of 3 recording"):
        att.score([*map(str, paths), str(tmp_path / "silence.wav")], [*expected, "high"])
    assert calls.clips("wav header") == calls.clips("speech") == 3
