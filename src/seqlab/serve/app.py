"""The HTTP API and the page: a FastAPI application over loaded run directories.

:func:`create_app` builds the application from named models (what :func:`load_models` reads
from run directories); ``seqlab serve`` runs it on uvicorn. Routes:

- ``GET /``: the page (static HTML/JS/CSS shipped in the package; no CDN, works offline);
- ``GET /health``: liveness and queue lengths (answers while a batch runs);
- ``GET /models``: each model's name, task, engine, parameters, labels or languages, metrics;
- ``POST /translate``, ``/classify``, ``/generate`` (``stream: true``: server-sent events),
  ``/forecast``; the OpenAPI schema at ``/docs``.

Safe by default: a request names a model, never a path, and nothing in a request reaches the
filesystem; with an API key every model route needs ``Authorization: Bearer KEY`` (or
``X-API-Key``); CORS is off unless origins are given; every error is JSON ``{"error": message,
"limit": name | null}``, never a traceback (tracebacks go to the server's log).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seqlab.errors import SeqlabError
from seqlab.serve import schemas
from seqlab.serve.batching import Batcher, Job, QueueFull
from seqlab.serve.handlers import Cancelled, Handler, make_handler
from seqlab.serve.limits import LimitExceeded, Limits

STATIC = Path(__file__).parent / "static"
#: seconds a client is told to wait when a model's queue is full
RETRY_AFTER_S = 1
log = logging.getLogger("seqlab.serve")


class UnknownModel(SeqlabError):
    """A request names no model the server holds (404)."""


class RequestTimeout(SeqlabError):
    """A request went over ``timeout_s`` (504)."""


def load_models(specs: Sequence[str], which: str = "best") -> dict[str, Any]:
    """Load run directories as named models: ``NAME=RUN_DIR``, or ``RUN_DIR`` (named after its
    folder). Two models may not share a name."""
    import seqlab

    models: dict[str, Any] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec.rstrip("/")).name, spec
        if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise SeqlabError(
                f"model name {name!r} (from {spec!r}): use letters, digits, '-', '_' and '.'; "
                "name a run with NAME=RUN_DIR"
            )
        if name in models:
            raise SeqlabError(
                f"two run directories are named {name!r}; name them: NAME=RUN_DIR NAME2=RUN_DIR2"
            )
        models[name] = seqlab.load(path, which)
    if not models:
        raise SeqlabError("give at least one run directory to serve")
    return models


def _error(status: int, message: str, limit: str | None = None, **headers: str) -> JSONResponse:
    body = schemas.ErrorBody(error=message, limit=limit).model_dump()
    return JSONResponse(body, status_code=status, headers=headers or None)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class BodyLimit:
    """Refuse request bodies over ``max_body_bytes`` (413) before anything parses them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").decode("latin-1")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = _error(
            413,
            f"the request body is over the server's limit max_body_bytes={self.limit}",
            "max_body_bytes",
        )
        await response(scope, receive, send)


def create_app(
    models: Mapping[str, Any],
    *,
    limits: Limits | None = None,
    engine: str = "auto",
    quantize: str | None = None,
    api_key: str | None = None,
    cors: Sequence[str] = (),
) -> FastAPI:
    """The application serving ``models`` (name → what :func:`seqlab.load` returned).

    Args:
        limits: per-request limits and queue settings (defaults: :class:`Limits`).
        engine: translation engine, ``auto`` | ``seqlab`` | ``ctranslate2`` (see
            :class:`~seqlab.serve.handlers.TranslationHandler`).
        quantize: with CTranslate2, e.g. ``int8``.
        api_key: when given, the model routes need it (``Authorization: Bearer KEY``).
        cors: origins allowed to call the API from a browser (none: CORS off).
    """
    limits = limits or Limits()
    handlers: dict[str, Handler] = {
        name: make_handler(name, predictor, limits, engine, quantize)
        for name, predictor in models.items()
    }
    for handler in handlers.values():
        handler.warm_up()
    batchers = {
        name: Batcher(
            name,
            handler.run_batch,
            max_batch=limits.max_batch,
            wait_s=limits.batch_wait_ms / 1000,
            max_queue=limits.max_queue,
            workers=handler.workers,
        )
        for name, handler in handlers.items()
    }

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # shutting down (SIGTERM): uvicorn has let in-flight requests finish; stop the workers
        for batcher in batchers.values():
            await asyncio.to_thread(batcher.close, limits.timeout_s)

    app = FastAPI(
        title="seqlab",
        summary="Trained seqlab models over HTTP: translation, classification, language "
        "models, forecasting, with their attention.",
        lifespan=lifespan,
    )
    app.state.handlers, app.state.batchers, app.state.limits = handlers, batchers, limits
    if cors:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)

    # ------------------------------------------------------------------------ errors
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), **(exc.headers or {}))

    @app.exception_handler(LimitExceeded)
    async def _limit(request: Request, exc: LimitExceeded) -> JSONResponse:
        return _error(exc.status, str(exc), exc.limit)

    @app.exception_handler(QueueFull)
    async def _busy(request: Request, exc: QueueFull) -> JSONResponse:
        return _error(
            503,
            f"model {exc} is busy: its queue of max_queue={limits.max_queue} requests is full; "
            f"retry after {RETRY_AFTER_S} s",
            "max_queue",
            **{"Retry-After": str(RETRY_AFTER_S)},
        )

    @app.exception_handler(RequestTimeout)
    async def _timeout(request: Request, exc: RequestTimeout) -> JSONResponse:
        return _error(504, str(exc), "timeout_s")

    @app.exception_handler(UnknownModel)
    async def _unknown(request: Request, exc: UnknownModel) -> JSONResponse:
        return _error(404, str(exc))

    @app.exception_handler(SeqlabError)
    async def _seqlab(request: Request, exc: SeqlabError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _error(500, "internal server error (the server's log has the details)")

    # -------------------------------------------------------------------------- auth
    async def authorised(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("x-api-key")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given = token.strip()
        if given is None or not hmac.compare_digest(given.encode(), api_key.encode()):
            raise StarletteHTTPException(
                401,
                "this server needs an API key: send the header Authorization: Bearer KEY",
                headers={"WWW-Authenticate": "Bearer"},
            )

    # ------------------------------------------------------------------------ models
    def pick(name: str | None, task: str, route: str) -> Handler:
        if name is None:
            same = [h for h in handlers.values() if h.task == task]
            if len(same) == 1:
                return same[0]
            raise UnknownModel(
                f"name the model: this server holds {len(same)} {task.replace('_', ' ')} "
                f"models ({', '.join(h.name for h in same) or 'none'})"
            )
        handler = handlers.get(name)
        if handler is None:
            raise UnknownModel(
                f"no model named {name[:100]!r}; this server holds: {', '.join(handlers)}"
            )
        if handler.task != task:
            routes = {
                "translation": "/translate",
                "classification": "/classify",
                "language_modeling": "/generate",
                "forecasting": "/forecast",
            }
            raise SeqlabError(
                f"model {name!r} is a {handler.task.replace('_', ' ')} model; {route} needs a "
                f"{task.replace('_', ' ')} model (use POST {routes[handler.task]})"
            )
        return handler

    async def answer(handler: Handler, work: Any, size: int) -> Any:
        job = batchers[handler.name].submit(work, size)
        try:
            result = await asyncio.wait_for(job.future, limits.timeout_s)
        except TimeoutError:
            job.cancelled.set()
            raise RequestTimeout(
                f"the request took longer than the server's time limit "
                f"timeout_s={limits.timeout_s:g}"
            ) from None
        # the handler built a response model already: serialise it directly (pydantic's own
        # JSON), not through FastAPI's validate-and-encode of response_model again
        return Response(result.model_dump_json(), media_type="application/json")

    # ------------------------------------------------------------------------ routes
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/health", response_model=schemas.Health)
    async def health() -> schemas.Health:
        return schemas.Health(
            models=len(handlers),
            queued={n: b.queued for n, b in batchers.items()},
            batches={n: b.batches for n, b in batchers.items()},
            texts={n: b.texts for n, b in batchers.items()},
        )

    @app.get("/models", response_model=schemas.ModelsResponse, dependencies=[Depends(authorised)])
    async def list_models() -> schemas.ModelsResponse:
        return schemas.ModelsResponse(models=[h.info() for h in handlers.values()])

    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": schemas.ErrorBody} for code in (401, 404, 413, 422, 503, 504)
    }

    @app.post(
        "/translate",
        response_model=schemas.TranslateResponse,
        dependencies=[Depends(authorised)],
        responses=errors,
    )
    async def translate(request: schemas.TranslateRequest) -> Any:
        handler = pick(request.model, "translation", "/translate")
        return await answer(handler, *handler.prepare(request))

    @app.post(
        "/classify",
        response_model=schemas.ClassifyResponse,
        dependencies=[Depends(authorised)],
        responses=errors,
    )
    async def classify(request: schemas.ClassifyRequest) -> Any:
        handler = pick(request.model, "classification", "/classify")
        return await answer(handler, *handler.prepare(request))

    @app.post(
        "/forecast",
        response_model=schemas.ForecastResponse,
        dependencies=[Depends(authorised)],
        responses=errors,
    )
    async def forecast(request: schemas.ForecastRequest) -> Any:
        handler = pick(request.model, "forecasting", "/forecast")
        return await answer(handler, *handler.prepare(request))

    @app.post(
        "/generate",
        response_model=schemas.GenerateResponse,
        dependencies=[Depends(authorised)],
        responses={
            **errors,
            200: {
                "content": {"text/event-stream": {}},
                "description": "with stream: true, server-sent events: `token` events "
                '({"token", "text", "index"}), then `done` (the response) or `error`',
            },
        },
    )
    async def generate(request: schemas.GenerateRequest) -> Any:
        handler = pick(request.model, "language_modeling", "/generate")
        work, size = handler.prepare(request)
        if not request.stream:
            return await answer(handler, work, size)
        return _stream(batchers[handler.name], work, limits.timeout_s)

    return app


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _stream(batcher: Batcher, work: Any, timeout_s: float) -> Response:
    """Server-sent events of one generation: each token as the worker produces it."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    work.emit = lambda event: loop.call_soon_threadsafe(events.put_nowait, event)
    job: Job = batcher.submit(work, 1)  # a full queue is answered 503 before the stream opens

    async def body() -> AsyncIterator[str]:
        deadline = loop.time() + timeout_s
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait(
                    {getter, job.future},
                    timeout=max(deadline - loop.time(), 0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if getter in done:
                    yield _sse("token", getter.result())
                    continue
                getter.cancel()
                if job.future not in done:
                    yield _sse(
                        "error",
                        {
                            "error": "the generation took longer than the server's time limit "
                            f"timeout_s={timeout_s:g}",
                            "limit": "timeout_s",
                        },
                    )
                    return
                while not events.empty():  # tokens queued before the result
                    yield _sse("token", events.get_nowait())
                exc = job.future.exception()
                if exc is None:
                    yield _sse("done", job.future.result().model_dump())
                elif isinstance(exc, SeqlabError):
                    yield _sse("error", {"error": str(exc), "limit": getattr(exc, "limit", None)})
                elif not isinstance(exc, Cancelled):
                    log.error("generation failed", exc_info=exc)
                    yield _sse("error", {"error": "internal server error", "limit": None})
                return
        finally:
            job.cancelled.set()  # the client left or the stream ended: stop generating
            job.future.cancel()  # and let nobody wait for its result

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
