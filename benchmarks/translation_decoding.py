"""Decoding the 1,014 Multi30k validation sentences: seqlab against CTranslate2, in one process.

One trained en→de Transformer (``--run``, default the README's
``runs/m30-en-de-transformer``), greedy and beam 5, three engines:

- ``seqlab``: seqlab's own cached search in PyTorch, fp32 (the inference default);
- ``seqlab-bf16``: the same in bf16 (``--precision bf16``; emulated, so slow, without native bf16);
- ``ct2-fp32``: the model exported to CTranslate2, float32;
- ``ct2-int8``: the same export, int8 weights (CTranslate2 ``compute_type="int8"``).

Every engine gets the same sentences in the same batches (``--batch-size``, sorted by length),
the same threads (PyTorch's and CTranslate2's ``intra_threads``), one warm-up pass, then the best
of ``--repeats`` timed passes, the engines taking turns. Reported: sentences/s, target tokens/s
(tokens produced, ``<eos>`` included), BLEU (sacreBLEU, cased, detokenised) and the ratios to
seqlab. Goals (issue): seqlab ≥ CTranslate2 fp32's throughput; int8 ≥ 2× seqlab with BLEU within
0.3.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/translation_decoding.py [--threads 2]

Writes ``benchmarks/results/translation_decoding.json``, with the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from seqlab import load
from seqlab.config import load_config
from seqlab.experiment import train
from seqlab.runtime.machine import machine
from seqlab.tasks.translation import load_pairs, score_translations

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_RUN = ROOT / "runs" / "m30-en-de-transformer"
#: engine name -> (seqlab precision, engine, quantize)
ENGINES = {
    "seqlab": ("fp32", "seqlab", None),
    "seqlab-bf16": ("bf16", "seqlab", None),
    "ct2-fp32": ("fp32", "ctranslate2", None),
    "ct2-int8": ("fp32", "ctranslate2", "int8"),
}


def measure(models, sources, references, beam: int, repeats: int, batch) -> dict[str, dict]:
    """Every engine's best-of-``repeats`` time after a warm-up, the engines taking turns in
    each round (so a drift in the machine's speed reaches them alike); outputs and BLEU of the
    last pass. ``models``: the run loaded in fp32 and in bf16."""
    runs = {
        name: (models[precision], dict(beam=beam, nbest=1, engine=engine, quantize=quantize))
        for name, (precision, engine, quantize) in ENGINES.items()
    }
    for model, run in runs.values():  # warm-up (and the export, the first time)
        model.hypotheses(sources[:batch], batch_size=batch, **run)
    best = dict.fromkeys(runs, float("inf"))
    found = {}
    for _ in range(repeats):
        for name, (model, run) in runs.items():
            start = time.perf_counter()
            found[name] = model.hypotheses(sources, batch_size=batch, **run)
            best[name] = min(best[name], time.perf_counter() - start)
    model = models["fp32"]
    results = {}
    for name, hyps in found.items():
        outputs = [model.detokenize(h[0].tokens) for h in hyps]
        tokens = sum(len(h[0].tokens) + 1 for h in hyps)
        results[name] = {
            "seconds": best[name],
            "sentences_per_s": len(sources) / best[name],
            "target_tokens_per_s": tokens / best[name],
            "target_tokens": tokens,
            "bleu": score_translations(outputs, references)["bleu"],
            "outputs": outputs,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="sentences decoded at once")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, help="only the first N validation sentences")
    parser.add_argument(
        "--out", type=Path, default=RESULTS / "translation_decoding.json", help="the JSON written"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        run, trained = args.run, (args.run / "checkpoints").is_dir()
        if not trained:
            if args.run != DEFAULT_RUN:
                raise SystemExit(f"{args.run}: not a trained run directory")
            run = untrained_run(Path(tmp) / "run")
        models = {p: load(run, precision=p) for p in ("fp32", "bf16")}
        decode(models, trained, args)


def untrained_run(run_dir: Path) -> Path:
    """The README's en→de config after one optimizer step, for a machine with no trained run.

    Its outputs run to the length limit, so it measures the engines on long outputs; its
    BLEU means nothing. The README's numbers come from the trained run.
    """
    print(
        f"no trained run at {DEFAULT_RUN}: timing an untrained model (speed ratios only; "
        "train it first for the README's numbers: seqlab train "
        "configs/multi30k-en-de-transformer.yaml --out runs/m30-en-de-transformer)",
        flush=True,
    )
    cfg = load_config("multi30k-en-de-transformer", ["train.max_steps=1", "train.average_last=0"])
    train(cfg, run_dir)
    return run_dir


def decode(models, trained: bool, args: argparse.Namespace) -> None:
    """Time every engine, greedy and beam 5, on the validation sentences; write the JSON."""
    model = models["fp32"]
    pairs = load_pairs(model.cfg)["val"][: args.sentences]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    results: dict[str, dict[str, dict]] = {}
    for beam in (1, 5):
        search = "greedy" if beam == 1 else f"beam{beam}"
        results[search] = measure(models, sources, references, beam, args.repeats, args.batch_size)
        for name, r in results[search].items():
            print(
                f"{search:7s} {name:9s} {r['seconds']:6.2f} s  {r['sentences_per_s']:7.1f} sent/s  "
                f"{r['target_tokens_per_s']:8.0f} tok/s  BLEU {r['bleu']:.2f}",
                flush=True,
            )
        base = results[search]["seqlab"]
        for r in results[search].values():
            r["speed_vs_seqlab"] = r["sentences_per_s"] / base["sentences_per_s"]
            r["bleu_minus_seqlab"] = r["bleu"] - base["bleu"]
            r["outputs_differing_from_seqlab"] = sum(
                a != b for a, b in zip(r["outputs"], base["outputs"], strict=True)
            )
        for r in results[search].values():
            del r["outputs"]
    summary = {
        "checkpoint": str(model.run.checkpoint) if trained else "untrained (one step)",
        "sentences": len(sources),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
        "decoding": results,
        "seqlab_over_ct2_fp32": {
            s: r["seqlab"]["sentences_per_s"] / r["ct2-fp32"]["sentences_per_s"]
            for s, r in results.items()
        },
        "precision": {name: p for name, (p, _, _) in ENGINES.items()},
        "seqlab_bf16_over_fp32": {
            s: r["seqlab-bf16"]["sentences_per_s"] / r["seqlab"]["sentences_per_s"]
            for s, r in results.items()
        },
        "machine": machine("seqlab fp32 and bf16, CTranslate2 fp32 and int8"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    for search, ratio in summary["seqlab_over_ct2_fp32"].items():
        int8 = results[search]["ct2-int8"]
        print(
            f"{search}: seqlab / CTranslate2 fp32 = {ratio:.2f} (goal >= 1.0); int8 = "
            f"{int8['speed_vs_seqlab']:.2f}x seqlab (goal >= 2), BLEU {int8['bleu_minus_seqlab']:+.2f}"
        )
        bf16 = results[search]["seqlab-bf16"]
        print(
            f"{search}: seqlab bf16 = {bf16['speed_vs_seqlab']:.2f}x seqlab fp32, BLEU "
            f"{bf16['bleu_minus_seqlab']:+.2f}, {bf16['outputs_differing_from_seqlab']} of "
            f"{len(sources)} outputs differ"
        )


if __name__ == "__main__":
    main()
