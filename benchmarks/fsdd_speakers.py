"""Spoken digits from a speaker never heard in training: FSDD's six speakers, each held out once.

For each fold, ``data.test_speaker`` is one speaker (all 500 of their recordings are the test
set) and ``data.val_speaker`` another (the next in :data:`ORDER`): the validation speaker's 500
recordings choose the checkpoint, and the recipe (model, augmentation, normalisation, schedule)
is chosen by the mean validation accuracy over the folds (``--choose`` compares several) —
never by a test speaker's accuracy, which is read once per fold at the end. With ``--refit``,
each fold then trains the same recipe again on all five training speakers (the usual last step
once the choices are made: one more voice to learn from) and reports that model, with the
first run's scores kept under ``single``.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_speakers.py \\
        --config fsdd-cnn [--folds george,jackson] [--set model.augment=false ...] [--refit]
    .venv/bin/python benchmarks/fsdd_speakers.py --choose NAME NAME ...

Writes ``benchmarks/results/fsdd_speakers-NAME.json``: per fold the validation and test speakers,
validation and test accuracy, macro-F1, per-digit accuracy, the confusion matrix (rows the true
digit), the temperature chosen on the validation speaker and the expected calibration error on
the test speaker before and after it (Guo et al. 2017), seconds; the mean and the worst fold;
the machine. ``--choose`` reads such files and names the recipe with the best mean validation
accuracy, the choice the test speakers never take part in.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from seqlab.config import load_config
from seqlab.experiment import train
from seqlab.runtime.machine import machine
from seqlab.tasks import load
from seqlab.tasks.classifier.calibration import expected_calibration_error

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: the folds' order: each fold's validation speaker is the one after its test speaker
ORDER = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")


def scores(model: Any, temperature: float) -> dict[str, Any]:
    """Test accuracy, macro-F1, per-digit accuracy, the confusion matrix and the ECE before and
    after ``temperature`` of a loaded run on its test split (the held-out speaker)."""
    waves, labels = model.split_examples("test")
    truth = torch.tensor([model.labels.index(label) for label in labels])
    model.model.temperature.fill_(1.0)
    raw = model.probabilities_of(waves)
    model.model.temperature.fill_(temperature)
    probs = model.probabilities_of(waves)
    pred = probs.argmax(1)
    k = len(model.labels)
    confusion = torch.zeros(k, k, dtype=torch.long)
    confusion.index_put_((truth, pred), torch.ones(len(pred), dtype=torch.long), accumulate=True)
    per_digit = (confusion.diag().double() / confusion.sum(1).clamp(min=1)).tolist()
    report = model.evaluate("test")
    return {
        "test_acc": report["accuracy"],
        "test_macro_f1": report["macro_f1"],
        "per_digit_acc": dict(zip(model.labels, [round(a, 4) for a in per_digit], strict=True)),
        "confusion": confusion.tolist(),
        "temperature": round(temperature, 4),
        "test_ece_before": round(expected_calibration_error(raw, truth), 4),
        "test_ece_after": round(expected_calibration_error(probs, truth), 4),
    }


def fold(
    config: str, test: str, overrides: list[str], root: Path, refit: bool, done: dict | None
) -> dict:
    """Train on four speakers, choose the checkpoint and the temperature on the fifth, score
    the sixth. ``refit``: then train the same recipe again, for as many epochs, on all five
    (the validation speaker too; 5 % of their clips validate, unused) and score its last
    checkpoint with the first run's temperature. ``done``: this fold's row of an earlier
    results file whose run is in ``root`` (``--reuse``): its first run is not trained again."""
    val = ORDER[(ORDER.index(test) + 1) % len(ORDER)]
    cfg = load_config(config, [*overrides, f"data.test_speaker={test}", f"data.val_speaker={val}"])
    run = root / f"{cfg.name}-{test}"
    start = time.perf_counter()
    if done is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summary = train(cfg, run)
    else:
        summary = {"best": done["val_acc"], "precision": done["precision"]}
    seconds = time.perf_counter() - start if done is None else done["train_seconds"]
    model = load(run)
    t = float(model.model.temperature)  # calibration.json: chosen on the validation speaker
    row = {"test_speaker": test, "val_speaker": val, "val_acc": summary["best"]}
    row |= scores(model, t)
    row |= {"train_seconds": round(seconds, 1), "precision": summary["precision"]}
    if refit:
        cfg5 = load_config(
            config, [*overrides, f"data.test_speaker={test}", "data.val_fraction=0.05"]
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            train(cfg5, root / f"{cfg.name}-{test}-refit")
        row["refit_seconds"] = round(time.perf_counter() - start, 1)
        refitted = scores(load(root / f"{cfg.name}-{test}-refit", "latest"), t)
        row["single"] = {k: row[k] for k in refitted}
        row |= refitted
    print(
        f"{test:9s} (val {val:9s}): val {row['val_acc']:.3f}  test {row['test_acc']:.3f}  "
        f"ECE {row['test_ece_before']:.3f} -> {row['test_ece_after']:.3f} (T {t:.2f})  "
        f"{seconds:.0f} s",
        flush=True,
    )
    return row


def choose(names: list[str]) -> int:
    """Print the recipes as a Markdown table, in the order given, and name the one with the
    best mean validation accuracy (the test speakers take no part in the choice)."""
    data = {n: json.loads((RESULTS / f"fsdd_speakers-{n}.json").read_text()) for n in names}
    chosen = max(names, key=lambda n: data[n]["mean_val_acc"])
    print(
        "| recipe | mean validation | "
        + " | ".join(ORDER)
        + " | **mean test** | worst | ECE before → after | minutes |"
    )
    print("|---" * (len(ORDER) + 6) + "|")
    for n in names:
        d = data[n]
        tests = {r["test_speaker"]: r["test_acc"] for r in d["folds"]}
        mark = " (chosen)" if n == chosen else ""
        cells = [f"{100 * tests[s]:.1f}%" if s in tests else "–" for s in ORDER]
        ece = "–"
        if "mean_test_ece_after" in d:
            ece = f"{100 * d['mean_test_ece_before']:.1f}% → {100 * d['mean_test_ece_after']:.1f}%"
        print(
            f"| `{n}` | {100 * d['mean_val_acc']:.1f}%{mark} | "
            + " | ".join(cells)
            + f" | **{100 * d['mean_test_acc']:.1f}%** | {d['worst_fold']['test_speaker']} "
            f"{100 * d['worst_fold']['test_acc']:.1f}% | {ece} | "
            f"{sum(r['train_seconds'] for r in d['folds']) / 60:.0f} |"
        )
    print(f"\nchosen on validation speakers: {chosen}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="fsdd-cnn", help="a packaged config or a YAML file")
    parser.add_argument("--folds", default=",".join(ORDER), help="test speakers, comma-separated")
    parser.add_argument("--set", action="append", default=[], help="config overrides (repeatable)")
    parser.add_argument("--name", help="the results file's suffix (default: the config's name)")
    parser.add_argument("--runs", type=Path, help="keep the runs here (default: a temporary dir)")
    parser.add_argument("--choose", nargs="+", metavar="NAME", help="compare results files")
    parser.add_argument(
        "--refit",
        action="store_true",
        help="after each fold's choices, train again on all five training speakers",
    )
    parser.add_argument(
        "--reuse",
        metavar="NAME",
        help="with --runs: the folds of results file NAME whose runs are in RUNS are not "
        "trained again (their validation scores and seconds are read from it); for --refit",
    )
    args = parser.parse_args()
    if args.choose:
        return choose(args.choose)
    done: dict[str, dict] = {}
    if args.reuse:
        if args.runs is None:
            parser.error("--reuse needs --runs (the directory that holds its runs)")
        earlier = json.loads((RESULTS / f"fsdd_speakers-{args.reuse}.json").read_text())
        if earlier["overrides"] != args.set or earlier["config"] != args.config:
            parser.error(f"--reuse {args.reuse}: its config and --set differ from these")
        done = {r["test_speaker"]: r for r in earlier["folds"]}
    folds = [s.strip() for s in args.folds.split(",") if s.strip()]
    unknown = sorted(set(folds) - set(ORDER))
    if unknown:
        parser.error(f"--folds: {', '.join(unknown)} not among {', '.join(ORDER)}")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.runs or Path(tmp)
        rows = [fold(args.config, s, args.set, root, args.refit, done.get(s)) for s in folds]
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
        "mean_test_ece_before": statistics.mean(r["test_ece_before"] for r in rows),
        "mean_test_ece_after": statistics.mean(r["test_ece_after"] for r in rows),
        "total_seconds": round(
            sum(r["train_seconds"] + r.get("refit_seconds", 0) for r in rows), 1
        ),
        "refit": args.refit,
        "goal": "mean test accuracy over the six folds >= 0.90, worst fold >= 0.80, "
        "ECE after scaling <= 0.05",
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
