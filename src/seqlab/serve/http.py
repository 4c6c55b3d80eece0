"""The server's HTTP plumbing, common to every route: error bodies, the body-size limit, the
OpenAPI description of the tasks' routes, and server-sent events.

Every error is JSON ``{"error": message, "limit": name | null}``
(:class:`~seqlab.serve.schemas.ErrorBody`). A request body is read once, as bytes, and parsed
and validated in one pass by pydantic (``model_validate_json``, strict: no type is converted);
its errors are reported as FastAPI reports a body's (:func:`parse_body`). The routes of the
tasks are plain Starlette routes, so FastAPI's per-request machinery (dependency solving, a
second JSON pass) is not on the request path; :func:`describe_routes` adds them to the OpenAPI
schema from the same declarations.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seqlab.errors import SeqlabError
from seqlab.serve import schemas
from seqlab.serve.batching import Batcher, Job
from seqlab.serve.service import Cancelled, Service

log = logging.getLogger("seqlab.serve")
#: statuses every task's route may answer with an error body
ERROR_STATUSES = (401, 404, 413, 422, 503, 504)


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
    (:func:`validation_message`)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


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
        response = error(
            413,
            f"the request body is over the server's limit max_body_bytes={self.limit}",
            "max_body_bytes",
        )
        await response(scope, receive, send)


#: the answer of a streaming route, for its OpenAPI schema
STREAM_RESPONSE = {
    "content": {"text/event-stream": {}},
    "description": "with stream: true, server-sent events: `token` events "
    '({"token", "text", "index"}), then `done` (the response) or `error`',
}


def describe_routes(schema: dict[str, Any], services: Mapping[str, Service]) -> dict[str, Any]:
    """Add each task's ``POST`` route to an OpenAPI ``schema``: its summary, request body and
    responses, with their models among the components (what FastAPI would write for a route
    it parsed itself)."""
    wanted: list[tuple[type[BaseModel], Any]] = [(schemas.ErrorBody, "serialization")]
    for service in services.values():
        wanted += [(service.request, "validation"), (service.response, "serialization")]
    refs, top = models_json_schema(wanted, ref_template="#/components/schemas/{model}")
    schema.setdefault("components", {}).setdefault("schemas", {}).update(top.get("$defs", {}))
    error = {
        "content": {"application/json": {"schema": refs[(schemas.ErrorBody, "serialization")]}}
    }
    for task, service in services.items():
        ok = {"application/json": {"schema": refs[(service.response, "serialization")]}}
        if service.stream:
            ok.update(STREAM_RESPONSE["content"])
        responses: dict[str, Any] = {
            "200": {
                "description": STREAM_RESPONSE["description"] if service.stream else "the answer",
                "content": ok,
            }
        }
        responses.update({str(s): {"description": "error", **error} for s in ERROR_STATUSES})
        schema.setdefault("paths", {})[service.route] = {
            "post": {
                "summary": service.summary or task,
                "operationId": f"{task}_post",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": refs[(service.request, "validation")]}
                    },
                },
                "responses": responses,
            }
        }
    return schema


def json_response(result: BaseModel) -> Response:
    """A response model serialised once, by pydantic itself."""
    return Response(result.model_dump_json(), media_type="application/json")


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
