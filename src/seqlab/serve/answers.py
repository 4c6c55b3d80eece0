"""Every error's answer, the same on every route and on both paths (the lean endpoint and
FastAPI's stack): JSON ``{"error", "limit"}`` with its status (:func:`error_for`), never a
traceback; and the errors the server raises itself (404 for an unknown model, 504 for a
request over ``timeout_s``).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from seqlab.errors import SeqlabError
from seqlab.serve.batching import QueueFull
from seqlab.serve.guards import UnsupportedMediaType
from seqlab.serve.http import error, log, validation_message
from seqlab.serving.limits import LimitExceeded, Limits

#: seconds a client is told to wait when a model's queue is full
RETRY_AFTER_S = 1


class UnknownModel(SeqlabError):
    """A request names no model the server holds (404)."""


class RequestTimeout(SeqlabError):
    """A request went over ``timeout_s`` (504)."""


def error_for(exc: Exception, limits: Limits, scope: Scope) -> Response:
    """The answer to an error, the same on every route: JSON ``{"error", "limit"}`` with its
    status (:func:`~seqlab.serve.http.error`), never a traceback (an unexpected error is logged
    and answered 500)."""
    if isinstance(exc, RequestValidationError):
        return error(422, validation_message(exc))
    if isinstance(exc, StarletteHTTPException):
        return error(exc.status_code, str(exc.detail), **(exc.headers or {}))
    if isinstance(exc, LimitExceeded):
        return error(exc.status, str(exc), exc.limit)
    if isinstance(exc, QueueFull):
        return error(
            503,
            f"model {exc} is busy: its queue of max_queue={limits.max_queue} requests is full; "
            f"retry after {RETRY_AFTER_S} s",
            "max_queue",
            **{"Retry-After": str(RETRY_AFTER_S)},
        )
    if isinstance(exc, RequestTimeout):
        return error(504, str(exc), "timeout_s")
    if isinstance(exc, UnknownModel):
        return error(404, str(exc))
    if isinstance(exc, UnsupportedMediaType):
        return error(415, str(exc))
    if isinstance(exc, SeqlabError):
        return error(422, str(exc))
    log.exception("internal error on %s %s", scope.get("method"), scope.get("path"), exc_info=exc)
    return error(500, "internal server error (the server's log has the details)")


def add_error_handlers(app: FastAPI, limits: Limits) -> None:
    """Every error of FastAPI's stack answered by :func:`error_for`, as the lean routes' are."""

    async def handle(request: Request, exc: Exception) -> Response:
        return error_for(exc, limits, request.scope)

    for kind in (
        RequestValidationError,
        StarletteHTTPException,
        LimitExceeded,
        QueueFull,
        RequestTimeout,
        UnknownModel,
        SeqlabError,
        Exception,
    ):
        app.add_exception_handler(kind, handle)
