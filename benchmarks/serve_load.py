"""``seqlab serve`` under load, on the loopback interface: 1, 8 and 32 concurrent clients, each
sending one real sentence per request, against offline ``translate`` on the same sentences.

The server runs as its own process (``seqlab serve RUN --host 127.0.0.1``), started and stopped
here; the clients are asyncio tasks in this process, each on its own keep-alive connection
(:class:`Connection`, a minimal HTTP/1.1 client: it costs the shared cores little), so on a
small machine they share its cores with the server, as a real client on the same host would.
Each level sends ``--requests`` requests or stops after ``--seconds``, whichever comes first
(bounded in count and time), after a warm-up at the highest concurrency. The sentences are the
source side of the run's validation split (Multi30k's 1,014 for the README's en→de run, read
from ``$SEQLAB_DATA_DIR``), cycled.

Reported per level: sentences/s, latency p50/p99, errors (any answer but 200, and transport
failures), the mean batch the server formed, the CPU seconds of server and clients, the server's
RSS after the level; and offline ``Translator.translate`` on the same sentences with the same
engine and threads (best of three passes, measured before the server starts and again after it
stops: the faster is the reference; with CTranslate2 the faster of one worker and one per
thread), the ratio of the two, and whether the server's translations
equal the offline ones. Goals (issue, a benchmark, not a test): at 32 clients ≥ 80 % of offline
sentences/s, zero errors, RSS growth under 5 % over 10,000 requests (``--requests 10000``).

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/serve_load.py \\
        --run runs/m30-en-de-transformer [--clients 1,8,32] [--requests 10000] [--threads 2]

**The stack's own ceiling** (``--instant``): the same server, client and requests, with a model
that answers instantly: the translator's engine replaced by one that returns a fixed translation
(:class:`InstantEngine`; tokenising, detokenising, validation, batching and HTTP all still run).
Its sentences/s is what the server could reach with an infinitely fast model; the ratio of the
real model to it says how close seqlab gets. It runs with as many workers as the real engine.
``--instant-latency MS`` makes it answer after MS milliseconds per sentence, asleep (no CPU, the
GIL released): the ceiling for a model with the real one's latency but none of its CPU, which
shows what the latency alone costs a closed loop of clients; ``--instant-busy`` spends those
milliseconds computing instead (the worker's CPU time, the GIL released): what the real model's CPU
cost alone does to the stack on the shared cores. Each level also reports the
server's CPU time per request (``server_cpu_ms_per_request``).

**The HTTP floor** (``--instant --bare``): the same run also serves the same instant model from a
bare Starlette application on the same uvicorn (:func:`bare_app`: one ``Route``, no middleware
of its own, the body parsed by the same request model, prepared by the same handler, batched by
the same batcher and answered with the same JSON, serialised by pydantic), and measures it level
by level right after seqlab's server (both processes up, one loaded at a time). Each level then
holds ``bare`` (the same fields) and ``ratio_to_bare``: what seqlab's own HTTP path (its routes,
error mapping, body limit, keys, duplicate-key check) leaves of the bare route's throughput.
Goal (issue 48): ≥ 0.8 at 32 clients.

Writes ``benchmarks/results/serve_load.json`` (``--out``; ``serve_load_instant.json`` with
``--instant``, ``serve_load_instant_latency<MS>ms.json`` with a latency), with the machine it ran
on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import httpx

from seqlab import load
from seqlab.export.ctranslate2 import engine_workers, give_cores_to_ctranslate2
from seqlab.runtime.machine import machine, set_threads
from seqlab.serving.limits import Limits
from seqlab.storage.rundir import RunDir
from seqlab.tasks.translation import load_pairs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``), all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


class InstantEngine:
    """A translation engine that answers at once: every source gets ``tokens`` (the offline
    translation of the first sentence), so the server's own costs are all that is left.

    ``latency_s`` > 0: it answers a batch after ``latency_s`` seconds per sentence, asleep (no CPU,
    the GIL released): the stack with a model that takes that long but costs nothing else, which
    separates what the model's latency costs a closed loop of clients from what its CPU costs.
    ``busy``: those seconds are spent computing instead, ``latency_s`` of this thread's CPU time per
    sentence in matrix products that release the GIL: a model with the real one's CPU cost on the
    shared cores and nothing else of it (no tokens, no engine).
    ``workers``: batches it takes at once, as the real engine's (the server's worker threads).
    """

    def __init__(
        self, tokens: list[int], workers: int = 1, latency_s: float = 0.0, busy: bool = False
    ) -> None:
        import numpy as np

        from seqlab.models.search import Hypothesis

        self.answer = [Hypothesis(list(tokens), 0.0, 0.0)]
        self.workers, self.latency_s, self.busy = workers, latency_s, busy
        self.work = np.ones((96, 96), dtype=np.float32)  # one product: tens of microseconds

    def hypotheses(self, batch: Any, decode: Any, need_weights: bool) -> list[list[Any]]:
        if self.latency_s and self.busy:
            end = time.thread_time() + self.latency_s * len(batch)
            while time.thread_time() < end:
                self.work @ self.work  # noqa: B018 - numpy releases the GIL inside
        elif self.latency_s:
            time.sleep(self.latency_s * len(batch))
        return [self.answer for _ in batch]


def bare_app(models: dict[str, Any], limits: Limits) -> Any:
    """The floor of ``POST /translate`` over HTTP: a bare Starlette application (one route, no
    middleware of its own) answering with the same JSON from the same model, through the same
    request model, handler and batcher as seqlab's server, and nothing else: no error mapping,
    no body limit, no key, no duplicate-key check (a bad request is a 500 here). ``/health`` and
    ``/models`` answer what this benchmark reads of them."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from seqlab.serve.app import Server
    from seqlab.tasks.translation.service import SERVICE

    server = Server(models, limits, {"engine": "ctranslate2"}, None)
    handler, batcher = server.handlers["bench"], server.batchers["bench"]
    body_model = SERVICE.body

    async def translate(request: Any) -> Response:
        work, size = handler.prepare(body_model.model_validate_json(await request.body()))
        result = await batcher.submit(work, size).future
        return Response(
            result.__pydantic_serializer__.to_json(result), media_type="application/json"
        )

    async def health(request: Any) -> JSONResponse:
        return JSONResponse(
            {"batches": {"bench": batcher.batches}, "texts": {"bench": batcher.texts}}
        )

    async def models_(request: Any) -> JSONResponse:
        return JSONResponse({"models": [{"engine": handler.engine, "workers": handler.workers}]})

    return Starlette(
        routes=[
            Route("/translate", translate, methods=["POST"]),
            Route("/health", health),
            Route("/models", models_),
        ]
    )


def serve_instant(
    run: Path,
    port: int,
    workers: int,
    latency_ms: float,
    busy: bool,
    limits: dict[str, Any],
    bare: bool = False,
) -> None:
    """``seqlab serve RUN --quiet`` with :class:`InstantEngine` in place of the model's engine
    (this process is the server of ``--instant``): the server takes it for a CTranslate2 engine
    of ``workers`` workers, as it does the real one, and has the real server's ``limits``;
    ``bare``: the same model served by :func:`bare_app` instead."""
    import uvicorn

    from seqlab.serve.app import create_app, load_models

    models = load_models([f"bench={run}"])
    translator = models["bench"]
    first = translator.hypotheses(["saturday 9 may 1998"], engine="seqlab")[0][0].tokens
    engine = InstantEngine(first, workers, latency_ms / 1000, busy)
    translator.engine = lambda *args, **kwargs: engine  # every engine setting answers at once
    translator.ctranslate2_engine = lambda *args, **kwargs: engine  # and has its workers
    if bare:
        app = bare_app(models, Limits(**limits))
    else:
        app = create_app(models, engine="ctranslate2", limits=Limits(**limits))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


def offline(
    model: Any, sentences: list[str], engine: str, batch: int, threads: int, passes: int = 3
) -> dict:
    """``translate`` on all sentences at once: the best of ``passes`` passes; with CTranslate2
    both with one worker (one batch at a time on all threads) and with one worker per thread
    (that many batches at once), the faster of the two."""
    best: dict = {}
    for workers in [1, threads] if engine == "ctranslate2" and threads > 1 else [1]:
        if engine == "ctranslate2":
            give_cores_to_ctranslate2(threads, workers)
        model.translate(sentences[:batch], batch_size=batch, engine=engine)  # engine made
        seconds, outputs = float("inf"), []
        for _ in range(passes):
            start = time.perf_counter()
            outputs = model.translate(sentences, batch_size=batch, engine=engine)
            seconds = min(seconds, time.perf_counter() - start)
        r = {"workers": workers, "seconds": seconds, "sentences_per_s": len(sentences) / seconds}
        print(f"  offline, {workers} worker(s): {r['sentences_per_s']:.1f} sentences/s")
        best.setdefault("outputs", outputs)
        if outputs != best["outputs"]:
            raise RuntimeError(f"offline translations differ with {workers} workers")
        best.setdefault("by_workers", []).append(r)
        if r["sentences_per_s"] > best.get("sentences_per_s", 0.0):
            best.update(r)
    return best


class Connection:
    """One keep-alive HTTP/1.1 connection to the server, on asyncio streams.

    A load generator that shares the server's cores must cost little per request: this one
    writes a request and reads ``Content-Length`` bytes back, nothing more (a general client
    such as httpx spends more CPU per request than the server's framing does).
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        assert self.reader is not None
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status, length = int(status_line.split()[1]), 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


async def load_level(
    url: str, model: str, sentences: list[str], clients: int, requests: int, seconds: float
) -> dict:
    """``clients`` concurrent clients (a keep-alive connection each), one sentence per request,
    until ``requests`` or ``seconds``."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    latencies: list[float] = []  # of every answered request
    errors: list[str] = []  # transport failures and answers other than 200
    answers: dict[int, str] = {}  # sentence index -> the server's translation
    sent = ok = 0
    deadline = time.monotonic() + seconds

    async def client() -> None:
        nonlocal sent, ok
        connection = Connection(host, int(port))
        try:
            while sent < requests and time.monotonic() < deadline:
                i, sent = sent % len(sentences), sent + 1
                start = time.perf_counter()
                try:
                    status, body = await connection.post(
                        "/translate", {"model": model, "text": sentences[i]}
                    )
                except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
                    errors.append(type(exc).__name__)
                    connection.close()
                    continue
                latencies.append(time.perf_counter() - start)
                if status != 200:
                    errors.append(f"{status}: {body[:200].decode(errors='replace')}")
                else:
                    ok += 1
                    answers[i] = json.loads(body)["translations"][0]["text"]
        finally:
            connection.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    return {
        "clients": clients,
        "requests": sent,
        "seconds": wall,
        "sentences_per_s": ok / wall,
        "latency_p50_ms": 1000 * statistics.median(latencies) if latencies else None,
        "latency_p99_ms": 1000 * percentile(latencies, 0.99) if latencies else None,
        "errors": len(errors),
        "error_examples": sorted(set(errors))[:5],
        "answers": answers,
    }


def wait_until_up(process: subprocess.Popen, url: str) -> None:
    """Wait (up to a minute) until the server answers ``/health``."""
    for _ in range(600):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            if process.poll() is not None:
                raise RuntimeError("the server exited: " + process.stderr.read()) from None
            time.sleep(0.1)
    raise RuntimeError(f"the server at {url} did not answer /health within a minute")


def measure(
    pid: int, url: str, sentences: list[str], clients: int, requests: int, seconds: float
) -> dict:
    """One level against the server ``pid`` at ``url`` (:func:`load_level`), with where the cores
    went (the server's CPU, all its threads, and these clients') and the batches it formed."""
    before = httpx.get(f"{url}/health").json()
    cpu = cpu_seconds(pid), cpu_seconds(os.getpid())
    r = asyncio.run(load_level(url, "bench", sentences, clients, requests, seconds))
    after = httpx.get(f"{url}/health").json()
    r["server_cpu_s"] = cpu_seconds(pid) - cpu[0]
    r["client_cpu_s"] = cpu_seconds(os.getpid()) - cpu[1]
    r["server_cpu_ms_per_request"] = 1000 * r["server_cpu_s"] / max(r["requests"], 1)
    r["batches"] = batches = after["batches"]["bench"] - before["batches"]["bench"]
    r["mean_batch"] = (after["texts"]["bench"] - before["texts"]["bench"]) / max(batches, 1)
    r["rss_after_mb"] = rss_bytes(pid) / 2**20
    return r


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a translation run directory")
    parser.add_argument("--clients", default="1,8,32", help="concurrency levels")
    parser.add_argument("--requests", type=int, default=2000, help="requests per level, at most")
    parser.add_argument("--seconds", type=float, default=120, help="seconds per level, at most")
    parser.add_argument("--split", default="val", help="the run's split to take sentences from")
    parser.add_argument("--sentences", type=int, default=0, help="use the first N (0: all)")
    parser.add_argument("--engine", choices=["auto", "seqlab", "ctranslate2"], default="auto")
    parser.add_argument("--threads", type=int, default=0, help="decoding threads (0: all cores)")
    parser.add_argument("--batch-size", type=int, default=64, help="offline and server batch")
    parser.add_argument(
        "--server-arg", action="append", default=[], help="more `seqlab serve` flags (repeatable)"
    )
    parser.add_argument(
        "--instant", action="store_true", help="the stack's ceiling: a model that answers at once"
    )
    parser.add_argument(
        "--instant-latency",
        type=float,
        default=0.0,
        metavar="MS",
        help="with --instant: the model answers after MS milliseconds per sentence, asleep (no "
        "CPU, the GIL released); e.g. the real model's offline time per sentence per worker",
    )
    parser.add_argument(
        "--instant-busy",
        action="store_true",
        help="with --instant-latency: spend those milliseconds computing (that much of the "
        "worker's CPU time, the GIL released) instead of asleep: the real model's CPU cost alone",
    )
    parser.add_argument(
        "--bare",
        action="store_true",
        help="with --instant: also measure a bare Starlette route on the same uvicorn, serving the "
        "same instant model and JSON (each level's `bare` and `ratio_to_bare`)",
    )
    parser.add_argument(
        "--warmup", type=int, default=5000, help="warm-up requests at the highest concurrency"
    )
    parser.add_argument("--serve-instant", type=int, help=argparse.SUPPRESS)  # the server side
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--batch-wait-ms", type=float, help="the server's --batch-wait-ms (default: its own)"
    )
    parser.add_argument("--serve-workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--serve-limits", type=json.loads, default={}, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.serve_instant:
        serve_instant(
            args.run,
            args.serve_instant,
            args.serve_workers,
            args.instant_latency,
            args.instant_busy,
            args.serve_limits,
            args.serve_bare,
        )
        return 0
    if args.instant_latency < 0 or (args.instant_latency and not args.instant):
        parser.error("--instant-latency takes milliseconds >= 0, with --instant")
    if args.instant_busy and not args.instant_latency:
        parser.error("--instant-busy spends --instant-latency computing: give both")
    if args.bare and not args.instant:
        parser.error("--bare measures the instant model's floor: give --instant too")
    stem = "serve_load_instant" if args.instant else "serve_load"
    if args.instant_latency:
        stem += f"_{'busy' if args.instant_busy else 'latency'}{args.instant_latency:g}ms"
    args.out = args.out or RESULTS / f"{stem}.json"
    levels = [int(c) for c in args.clients.split(",")]
    if args.threads < 0 or min(levels) < 1:
        parser.error("--threads must be >= 0 and every --clients level >= 1")
    cfg = RunDir(args.run).read_config()
    if cfg.model.arch != "transformer" and args.engine == "ctranslate2":
        parser.error(
            f"--engine ctranslate2 decodes Transformer runs, not model.arch={cfg.model.arch}"
        )
    try:
        import ctranslate2  # noqa: F401

        installed = True
    except ImportError:
        installed = False
    use_ct2 = cfg.model.arch == "transformer" and (
        args.engine == "ctranslate2" or (args.engine == "auto" and installed)
    )
    engine = "ctranslate2" if use_ct2 else "seqlab"
    if use_ct2:  # as `seqlab translate --engine ctranslate2` and `seqlab serve` do
        threads = give_cores_to_ctranslate2(args.threads)
    else:
        threads = set_threads(args.threads)
    model = load(args.run)
    if model.task != "translation":
        parser.error(f"--run {args.run} holds a {model.task} model; this measures /translate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sentences = [s for s, _ in load_pairs(model.cfg)[args.split] if s.strip()]
    if args.sentences:
        sentences = sentences[: args.sentences]
    print(f"{len(sentences)} sentences; engine {engine}; {threads} threads", flush=True)

    base = offline(model, sentences, engine, args.batch_size, threads)
    print(f"offline translate: {base['sentences_per_s']:.1f} sentences/s", flush=True)

    limits: dict[str, Any] = {"max_batch": args.batch_size, "max_queue": max(levels) * 4}
    if args.batch_wait_ms is not None:
        limits["batch_wait_ms"] = args.batch_wait_ms

    def command(port: int, bare: bool = False) -> list[str]:
        """The server's command line: ``seqlab serve``, or this script serving an instant model
        (seqlab's server, or the bare Starlette route with ``bare``)."""
        if not args.instant:
            argv = [sys.executable, "-m", "seqlab", "serve", f"bench={args.run}"]
            argv += ["--port", str(port), "--engine", args.engine, "--threads", str(threads)]
            argv += ["--quiet"]
            argv += [a for k, v in limits.items() for a in (f"--{k.replace('_', '-')}", str(v))]
            return argv + [a for arg in args.server_arg for a in arg.split()]
        argv = [sys.executable, __file__, "--run", str(args.run), "--serve-instant", str(port)]
        argv += ["--serve-workers", str(engine_workers() if use_ct2 else 1)]
        argv += ["--instant-latency", str(args.instant_latency)]
        argv += ["--instant-busy"] * args.instant_busy + ["--serve-bare"] * bare
        return argv + ["--serve-limits", json.dumps(limits)]

    env = {**os.environ}
    if args.instant_busy:  # its products on the worker's thread alone, as the real engine's
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    servers: dict[str, tuple[subprocess.Popen, str]] = {}
    results: list[dict] = []
    try:
        for kind in ["seqlab", "bare"] if args.bare else ["seqlab"]:
            port = free_port()
            process = subprocess.Popen(
                command(port, kind == "bare"), env=env, stderr=subprocess.PIPE, text=True
            )
            servers[kind] = process, f"http://127.0.0.1:{port}"
        for process, url in servers.values():
            wait_until_up(process, url)
        server, url = servers["seqlab"]
        info = httpx.get(f"{url}/models").json()["models"][0]
        rss_loaded = rss_bytes(server.pid)
        # warm-up at the highest concurrency: the engine's buffers grow to the largest batch
        # once; what grows after that, over the levels, is what the leak goal measures
        for _, url in servers.values():
            asyncio.run(load_level(url, "bench", sentences, max(levels), args.warmup, 60))
        rss_start = rss_bytes(server.pid)
        for clients in levels:
            for kind, (process, url) in servers.items():  # seqlab's, then the bare route's
                r = measure(process.pid, url, sentences, clients, args.requests, args.seconds)
                answers = r.pop("answers")
                if not args.instant:  # an instant model answers the same text to every sentence
                    r["differ_from_offline"] = sum(
                        base["outputs"][i] != t for i, t in answers.items()
                    )
                r["ratio_to_offline"] = r["sentences_per_s"] / base["sentences_per_s"]
                if kind == "bare":
                    results[-1]["bare"] = r
                    results[-1]["ratio_to_bare"] = (
                        results[-1]["sentences_per_s"] / r["sentences_per_s"]
                    )
                else:
                    results.append(r)
                print(
                    f"{clients:3d} clients, {kind:6s}: {r['sentences_per_s']:8.1f} sentences/s "
                    f"({r['ratio_to_offline']:.2f}× offline), p50 {r['latency_p50_ms']:.1f} ms, "
                    f"p99 {r['latency_p99_ms']:.1f} ms, {r['errors']} errors, "
                    f"{r['requests']} requests, mean batch {r['mean_batch']:.1f}, server CPU "
                    f"{r['server_cpu_ms_per_request']:.3f} ms/request, client "
                    f"{r['client_cpu_s']:.1f} s, RSS {r['rss_after_mb']:.0f} MiB",
                    flush=True,
                )
            if "ratio_to_bare" in results[-1]:
                print(f"{clients:3d} clients: {results[-1]['ratio_to_bare']:.2f}× the bare route")
        rss_end = rss_bytes(server.pid)
    finally:
        for process, _ in servers.values():
            process.terminate()
        for process, _ in servers.values():
            process.wait(timeout=60)
    # offline again with the server stopped: the reference is the faster of the two, so that
    # a slow moment of the machine during the first cannot flatter the ratios
    again = offline(model, sentences, engine, args.batch_size, threads)
    print(f"offline translate again: {again['sentences_per_s']:.1f} sentences/s", flush=True)
    if again["sentences_per_s"] > base["sentences_per_s"]:
        base = {**again, "outputs": base["outputs"]}
    for r in results:
        r["ratio_to_offline"] = r["sentences_per_s"] / base["sentences_per_s"]
        print(f"{r['clients']:3d} clients: {r['ratio_to_offline']:.2f}× offline", flush=True)
    growth = (rss_end - rss_start) / rss_start
    print(f"server RSS {rss_start / 2**20:.0f} → {rss_end / 2**20:.0f} MiB ({growth:+.1%})")
    summary = {
        "benchmark": stem,
        "instant_latency_ms_per_sentence": args.instant_latency if args.instant else None,
        "instant_latency_busy": args.instant_busy,
        "run": str(args.run),
        "sentences": len(sentences),
        "split": args.split,
        "engine": info["engine"],
        "server_workers": info["workers"],
        "server_limits": limits,
        "offline": {k: v for k, v in base.items() if k != "outputs"},
        "levels": results,
        "bare": "the same instant model from a bare Starlette route on the same uvicorn (each "
        "level's `bare`, `ratio_to_bare`)"
        if args.bare
        else None,
        "seqlab": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        + (f" (seqlab from {os.environ['PYTHONPATH']})" if os.environ.get("PYTHONPATH") else ""),
        "rss_loaded_mb": rss_loaded / 2**20,
        "rss_start_mb": rss_start / 2**20,
        "rss_end_mb": rss_end / 2**20,
        "rss_growth": growth,
        "requests_total": sum(r["requests"] for r in results),
        "goals": {
            "ratio_at_32_clients": ">= 0.8",
            "ratio_to_bare_at_32_clients": ">= 0.8" if args.bare else None,
            "errors": 0,
            "rss_growth_over_10000_requests": "< 0.05",
        },
        "machine": {
            **machine(f"fp32 (seqlab serve, engine {info['engine']})"),
            "threads": threads,  # the engine's (PyTorch keeps one when CTranslate2 decodes)
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
