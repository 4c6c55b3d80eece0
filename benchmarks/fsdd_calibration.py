"""Calibration on speakers never heard, re-scored from the runs ``fsdd_speakers.py --runs DIR
--refit`` kept: the softmax temperature (Guo et al. 2017) fitted on each fold's validation
speaker as the run does (the clean recordings), and, for comparison, on the same speaker's
recordings under training's own augmentation (``model.features``: a random microphone, noise,
rooms; ``--draws`` random draws per clip, seeded). For each, the expected calibration error (15
bins) of the refitted model on the test speaker, per fold, as the mean of the six folds and
pooled over all their test clips in one set of bins.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_speakers.py \\
        --refit --runs RUNS --name NAME [--set ...]
    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_calibration.py RUNS

Which fit to use is a choice made without the test speakers: ``--choose-rule`` trains, for each
fold, a model on the three speakers left once the test speaker is set aside
(``data.exclude_speakers``) and the validation speaker held out, fits both temperatures on the
validation speaker and measures the ECE on the speaker after it (a second validation speaker, never
trained on); the rule with the lower mean ECE there is the one to use. The test speakers take no
part.

    SEQLAB_DATA_DIR=../shared/data .venv/bin/python benchmarks/fsdd_calibration.py \
        --choose-rule RULE_RUNS [--set ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import warnings
from pathlib import Path

import torch
from torch import Tensor

from seqlab.config import load_config
from seqlab.experiment import train
from seqlab.runtime.machine import machine
from seqlab.tasks import load
from seqlab.tasks.classifier.calibration import expected_calibration_error, fit_temperature

ORDER = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")
RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


@torch.no_grad()
def logits_of(predictor, waves: list[Tensor], augment: bool = False) -> Tensor:
    """Logits ``(N, C)`` at temperature 1 of clips, in batches of 64; ``augment``: each batch
    through training's waveform and spectral augmentation first (SpecAugment and dropout off)."""
    net = predictor.model.eval()
    net.temperature.fill_(1.0)
    out = []
    for i in range(0, len(waves), 64):
        chunk = waves[i : i + 64]
        lengths = torch.tensor([len(w) for w in chunk])
        x = torch.zeros(len(chunk), int(lengths.max()))  # (B, N)
        for j, w in enumerate(chunk):
            x[j, : len(w)] = w
        draws = None
        if augment:
            x, lengths, draws = net.augment(x, lengths)
        feats, frames = net.features(x, lengths, draws)
        body, n = net._body_inputs(feats, frames)
        out.append(net.body(body, n).float())
    return torch.cat(out)


def fits(predictor, draws: int) -> dict[str, float]:
    """The two temperatures of a loaded run, fitted on its validation split: on the clean
    recordings and on ``draws`` augmented copies of each (seeded)."""
    waves, names = predictor.split_examples("val")
    labels = torch.tensor([predictor.labels.index(n) for n in names])
    torch.manual_seed(0)
    shifted = torch.cat([logits_of(predictor, waves, augment=True) for _ in range(draws)])
    return {
        "clean": fit_temperature(logits_of(predictor, waves), labels),
        "augmented": fit_temperature(shifted, labels.repeat(draws)),
    }


def fold(runs: Path, config: str, test: str, draws: int) -> dict:
    """Both temperatures of a fold's first run, applied to its refitted model on the test
    speaker."""
    temps = fits(load(runs / f"{config}-{test}"), draws)
    refit = load(runs / f"{config}-{test}-refit", "latest")
    waves, names = refit.split_examples("test")
    truth = torch.tensor([refit.labels.index(n) for n in names])
    logits = logits_of(refit, waves)
    return {
        "test": test,
        "acc": float((logits.argmax(1) == truth).double().mean()),
        "T": temps,
        "probs": {k: (logits / t).softmax(-1) for k, t in temps.items()},
        "truth": truth,
    }


def rule_fold(config: str, overrides: list[str], test: str, root: Path, draws: int) -> dict:
    """One fold of ``--choose-rule``: ``test`` set aside, trained on the other three training
    speakers, both temperatures fitted on the validation speaker, ECE on the next speaker."""
    val = ORDER[(ORDER.index(test) + 1) % len(ORDER)]
    second = ORDER[(ORDER.index(test) + 2) % len(ORDER)]
    keys = [f"data.test_speaker={second}", f"data.val_speaker={val}"]
    cfg = load_config(config, [*overrides, *keys, f"data.exclude_speakers=[{test}]"])
    run = root / f"{cfg.name}-without-{test}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = train(cfg, run)
        model = load(run)
        temps = fits(model, draws)
    waves, names = model.split_examples("test")  # the second validation speaker
    truth = torch.tensor([model.labels.index(n) for n in names])
    logits = logits_of(model, waves)
    row = {
        "set_aside": test,
        "val_speaker": val,
        "second_val_speaker": second,
        "second_val_acc": round(float((logits.argmax(1) == truth).double().mean()), 4),
        "T": {k: round(t, 4) for k, t in temps.items()},
        "ece": {
            k: round(expected_calibration_error((logits / t).softmax(-1), truth), 4)
            for k, t in temps.items()
        },
        "precision": summary["precision"],
    }
    print(
        f"without {test:9s} val {val:9s} second {second:9s}: acc {row['second_val_acc']:.3f}  "
        + "  ".join(f"{k} T {row['T'][k]:.2f} ECE {row['ece'][k]:.3f}" for k in temps),
        flush=True,
    )
    return row


def choose_rule(args: argparse.Namespace) -> int:
    """``--choose-rule``: the six folds, the mean ECE of each rule on the second validation
    speakers, the rule chosen; ``benchmarks/results/fsdd_calibration_rule.json``."""
    rows = [rule_fold(args.config, args.set, t, args.choose_rule, args.draws) for t in ORDER]
    means = {k: statistics.mean(r["ece"][k] for r in rows) for k in ("clean", "augmented")}
    chosen = min(means, key=means.__getitem__)
    out = {
        "benchmark": "fsdd_calibration_rule",
        "config": args.config,
        "overrides": args.set,
        "draws": args.draws,
        "folds": rows,
        "mean_ece": means,
        "chosen": chosen,
        "machine": machine(rows[0]["precision"]),
    }
    path = RESULTS / "fsdd_calibration_rule.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"mean ECE on the second validation speakers: {means}; chosen: {chosen}; wrote {path}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", type=Path, nargs="?", help="the --runs folder of fsdd_speakers.py --refit"
    )
    parser.add_argument(
        "--choose-rule", type=Path, metavar="DIR", help="train the rule's folds into DIR"
    )
    parser.add_argument("--set", action="append", default=[], help="config overrides (repeatable)")
    parser.add_argument("--config", default="fsdd-cnn", help="the runs' config name")
    parser.add_argument("--draws", type=int, default=4, help="augmented draws per clip")
    args = parser.parse_args()
    if args.choose_rule:
        return choose_rule(args)
    if args.runs is None:
        parser.error("give the runs folder, or --choose-rule DIR")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = [fold(args.runs, args.config, t, args.draws) for t in ORDER]
    print("| fit on the validation speaker | " + " | ".join(ORDER) + " | mean | pooled |")
    print("|---" * (len(ORDER) + 3) + "|")
    for fit in ("clean", "augmented"):
        eces = [expected_calibration_error(r["probs"][fit], r["truth"]) for r in rows]
        pooled = expected_calibration_error(
            torch.cat([r["probs"][fit] for r in rows]), torch.cat([r["truth"] for r in rows])
        )
        cells = [f"{100 * e:.1f}% (T {r['T'][fit]:.2f})" for e, r in zip(eces, rows, strict=True)]
        print(
            f"| {fit} | " + " | ".join(cells) + f" | {100 * statistics.mean(eces):.1f}% | "
            f"{100 * pooled:.1f}% |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
