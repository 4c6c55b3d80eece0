"""The server's HTTP plumbing, common to every route: error bodies, the body-size limit, the
OpenAPI description of the tasks' routes, and server-sent events.

Every error is JSON ``{"error": message, "limit": name | null}``
(:class:`~seqlab.serve.schemas.ErrorBody`). A request body is read once, as bytes, and parsed
and validated in one pass by pydantic (``model_validate_json``, strict: no type is converted);
its errors are reported as FastAPI reports a body's (:func:`parse_body`). The routes of the
tasks answer as plain ASGI endpoints, so FastAPI's per-request machinery (dependency solving, a
second JSON pass) is not on the request path, nor, for a ``POST``, its middleware (the
application's outer dispatch answers it: :class:`seqlab.serve.app.SeqlabAPI`, with the body read
by :func:`read_body`); each is one :class:`TaskRoute`, which FastAPI's own OpenAPI generation
describes and whose application is the one that answers.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seqlab.errors import SeqlabError
from seqlab.serve import schemas
from seqlab.serve.batching import Batcher, Job
from seqlab.serving.limits import LimitExceeded
from seqlab.serving.service import Cancelled, Service

log = logging.getLogger("seqlab.serve")
#: statuses every task's route may answer with an error body
ERROR_STATUSES = (401, 404, 408, 413, 415, 422, 503, 504)


def error(status: int, message: str, limit: str | None = None, **headers: str) -> JSONResponse:
    body = schemas.ErrorBody(error=message, limit=limit).model_dump()
    return JSONResponse(body, status_code=status, headers=headers or None)


def validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_body(body: bytes, model: type[BaseModel]) -> Any:
    """A request body parsed and validated in one pass (pydantic-core, from the bytes); its
    errors raised as FastAPI raises a body's, so that they read the same
    (:func:`validation_message`). A key given twice in one object (``{"model": "a", "model":
    "b"}``, at any depth), which JSON parsers read as the last value, is refused naming it
    (:func:`duplicate_keys`)."""
    repeated = duplicate_keys(body)
    if repeated:
        errors = [
            {
                "type": "duplicate_key",
                "loc": ("body", *where),
                "msg": f"the key {key!r} is given twice; give each key once (a repeated key "
                "would silently drop one of its values)",
                "input": key,
            }
            for where, key in repeated
        ]
        raise RequestValidationError(errors)
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


class _Object(dict[str, Any]):
    """A JSON object as read by :func:`duplicate_keys`: its keys given more than once."""

    repeated: tuple[str, ...] = ()


def duplicate_keys(body: bytes) -> list[tuple[tuple[str | int, ...], str]]:
    """Each key given twice in one object of the JSON ``body``: (where the object is, as the
    keys and indices leading to it; the key). Empty when there is none, or when ``body`` is not
    JSON (pydantic's parse says what is wrong with it)."""
    found = False

    def pairs(items: list[tuple[str, Any]]) -> _Object:
        nonlocal found
        obj = _Object(items)
        if len(obj) < len(items):
            found, seen, twice = True, set(), []
            for key, _ in items:
                if key in seen:
                    twice.append(key)
                seen.add(key)
            obj.repeated = tuple(dict.fromkeys(twice))
        return obj

    try:
        tree = json.loads(body, object_pairs_hook=pairs)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
        return []
    if not found:
        return []
    out: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), tree)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, _Object):
            out += [(where, key) for key in node.repeated]
            stack += [((*where, k), v) for k, v in node.items()][::-1]  # first on top
        elif isinstance(node, list):
            stack += [((*where, i), v) for i, v in enumerate(node)][::-1]
    return out


def body_too_large(limit: int) -> LimitExceeded:
    """The error of a body over ``max_body_bytes`` (413)."""
    return LimitExceeded(
        f"the request body is over the server's limit max_body_bytes={limit}",
        "max_body_bytes",
        413,
    )


def body_too_slow(seconds: float) -> LimitExceeded:
    """The error of a body that did not arrive within ``body_timeout_s`` (408)."""
    return LimitExceeded(
        f"the request body did not arrive within the server's limit body_timeout_s={seconds:g}",
        "body_timeout_s",
        408,
    )


async def read_body(
    scope: Scope, receive: Receive, limit: int, seconds: float | None = None
) -> bytes | None:
    """A request's body, read within ``limit`` bytes and, when given, ``seconds``: a declared
    ``Content-Length`` over the limit is refused before a byte is read, a body without one as
    soon as it passes it (:func:`body_too_large`), and one that has not all arrived in time
    (:func:`body_too_slow`: a client that stalls holds its connection no longer); None when the
    client left before its end."""
    if seconds is None:
        return await _read_body(scope, receive, limit)
    try:
        async with asyncio.timeout(seconds):
            return await _read_body(scope, receive, limit)
    except TimeoutError:
        raise body_too_slow(seconds) from None


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise body_too_large(limit)
            break
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise body_too_large(limit)
        if not message.get("more_body", False):
            return b"".join((*chunks, chunk)) if chunks else chunk
        chunks.append(chunk)


class BodyLimit:
    """Refuse request bodies over ``max_body_bytes`` (413), or slower than ``body_timeout_s``
    (408), before anything parses them, on the routes of FastAPI's stack (a task's ``POST``
    reads its own: :func:`read_body`)."""

    def __init__(self, app: ASGIApp, limit: int, seconds: float | None = None) -> None:
        self.app, self.limit, self.seconds = app, limit, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            read = await read_body(scope, receive, self.limit, self.seconds)
        except LimitExceeded as exc:
            await error(exc.status, str(exc), exc.limit)(scope, receive, send)
            return
        body, replayed = b"" if read is None else read, False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


#: the answer of a streaming route, for its OpenAPI schema
STREAM_RESPONSE = {
    "content": {"text/event-stream": {}},
    "description": "with stream: true, server-sent events: `token` events "
    '({"token", "text", "index"}), then `done` (the response) or `error`',
}


class TaskRoute(APIRoute):
    """A task's ``POST`` route, one object that is both documented and answering.

    FastAPI's OpenAPI generation reads it like any route: the request body
    (:attr:`~seqlab.serving.service.Service.body`, pydantic's schema: each field with its
    description and bounds), the response, the error bodies and, for a streaming route, the
    event stream, declared by the signature of an endpoint that never runs. What answers is
    ``asgi``, the task's lean ASGI endpoint (:meth:`seqlab.serve.app.Server.lean_endpoint`: the
    body read once within the limit, parsed and validated in one pass by :func:`parse_body`),
    set as the route's application: the application's outer dispatch calls it for a ``POST``
    (:class:`seqlab.serve.app.SeqlabAPI`), and the router reaches the same one through
    FastAPI's stack (another method: 405, by Starlette's route)."""

    def __init__(self, task: str, service: Service, asgi: ASGIApp) -> None:
        async def post(body: Any) -> Any:  # pragma: no cover - never called: it documents
            raise NotImplementedError

        body = inspect.Parameter(
            "body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=service.body
        )
        post.__signature__ = inspect.Signature([body])  # type: ignore[attr-defined]
        responses: dict[int | str, dict[str, Any]] = {
            s: {"model": schemas.ErrorBody, "description": "error"} for s in ERROR_STATUSES
        }
        if service.stream:
            responses[200] = STREAM_RESPONSE
        super().__init__(
            service.route,
            post,
            methods=["POST"],
            response_model=service.response,
            responses=responses,
            summary=service.summary or task,
            operation_id=f"{task}_post",
            name=task,
            response_description="the answer",
        )
        self.app = asgi  # what answers: the lean endpoint, not FastAPI's request handler


def bound_by_limits(schema: dict[str, Any], services: Mapping[str, Service], limits: Any) -> None:
    """This server's bounds in its OpenAPI ``schema`` (changed in place): each option a task's
    handler bounds by a limit (:attr:`~seqlab.serving.service.Handler.limited`) gets that
    limit's value as its ``maximum`` where it is lower than the field's own, so the schema (and
    the page's forms, which read it) says what this server accepts."""
    components = schema.get("components", {}).get("schemas", {})
    for service in services.values():
        properties = components.get(service.body.__name__, {}).get("properties", {})
        for field, limit in getattr(service.handler, "limited", {}).items():
            bound = getattr(limits, limit)
            prop = properties.get(field, {})
            for number in [prop, *prop.get("anyOf", [])]:
                if number.get("type") in ("integer", "number"):
                    number["maximum"] = min(number.get("maximum", bound), bound)


def json_response(result: BaseModel) -> Response:
    """A response model serialised once, by pydantic itself, straight to bytes (what
    ``model_dump_json`` writes, not decoded to a string and encoded again)."""
    return Response(result.__pydantic_serializer__.to_json(result), media_type="application/json")


def sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def stream(batcher: Batcher, work: Any, timeout_s: float) -> Response:
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
                    yield sse("token", getter.result())
                    continue
                getter.cancel()
                if job.future not in done:
                    yield sse(
                        "error",
                        {
                            "error": "the generation took longer than the server's time limit "
                            f"timeout_s={timeout_s:g}",
                            "limit": "timeout_s",
                        },
                    )
                    return
                while not events.empty():  # tokens queued before the result
                    yield sse("token", events.get_nowait())
                exc = job.future.exception()
                if exc is None:
                    yield sse("done", job.future.result().model_dump())
                elif isinstance(exc, SeqlabError):
                    yield sse("error", {"error": str(exc), "limit": getattr(exc, "limit", None)})
                elif not isinstance(exc, Cancelled):
                    log.error("generation failed", exc_info=exc)
                    yield sse("error", {"error": "internal server error", "limit": None})
                return
        finally:
            job.cancelled.set()  # the client left or the stream ended: stop generating
            job.future.cancel()  # and let nobody wait for its result

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
