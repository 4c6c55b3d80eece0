"""Audio classification speed: log-mel feature extraction and whole classification, clips/s at
batch 1 and 64, and the server's latency for one 1-second clip.

- **features**: :class:`seqlab.nn.audio.LogMel` (+ the normalisation) on FSDD-length clips
  (1 s of speech-band noise at the run's rate), batch 1 and 64, best of three timed passes;
- **classification**: the trained run's ``probabilities`` on the same clips (features, model,
  softmax), batch 1 and 64;
- **server**: ``seqlab serve RUN`` in its own process, one client posting the same 1-second WAV
  ``--requests`` times (after a warm-up), p50 and p99 of the round trip.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/audio_throughput.py --run runs/fsdd-cnn

Writes ``benchmarks/results/audio_throughput.json`` with the machine it ran on.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import soundfile
import torch

from seqlab.data.audio_batching import pad_waves
from seqlab.runtime.machine import machine, set_threads
from seqlab.tasks import load

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def best_of(fn, passes: int = 3) -> float:
    """The fastest of ``passes`` timed calls (seconds), after one warm-up call."""
    fn()
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def clips(n: int, rate: int, seconds: float = 1.0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [0.1 * torch.randn(int(seconds * rate), generator=g) for _ in range(n)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def server_latency(run: Path, rate: int, requests: int) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-m", "seqlab", "serve", f"bench={run}", "--port", str(port), "--quiet"]
    server = subprocess.Popen(argv, env={**os.environ}, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    buffer = io.BytesIO()
    soundfile.write(buffer, clips(1, rate)[0].numpy(), rate, format="WAV", subtype="PCM_16")
    body = {"model": "bench", "audio": base64.b64encode(buffer.getvalue()).decode()}
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        with httpx.Client(timeout=30) as client:
            for _ in range(20):  # warm-up
                client.post(f"{url}/classify-audio", json=body).raise_for_status()
            latencies = []
            for _ in range(requests):
                start = time.perf_counter()
                client.post(f"{url}/classify-audio", json=body).raise_for_status()
                latencies.append(time.perf_counter() - start)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "requests": requests,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * percentile(latencies, 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="an audio classification run")
    parser.add_argument("--threads", type=int, default=0, help="threads (0: all cores)")
    parser.add_argument("--requests", type=int, default=200, help="server requests")
    parser.add_argument("--out", type=Path, default=RESULTS / "audio_throughput.json")
    args = parser.parse_args()
    threads = set_threads(args.threads)
    model = load(args.run)
    if model.task != "audio_classification":
        parser.error(f"--run {args.run} holds a {model.task} model, not an audio classifier")
    rate, front = model.rate, model.model
    results: dict = {"run": str(args.run), "arch": model.cfg.model.body.arch, "rate": rate}
    for batch in (1, 64):
        waves = clips(batch, rate)
        padded, lengths = pad_waves(waves)
        with torch.no_grad():
            feats = best_of(lambda p=padded, n=lengths: front.features(p, n))
        whole = best_of(lambda w=waves, b=batch: model.probabilities_of(w, b))
        results[f"batch_{batch}"] = {
            "features_clips_per_s": batch / feats,
            "classification_clips_per_s": batch / whole,
        }
        print(
            f"batch {batch:2d}: features {batch / feats:9.1f} clips/s, classification "
            f"{batch / whole:8.1f} clips/s (1 s clips at {rate} Hz)",
            flush=True,
        )
    results["server_1s_clip"] = server_latency(args.run, rate, args.requests)
    s = results["server_1s_clip"]
    print(
        f"server, one 1-second clip per request: p50 {s['p50_ms']:.1f} ms, p99 {s['p99_ms']:.1f} ms"
    )
    results["machine"] = {**machine(f"{model.precision.precision} inference"), "threads": threads}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
