"""``seqlab demo vit-vs-cnn``: "with little data CNNs win, with much data ViT wins" (Dosovitskiy
et al. 2021, §4.2–4.3; d2l.ai §11.8), measured on MNIST.

The tiny ViT and the small CNN of the shipped configs (``mnist-vit``, ``mnist-cnn``) are trained
on the first N training images for growing N, each for the same number of optimizer steps
(at least ``--min-steps``, at least the config's epochs), checkpoints chosen on the held-out
validation images, and scored on the 10,000 test images. Writes ``vit_vs_cnn.png`` (test
accuracy against N, log scale) and ``vit_vs_cnn.json``; each run directory stays in ``OUT``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from seqlab import load
from seqlab.config import load_config
from seqlab.demos.dates import clear_earlier_run
from seqlab.experiment import train
from seqlab.io import atomic_write_text
from seqlab.plotting import plot_lines

MODELS = {"vit": "mnist-vit", "cnn": "mnist-cnn"}
DEFAULT_SIZES = (500, 2000, 10000, 55000)  # 55,000 = all training images but the 5,000 held out


def steps_for(size: int, batch: int, epochs: int, min_steps: int) -> tuple[int, int]:
    """Epochs and step budget for a training set of ``size`` images: the config's epochs, or
    enough epochs for ``min_steps`` steps on a small set."""
    per_epoch = math.ceil(size / batch)
    epochs = max(epochs, math.ceil(min_steps / per_epoch))
    return epochs, epochs * per_epoch


def run_vit_vs_cnn(
    out: str | Path,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    min_steps: int = 600,
    max_minutes: float | None = None,
    threads: int = 0,
) -> dict[str, Any]:
    """Train both models at each size; returns (and writes) the test accuracies."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"sizes": list(sizes), "runs": {name: [] for name in MODELS}}
    for size in sizes:
        for name, config in MODELS.items():
            cfg = load_config(config)
            epochs, steps = steps_for(size, cfg.data.batch_size, cfg.train.epochs, min_steps)
            overrides = {
                "data": {"num_examples": size},
                "train": {
                    "epochs": epochs,
                    "eval_every": max(steps // 5, 1),
                    "log_every": max(steps // 10, 1),
                    "max_minutes": max_minutes or cfg.train.max_minutes,
                    "threads": threads,
                },
            }
            cfg = cfg.model_copy(
                update={
                    "data": cfg.data.model_copy(update=overrides["data"]),
                    "train": cfg.train.model_copy(update=overrides["train"]),
                }
            )
            run_dir = out / f"{name}-{size}"
            clear_earlier_run(run_dir)
            started = time.monotonic()
            summary = train(cfg, run_dir)
            scores = load(run_dir).evaluate("test")
            results["runs"][name].append(
                {
                    "train_images": size,
                    "steps": summary.get("step"),
                    "minutes": round((time.monotonic() - started) / 60, 2),
                    "test_accuracy": scores["accuracy"],
                    "stopped": summary.get("stopped"),
                }
            )
            atomic_write_text(out / "vit_vs_cnn.json", json.dumps(results, indent=2))
    import torch

    done = [r["train_images"] for r in results["runs"]["vit"]]
    plot_lines(
        torch.tensor(done, dtype=torch.float),
        {
            name.upper(): torch.tensor([100 * r["test_accuracy"] for r in runs])
            for name, runs in results["runs"].items()
        },
        out / "vit_vs_cnn.png",
        xlabel="training images (log scale)",
        ylabel="MNIST test accuracy (%)",
        title="ViT vs CNN as the training set grows",
        logx=True,
    )
    return results
