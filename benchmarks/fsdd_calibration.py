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

The augmented fit is a measurement, not the run's rule: which fit to use is a choice that must
be made without the test speakers.
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from pathlib import Path

import torch
from torch import Tensor

from seqlab.tasks import load
from seqlab.tasks.classifier.calibration import expected_calibration_error, fit_temperature

ORDER = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")


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


def fold(runs: Path, config: str, test: str, draws: int) -> dict:
    first = load(runs / f"{config}-{test}")
    waves, names = first.split_examples("val")
    labels = torch.tensor([first.labels.index(n) for n in names])
    clean = fit_temperature(logits_of(first, waves), labels)
    torch.manual_seed(0)
    shifted = torch.cat([logits_of(first, waves, augment=True) for _ in range(draws)])
    augmented = fit_temperature(shifted, labels.repeat(draws))
    refit = load(runs / f"{config}-{test}-refit", "latest")
    waves, names = refit.split_examples("test")
    truth = torch.tensor([refit.labels.index(n) for n in names])
    logits = logits_of(refit, waves)
    return {
        "test": test,
        "acc": float((logits.argmax(1) == truth).double().mean()),
        "T": {"clean": clean, "augmented": augmented},
        "probs": {
            "clean": (logits / clean).softmax(-1),
            "augmented": (logits / augmented).softmax(-1),
        },
        "truth": truth,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="the --runs folder of fsdd_speakers.py --refit")
    parser.add_argument("--config", default="fsdd-cnn", help="the runs' config name")
    parser.add_argument("--draws", type=int, default=4, help="augmented draws per clip")
    args = parser.parse_args()
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
