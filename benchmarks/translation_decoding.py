"""Decoding speed as users get it: seqlab's own search against CTranslate2, each engine in its own
process, warm and cold.

One trained en→de Transformer (``--run``, default the README's ``runs/m30-en-de-transformer``)
decodes the Multi30k validation sentences repeated ``--repeat-val`` times (4 × 1,014 = 4,056 by
default), greedy and beam 5, with every engine:

- ``seqlab``: seqlab's own search in PyTorch, fp32;
- ``seqlab-bf16``: the same in bf16, only where the CPU computes bf16 natively (AVX512_BF16 or
  AMX; elsewhere it is emulated, ~10× slower, and left out);
- ``ct2-fp32``: the model exported to CTranslate2 (``seqlab translate --engine ctranslate2``);
- ``ct2-int8``: the same with int8 weights (``--quantize int8``).

**Fair.** Each measurement runs in a fresh process of its own: two engines in one process share
neither cores nor an OpenMP runtime fairly (once PyTorch's pool has started, CTranslate2's
threads slow several-fold; ``seqlab.export.ctranslate2.give_cores_to_ctranslate2``). Each engine
gets the layout of the machine's cores that is fastest for it among those seqlab offers
(``seqlab translate --threads T --workers W``: W batches decoded at once, each by T / W
threads — CTranslate2's ``inter_threads`` × ``intra_threads``): every layout is timed warm, the
best is kept and named, and the cold runs use it.

- **warm**: the Python API in a fresh process set up as ``seqlab`` sets up its own (huge pages,
  freed memory kept: ``seqlab.runtime.allocator``; the CLI's threads and workers), one warm-up
  pass over the first 256 sentences, then one timed pass over all of them
  (``Translator.hypotheses``); best of ``--repeats`` such processes;
- **cold**: ``seqlab translate --run RUN --input FILE ...`` as a user runs it, the process's whole
  wall time (Python start, imports, loading, the export cache already written, decoding,
  printing), best of ``--repeats``; ``startup`` is the same command on one sentence.

The engines take turns: each repeat times every engine and layout once, one after another, so
that a machine whose speed drifts over minutes (a shared host) handicaps none of them alone.

Reported: seconds, sentences/s, BLEU of the output (sacreBLEU against the references, the same
for every repeat of the validation set) and every engine's speed over CTranslate2 fp32's. Goals
(issue): seqlab ≥ 1.0× CTranslate2 fp32 warm, greedy and beam 5; cold ≥ 0.9×.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/translation_decoding.py \\
        [--run RUN] [--threads 2] [--repeats 2] [--repeat-val 4]

Writes ``benchmarks/results/translation_decoding.json`` (``--out``), with the machine it ran on.
Run it on a quiet machine: the processes take turns, never overlap.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_RUN = ROOT / "runs" / "m30-en-de-transformer"
#: engine name -> the ``seqlab translate`` flags that select it
ENGINES = {
    "seqlab": ["--engine", "seqlab"],
    "seqlab-bf16": ["--engine", "seqlab", "--precision", "bf16"],
    "ct2-fp32": ["--engine", "ctranslate2"],
    "ct2-int8": ["--engine", "ctranslate2", "--quantize", "int8"],
}
SEARCHES = {"greedy": 1, "beam5": 5}
#: measured in a fresh process: ``python translation_decoding.py --warm JSON``
WARM_WORKER = "--warm"


def layouts(threads: int) -> list[tuple[int, int]]:
    """(workers, threads) pairs that use ``threads`` cores: W batches at once, T / W threads each."""
    return [(w, threads) for w in range(1, threads + 1) if threads % w == 0]


def flags(engine: str, beam: int, layout: tuple[int, int]) -> list[str]:
    workers, threads = layout
    return [
        *ENGINES[engine],
        "--beam",
        str(beam),
        "--threads",
        str(threads),
        "--workers",
        str(workers),
    ]


# ------------------------------------------------------------------------------- in the worker
def warm(spec: dict) -> dict:
    """In a fresh process: the engine's layout as the CLI sets it, the run loaded, one warm-up
    pass, then the best of ``repeats`` timed passes (what ``--warm`` prints)."""
    from seqlab.runtime.allocator import keep_freed_memory, use_huge_pages

    use_huge_pages()  # as seqlab.cli.main, before the first tensor
    keep_freed_memory()
    import torch

    from seqlab.cli import build_parser
    from seqlab.cli.infer import load_run  # the CLI's own layout of the cores, and loading

    sources = Path(spec["input"]).read_text(encoding="utf-8").splitlines()
    args = build_parser().parse_args(["translate", "--run", spec["run"], *spec["flags"]])
    model: Any = load_run(args)[0]
    beam = int(args.beam)
    run = {"beam": beam, "engine": args.engine, "quantize": args.quantize}
    model.hypotheses(sources[:256], **run)  # warm-up (and CTranslate2's export cache)
    best, found = float("inf"), None
    for _ in range(spec["repeats"]):
        start = time.perf_counter()
        found = model.hypotheses(sources, **run)
        best = min(best, time.perf_counter() - start)
    assert found is not None
    outputs = [model.detokenize(h[0].tokens) for h in found]
    return {"seconds": best, "outputs": outputs, "torch_threads": torch.get_num_threads()}


# ----------------------------------------------------------------------------- in the driver
def measure_warm(run: Path, flagset: list[str], input_file: Path, repeats: int) -> dict:
    spec = {"run": str(run), "flags": flagset, "input": str(input_file), "repeats": repeats}
    out = subprocess.run(
        [sys.executable, __file__, WARM_WORKER, json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"warm run {flagset} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_cold(run: Path, flagset: list[str], input_file: Path, repeats: int) -> dict:
    """Best wall time of ``seqlab translate`` in a fresh process, and its outputs."""
    seqlab = Path(sys.executable).with_name("seqlab")
    command = [str(seqlab), "translate", "--run", str(run), *flagset, "--input", str(input_file)]
    best, printed = float("inf"), ""
    for _ in range(repeats):
        start = time.perf_counter()
        out = subprocess.run(command, capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - start
        if out.returncode:
            raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr[-3000:]}")
        best, printed = min(best, elapsed), out.stdout
    return {"seconds": best, "outputs": printed.splitlines()}


def bleu(outputs: list[str], references: list[str]) -> float:
    from seqlab.tasks.translation import score_translations

    return float(score_translations(outputs, references)["bleu"])


def native_bf16() -> bool:
    from seqlab.runtime.precision import native_bf16 as native

    return native()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--repeat-val", type=int, default=4, help="validation set repeated N times")
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated subset")
    parser.add_argument("--searches", default=",".join(SEARCHES), help="greedy, beam5")
    parser.add_argument(
        "--out", type=Path, default=RESULTS / "translation_decoding.json", help="the JSON written"
    )
    args = parser.parse_args()
    if not (args.run / "checkpoints").is_dir():
        raise SystemExit(
            f"{args.run}: not a trained run; train it first: seqlab train "
            "multi30k-en-de-transformer --out runs/m30-en-de-transformer"
        )
    from seqlab import load
    from seqlab.runtime.machine import machine
    from seqlab.tasks.translation import load_pairs

    model = load(args.run)
    pairs = load_pairs(model.cfg)["val"] * args.repeat_val
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    del model
    engines = [e for e in args.engines.split(",") if e != "seqlab-bf16" or native_bf16()]
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        input_file, one = Path(tmp) / "sources.txt", Path(tmp) / "one.txt"
        input_file.write_text("\n".join(sources) + "\n", encoding="utf-8")
        one.write_text(sources[0] + "\n", encoding="utf-8")
        for search in args.searches.split(","):
            beam = SEARCHES[search]
            # the engines take turns within each repeat, so that a machine whose speed drifts
            # over minutes (a shared host) slows none of them alone; each keeps its best
            tried: dict[str, dict[str, dict]] = {engine: {} for engine in engines}
            for _ in range(args.repeats):
                for engine in engines:
                    for layout in layouts(args.threads):
                        name = f"{layout[0]}x{layout[1] // layout[0]}"
                        found = measure_warm(args.run, flags(engine, beam, layout), input_file, 1)
                        print(
                            f"{search:6s} {engine:11s} warm {layout[0]} worker(s) x "
                            f"{layout[1] // layout[0]} thread(s): {found['seconds']:.2f} s",
                            flush=True,
                        )
                        if found["seconds"] < tried[engine].get(name, {}).get("seconds", 1e99):
                            tried[engine][name] = found
            chosen = {e: min(tried[e], key=lambda k: tried[e][k]["seconds"]) for e in engines}
            best = {
                e: flags(e, beam, (int(chosen[e].split("x")[0]), args.threads)) for e in engines
            }
            cold: dict[str, dict] = {}
            startup: dict[str, dict] = {}
            for _ in range(args.repeats):
                for engine in engines:
                    for timings, file in ((cold, input_file), (startup, one)):
                        found = measure_cold(args.run, best[engine], file, 1)
                        if found["seconds"] < timings.get(engine, {}).get("seconds", 1e99):
                            timings[engine] = found
            for engine in engines:
                name, workers = chosen[engine], int(chosen[engine].split("x")[0])
                warm_best = tried[engine][name]
                results.setdefault(search, {})[engine] = {
                    "layout": f"{workers} worker(s) x {args.threads // workers} thread(s)",
                    "flags": " ".join(best[engine]),
                    "warm_by_layout_s": {k: v["seconds"] for k, v in tried[engine].items()},
                    "warm_s": warm_best["seconds"],
                    "cold_s": cold[engine]["seconds"],
                    "startup_s": startup[engine]["seconds"],
                    "sentences_per_s_warm": len(sources) / warm_best["seconds"],
                    "bleu": bleu(warm_best["outputs"], references),
                    "cold_outputs_equal_warm": cold[engine]["outputs"] == warm_best["outputs"],
                }
                r = results[search][engine]
                print(
                    f"{search:6s} {engine:11s} best {r['layout']}: warm {r['warm_s']:.2f} s, "
                    f"cold {r['cold_s']:.2f} s (startup {r['startup_s']:.2f} s), "
                    f"BLEU {r['bleu']:.2f}",
                    flush=True,
                )
    for by_engine in results.values():
        anchor = by_engine.get("ct2-fp32")
        for r in by_engine.values():
            if anchor:
                r["warm_vs_ct2_fp32"] = anchor["warm_s"] / r["warm_s"]
                r["cold_vs_ct2_fp32"] = anchor["cold_s"] / r["cold_s"]
                r["cold_without_startup_vs_ct2_fp32"] = (anchor["cold_s"] - anchor["startup_s"]) / (
                    r["cold_s"] - r["startup_s"]
                )
    summary = {
        "run": str(args.run),
        "checkpoint": str(load(args.run).run.checkpoint),
        "sentences": len(sources),
        "repeats": args.repeats,
        "threads": args.threads,
        "decoding": results,
        "machine": machine("seqlab fp32 (bf16 where native), CTranslate2 fp32 and int8"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    for search, by_engine in results.items():
        for engine, r in by_engine.items():
            if "warm_vs_ct2_fp32" in r:
                print(
                    f"{search}: {engine} / CTranslate2 fp32 = {r['warm_vs_ct2_fp32']:.2f} warm, "
                    f"{r['cold_vs_ct2_fp32']:.2f} cold"
                )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WARM_WORKER:
        found = warm(json.loads(sys.argv[2]))
        print(json.dumps(found))
    else:
        main()
