"""Spoken digits from a speaker never heard in training: FSDD's six speakers, each held out once.

For each fold, ``data.test_speaker`` is one speaker (all 500 of their recordings are the test
set) and ``data.val_speaker`` another (the next in :data:`ORDER`): the validation speaker's 500
recordings choose the checkpoint, and the recipe (model, augmentation, normalisation, schedule)
is chosen by the mean validation accuracy over the folds (``--recipes`` compares several) —
never by a test speaker's accuracy, which is read once per fold at the end.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_speakers.py \\
        --config fsdd-cnn [--folds george,jackson] [--set model.augment=false ...]

Writes ``benchmarks/results/fsdd_speakers-NAME.json``: per fold the validation and test speakers,
validation and test accuracy, macro-F1, seconds; the mean and the worst fold; the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from seqlab.config import load_config
from seqlab.experiment import train
from seqlab.runtime.machine import machine
from seqlab.tasks import load

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: the folds' order: each fold's validation speaker is the one after its test speaker
ORDER = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")


def fold(config: str, test: str, overrides: list[str], root: Path) -> dict:
    """Train on four speakers, choose the checkpoint on the fifth, score the sixth."""
    val = ORDER[(ORDER.index(test) + 1) % len(ORDER)]
    cfg = load_config(config, [*overrides, f"data.test_speaker={test}", f"data.val_speaker={val}"])
    run = root / f"{cfg.name}-{test}"
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = train(cfg, run)
    seconds = time.perf_counter() - start
    model = load(run)
    scores = model.evaluate("test")
    row = {
        "test_speaker": test,
        "val_speaker": val,
        "val_acc": summary["best"],
        "test_acc": scores["accuracy"],
        "test_macro_f1": scores["macro_f1"],
        "train_seconds": round(seconds, 1),
        "precision": summary["precision"],
    }
    print(
        f"{test:9s} (val {val:9s}): val {row['val_acc']:.3f}  test {row['test_acc']:.3f}  "
        f"{seconds:.0f} s",
        flush=True,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="fsdd-cnn", help="a packaged config or a YAML file")
    parser.add_argument("--folds", default=",".join(ORDER), help="test speakers, comma-separated")
    parser.add_argument("--set", action="append", default=[], help="config overrides (repeatable)")
    parser.add_argument("--name", help="the results file's suffix (default: the config's name)")
    parser.add_argument("--runs", type=Path, help="keep the runs here (default: a temporary dir)")
    args = parser.parse_args()
    folds = [s.strip() for s in args.folds.split(",") if s.strip()]
    unknown = sorted(set(folds) - set(ORDER))
    if unknown:
        parser.error(f"--folds: {', '.join(unknown)} not among {', '.join(ORDER)}")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.runs or Path(tmp)
        rows = [fold(args.config, speaker, args.set, root) for speaker in folds]
    tests = [r["test_acc"] for r in rows]
    vals = [r["val_acc"] for r in rows]
    worst = min(rows, key=lambda r: r["test_acc"])
    name = args.name or Path(args.config).stem
    summary = {
        "benchmark": "fsdd_speakers",
        "config": args.config,
        "overrides": args.set,
        "folds": rows,
        "mean_val_acc": statistics.mean(vals),
        "mean_test_acc": statistics.mean(tests),
        "worst_fold": {"test_speaker": worst["test_speaker"], "test_acc": worst["test_acc"]},
        "goal": "mean test accuracy over the six folds >= 0.90",
        "machine": machine(rows[0]["precision"] if rows else "fp32"),
    }
    print(
        f"mean val {summary['mean_val_acc']:.3f}  mean test {summary['mean_test_acc']:.3f}  "
        f"worst {worst['test_speaker']} {worst['test_acc']:.3f}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"fsdd_speakers-{name}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
