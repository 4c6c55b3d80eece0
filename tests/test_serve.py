"""``seqlab serve`` through its ASGI interface, as a client sees it: every route, every limit,
bad inputs, keys, CORS, batching under concurrency, streaming, a full queue, time limits, and a
real server process stopped by SIGTERM."""

import asyncio
import base64
import importlib.util
import io
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

import httpx  # noqa: E402

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

import seqlab  # noqa: E402
from conftest import png_claiming  # noqa: E402
from seqlab.errors import SeqlabError  # noqa: E402
from seqlab.serve import Limits, create_app  # noqa: E402
from seqlab.tasks.translation.service import TranslationHandler  # noqa: E402

TASKS = {
    "mt": "translation",
    "bahdanau": "translation",
    "seq2seq": "translation",
    "cls": "classification",
    "vit": "classification",
    "lm": "language_modeling",
    "lm-transformer": "language_modeling",
    "fc": "forecasting",
}
DATES = ["saturday 9 may 1998", "09/05/98", "May 9, 1998", "1 jan 2001", "12.11.1999"]


@pytest.fixture(scope="module")
def models(tiny_runs):
    return {name: seqlab.load(tiny_runs[name]) for name in TASKS}


def client(models, **options):
    """A test client of an app over ``models`` (seqlab's own engine unless asked)."""
    options.setdefault("engine", "seqlab")
    return TestClient(create_app(models, **options), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def api(models):
    with client(models) as c:
        yield c


def png(array):
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def digit(size=28):
    import numpy as np

    x = np.zeros((size, size), dtype=np.uint8)
    x[6:14, 6:14] = 255
    return x


# ----------------------------------------------------------------------------- the routes
def test_health_and_models_describe_every_run(api, models):
    health = api.get("/health")
    assert health.status_code == 200
    body = health.json()
    counts = {k: body.pop(k) for k in ("batches", "texts")}
    assert body == {"status": "ok", "models": len(TASKS), "queued": dict.fromkeys(TASKS, 0)}
    assert counts["batches"].keys() == counts["texts"].keys() == TASKS.keys()
    for name in TASKS:  # every batch holds at least one text
        assert counts["texts"][name] >= counts["batches"][name] >= 0
    infos = {m["name"]: m for m in api.get("/models").json()["models"]}
    assert {n: m["task"] for n, m in infos.items()} == TASKS
    for name, m in infos.items():
        params = {id(p): p.numel() for p in models[name].model.parameters()}
        assert m["parameters"] == sum(params.values())
        assert m["arch"] == models[name].cfg.model.arch
        assert m["checkpoint_step"] == models[name].run.state.step
        assert m["metrics"] and all(k.startswith("val_") for k in m["metrics"])
    assert infos["mt"]["attention"] == ["cross", "encoder", "decoder", "alignment"]
    assert infos["bahdanau"]["attention"] == ["alignment"]
    assert infos["seq2seq"]["attention"] == []
    assert infos["cls"]["labels"] == models["cls"].labels and infos["cls"]["attention"] == ["self"]
    assert infos["vit"]["input"] == "image" and infos["vit"]["attention"] == ["self", "rollout"]
    assert infos["vit"]["image_size"] == 28 and infos["fc"]["window"] == 4
    assert infos["mt"]["languages"] is None  # dates: generated strings, not two languages
    assert {m["engine"] for m in infos.values()} == {"seqlab"}


def test_translate_gives_the_predictors_translations_and_nbest(api, models):
    mt = models["mt"]
    r = api.post("/translate", json={"model": "mt", "text": DATES})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "mt" and body["engine"] == "seqlab"
    assert [t["text"] for t in body["translations"]] == mt.translate(DATES)
    r = api.post("/translate", json={"model": "mt", "text": DATES[0], "beam": 3, "nbest": 2})
    (t,) = r.json()["translations"]
    (hyps,) = mt.hypotheses([DATES[0]], beam=3, nbest=2)
    assert [h["text"] for h in t["hypotheses"]] == [mt.detokenize(h.tokens) for h in hyps]
    assert [h["score"] for h in t["hypotheses"]] == pytest.approx([h.score for h in hyps])
    assert t["text"] == t["hypotheses"][0]["text"] and t["detail"] is None
    body = {"model": "mt", "text": DATES[0], "beam": 3, "nbest": 3, "length_penalty": 0.0}
    (t,) = api.post("/translate", json=body).json()["translations"]
    (hyps,) = mt.hypotheses([DATES[0]], beam=3, nbest=3, length_penalty=0.0)
    assert [h["text"] for h in t["hypotheses"]] == [mt.detokenize(h.tokens) for h in hyps]
    assert [h["score"] for h in t["hypotheses"]] == pytest.approx([h.log_prob for h in hyps])


def _rows_sum_to_one(layers):
    for layer in layers:
        for head in layer:
            for row in head:
                assert sum(row) == pytest.approx(1.0, abs=2e-3)


def test_transformer_attention_every_layer_and_head(api, models):
    mt = models["mt"]
    r = api.post("/translate", json={"model": "mt", "text": DATES[1], "attention": True})
    (t,) = r.json()["translations"]
    d = t["detail"]
    (hyp,) = mt.hypotheses([DATES[1]])[0]
    S, T = len(mt.source_ids(DATES[1])), len(hyp.tokens) + 1
    cfg = mt.cfg.model
    assert len(d["source_tokens"]) == S and d["source_tokens"][-1] == "<eos>"
    assert d["target_tokens"][-1] == "<eos>" and len(d["target_tokens"]) == T
    assert d["target_inputs"][0] == "<bos>" and d["target_inputs"][1:] == d["target_tokens"][:-1]
    shapes = {
        "encoder": (cfg.encoder_layers, cfg.num_heads, S, S),
        "decoder": (cfg.decoder_layers, cfg.num_heads, T, T),
        "cross": (cfg.decoder_layers, cfg.num_heads, T, S),
    }
    for kind, shape in shapes.items():
        assert tuple(torch.tensor(d[kind]).shape) == shape, kind
        _rows_sum_to_one(d[kind])
    decoder = torch.tensor(d["decoder"])  # causal: no weight on later positions
    assert decoder.triu(diagonal=1).abs().max() == 0
    # the teacher-forced pass agrees with the search: the same log-probability in total
    assert sum(d["log_probs"]) == pytest.approx(hyp.log_prob, abs=1e-4)
    assert all(lp <= 0 for lp in d["log_probs"])
    # the alignment is the last layer's cross-attention averaged over heads, as decode() gives
    torch.testing.assert_close(
        torch.tensor(d["alignment"]), torch.tensor(d["cross"][-1]).mean(0), atol=2e-4, rtol=0
    )
    assert t["text"] == mt.translate([DATES[1]])[0]


def test_rnn_alignment_and_a_model_without_attention(api, models):
    r = api.post("/translate", json={"model": "bahdanau", "text": DATES[:2], "attention": True})
    assert r.status_code == 200, r.text
    found = models["bahdanau"].hypotheses(DATES[:2])
    for t, hyps in zip(r.json()["translations"], found, strict=True):
        d = t["detail"]
        assert d["cross"] is None and d["encoder"] is None and d["decoder"] is None
        assert len(d["alignment"]) == len(d["target_tokens"]) == len(hyps[0].tokens) + 1
        _rows_sum_to_one([[d["alignment"]]])
        assert sum(d["log_probs"]) == pytest.approx(hyps[0].log_prob, abs=1e-4)
    r = api.post("/translate", json={"model": "seq2seq", "text": "x", "attention": True})
    assert r.status_code == 422 and "no attention over the source" in r.json()["error"]
    r = api.post("/translate", json={"model": "seq2seq", "text": DATES[0]})
    assert r.json()["translations"][0]["text"] == models["seq2seq"].translate(DATES[:1])[0]


def test_classify_texts_with_attention(api, models):
    cls = models["cls"]
    texts = ["a great story", "an awful film", "loved it"]
    r = api.post("/classify", json={"model": "cls", "text": texts, "attention": True})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [(x["label"], x["probability"]) for x in results] == [
        (label, pytest.approx(p, abs=1e-6)) for label, p in cls.classify(texts)
    ]
    for text, x in zip(texts, results, strict=True):
        assert sum(x["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        names, weights = cls.attention(text)
        a = x["attention"]
        assert a["tokens"] == names and a["rollout"] is None
        assert tuple(torch.tensor(a["layers"]).shape) == (len(weights), *weights[0].shape)
        _rows_sum_to_one(a["layers"])
    r = api.post("/classify", json={"model": "cls", "image": png(digit())})
    assert r.status_code == 422 and "classifies text" in r.json()["error"]


def test_classify_an_uploaded_image_with_rollout(api, models):
    from seqlab.data.images import load_image

    vit = models["vit"]
    image = png(digit())
    for sent in (image, "data:image/png;base64," + image):
        r = api.post("/classify", json={"model": "vit", "image": sent, "attention": True})
        assert r.status_code == 200, r.text
        (x,) = r.json()["results"]
        pixels, _ = load_image(io.BytesIO(base64.b64decode(image)), 28, 1)
        probs = vit.probabilities(pixels[None])[0]
        assert x["probabilities"] == {
            lab: pytest.approx(float(p), abs=1e-6) for lab, p in zip(vit.labels, probs, strict=True)
        }
        a = x["attention"]
        assert len(a["tokens"]) == 17 and a["tokens"][0] == "[CLS]"  # 4 × 4 patches of 7 × 7
        assert tuple(torch.tensor(a["rollout"]).shape) == (4, 4)
        assert 0 < sum(map(sum, a["rollout"])) <= 1.0 + 1e-3
    big = png(digit(56))  # resized to the model's 28 × 28, and said so
    r = api.post("/classify", json={"model": "vit", "image": [big]})
    assert r.status_code == 200 and "56×56 → 28×28" in r.json()["results"][0]["notes"][0]
    for bad, message in [
        ("not base64!", "not valid base64"),
        (base64.b64encode(b"plain text, not a picture").decode(), "not an image file"),
        ("data:image/png,abc", "must be base64"),
    ]:
        r = api.post("/classify", json={"model": "vit", "image": bad})
        assert r.status_code == 422 and message in r.json()["error"], r.text
    r = api.post("/classify", json={"model": "vit", "text": "a digit"})
    assert r.status_code == 422 and "classifies images" in r.json()["error"]


@pytest.mark.parametrize("name", ["lm", "lm-transformer"])
def test_generate_gives_the_predictors_text(api, models, name):
    lm = models[name]
    cases = [
        {"prefix": "the time", "tokens": 30},  # the run's decoding (greedy)
        {"prefix": "the time", "tokens": 30, "temperature": 0.8, "seed": 3},
        {"prefix": "", "tokens": 10, "top_k": 3, "seed": 1},
    ]
    for case in cases:
        r = api.post("/generate", json={"model": name, **case})
        assert r.status_code == 200, r.text
        body = r.json()
        options = {k: case[k] for k in ("temperature", "top_k", "seed") if k in case}
        assert body["text"] == lm.generate(case["prefix"], case["tokens"], **options)
        assert len(body["tokens"]) == case["tokens"]


def _events(text):
    out = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_generate_streams_server_sent_events(api):
    request = {"model": "lm", "prefix": "the time", "tokens": 40, "temperature": 0.9, "seed": 2}
    whole = api.post("/generate", json=request).json()
    with api.stream("POST", "/generate", json={**request, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _events(r.read().decode())
    tokens = [data for kind, data in events if kind == "token"]
    assert [t["index"] for t in tokens] == list(range(1, 41))
    assert [t["token"] for t in tokens] == whole["tokens"]
    assert "the time" + "".join(t["text"] for t in tokens) == whole["text"]
    assert events[-1] == ("done", whole)


def test_forecast_from_values_and_from_a_csv(api, models):
    fc = models["fc"]
    history = [math.sin(0.3 * t) for t in range(40)]
    r = api.post("/forecast", json={"model": "fc", "history": history, "steps": 6})
    assert r.status_code == 200, r.text
    assert r.json()["forecast"] == pytest.approx(fc.forecast(history, 6), abs=1e-6)
    csv = "month,value\n" + "".join(f"{t},{v}\n" for t, v in enumerate(history))
    csv = csv.replace(f"3,{history[3]}", "3,")  # a missing value, interpolated
    r = api.post("/forecast", json={"csv": csv, "missing": "interpolate", "steps": 3})
    assert r.status_code == 200, r.text  # the only forecaster needs no name
    read = r.json()["history"]
    assert read[3] == pytest.approx((history[2] + history[4]) / 2)
    assert r.json()["forecast"] == pytest.approx(fc.forecast(read, 3), abs=1e-6)
    r = api.post("/forecast", json={"csv": csv, "steps": 3})
    assert r.status_code == 422 and r.json()["error"] == (  # what a client can do, no config
        "csv:5: missing value in column 'value'; fill it, or set \"missing\" in the request: "
        "interpolate or drop"
    )
    r = api.post("/forecast", json={"csv": csv, "column": "x", "missing": "drop", "steps": 3})
    assert r.status_code == 422
    assert r.json()["error"].endswith('; set "column" in the request to one of them')
    r = api.post("/forecast", json={"csv": "t,v\n1,2\n2,abc\n", "steps": 3})
    assert r.status_code == 422 and "csv:3: 'abc'" in r.json()["error"]
    r = api.post("/forecast", json={"history": [1.0, 2.0], "steps": 3})
    assert r.status_code == 422 and "at least τ = 4 past values" in r.json()["error"]
    r = api.post("/forecast", json={"history": history, "csv": csv, "steps": 3})
    assert r.status_code == 422 and "either history" in r.json()["error"]
    r = api.post(
        "/forecast",
        content=b'{"history": [1, 2, 3, NaN, 5], "steps": 2}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422


def test_the_page_and_the_api_schema(api):
    page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/app.js">' in page.text
    for name, kind in [("app.js", "javascript"), ("style.css", "text/css")]:
        r = api.get(f"/static/{name}")
        assert r.status_code == 200 and kind in r.headers["content-type"]
        # no CDN, nothing fetched from elsewhere: the page works offline
        assert "http://" not in r.text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in r.text
    assert "https://" not in page.text and "http://" not in page.text
    schema = api.get("/openapi.json").json()
    assert {"/translate", "/classify", "/generate", "/forecast", "/models", "/health"} <= set(
        schema["paths"]
    )
    assert api.get("/docs").status_code == 200


def test_head_answers_wherever_get_does_with_the_same_headers_and_no_body(api):
    for path in ("/", "/health", "/models", "/static/app.js", "/panels/translation.js"):
        got, head = api.get(path), api.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert head.content == b"", path
    assert "head" not in api.get("/openapi.json").json()["paths"]["/health"]


# ------------------------------------------------------------------------------ bad input
def test_bad_requests_are_json_errors_naming_the_problem(api):
    cases = [
        ("/translate", {"model": "nope", "text": "x"}, 404, "no model named 'nope'"),
        (
            "/translate",
            {"text": "x"},
            422,
            "model: required, since this server holds 3 translation models (",
        ),
        ("/translate", {"model": "lm", "text": "x"}, 422, "use POST /generate"),
        ("/generate", {"model": "mt"}, 422, "use POST /translate"),
        ("/translate", {"model": "mt", "text": ""}, 422, "text is empty"),
        ("/translate", {"model": "mt", "text": ["a", " "]}, 422, "text 2 is empty"),
        ("/translate", {"model": "mt", "text": []}, 422, "empty list"),
        ("/translate", {"model": "mt"}, 422, "text: Field required"),
        ("/translate", {"model": "mt", "text": 3}, 422, "valid string"),
        ("/translate", {"model": "mt", "text": "x", "beam": "wide"}, 422, "beam: Input should"),
        ("/translate", {"model": "mt", "text": "x", "beam": 0}, 422, "beam: Input should be"),
        ("/translate", {"model": "mt", "text": "x", "beam": 2, "nbest": 3}, 422, "nbest 3 needs"),
        ("/translate", {"model": "mt", "text": "x", "length_penalty": 1}, 422, "is greedy search"),
        ("/translate", {"model": "mt", "text": "x", "length_penalty": -1}, 422, "length_penalty"),
        ("/translate", {"model": "mt", "text": "x", "path": "/etc"}, 422, "path: Extra inputs"),
        ("/classify", {"model": "cls"}, 422, "give text"),
        ("/generate", {"model": "lm", "tokens": -1}, 422, "tokens: Input should be"),
        ("/generate", {"model": "lm", "temperature": 0, "top_k": 2}, 422, "top_k applies"),
        ("/forecast", {"model": "fc", "history": [1, 2, 3, 4, 5]}, 422, "steps: Field required"),
    ]
    for route, body, status, message in cases:
        r = api.post(route, json=body)
        assert r.status_code == status, (route, body, r.text)
        assert r.headers["content-type"] == "application/json"
        assert message in r.json()["error"], (route, body, r.json())
    r = api.post("/translate", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "JSON" in r.json()["error"]
    assert api.get("/nowhere").json() == {"error": "Not Found", "limit": None}
    assert api.post("/health").status_code == 405 and "error" in api.post("/health").json()


def test_an_internal_error_is_json_without_a_traceback(models, monkeypatch):
    def broken(self, jobs):
        raise RuntimeError("secret detail from /srv/models")

    monkeypatch.setattr(TranslationHandler, "run", broken)
    with client({"mt": models["mt"]}) as c:
        r = c.post("/translate", json={"text": "09/05/98"})
    assert r.status_code == 500 and r.headers["content-type"] == "application/json"
    assert r.json() == {
        "error": "internal server error (the server's log has the details)",
        "limit": None,
    }


@pytest.fixture(scope="module")
def small(models):
    limits = Limits(
        max_chars=20,
        max_texts=2,
        max_beam=3,
        max_nbest=2,
        max_tokens=5,
        max_steps=3,
        max_history=10,
        max_upload_bytes=400,
        max_image_pixels=40 * 40,
        max_body_bytes=3000,
    )
    with client(models, limits=limits) as c:
        yield c


@pytest.mark.parametrize(
    ("route", "body", "status", "limit"),
    [
        ("/translate", {"model": "mt", "text": "x" * 21}, 413, "max_chars"),
        ("/translate", {"model": "mt", "text": ["a", "b", "c"]}, 413, "max_texts"),
        ("/translate", {"model": "mt", "text": "a", "beam": 4}, 422, "max_beam"),
        ("/translate", {"model": "mt", "text": "a", "beam": 3, "nbest": 3}, 422, "max_nbest"),
        ("/classify", {"model": "cls", "text": ["a", "b", "c"]}, 413, "max_texts"),
        ("/classify", {"model": "vit", "image": "A" * 600}, 413, "max_upload_bytes"),
        ("/classify", {"model": "vit", "image": png(digit(56))}, 413, "max_image_pixels"),
        ("/generate", {"model": "lm", "tokens": 6}, 422, "max_tokens"),
        ("/generate", {"model": "lm", "prefix": "p" * 21}, 413, "max_chars"),
        ("/forecast", {"model": "fc", "history": [0.0] * 11, "steps": 1}, 413, "max_history"),
        ("/forecast", {"model": "fc", "history": [0.0] * 5, "steps": 4}, 422, "max_steps"),
        ("/forecast", {"model": "fc", "csv": "v\n" + "1\n" * 11, "steps": 1}, 413, "max_history"),
        (
            "/forecast",
            {"model": "fc", "csv": "v\n" + "1\n" * 300, "steps": 1},
            413,
            "max_upload_bytes",
        ),
        ("/translate", {"model": "mt", "text": "x" * 4000}, 413, "max_body_bytes"),
    ],
)
def test_every_limit_answers_with_its_name(small, route, body, status, limit):
    r = small.post(route, json=body)
    assert r.status_code == status, r.text
    assert r.json()["limit"] == limit and limit in r.json()["error"]


@pytest.mark.parametrize("side", [5000, 20000])  # PIL opens the first, refuses the second
def test_an_image_claiming_too_many_pixels_is_413_before_it_is_decoded(api, side):
    bomb = base64.b64encode(png_claiming(side, side)).decode()  # a bomb's header, 100 bytes
    for image in (bomb, [png(digit()), bomb]):
        r = api.post("/classify", json={"model": "vit", "image": image})
        assert r.status_code == 413, r.text
        body = r.json()
        assert body["limit"] == "max_image_pixels" and f"{side * side:,}" in body["error"]
        assert "max_image_pixels=16777216" in body["error"]
    assert api.post("/classify", json={"model": "vit", "image": png(digit())}).status_code == 200


def test_a_streamed_body_over_the_limit_is_refused(small):
    chunks = (b" " * 1000 for _ in range(5))  # no Content-Length: counted as it arrives
    r = small.post("/translate", content=chunks, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["limit"] == "max_body_bytes"
    ok = small.post("/translate", json={"model": "mt", "text": "09/05/98"})
    assert ok.status_code == 200


# ----------------------------------------------------------------------- keys and CORS
def test_api_key(models):
    with client({"mt": models["mt"]}, api_key="s3cret") as c:
        r = c.get("/models")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in r.json()["error"]
        body = {"text": "09/05/98"}
        assert c.post("/translate", json=body).status_code == 401
        bad = {"Authorization": "Bearer wrong"}
        assert c.post("/translate", json=body, headers=bad).status_code == 401
        good = {"Authorization": "Bearer s3cret"}
        assert c.post("/translate", json=body, headers=good).status_code == 200
        assert c.get("/models", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert c.get("/health").status_code == 200 and c.get("/").status_code == 200


def test_cors_is_off_unless_an_origin_is_given(models):
    preflight = {
        "Origin": "http://example.org",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    with client({"mt": models["mt"]}) as c:
        r = c.options("/translate", headers=preflight)
        assert "access-control-allow-origin" not in r.headers
        r = c.post("/translate", json={"text": "1 jan 2001"}, headers={"Origin": "http://x.org"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    with client({"mt": models["mt"]}, cors=["http://example.org"]) as c:
        r = c.options("/translate", headers=preflight)
        assert r.headers["access-control-allow-origin"] == "http://example.org"
        r = c.options("/translate", headers={**preflight, "Origin": "http://evil.org"})
        assert r.headers.get("access-control-allow-origin") != "http://evil.org"


# ---------------------------------------------------------------- concurrency and load
def _same(a, b, where="response"):
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=1e-4), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


async def _together(app, requests):
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        answers = await asyncio.gather(*(c.post(route, json=body) for route, body in requests))
    return [(a.status_code, a.json()) for a in answers]


def test_simultaneous_requests_are_batched_and_answer_as_one_by_one(models):
    requests = []
    for i in range(24):
        text = [DATES[i % 5], DATES[(i + 2) % 5]] if i % 3 else DATES[i % 5]
        body = {"model": "mt" if i % 4 else "bahdanau", "text": text}
        if i % 5 == 1:
            body["beam"] = 3
        if i % 7 == 2:
            body["attention"] = True
        requests.append(("/translate", body))
    requests += [("/classify", {"model": "cls", "text": t}) for t in ["loved it", "awful"]]
    requests += [("/generate", {"model": "lm", "tokens": 8, "seed": s}) for s in range(3)]
    app = create_app(models, engine="seqlab", limits=Limits(batch_wait_ms=50))
    together = asyncio.run(_together(app, requests))
    with client(models) as c:
        alone = [(r.status_code, r.json()) for r in (c.post(u, json=b) for u, b in requests)]
    assert [s for s, _ in together] == [200] * len(requests)
    _same(together, alone)  # texts, labels and tokens equal; numbers up to padding's rounding
    assert app.state.batchers["mt"].batches < sum(b["model"] == "mt" for _, b in requests)


def test_the_batcher_fills_batches_carries_the_rest_and_drains_on_close():
    from seqlab.serve.batching import Batcher

    release, batches = threading.Event(), []

    def run(jobs):
        release.wait(10)
        batches.append([job.payload for job in jobs])
        return [ValueError(j.payload) if j.payload == "bad" else j.payload.upper() for j in jobs]

    batcher = Batcher("t", run, max_batch=4, wait_s=0.05, max_queue=8)

    async def scenario():
        first = batcher.submit("first", 1)
        await _until(lambda: batcher.queued == 0)  # the worker holds it
        jobs = [batcher.submit(p, n) for p, n in [("a", 2), ("b", 2), ("c", 1), ("bad", 1)]]
        gone = batcher.submit("gone", 1)
        gone.cancelled.set()  # its client stopped waiting: never run
        last = batcher.submit("d", 3)
        release.set()
        out = await asyncio.gather(first.future, *(j.future for j in jobs), return_exceptions=True)
        closing = asyncio.to_thread(batcher.close, 10)
        return out, await last.future, await closing

    out, last, _ = asyncio.run(scenario())
    assert out[:4] == ["FIRST", "A", "B", "C"] and isinstance(out[4], ValueError)
    assert last == "D"
    # four texts at most per batch; a job that does not fit waits for the next batch
    assert batches == [["first"], ["a", "b"], ["c", "bad"], ["d"]]
    with pytest.raises(RuntimeError, match="shutting down"):
        asyncio.run(_submit(batcher))


def test_answered_clients_come_back_into_one_batch_and_a_lone_request_does_not_wait():
    """Under load, the clients a batch answered send again at once: the next batch waits for
    them (up to ``wait_s``) instead of running the first to arrive alone. A request to an idle
    server runs at once."""
    from seqlab.serve.batching import Batcher

    release, batches = threading.Event(), []

    def run(jobs):
        release.wait(10)
        batches.append([job.payload for job in jobs])
        return [job.payload for job in jobs]

    batcher = Batcher("t", run, max_batch=8, wait_s=1.0, max_queue=8)

    async def scenario():
        held = batcher.submit("held", 1)
        await _until(lambda: batcher.queued == 0)  # the worker holds it
        first = [batcher.submit(p, 1) for p in "abc"]
        release.set()
        await asyncio.gather(held.future, *(j.future for j in first))
        again = []
        for p in ("a2", "b2", "c2"):  # the three clients, one after another
            again.append(batcher.submit(p, 1))
            await asyncio.sleep(0.02)
        await asyncio.gather(*(j.future for j in again))
        await asyncio.sleep(1.5)  # idle for longer than wait_s
        solo = batcher.submit("solo", 1)
        await asyncio.sleep(0.3)
        other = batcher.submit("other", 1)
        await asyncio.gather(solo.future, other.future)
        await asyncio.to_thread(batcher.close, 10)

    asyncio.run(scenario())
    assert batches == [["held"], ["a", "b", "c"], ["a2", "b2", "c2"], ["solo"], ["other"]]


def test_two_workers_run_two_batches_at_once_and_both_stop_on_close():
    """A batcher with two workers (for an engine that decodes two batches at once) runs two
    batches at the same time, answers every job, and closing stops both threads."""
    from seqlab.serve.batching import Batcher

    both, lock, batches = threading.Barrier(2, timeout=10), threading.Lock(), []

    def run(jobs):
        with lock:
            batches.append([job.payload for job in jobs])
            first_two = len(batches) <= 2
        if first_two:
            both.wait()  # passes only while another batch runs (else BrokenBarrierError)
        return [job.payload.upper() for job in jobs]

    batcher = Batcher("t", run, max_batch=2, wait_s=0.0, max_queue=8, workers=2)

    async def scenario():
        jobs = [batcher.submit(p, 1) for p in "abcdef"]
        out = await asyncio.gather(*(j.future for j in jobs))
        await asyncio.to_thread(batcher.close, 10)
        return out

    assert asyncio.run(scenario()) == list("ABCDEF")
    assert sorted(p for b in batches for p in b) == list("abcdef")
    assert batcher.batches == len(batches) and batcher.texts == 6
    assert len(batcher._threads) == 2 and not any(t.is_alive() for t in batcher._threads)
    with pytest.raises(ValueError, match="workers must be at least 1, not 0"):
        Batcher("t", run, max_batch=2, wait_s=0.0, max_queue=8, workers=0)


async def _submit(batcher):
    return batcher.submit("late", 1)


def _blocking(monkeypatch, cls=TranslationHandler):
    """Make the batches of the apps built next wait for ``release``; ``started`` says one is
    running."""
    started, release = threading.Event(), threading.Event()
    run = cls.run

    def slow(self, jobs):
        started.set()
        release.wait(10)
        return run(self, jobs)

    monkeypatch.setattr(cls, "run", slow)
    return started, release


async def _until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def test_health_answers_while_a_batch_runs(models, monkeypatch):
    started, release = _blocking(monkeypatch)
    app = create_app({"mt": models["mt"]}, engine="seqlab")

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            busy = asyncio.ensure_future(c.post("/translate", json={"text": "09/05/98"}))
            await _until(started.is_set)
            t0 = time.monotonic()
            health = await c.get("/health")
            waited = time.monotonic() - t0
            release.set()
            return health, waited, await busy

    health, waited, busy = asyncio.run(scenario())
    assert health.status_code == 200 and waited < 1.0
    assert busy.status_code == 200


def test_a_full_queue_answers_503_with_retry_after(models, monkeypatch):
    limits = Limits(max_queue=1, max_batch=1, batch_wait_ms=0)
    started, release = _blocking(monkeypatch)
    app = create_app({"mt": models["mt"]}, engine="seqlab", limits=limits)
    batcher = app.state.batchers["mt"]

    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            first = asyncio.ensure_future(c.post("/translate", json={"text": "09/05/98"}))
            await _until(started.is_set)  # the worker holds the first request
            second = asyncio.ensure_future(c.post("/translate", json={"text": "1 jan 2001"}))
            await _until(lambda: batcher.queued == 1)  # the second waits: the queue is full
            third = await c.post("/translate", json={"text": "May 9, 1998"})
            release.set()
            return third, await first, await second

    third, first, second = asyncio.run(scenario())
    assert third.status_code == 503 and third.headers["retry-after"] == "1"
    assert third.json()["limit"] == "max_queue" and "queue of max_queue=1" in third.json()["error"]
    assert first.status_code == 200 and second.status_code == 200


def test_a_request_over_its_time_limit_answers_504(models, monkeypatch):
    limits = Limits(timeout_s=0.2)
    started, release = _blocking(monkeypatch)
    app = create_app({"mt": models["mt"], "lm": models["lm"]}, engine="seqlab", limits=limits)
    with TestClient(app) as c:
        r = c.post("/translate", json={"text": "09/05/98"})
        assert r.status_code == 504 and r.json()["limit"] == "timeout_s"
        assert "timeout_s=0.2" in r.json()["error"]
        release.set()
        lm = app.state.handlers["lm"]
        tokens = lm._tokens

        def slow_tokens(work):
            for token in tokens(work):
                time.sleep(0.05)
                yield token

        monkeypatch.setattr(lm, "_tokens", slow_tokens)
        with c.stream("POST", "/generate", json={"tokens": 100, "stream": True}) as s:
            events = _events(s.read().decode())
        assert 0 < len(events) - 1 < 100 and events[-1][0] == "error"
        assert events[-1][1]["limit"] == "timeout_s"
        assert c.post("/translate", json={"text": "09/05/98"}).status_code == 200


class _Terminal(io.StringIO):
    """A standard error that says it is a terminal (where progress bars are drawn)."""

    def isatty(self):
        return True


def test_the_server_draws_no_progress_bars(models, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    models["mt"].hypotheses(DATES)  # called directly, on a terminal: a bar
    assert "decoding" in terminal.getvalue()
    terminal.seek(0)
    terminal.truncate()
    with client({"mt": models["mt"], "lm": models["lm"]}) as c:
        assert c.post("/translate", json={"text": DATES}).status_code == 200
        assert c.post("/generate", json={"tokens": 5}).status_code == 200
    assert "decoding" not in terminal.getvalue() and "\r" not in terminal.getvalue()


# ---------------------------------------------------------------------------- engines
def test_transformer_runs_on_ctranslate2_when_installed(models):
    pytest.importorskip("ctranslate2")
    mt = models["mt"]
    chosen = {"mt": mt, "bahdanau": models["bahdanau"]}
    with client(chosen, engine="auto") as c:
        infos = {m["name"]: m["engine"] for m in c.get("/models").json()["models"]}
        assert infos == {"mt": "ctranslate2", "bahdanau": "seqlab"}
        r = c.post("/translate", json={"model": "mt", "text": DATES}).json()
        assert r["engine"] == "ctranslate2"
        assert [t["text"] for t in r["translations"]] == mt.translate(DATES, engine="ctranslate2")
        r = c.post("/translate", json={"model": "mt", "text": DATES[0], "attention": True}).json()
        assert r["engine"] == "seqlab" and r["translations"][0]["detail"]["cross"]
    # required: for the Transformer; the models CTranslate2 does not decode stay on seqlab
    with client(chosen, engine="ctranslate2") as c:
        infos = {m["name"]: m["engine"] for m in c.get("/models").json()["models"]}
        assert infos == {"mt": "ctranslate2", "bahdanau": "seqlab"}
    with pytest.raises(SeqlabError, match="--engine must be auto, seqlab, ctranslate2"):
        create_app(chosen, engine="onnx")


# ------------------------------------------------------------------ the command line
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_command_line_errors(tiny_runs, tmp_path, capsys):
    from seqlab.cli import main

    mt = str(tiny_runs["mt"])
    cases = [
        (["serve", str(tmp_path / "none")], "run directory not found"),
        (["serve", mt, mt], "two run directories are named 'mt'"),
        (["serve", f"a b={mt}"], "model name 'a b'"),
        (["serve", mt, "--api-key-file", str(tmp_path / "key")], "--api-key-file"),
        (["serve", mt, "--max-chars", "0"], "--max-chars 0: Input should be greater than 0"),
        (["serve", mt, "--engine", "seqlab", "--quantize", "int8"], "--quantize applies"),
        (["serve", mt, "--engine", "seqlab", "--workers", "2"], "--workers applies to models"),
    ]
    if importlib.util.find_spec("ctranslate2"):  # the engine that has workers
        cases.append(
            (
                ["serve", mt, "--threads", "1", "--workers", "2"],
                "2 CTranslate2 workers need at least 2 threads, not 1",
            )
        )
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", mt, "--port", str(port)]) == 2
        assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "65536", "0", "http"])
def test_a_port_out_of_range_is_refused_by_the_parser(tiny_runs, capsys, port):
    from seqlab.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(tiny_runs["mt"]), "--port", port])
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "http://" not in captured.err
    assert captured.err.splitlines()[-1].startswith("seqlab serve: error: argument --port: ")


def test_sigterm_finishes_the_requests_in_flight_and_exits(tiny_runs, tmp_path):
    port = _free_port()
    key = tmp_path / "key"
    key.write_text("k3y\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SEQLAB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "seqlab", "serve", f"words={tiny_runs['lm']}", "--quiet"]
    argv += ["--port", str(port), "--api-key-file", str(key), "--max-tokens", "100000"]
    server = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        else:
            pytest.fail("the server did not start: " + server.stderr.read())
        headers = {"Authorization": "Bearer k3y"}
        body = {"model": "words", "tokens": 5000, "stream": True}
        with httpx.stream("POST", f"{url}/generate", json=body, headers=headers, timeout=30) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert next(lines) == "event: token"
            server.send_signal(signal.SIGTERM)  # while the generation runs
            rest = "\n".join(lines)
        assert rest.count("event: token") == 5000 - 1 and "event: done" in rest
        assert server.wait(timeout=30) == 0
        assert "seqlab serve: stopped" in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def _serve(argv, log):
    """Start ``seqlab serve ARGV`` on a free port, its log in ``log``; (process, base URL)."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SEQLAB_OFFLINE": "1"}
    command = [sys.executable, "-m", "seqlab", "serve", *argv, "--port", str(port)]
    server = subprocess.Popen(command, env=env, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return server, port, url
        except httpx.TransportError:
            time.sleep(0.05)
    server.kill()
    pytest.fail("the server did not start")


def _send(port, path, body, cut=None, host=None):
    """A raw HTTP POST (``cut``: send only that many bytes of the body; ``host``: its Host
    header, by default the server's address); the open socket."""
    data = json.dumps(body).encode()
    host = host or f"127.0.0.1:{port}"
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(data)}\r\n\r\n"
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    conn.sendall(head.encode() + data[:cut])
    return conn


def _reset(conn):
    """Close as a client that crashed: a TCP reset, nothing more read or sent."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def test_clients_that_leave_never_stop_the_server(tiny_runs, tmp_path):
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    argv = [f"words={tiny_runs['lm']}", f"dates={tiny_runs['mt']}", "--quiet"]
    argv += ["--max-tokens", "100000", "--timeout-s", "600", "--engine", "seqlab"]
    server, port, url = _serve(argv, log)
    try:
        # a stream whose client goes away after its first token: the generation stops
        stream = _send(port, "/generate", {"model": "words", "tokens": 100000, "stream": True})
        seen = b""
        while b"event: token" not in seen:
            chunk = stream.recv(4096)
            assert chunk, seen
            seen += chunk
        _reset(stream)
        # a request whose client leaves before the answer, and one that leaves mid-body
        _reset(_send(port, "/translate", {"model": "dates", "text": DATES}))
        _reset(_send(port, "/translate", {"model": "dates", "text": DATES}, cut=10))
        # the same model answers next (its one worker is not busy with the abandoned stream)
        r = httpx.post(f"{url}/generate", json={"model": "words", "tokens": 5}, timeout=60)
        assert r.status_code == 200 and len(r.json()["tokens"]) == 5
        r = httpx.post(f"{url}/translate", json={"model": "dates", "text": DATES}, timeout=60)
        assert r.status_code == 200 and len(r.json()["translations"]) == len(DATES)
        assert httpx.get(f"{url}/health", timeout=10).json()["queued"] == {"words": 0, "dates": 0}
        assert server.poll() is None
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    text = (tmp_path / "server.log").read_text()
    assert "Traceback" not in text and "seqlab serve: stopped" in text, text


def test_only_a_closed_standard_stream_ends_a_command_quietly(tiny_runs, monkeypatch, capsys):
    """``seqlab … | head`` ends with 141 and nothing said; a broken pipe anywhere else (what a
    socket gives) is not mistaken for it: ``seqlab serve`` never ends quietly on one."""
    import uvicorn

    from seqlab.cli import main

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    with monkeypatch.context() as m:
        m.setattr(sys, "stdout", ClosedPipe())
        assert main(["data", "list"]) == 141
    assert capsys.readouterr().err == ""

    def broken(self, *args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(uvicorn.Server, "run", broken)
    with pytest.raises(BrokenPipeError):
        main(["serve", str(tiny_runs["mt"]), "--port", str(_free_port()), "--engine", "seqlab"])


# ------------------------------------------------------- nothing altered or coerced silently
def test_responses_name_the_texts_with_unknown_tokens_as_the_api_does(api, models):
    """The same input warned about by the Python API is listed in the response's ``warnings``
    (declared in the OpenAPI schema); the server's workers raise no Python warning for it."""
    told = "2 tokens not in the model's vocabulary, read as <unk>:"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = api.post(
            "/translate", json={"model": "mt", "text": ["May 9, 1998", "9 May \u2603\u2603"]}
        )
        assert r.status_code == 200 and r.json()["warnings"] == [f"text 2: {told} '\u2603'"]
        r = api.post(
            "/translate", json={"model": "mt", "text": "9 May \u2603\u2603", "attention": True}
        )
        assert r.json()["warnings"] == [f"text 1: {told} '\u2603'"]
        r = api.post("/classify", json={"model": "cls", "text": ["great fun", "zzz zzz"]})
        assert r.status_code == 200 and r.json()["warnings"] == [f"text 2: {told} 'zzz'"]
        r = api.post("/translate", json={"model": "mt", "text": "May 9, 1998"})
        assert r.json()["warnings"] == []
        request = {"model": "lm", "prefix": "the QQ", "tokens": 3}
        whole = api.post("/generate", json=request).json()
        assert whole["warnings"] == [f"prefix: {told} 'Q'"]
        with api.stream("POST", "/generate", json={**request, "stream": True}) as s:
            assert _events(s.read().decode())[-1] == ("done", whole)
    assert not [w for w in caught if "vocabulary" in str(w.message)]
    with pytest.warns(UserWarning, match=f"sentence 1: {told} '\u2603'"):
        models["mt"].translate(["May 9, 1998", "9 May \u2603\u2603"])
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    for name in ("TranslateResponse", "ClassifyResponse", "GenerateResponse"):
        assert schemas[name]["properties"]["warnings"]["type"] == "array"


@pytest.mark.parametrize(
    ("route", "field", "value"),
    [
        ("/translate", "beam", "5"),
        ("/translate", "beam", 5.0),
        ("/translate", "beam", True),
        ("/translate", "nbest", 2.0),
        ("/translate", "text", 5),
        ("/translate", "attention", 1),
        ("/translate", "length_penalty", "1.0"),
        ("/classify", "text", ["great fun", 7]),
        ("/generate", "tokens", "3"),
        ("/generate", "seed", 1.0),
        ("/generate", "prefix", 5),
        ("/generate", "stream", "false"),
        ("/forecast", "steps", 2.0),
        ("/forecast", "history", [1.0, "2"]),
    ],
)
def test_a_field_of_the_wrong_json_type_is_422_naming_it_never_converted(api, route, field, value):
    body = {
        "/translate": {"model": "mt", "text": "May 9, 1998", "beam": 2},
        "/classify": {"model": "cls", "text": "great fun"},
        "/generate": {"model": "lm", "prefix": "the", "tokens": 2},
        "/forecast": {"model": "fc", "history": [0.1, 0.2, 0.3, 0.4, 0.5], "steps": 2},
    }[route]
    r = api.post(route, json={**body, field: value})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith(f"{field}") and "Input should be" in r.json()["error"]
    assert api.post(route, json=body).status_code == 200  # the right types are taken


def test_a_whole_number_is_taken_for_a_float_field(api):
    r = api.post("/translate", json={"model": "mt", "text": "x", "beam": 2, "length_penalty": 1})
    assert r.status_code == 200, r.text
    r = api.post("/generate", json={"model": "lm", "prefix": "the", "tokens": 2, "temperature": 1})
    assert r.status_code == 200, r.text
    r = api.post("/forecast", json={"model": "fc", "history": [1, 2, 3, 4, 5], "steps": 1})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("char", ["\r", "\x0c", "\x85", "\u2028", "\u2029"])
def test_a_text_holding_an_odd_line_break_is_422_naming_it(api, char):
    name = f"U+{ord(char):04X}"
    for route, body, where in [
        ("/translate", {"model": "mt", "text": ["May 9, 1998", f"9 May{char}1998"]}, "text 2"),
        ("/classify", {"model": "cls", "text": f"great{char}fun"}, "text"),
        ("/generate", {"model": "lm", "prefix": f"the{char}time", "tokens": 2}, "prefix"),
    ]:
        r = api.post(route, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["error"].startswith(f"{where} holds {name} (")


def test_the_servers_token_limit_cannot_exceed_generates_cap():
    pytest.importorskip("fastapi")
    from pydantic import ValidationError

    from seqlab.serving.limits import Limits
    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS

    assert Limits(max_tokens=MAX_GENERATE_TOKENS).max_tokens == MAX_GENERATE_TOKENS
    with pytest.raises(ValidationError):
        Limits(max_tokens=MAX_GENERATE_TOKENS + 1)


@pytest.mark.parametrize(
    ("route", "body", "key", "where"),
    [
        ("/translate", '{"model": "mt", "model": "bahdanau", "text": "1 jan 2001"}', "model", "body"),
        ("/classify", '{"model": "cls", "text": ["a", "b"], "text": "c"}', "text", "body"),
        ("/generate", '{"model": "lm", "prefix": "the", "tokens": 2, "tokens": 9}', "tokens", "body"),
        ("/forecast", '{"model": "fc", "x": [{"a": 1}, {"b": {"c": 1, "c": 2}}], "steps": 1}', "c", "x.1.b"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_refused_naming_it(api, route, body, key, where):
    """JSON parsers keep the last value of a repeated key (``"model":"a","model":"b"`` would be
    answered by b): seqlab answers 422 naming the key, where it is, before anything else."""
    r = api.post(route, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    message = r.json()["error"]
    assert message.startswith(f"{where}: the key {key!r} is given twice"), message
    assert "\n" not in message
    once = json.loads(body)  # the same body with each key once is not refused for it
    r = api.post(route, json=once)
    assert "given twice" not in r.text


@pytest.mark.parametrize(
    "headers",
    [
        {"content-type": "text/plain;charset=UTF-8"},  # what fetch() sends with a string body
        {"content-type": "application/x-www-form-urlencoded"},  # an HTML form
        {"content-type": "multipart/form-data; boundary=x"},
        {},  # fetch() with a Blob body of no type
        {"content-type": "application/json; charset=latin-1"},
    ],
)
def test_a_body_a_web_page_may_send_unasked_is_refused_before_any_work(
    models, monkeypatch, headers
):
    """The bodies a page may send to a server on the user's machine without a CORS preflight
    (text, a form, multipart, no type) are answered 415 and do no work (the model's handler is
    never asked); a JSON body needs ``Content-Type: application/json``, which makes a browser
    ask first (its preflight gets no CORS headers here, so it is not sent), or a client that is
    not a browser. A charset other than UTF-8 is named, with the fix."""
    prepared: list[object] = []
    real = TranslationHandler.prepare
    monkeypatch.setattr(
        TranslationHandler, "prepare", lambda self, r: prepared.append(r) or real(self, r)
    )
    body = json.dumps({"model": "mt", "text": "may 9 1998"}).encode()
    with TestClient(create_app({"mt": models["mt"]}, engine="seqlab")) as api:
        r = api.post("/translate", content=body, headers=headers)
        assert r.status_code == 415 and prepared == []
        message = r.json()["error"]
        if headers.get("content-type", "").startswith("application/json"):
            assert "charset=latin-1: encode the body as UTF-8" in message
        else:
            assert "send the header Content-Type: application/json" in message
        ok = api.post("/translate", content=body, headers={"content-type": "application/json"})
        assert ok.status_code == 200 and len(prepared) == 1
        asked = api.options(
            "/translate",
            headers={
                "Origin": "http://evil.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert "access-control-allow-origin" not in asked.headers


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("[::1]:{port}", 200),
        ("evil.example:{port}", 403),  # a page's own name pointed at 127.0.0.1 (DNS rebinding)
        ("127.0.0.1.evil.example", 403),
    ],
)
def test_a_name_the_server_is_not_gets_403_before_anything(models, host, status):
    """``seqlab serve`` on the loopback answers to its names alone (``allowed_hosts``); any
    other Host gets 403 with the flag that adds a name, on every route (the page's and the
    tasks', before the key, the body or the model are looked at)."""
    from seqlab.serve.guards import allowed_hosts

    app = create_app({"mt": models["mt"]}, engine="seqlab", hosts=allowed_hosts("127.0.0.1"))
    headers = {"host": host.format(port=8000), "content-type": "application/json"}
    with TestClient(app, raise_server_exceptions=False) as api:
        for method, path in (("GET", "/"), ("GET", "/models"), ("POST", "/translate")):
            r = api.request(method, path, headers=headers, content=b'{"text": "may 9 1998"}')
            assert r.status_code == status, (method, path, r.text)
            if status == 403:
                assert "--allowed-host NAME" in r.json()["error"]
    named = create_app({"mt": models["mt"]}, hosts=allowed_hosts("127.0.0.1", ["box.lan"]))
    with TestClient(named) as api:
        assert api.get("/health", headers={"host": "box.lan:8000"}).status_code == 200
    assert allowed_hosts("0.0.0.0") is None and allowed_hosts("127.0.0.1", ["*"]) is None


def test_the_running_server_refuses_another_host(tiny_runs, tmp_path):
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    server, port, _ = _serve([f"dates={tiny_runs['mt']}", "--quiet", "--engine", "seqlab"], log)
    try:
        for host, status in ((f"127.0.0.1:{port}", b"200"), ("rebound.example", b"403")):
            conn = _send(port, "/translate", {"text": "may 9 1998"}, host=host)
            answer = conn.recv(65536)
            conn.close()
            assert answer.split(b" ")[1] == status, answer[:200]
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _stalled(app, path, method="POST"):
    """Call ``app`` as a client that declares 100 bytes, sends 9 and then nothing: the status and
    JSON body it is answered with."""
    sent: list[dict] = []
    first = True

    async def receive():
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": b'{"text": ', "more_body": True}
        await asyncio.sleep(3600)  # the rest never comes

    async def send(message):
        sent.append(message)

    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [*headers, (b"content-length", b"100")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body)


def test_a_body_that_stalls_is_answered_408_within_the_deadline(models):
    """A client that declares a body and stops sending it is answered 408, naming the limit,
    once ``body_timeout_s`` has passed: on a task's route (the lean path) and on any other
    (FastAPI's stack, whose body limit reads it first)."""
    app = create_app({"mt": models["mt"]}, engine="seqlab", limits=Limits(body_timeout_s=0.3))
    for path in ("/translate", "/"):
        start = time.perf_counter()
        status, body = _stalled(app, path)
        assert status == 408 and body["limit"] == "body_timeout_s", (path, body)
        assert "did not arrive within the server's limit body_timeout_s=0.3" in body["error"]
        assert time.perf_counter() - start < 3


def test_stalled_bodies_leave_the_running_server_answering(tiny_runs, tmp_path):
    """50 clients that declare a body and stall: a normal request is answered within 2 s, and
    each stalled one gets 408 after ``--body-timeout-s``."""
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    argv = [f"dates={tiny_runs['mt']}", "--quiet", "--engine", "seqlab", "--body-timeout-s", "2"]
    server, port, url = _serve(argv, log)
    try:
        stalled = [_send(port, "/translate", {"text": "may 9 1998"}, cut=9) for _ in range(50)]
        start = time.perf_counter()
        ok = httpx.post(f"{url}/translate", json={"text": "may 9 1998"}, timeout=10)
        assert ok.status_code == 200 and time.perf_counter() - start < 2
        for conn in stalled:
            conn.settimeout(10)
            assert conn.recv(65536).split(b" ")[1] == b"408"
            conn.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_the_api_docs_are_served_offline_by_the_server_itself(models):
    """``/docs`` is Swagger UI from the server's own assets (``fastapi-offline``'s): its page
    names no other host, its script and styles are served, ``HEAD`` answers as ``GET``, and the
    CDN-only ReDoc page is not offered."""
    with TestClient(create_app({"mt": models["mt"]}, engine="seqlab")) as api:
        page = api.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "http://" not in page.text and "https://" not in page.text
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"):
            assert f'"/docs-assets/{asset}"' in page.text
            assert api.get(f"/docs-assets/{asset}").status_code == 200
        assert '"validatorUrl": null' in page.text
        assert api.head("/docs").status_code == 200
        assert api.get("/redoc").status_code == 404


def test_options_in_the_url_are_refused_by_name(models, monkeypatch):
    """A task's options are JSON fields; one given in the query string (``?beam=99``), which
    would otherwise be ignored, is a 422 naming it, before any work."""
    prepared: list[object] = []
    real = TranslationHandler.prepare
    monkeypatch.setattr(
        TranslationHandler, "prepare", lambda self, r: prepared.append(r) or real(self, r)
    )
    with TestClient(create_app({"mt": models["mt"]}, engine="seqlab")) as api:
        r = api.post("/translate?beam=99&nbest=2", json={"text": "may 9 1998"})
        assert r.status_code == 422
        assert "not in the URL's query string (got 'beam', 'nbest')" in r.json()["error"]
        assert prepared == []
        assert api.post("/translate", json={"text": "may 9 1998", "beam": 2}).status_code == 200
        assert len(prepared) == 1


@pytest.mark.parametrize("name", ["lm", "lm-transformer"])
def test_an_empty_prefix_returns_the_continuation_alone(api, models, name):
    """Generation from nothing starts from the most frequent token, as context: the text
    returned is the continuation alone, with no leading space, in the Python API, the response
    and the streamed deltas alike (they join to the response's text)."""
    lm = models[name]
    seed = lm.detokenize(lm.prefix_ids(""))
    text = lm.generate("", 12, temperature=0.9, seed=4)
    new = list(lm.stream("", 12, temperature=0.9, seed=4))
    assert text == lm.detokenize(lm.prefix_ids("") + new)[len(seed) :].lstrip()
    assert text == text.lstrip() and len(new) == 12
    request = {"model": name, "prefix": "", "tokens": 12, "temperature": 0.9, "seed": 4}
    whole = api.post("/generate", json=request).json()
    assert whole["text"] == text
    with api.stream("POST", "/generate", json={**request, "stream": True}) as r:
        events = _events(r.read().decode())
    assert "".join(d["text"] for kind, d in events if kind == "token") == whole["text"]
