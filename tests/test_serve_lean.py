"""The lean request path of ``seqlab serve`` (issue 48): a ``POST`` to a task's route is answered
by the application's outer dispatch (``SeqlabAPI``), below FastAPI's middleware, and must answer
exactly as FastAPI's stack does. Each request here is sent both ways — through the application
(the lean path) and through ``FastAPI.__call__`` on the same application (its middleware, router
and exception handlers, the path every request took before) — and the two answers must have the
same status, the same headers and the same bytes: good requests and bad ones (oversized bodies,
bad JSON, duplicate keys, unknown fields, wrong types and content types, unknown models, limits,
keys, CORS, an internal error)."""

import warnings

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from fastapi import FastAPI  # noqa: E402

import seqlab  # noqa: E402
from seqlab.serve import Limits, create_app  # noqa: E402
from seqlab.tasks.translation.service import TranslationHandler  # noqa: E402

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def models(tiny_runs):
    runs = {"mt": "mt", "rnn": "bahdanau", "cls": "cls", "fc": "fc"}
    return {name: seqlab.load(tiny_runs[run]) for name, run in runs.items()}


def generic(app: FastAPI):
    """The same application entered through FastAPI's stack (``FastAPI.__call__``): what every
    request went through before the lean path."""

    async def asgi(scope, receive, send):
        await FastAPI.__call__(app, scope, receive, send)

    return asgi


def both(app):
    """Test clients of the lean path and of FastAPI's stack, on one application."""
    return (
        TestClient(app, raise_server_exceptions=False),
        TestClient(generic(app), raise_server_exceptions=False),
    )


def same(lean, stack, method, route, **request):
    """Send one request both ways; assert the same status, headers and bytes; return it."""
    a = lean.request(method, route, **request)
    b = stack.request(method, route, **request)
    assert (a.status_code, a.content) == (b.status_code, b.content), (route, request)
    assert dict(a.headers) == dict(b.headers), (route, request)
    return a


CASES = [
    # good requests
    ("/translate", {"json": {"model": "mt", "text": "09/05/98"}}, 200),
    ("/translate", {"json": {"model": "rnn", "text": ["1 jan 2001", "May 9, 1998"]}}, 200),
    ("/translate", {"json": {"model": "rnn", "text": "1 jan 2001", "beam": 2, "nbest": 2}}, 200),
    ("/translate", {"json": {"model": "mt", "text": "09/05/98", "attention": True}}, 200),
    ("/classify", {"json": {"model": "cls", "text": ["a good film", "bad"]}}, 200),
    (
        "/forecast",
        {"json": {"model": "fc", "history": [0.1 * i for i in range(12)], "steps": 2}},
        200,
    ),
    # JSON sent as another content type, or as none, or in another charset: 415
    ("/translate", {"content": b'{"model": "mt", "text": "09/05/98"}', "headers": {}}, 415),
    (
        "/translate",
        {"content": b'{"model":"mt","text":"x"}', "headers": {"content-type": "text/plain"}},
        415,
    ),
    (
        "/translate",
        {
            "content": b'{"model":"mt","text":"x"}',
            "headers": {"content-type": "application/json; charset=latin-1"},
        },
        415,
    ),
    (
        "/translate",
        {
            "content": b'{"model":"mt","text":"x"}',
            "headers": {"content-type": "Application/JSON; Charset=UTF-8"},
        },
        200,
    ),
    # bad requests
    ("/translate", {"content": b'{"model": "mt", "text": ', "headers": JSON}, 422),
    ("/translate", {"content": b"\xff\xfe{}", "headers": JSON}, 422),
    ("/translate", {"content": b"", "headers": JSON}, 422),
    ("/translate", {"content": b"[1, 2]", "headers": JSON}, 422),
    ("/translate", {"content": b'{"model":"mt","text":"a","model":"rnn"}', "headers": JSON}, 422),
    ("/translate", {"json": {"model": "mt", "text": "a", "bogus": 1}}, 422),
    ("/translate", {"json": {"model": "rnn", "text": "a", "beam": "2"}}, 422),
    ("/translate", {"json": {"model": "rnn", "text": "a", "beam": 0}}, 422),
    ("/translate", {"json": {"model": "nope", "text": "a"}}, 404),
    ("/translate", {"json": {"text": "a"}}, 422),  # two translation models: name one
    ("/translate", {"json": {"model": "cls", "text": "a"}}, 422),
    ("/translate", {"json": {"model": "mt", "text": ""}}, 422),
    ("/translate", {"json": {"model": "mt", "text": "a\rb"}}, 422),
    ("/translate", {"json": {"model": "mt", "text": "x" * 21}}, 413),  # max_chars
    ("/translate", {"json": {"model": "mt", "text": ["a", "b", "c"]}}, 413),  # max_texts
    ("/translate", {"json": {"model": "rnn", "text": "a", "beam": 4}}, 422),  # max_beam
    ("/translate", {"json": {"model": "mt", "text": "x" * 4000}}, 413),  # max_body_bytes
    ("/translate?beam=99", {"json": {"model": "rnn", "text": "a"}}, 422),  # options in the URL
    ("/classify", {"json": {"model": "mt", "text": "a"}}, 422),
    ("/forecast", {"json": {"model": "fc", "history": [1.0, 2.0], "steps": 2}}, 422),
]


@pytest.fixture(scope="module")
def clients(models):
    limits = Limits(max_chars=20, max_texts=2, max_beam=3, max_body_bytes=3000)
    app = create_app(models, limits=limits, engine="seqlab")
    lean, stack = both(app)
    with lean:  # the lifespan: the batchers are closed at the end
        yield lean, stack


@pytest.mark.parametrize(("route", "request_", "status"), CASES)
def test_the_lean_path_answers_as_fastapis_stack(clients, route, request_, status):
    r = same(*clients, "POST", route, **request_)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    if status != 200:
        assert set(r.json()) == {"error", "limit"}, r.text


def test_a_body_over_the_limit_without_its_length_is_refused_both_ways(clients):
    lean, stack = clients
    for client in clients:
        chunks = (b" " * 1000 for _ in range(5))  # no Content-Length: counted as it arrives
        r = client.post("/translate", content=chunks, headers=JSON)
        assert r.status_code == 413 and r.json()["limit"] == "max_body_bytes"
    a = lean.post("/translate", content=iter([b" " * 4000]), headers=JSON)
    assert a.content == stack.post("/translate", content=iter([b" " * 4000]), headers=JSON).content


def test_other_methods_and_paths_still_go_through_fastapi(clients):
    for method, route in [("GET", "/translate"), ("POST", "/nowhere"), ("POST", "/translate/")]:
        request = {"json": {"model": "mt", "text": "a"}, "follow_redirects": False}
        r = same(*clients, method, route, **request)
        assert r.status_code in (404, 405, 307), (method, route)


def test_keys_and_cors_answer_the_same(models):
    one = {"mt": models["mt"]}
    body = {"text": "09/05/98"}
    lean, stack = both(create_app(one, engine="seqlab", api_key="s3cret"))
    r = same(lean, stack, "POST", "/translate", json=body)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    for headers in ({"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}):
        assert (
            same(lean, stack, "POST", "/translate", json=body, headers=headers).status_code == 401
        )
    for headers in ({"Authorization": "Bearer s3cret"}, {"X-API-Key": "s3cret"}):
        assert (
            same(lean, stack, "POST", "/translate", json=body, headers=headers).status_code == 200
        )
    lean, stack = both(create_app(one, engine="seqlab", cors=["http://example.org"]))
    for origin, allowed in [
        ("http://example.org", "http://example.org"),
        ("http://evil.org", None),
    ]:
        r = same(lean, stack, "POST", "/translate", json=body, headers={"Origin": origin})
        assert r.status_code == 200 and r.headers.get("access-control-allow-origin") == allowed
    r = same(
        lean,
        stack,
        "POST",
        "/translate",
        json={"text": ""},
        headers={"Origin": "http://example.org"},
    )
    assert r.status_code == 422 and r.headers["access-control-allow-origin"] == "http://example.org"


def test_an_internal_error_answers_the_same_500(models, monkeypatch, caplog):
    def broken(self, jobs):
        raise RuntimeError("secret detail from /srv/models")

    monkeypatch.setattr(TranslationHandler, "run", broken)
    lean, stack = both(create_app({"mt": models["mt"]}, engine="seqlab"))
    r = same(lean, stack, "POST", "/translate", json={"text": "09/05/98"})
    assert r.status_code == 500 and "secret" not in r.text
    assert "internal error on POST /translate" in caplog.text  # the log has it, both ways


def test_a_tasks_post_never_enters_fastapis_middleware(models):
    app = create_app({"mt": models["mt"]}, engine="seqlab")
    client = TestClient(app)  # no lifespan: nothing has built FastAPI's stack yet
    assert client.post("/translate", json={"text": "09/05/98"}).status_code == 200
    assert client.post("/translate", json={"text": ""}).status_code == 422
    assert app.middleware_stack is None  # built on the first request that goes through it
    assert client.get("/health").status_code == 200 and app.middleware_stack is not None


def test_the_openapi_schema_still_describes_every_tasks_route(clients):
    schema = clients[0].get("/openapi.json").json()
    post = schema["paths"]["/translate"]["post"]
    assert post["operationId"] == "translation_post"
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"] == "#/components/schemas/TranslateRequest"
    answer = post["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer["$ref"] == "#/components/schemas/TranslateResponse"
    assert {"401", "404", "413", "422", "503", "504"} <= set(post["responses"])
    fields = schema["components"]["schemas"]["TranslateRequest"]["properties"]
    assert {"model", "text", "beam", "nbest", "attention"} <= set(fields)


@pytest.mark.parametrize("cors", [(), ("http://localhost:5173",)])
def test_each_task_has_one_route_that_is_documented_and_answers(models, cors):
    """One route object per task's path: the schema is FastAPI's description of it, the router
    reaches it through FastAPI's stack, and the outer dispatch calls its application (wrapped in
    the same CORS middleware when CORS is on): nothing else answers or documents the path."""
    from seqlab.serve.http import TaskRoute

    app = create_app(models, engine="seqlab", cors=cors)
    paths = set(app.lean)
    assert {"/translate", "/classify", "/forecast", "/generate"} <= paths
    schema = app.openapi()
    for path in paths:
        (route,) = [r for r in app.routes if getattr(r, "path", None) == path]
        assert isinstance(route, TaskRoute) and route.methods == {"POST"}
        dispatched = app.lean[path]
        assert (dispatched.app if cors else dispatched) is route.app
        assert list(schema["paths"][path]) == ["post"]


@pytest.mark.parametrize("api_key", [None, "s3cret"])
def test_errors_answer_the_same_on_a_server_without_models(api_key):
    lean, stack = both(create_app({}, api_key=api_key, limits=Limits(max_body_bytes=100)))
    key = {"X-API-Key": "s3cret"}
    typed = {**key, **JSON}
    for route, request, status in [
        ("/translate", {"json": {"text": "a"}, "headers": key}, 404),  # no model to name
        ("/generate", {"content": b'{"tokens": 1, "tokens": 2}', "headers": typed}, 422),
        ("/generate", {"content": b'{"tokens": 1}', "headers": key}, 415),  # no content type
        ("/classify", {"json": {"text": "a", "bogus": 1}, "headers": key}, 422),
        ("/forecast", {"content": b"{", "headers": typed}, 422),
        ("/translate", {"json": {"text": "x" * 200}, "headers": key}, 413),
        ("/translate", {"json": {"text": "a"}}, 401 if api_key else 404),
    ]:
        r = same(lean, stack, "POST", route, **request)
        assert r.status_code == status and set(r.json()) == {"error", "limit"}, (route, r.text)
