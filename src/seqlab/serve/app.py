"""The HTTP API and the page: a FastAPI application over loaded run directories.

:func:`create_app` builds the application from named models (what :func:`load_models` reads
from run directories); ``seqlab serve`` runs it on uvicorn. Routes:

- ``GET /``: the page (static HTML/JS/CSS shipped in the package; no CDN, works offline);
- ``GET /health``: liveness and queue lengths (answers while a batch runs);
- ``GET /models``: each model's name, task, route, engine, parameters, metrics and what its task
  says of it (labels, languages, decoding settings);
- ``GET /panels/TASK.js``: the page's script for a task's panel, as the task declares it;
- one ``POST`` route per registered task, each with its request and response bodies,
  as the task declares them (:class:`seqlab.serving.service.Service`): ``/translate``,
  ``/classify``, ``/generate`` (``stream: true``: server-sent events), ``/forecast``, and any
  task registered from outside seqlab; the OpenAPI schema at ``/docs``.

Nothing here names a task: the routes are derived from the tasks' records
(:func:`seqlab.tasks.tasks`).

Safe by default: a request names a model, never a path, and nothing in a request reaches the
filesystem; with an API key every model route needs ``Authorization: Bearer KEY`` (or
``X-API-Key``); CORS is off unless origins are given; every error is JSON ``{"error": message,
"limit": name | null}``, never a traceback (tracebacks go to the server's log).

A task's route is lean: a ``POST`` to it is answered by the application's outer ASGI dispatch
(:class:`SeqlabAPI`), below FastAPI's and Starlette's middleware (telemetry, body limit, error
and exception middleware, exit stack, routing), with the same error mapping
(:func:`~seqlab.serve.answers.error_for`), body limit (:func:`~seqlab.serve.http.read_body`),
key and CORS; its body is read once and parsed and validated in one pass (:func:`~seqlab.serve.http.parse_body`),
checked by the model's handler on the event loop, batched with other requests on the model's
worker thread, and its response serialised once, by pydantic, straight to bytes
(:func:`~seqlab.serve.http.json_response`). Everything else (the page, ``/health``,
``/models``, the docs, another method on a task's route) goes through FastAPI as before.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from seqlab.errors import SeqlabError
from seqlab.serve import schemas
from seqlab.serve.answers import RequestTimeout, UnknownModel, add_error_handlers, error_for
from seqlab.serve.batching import Batcher
from seqlab.serve.guards import check_json, check_no_query, host_refused
from seqlab.serve.http import (
    BodyLimit,
    TaskRoute,
    bound_by_limits,
    error,
    json_response,
    parse_body,
    read_body,
    stream,
)
from seqlab.serving.limits import Limits
from seqlab.serving.service import Handler, Service
from seqlab.tasks import load, tasks

STATIC = Path(__file__).parent / "static"


def load_models(
    specs: Sequence[str], which: str = "best", device: str | None = None
) -> dict[str, Any]:
    """Load run directories as named models: ``NAME=RUN_DIR``, or ``RUN_DIR`` (named after its
    folder), each on ``device`` (:func:`seqlab.load`). Two models may not share a name."""
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
        models[name] = load(path, which, device=device)
    if not models:
        raise SeqlabError("give at least one run directory to serve")
    return models


def service_of(task: str) -> Service:
    """The service its task declares (:class:`seqlab.catalog.TaskSpec`)."""
    spec = next((t for t in tasks() if t.name == task), None)
    if spec is None or spec.service is None:
        raise SeqlabError(f"the server cannot serve task {task!r}: it declares no service")
    return spec.service


def make_handler(
    name: str, predictor: Any, limits: Limits, settings: Mapping[str, Any] | None = None
) -> Handler:
    """The handler of ``predictor``'s task, as the task declares it."""
    try:
        service = service_of(predictor.task)
    except SeqlabError as exc:
        raise SeqlabError(f"model {name!r}: {exc}") from None
    return service.handler(name, predictor, limits, settings)


class Server:
    """The models served, and what every task's route does with them.

    Args:
        models: name → what :func:`seqlab.load` returned.
        limits: per-request limits and queue settings.
        settings: the handlers' settings (``engine``, ``quantize``).
        api_key: when given, the model routes need it.
    """

    def __init__(
        self,
        models: Mapping[str, Any],
        limits: Limits,
        settings: Mapping[str, Any],
        api_key: str | None,
    ) -> None:
        self.limits, self.api_key = limits, api_key
        self.handlers = {
            name: make_handler(name, p, limits, settings) for name, p in models.items()
        }
        # every registered task's route, served or not (a route without its models answers 404)
        self.services = {t.name: t.service for t in tasks() if t.service is not None}
        for handler in self.handlers.values():
            handler.warm_up()
        self.batchers = {
            name: Batcher(
                name,
                handler.run_batch,
                max_batch=limits.max_batch,
                wait_s=limits.batch_wait_ms / 1000,
                max_queue=limits.max_queue,
                workers=handler.workers,
            )
            for name, handler in self.handlers.items()
        }

    def authorise(self, headers: Headers) -> None:
        """Refuse (401) a request without the server's API key, when it has one."""
        if self.api_key is None:
            return
        given = headers.get("x-api-key")
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            given = token.strip()
        if given is None or not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise StarletteHTTPException(
                401,
                "this server needs an API key: send the header Authorization: Bearer KEY",
                headers={"WWW-Authenticate": "Bearer"},
            )

    def pick(self, name: str | None, task: str, route: str) -> Handler:
        """The model a request names (or the one model of its task, when it names none)."""
        if name is None:
            same = [h for h in self.handlers.values() if h.task == task]
            if len(same) == 1:
                return same[0]
            kind = task.replace("_", " ")
            if not same:
                raise UnknownModel(f"this server holds no {kind} model: {route} has none to run")
            # the request is incomplete, not about a missing model: 422 naming the field
            raise SeqlabError(
                f"model: required, since this server holds {len(same)} {kind} models "
                f"({', '.join(h.name for h in same)}); name one"
            )
        handler = self.handlers.get(name)
        if handler is None:
            raise UnknownModel(
                f"no model named {name[:100]!r}; this server holds: {', '.join(self.handlers)}"
            )
        if handler.task != task:
            raise SeqlabError(
                f"model {name!r} is a {handler.task.replace('_', ' ')} model; {route} needs a "
                f"{task.replace('_', ' ')} model (use POST {self.services[handler.task].route})"
            )
        return handler

    async def answer(self, handler: Handler, work: Any, size: int) -> Response:
        """Run ``work`` on the model's batcher and answer with its response, serialised once."""
        job = self.batchers[handler.name].submit(work, size)
        try:
            result = await asyncio.wait_for(job.future, self.limits.timeout_s)
        except TimeoutError:
            job.cancelled.set()
            raise RequestTimeout(
                f"the request took longer than the server's time limit "
                f"timeout_s={self.limits.timeout_s:g}"
            ) from None
        return json_response(result)

    async def respond(
        self, task: str, service: Service, headers: Headers, body: bytes, query: bytes = b""
    ) -> Response:
        """``POST service.route`` with ``body`` (read within the limit): authorised, declared
        JSON (:func:`~seqlab.serve.guards.check_json`), the body parsed once, the model picked,
        the request checked by its handler, then answered (streamed, for a streaming request).
        Errors are raised (:func:`~seqlab.serve.answers.error_for` maps them)."""
        self.authorise(headers)
        check_json(headers, service.route)
        check_no_query(query, service.route)
        request = parse_body(body, service.body)
        handler = self.pick(request.model, task, service.route)
        work, size = handler.prepare(request)
        if service.stream and getattr(request, "stream", False):
            return stream(self.batchers[handler.name], work, self.limits.timeout_s)
        return await self.answer(handler, work, size)

    def lean_endpoint(self, task: str, service: Service) -> ASGIApp:
        """``POST service.route`` as a bare ASGI application, the application of the task's
        route (:class:`~seqlab.serve.http.TaskRoute`), called by :class:`SeqlabAPI`'s dispatch:
        the body read within ``max_body_bytes`` (413 before anything else, as the generic
        stack's :class:`~seqlab.serve.http.BodyLimit` does), then :meth:`respond`, each error
        answered by :func:`~seqlab.serve.answers.error_for` as FastAPI's handlers answer it."""
        limit = self.limits.max_body_bytes

        async def post(scope: Scope, receive: Receive, send: Send) -> None:
            try:
                body = await read_body(scope, receive, limit, self.limits.body_timeout_s)
                if body is None:  # the client left before sending its body: nobody to answer
                    return
                headers, query = Headers(scope=scope), scope.get("query_string", b"")
                response = await self.respond(task, service, headers, body, query)
            except Exception as exc:  # noqa: BLE001 - every error is a JSON answer
                response = error_for(exc, self.limits, scope)
            await response(scope, receive, send)

        return post

    def describe(self, handler: Handler) -> schemas.ModelInfo:
        """``/models``' entry for one model: the common fields, then its task's details."""
        run, cfg, service = handler.predictor.run, handler.cfg, self.services[handler.task]
        return schemas.ModelInfo(
            name=handler.name,
            task=handler.task,
            route=service.route,
            panel=f"/panels/{handler.task}.js" if service.panel is not None else None,
            arch=cfg.model.arch,
            dataset=str(cfg.data.dataset),
            engine=handler.engine,
            workers=handler.workers,
            parameters=sum(p.numel() for p in handler.predictor.model.parameters()),
            checkpoint_step=run.state.step if run is not None else None,
            metrics=run.metrics if run is not None else {},
            **handler.details(),
        )


class SeqlabAPI(FastAPI):
    """FastAPI's application entered through one outer ASGI dispatch: a ``POST`` to a task's
    route goes straight to its lean endpoint (:meth:`Server.lean_endpoint`, wrapped in the same
    CORS middleware when CORS is on); every other request goes through FastAPI's stack (its
    middleware, routing, exception handlers). The schema, ``/docs`` and ``app.state`` are
    FastAPI's."""

    #: route path → the task's lean endpoint (set by :func:`create_app`; none: all to FastAPI)
    lean: Mapping[str, ASGIApp] = MappingProxyType({})
    #: the names the ``Host`` header may give (set by :func:`create_app`; None: any)
    hosts: frozenset[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.hosts is not None:
            refused = host_refused(Headers(scope=scope).get("host"), self.hosts)
            if refused is not None:
                if scope["type"] == "http":
                    await error(403, refused)(scope, receive, send)
                else:  # a websocket handshake refused (FastAPI serves none; said for safety)
                    await send({"type": "websocket.close", "code": 1008})
                return
        if scope["type"] == "http" and scope["method"] == "POST":
            path, root = scope["path"], scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            endpoint = self.lean.get(path)
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    models: Mapping[str, Any],
    *,
    limits: Limits | None = None,
    engine: str = "auto",
    quantize: str | None = None,
    api_key: str | None = None,
    cors: Sequence[str] = (),
    hosts: frozenset[str] | None = None,
) -> FastAPI:
    """The application serving ``models`` (name → what :func:`seqlab.load` returned).

    Args:
        limits: per-request limits and queue settings (defaults: :class:`Limits`).
        engine: translation engine, ``auto`` | ``seqlab`` | ``ctranslate2`` (see
            :class:`~seqlab.tasks.translation.service.TranslationHandler`).
        quantize: with CTranslate2, e.g. ``int8``.
        api_key: when given, the model routes need it (``Authorization: Bearer KEY``).
        cors: origins allowed to call the API from a browser (none: CORS off).
        hosts: the names the ``Host`` header of a request may give
            (:func:`~seqlab.serve.guards.allowed_hosts`; any other is answered 403 before
            anything else); None: any (``seqlab serve`` always gives them).
    """
    limits = limits or Limits()
    server = Server(models, limits, {"engine": engine, "quantize": quantize}, api_key)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # shutting down (SIGTERM): uvicorn has let in-flight requests finish; stop the workers
        for batcher in server.batchers.values():
            await asyncio.to_thread(batcher.close, limits.timeout_s)

    served = sorted({h.task.replace("_", " ") for h in server.handlers.values()})
    app = SeqlabAPI(
        docs_url=None,  # served offline below (add_docs), not from a CDN
        redoc_url=None,
        title="seqlab",
        summary="Trained seqlab models over HTTP, with their attention: " + ", ".join(served),
        lifespan=lifespan,
    )
    app.state.server, app.state.handlers, app.state.batchers = (
        server,
        server.handlers,
        server.batchers,
    )
    app.state.limits = limits
    app.hosts = hosts
    # one route per task: documented (the schema) and answering (its application, the lean path)
    task_routes = [TaskRoute(t, s, server.lean_endpoint(t, s)) for t, s in server.services.items()]
    app.lean = {r.path: r.app for r in task_routes}
    if cors:
        from fastapi.middleware.cors import CORSMiddleware  # deferred: fastapi's CORS, if asked

        allowed = {
            "allow_origins": list(cors),
            "allow_methods": ["GET", "POST"],
            "allow_headers": ["Authorization", "X-API-Key", "Content-Type"],
        }
        app.add_middleware(CORSMiddleware, **allowed)  # type: ignore[arg-type]
        app.lean = {route: CORSMiddleware(lean, **allowed) for route, lean in app.lean.items()}
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes, seconds=limits.body_timeout_s)
    add_error_handlers(app, limits)
    add_common_routes(app, server)
    # the tasks' routes first: a request is matched against them before the page's and the docs'
    app.router.routes[:0] = task_routes

    def openapi() -> dict[str, Any]:
        """FastAPI's schema of the application's routes, the tasks' among them
        (:class:`~seqlab.serve.http.TaskRoute`), with this server's limits as the bounds of the
        options they bound (:func:`~seqlab.serve.http.bound_by_limits`), made once."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
            )
            bound_by_limits(schema, server.services, limits)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def add_docs(app: FastAPI) -> None:
    """``/docs``, Swagger UI over this server's schema, from the assets that ``fastapi-offline``
    ships (Swagger UI 5), served here: no CDN, so it renders with the network unplugged."""
    import fastapi_offline  # deferred: fastapi (only its static files are used)

    assets = Path(fastapi_offline.__file__).parent / "static"
    app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")
    redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.head("/docs", include_in_schema=False)
    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title}: the HTTP API",
            oauth2_redirect_url=f"{root}{redirect}",
            swagger_js_url=f"{root}/docs-assets/swagger-ui-bundle.js",
            swagger_css_url=f"{root}/docs-assets/swagger-ui.css",
            swagger_favicon_url=f"{root}/docs-assets/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from swagger.io
        )

    @app.get(redirect, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()


def add_common_routes(app: FastAPI, server: Server) -> None:
    """The page, its panels, ``/health``, ``/models`` and ``/docs``."""
    add_docs(app)

    async def authorised(request: Request) -> None:
        server.authorise(request.headers)

    # HEAD wherever GET is (a monitor's probe, curl -I): the same headers, no body (uvicorn
    # sends none for HEAD); out of the schema, whose GET operations describe them
    @app.head("/", include_in_schema=False)
    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.head("/panels/{task}.js", include_in_schema=False)
    @app.get("/panels/{task}.js", include_in_schema=False)
    async def panel(task: str) -> FileResponse:
        service = server.services.get(task)
        if service is None or service.panel is None:
            raise StarletteHTTPException(404, f"no panel script for task {task[:100]!r}")
        return FileResponse(service.panel, media_type="text/javascript")

    @app.head("/health", include_in_schema=False)
    @app.get("/health", response_model=schemas.Health)
    async def health() -> schemas.Health:
        batchers = server.batchers
        return schemas.Health(
            models=len(server.handlers),
            queued={n: b.queued for n, b in batchers.items()},
            batches={n: b.batches for n, b in batchers.items()},
            texts={n: b.texts for n, b in batchers.items()},
        )

    @app.head("/models", include_in_schema=False, dependencies=[Depends(authorised)])
    @app.get("/models", response_model=schemas.ModelsResponse, dependencies=[Depends(authorised)])
    async def list_models() -> schemas.ModelsResponse:
        return schemas.ModelsResponse(models=[server.describe(h) for h in server.handlers.values()])
