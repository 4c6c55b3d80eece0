"""An emotion from a voice never heard: EmoDB's ten actors, each held out once.

For each fold, ``data.test_speaker`` is one actor (all their utterances are the test set) and
``data.val_speaker`` the next in :data:`seqlab.data.emodb.EMODB_SPEAKERS`: the validation
actor's utterances choose the checkpoint and fit the softmax temperature (a held-out speaker,
never clips of the training speakers), and the recipe is chosen by the mean validation UAR over
the folds (``--choose``), never by a test actor's score, which is read once per fold at the end.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/emodb_speakers.py \\
        --config emodb-cnn [--folds 03,08] [--set train.epochs=20 ...] [--name NAME]
    .venv/bin/python benchmarks/emodb_speakers.py --choose NAME NAME ...

Writes ``benchmarks/results/emodb_speakers-NAME.json``: which copy of EmoDB was read (the derived
22.05 kHz / 2.0 s copy or the original), per fold the two actors and the test actor's sex, the
validation UAR, the test UAR (unweighted average recall: the mean of the per-emotion recalls,
over the emotions the actor has), weighted accuracy (the share right), per-emotion recall, the
confusion matrix (rows the true emotion, in :data:`~seqlab.data.emodb.EMODB_EMOTIONS` order),
the temperature and the expected calibration error before and after it (Guo et al. 2017);
then the mean and worst fold, women and men apart, the pooled confusion matrix, the machine.
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
from seqlab.data.emodb import (
    EMODB_EMOTIONS,
    EMODB_SEX,
    EMODB_SPEAKERS,
    VARIANTS,
    emodb_variant,
    emodb_wavs,
    per_sex,
)
from seqlab.experiment import train
from seqlab.runtime.machine import machine
from seqlab.tasks import load
from seqlab.tasks.classifier.calibration import expected_calibration_error

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
GOAL = "mean test UAR over the ten folds >= 0.80, no fold below 0.65"


def confusion_of(truth: torch.Tensor, pred: torch.Tensor, k: int) -> torch.Tensor:
    """``(k, k)`` counts, rows the true class."""
    out = torch.zeros(k, k, dtype=torch.long)
    out.index_put_((truth, pred), torch.ones(len(pred), dtype=torch.long), accumulate=True)
    return out


def uar(confusion: torch.Tensor) -> float:
    """The mean recall over the classes that occur (rows with any example)."""
    rows = confusion.sum(1)
    recall = confusion.diag().double()[rows > 0] / rows[rows > 0]
    return float(recall.mean())


def split_scores(model: Any, split: str) -> dict[str, Any]:
    """UAR, weighted accuracy, per-emotion recall, confusion and ECE before/after the run's
    temperature, of a loaded run on ``split``."""
    waves, labels = model.split_examples(split)
    truth = torch.tensor([model.labels.index(label) for label in labels])
    temperature = float(model.model.temperature)
    model.model.temperature.fill_(1.0)
    raw = model.probabilities_of(waves)
    model.model.temperature.fill_(temperature)
    probs = model.probabilities_of(waves)
    confusion = confusion_of(truth, probs.argmax(1), len(model.labels))
    rows = confusion.sum(1)
    recall = {
        e: round(float(confusion[i, i] / rows[i]), 4)
        for i, e in enumerate(model.labels)
        if rows[i] > 0
    }
    return {
        "uar": uar(confusion),
        "wa": float(confusion.diag().sum() / confusion.sum()),
        "recall": recall,
        "confusion": confusion.tolist(),
        "temperature": round(temperature, 4),
        "ece_before": round(expected_calibration_error(raw, truth), 4),
        "ece_after": round(expected_calibration_error(probs, truth), 4),
        "mean_confidence": round(float(probs.max(1).values.mean()), 4),
    }


def fold(config: str, test: str, overrides: list[str], root: Path) -> dict:
    """Train on eight actors, choose the checkpoint and temperature on the ninth, score the
    tenth."""
    val = EMODB_SPEAKERS[(EMODB_SPEAKERS.index(test) + 1) % len(EMODB_SPEAKERS)]
    speakers = [f'data.test_speaker="{test}"', f'data.val_speaker="{val}"']
    cfg = load_config(config, [*overrides, *speakers])
    run = root / f"{cfg.name}-{test}"
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = train(cfg, run)
    seconds = time.perf_counter() - start
    model = load(run)
    if tuple(model.labels) != EMODB_EMOTIONS:
        raise RuntimeError(f"{run}: labels {model.labels}, expected {EMODB_EMOTIONS}")
    valid = split_scores(model, "val")
    row = {"test_speaker": test, "sex": EMODB_SEX[test], "val_speaker": val}
    row |= {"val_uar": valid["uar"], "val_wa": valid["wa"]}
    row |= {
        f"test_{k}" if k in ("uar", "wa") else k: v for k, v in split_scores(model, "test").items()
    }
    row |= {"train_seconds": round(seconds, 1), "precision": summary["precision"]}
    print(
        f"{test} ({row['sex']}, val {val}): val UAR {row['val_uar']:.3f}  test UAR "
        f"{row['test_uar']:.3f}  WA {row['test_wa']:.3f}  ECE {row['ece_before']:.3f} -> "
        f"{row['ece_after']:.3f} (T {row['temperature']:.2f})  {seconds:.0f} s",
        flush=True,
    )
    return row


def summarise(rows: list[dict], config: str, overrides: list[str], variant: str) -> dict:
    """The folds' means, worst fold, women and men apart, and the pooled confusion matrix."""
    test = {r["test_speaker"]: r["test_uar"] for r in rows}
    worst = min(rows, key=lambda r: r["test_uar"])
    pooled = torch.tensor([r["confusion"] for r in rows]).sum(0)
    return {
        "benchmark": "emodb_speakers",
        "data": VARIANTS[variant],
        "config": config,
        "overrides": overrides,
        "folds": rows,
        "mean_val_uar": statistics.mean(r["val_uar"] for r in rows),
        "mean_test_uar": statistics.mean(test.values()),
        "mean_test_wa": statistics.mean(r["test_wa"] for r in rows),
        "worst_fold": {"test_speaker": worst["test_speaker"], "test_uar": worst["test_uar"]},
        "test_uar_by_sex": per_sex(test),
        "test_wa_by_sex": per_sex({r["test_speaker"]: r["test_wa"] for r in rows}),
        "pooled_uar": uar(pooled),
        "pooled_confusion": pooled.tolist(),
        "labels": list(EMODB_EMOTIONS),
        "mean_ece_before": statistics.mean(r["ece_before"] for r in rows),
        "mean_ece_after": statistics.mean(r["ece_after"] for r in rows),
        "total_seconds": round(sum(r["train_seconds"] for r in rows), 1),
        "goal": GOAL,
        "machine": machine(rows[0]["precision"] if rows else "fp32"),
    }


def choose(names: list[str]) -> int:
    """The recipes as a Markdown table, and the one with the best mean validation UAR."""
    data = {n: json.loads((RESULTS / f"emodb_speakers-{n}.json").read_text()) for n in names}
    chosen = max(names, key=lambda n: data[n]["mean_val_uar"])
    print("| recipe | mean validation UAR | **mean test UAR** | worst fold | women | men | WA |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        d = data[n]
        mark = " (chosen)" if n == chosen else ""
        sexes = d["test_uar_by_sex"]
        print(
            f"| `{n}` | {100 * d['mean_val_uar']:.1f}%{mark} | **{100 * d['mean_test_uar']:.1f}%** "
            f"| {d['worst_fold']['test_speaker']} {100 * d['worst_fold']['test_uar']:.1f}% | "
            f"{100 * sexes['women']:.1f}% | {100 * sexes['men']:.1f}% | "
            f"{100 * d['mean_test_wa']:.1f}% |"
        )
    print(f"\nchosen on validation speakers: {chosen}\n")
    d = data[chosen]
    print(
        "| test actor | sex | validation actor | val UAR | **test UAR** | test WA | ECE before → after |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in d["folds"]:
        print(
            f"| {r['test_speaker']} | {r['sex']} | {r['val_speaker']} | {100 * r['val_uar']:.1f}% | "
            f"**{100 * r['test_uar']:.1f}%** | {100 * r['test_wa']:.1f}% | "
            f"{100 * r['ece_before']:.1f}% → {100 * r['ece_after']:.1f}% |"
        )
    pooled = torch.tensor(d["pooled_confusion"])
    recall = pooled.diag().double() / pooled.sum(1).clamp(min=1)
    print("\nper-emotion recall, pooled over the folds:")
    print(", ".join(f"{e} {100 * float(r):.1f}%" for e, r in zip(d["labels"], recall, strict=True)))
    print("rows true, columns predicted:", d["labels"])
    for e, row in zip(d["labels"], d["pooled_confusion"], strict=True):
        print(f"{e:>10s} {row}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="emodb-cnn", help="a packaged config or a YAML file")
    parser.add_argument("--folds", default=",".join(EMODB_SPEAKERS), help="test actors, a,b,...")
    parser.add_argument("--set", action="append", default=[], help="config overrides (repeatable)")
    parser.add_argument("--name", help="the results file's suffix (default: the config's name)")
    parser.add_argument("--runs", type=Path, help="keep the runs here (default: a temporary dir)")
    parser.add_argument("--choose", nargs="+", metavar="NAME", help="compare results files")
    args = parser.parse_args()
    if args.choose:
        return choose(args.choose)
    folds = [s.strip() for s in args.folds.split(",") if s.strip()]
    unknown = sorted(set(folds) - set(EMODB_SPEAKERS))
    if unknown:
        parser.error(f"--folds: {', '.join(unknown)} not among {', '.join(EMODB_SPEAKERS)}")
    variant = emodb_variant(emodb_wavs())
    with tempfile.TemporaryDirectory() as tmp:
        root = args.runs or Path(tmp)
        rows = [fold(args.config, s, args.set, root) for s in folds]
    summary = summarise(rows, args.config, args.set, variant)
    sexes = summary["test_uar_by_sex"]
    print(
        f"{summary['data']}: mean val UAR {summary['mean_val_uar']:.3f}  mean test UAR "
        f"{summary['mean_test_uar']:.3f} (women {sexes.get('women', float('nan')):.3f}, men "
        f"{sexes.get('men', float('nan')):.3f})  worst {summary['worst_fold']['test_speaker']} "
        f"{summary['worst_fold']['test_uar']:.3f}"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"emodb_speakers-{args.name or Path(args.config).stem}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
