"""``seqlab serve``: run directories behind an HTTP API and a web page (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from seqlab.builtin_records import QUANTIZE_TYPES, SERVER_ENGINE_NAMES
from seqlab.cli.common import positive_int
from seqlab.errors import SeqlabError
from seqlab.serving.limits import Limits


def _api_key(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise SeqlabError(f"--api-key-file {path}: no such file")
    try:
        key = file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SeqlabError(f"--api-key-file {path}: cannot read it ({exc})") from None
    if not key or len(key.splitlines()) != 1:
        raise SeqlabError(f"--api-key-file {path}: expected the key alone on one line")
    return key


#: the largest TCP port number
MAX_PORT = 65535


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to :data:`MAX_PORT` (refused by the parser, before
    anything is loaded or printed; a larger number would wrap around or overflow)."""
    value = positive_int(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"a port is 1 to {MAX_PORT}, got {value}")
    return value


def _check_port(host: str, port: int) -> None:
    """Fail now, with a clear message, when the address cannot be bound."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise SeqlabError(f"--host {host}: cannot resolve it ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise SeqlabError(
                f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port"
            ) from None


def _ctranslate2_decodes(specs: list[str], engine: str) -> bool:
    """Whether CTranslate2 will decode one of the runs (read from their configs, before any
    model is loaded): a Transformer translation run, with CTranslate2 installed for ``auto``."""
    from seqlab.storage.rundir import RunDir  # deferred: torch (its checkpoints)
    from seqlab.tasks.translation import engine_decodes  # deferred: torch

    if engine == "auto":
        try:
            import ctranslate2  # noqa: F401
        except ImportError:
            return False
    for spec in specs:
        path = spec.partition("=")[2] or spec
        try:
            model = RunDir(path).read_config().model
        except (SeqlabError, OSError, ValueError):
            continue  # load_models reports it
        if engine_decodes("ctranslate2", model):
            return True
    return False


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from seqlab.serve.app import create_app, load_models  # deferred: fastapi, uvicorn
        from seqlab.serve.guards import allowed_hosts  # deferred: starlette
    except ImportError as exc:
        raise SeqlabError(
            f"seqlab serve needs FastAPI and uvicorn ({exc.name} is not installed): "
            "pip install 'seqlab[serve]'"
        ) from None
    if args.quantize and args.engine == "seqlab":
        raise SeqlabError("--quantize applies to the ctranslate2 engine, not --engine seqlab")
    api_key = _api_key(args.api_key_file) if args.api_key_file else None
    given = {n: getattr(args, n) for n in Limits.model_fields if getattr(args, n) is not None}
    try:
        limits = Limits(**given)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-")
        raise SeqlabError(f"{flag} {first.get('input')}: {first['msg']}") from None
    _check_port(args.host, args.port)
    if args.engine != "seqlab" and _ctranslate2_decodes(args.run_dirs, args.engine):
        from seqlab.export.ctranslate2 import give_cores_to_ctranslate2  # deferred: torch

        # before PyTorch starts its threads; one batch worker per thread unless told
        give_cores_to_ctranslate2(args.threads or 0, args.workers or 0)
    elif args.workers:
        raise SeqlabError(
            "--workers applies to models CTranslate2 decodes (Transformer translation runs, "
            "with CTranslate2 installed and --engine auto or ctranslate2)"
        )
    elif args.threads:
        import torch

        torch.set_num_threads(args.threads)
    models = load_models(args.run_dirs, args.which, args.device)
    app = create_app(
        models,
        limits=limits,
        engine=args.engine,
        quantize=args.quantize,
        api_key=api_key,
        cors=args.cors or (),
        hosts=allowed_hosts(args.host, args.allowed_host or ()),
    )
    for handler in app.state.handlers.values():
        print(
            f"  {handler.name}: {handler.task.replace('_', ' ')}, model.arch="
            f"{handler.cfg.model.arch}, engine {handler.engine}"
            + (f" ({why})" if (why := getattr(handler, "why", None)) else ""),
            file=sys.stderr,
        )
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"seqlab: warning: --host {args.host} makes the server reachable from other machines"
            + ("" if api_key else "; consider --api-key-file"),
            file=sys.stderr,
        )
    where = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"seqlab serve: http://{where}:{args.port}/ (API: /docs); Ctrl-C or SIGTERM stops it "
        "after the requests in flight",
        file=sys.stderr,
    )
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning" if args.quiet else "info",
        access_log=not args.quiet,
        timeout_graceful_shutdown=int(limits.timeout_s) + 5,
        limit_concurrency=limits.max_connections,
    )
    # uvicorn stops on SIGINT/SIGTERM after the requests in flight, then raises the signal
    # again with the handlers found here: make those a no-op, so that a stop is a clean exit
    quiet: dict[int, Any] = {
        sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        uvicorn.Server(config).run()
    finally:
        for sig, handler in quiet.items():
            signal.signal(sig, handler)
    print("seqlab serve: stopped", file=sys.stderr)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve trained runs over HTTP (an API and a page that shows their attention)",
        description="Serve run directories over HTTP: POST /translate, /classify, /generate, "
        "/forecast; GET /models, /health; the page at /; the API's schema at /docs.",
    )
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="trained runs, each named after its folder, or NAME=RUN_DIR",
    )
    p.add_argument("--which", default="best", help="best | latest | a step number")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback)")
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a name requests may give in their Host header besides the address listened on "
        "(loopback: 127.0.0.1, localhost, ::1); repeatable; * accepts any. Others get 403: a "
        "web page may point a name of its own at this machine (DNS rebinding)",
    )
    p.add_argument("--port", type=port_number, default=8000, help="1 to 65535 (default: 8000)")
    p.add_argument(
        "--device",
        default="auto",
        metavar="DEVICE",
        help="where the models compute: auto (a CUDA GPU when present, else the CPU), cpu, "
        "cuda or cuda:N",
    )
    p.add_argument(
        "--engine",
        choices=SERVER_ENGINE_NAMES,  # records only: --help imports no task
        default="auto",
        help="Transformer translation: CTranslate2 when installed (auto), or always seqlab's "
        "own decoder; attention requests always use seqlab's",
    )
    p.add_argument("--quantize", choices=QUANTIZE_TYPES, help="ctranslate2: quantized weights")
    p.add_argument(
        "--api-key-file", metavar="FILE", help="require this key (Authorization: Bearer KEY)"
    )
    p.add_argument(
        "--cors",
        action="append",
        metavar="ORIGIN",
        help="allow browser pages from ORIGIN to call the API (repeatable; default: none)",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        help="decoding threads (default: all cores); when CTranslate2 decodes, it gets them and "
        "PyTorch (attention requests, other models) keeps one",
    )
    p.add_argument(
        "--workers",
        type=positive_int,
        help="batches each CTranslate2 model decodes at once, from separate threads, sharing "
        "--threads (CTranslate2's inter_threads; default: one per thread)",
    )
    p.add_argument("--quiet", action="store_true", help="no access log")
    limits = p.add_argument_group("limits (each answered 408/413/422 with its name when exceeded)")
    defaults = Limits()
    for name, field in Limits.model_fields.items():
        kind = float if field.annotation is float else int
        limits.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=kind,
            metavar="N",
            help=f"{field.description} (default: {getattr(defaults, name)})",
        )
    p.set_defaults(func=cmd_serve)
