"""``seqlab demo vit-vs-cnn``: "with little data CNNs win, with much data ViT wins" (Dosovitskiy
et al. 2021, §4.2–4.3; d2l.ai §11.8), measured on MNIST.

The tiny ViT and the small CNN of the shipped configs (``mnist-vit``, ``mnist-cnn``) are trained
on the first N training images for growing N, each for its config's epochs, or for more epochs
on a small set, enough for a step budget of at least ``--min-step-budget`` optimizer steps. The
time budget (``--max-minutes``, else the config's ``train.max_minutes``) can end a run before
its step budget: each run's JSON record says so (``stopped_early``), and so does the printed
summary. Checkpoints are chosen on the held-out validation images and scored on the 10,000 test
images. Writes ``vit_vs_cnn.png`` (test accuracy against N, log scale) and ``vit_vs_cnn.json``;
each run directory stays in ``OUT``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from seqlab.analysis.summary import claim, percent, run_precision
from seqlab.atomic import atomic_write_text
from seqlab.config import load_config
from seqlab.demos.dates import clear_earlier_run
from seqlab.deprecation import renamed_kwargs
from seqlab.experiment import train
from seqlab.plotting import plot_lines
from seqlab.tasks import load

MODELS = {"vit": "mnist-vit", "cnn": "mnist-cnn"}
LABELS = {"vit": "ViT", "cnn": "CNN"}
DEFAULT_SIZES = (500, 2000, 10000, 55000)  # 55,000 = all training images but the 5,000 held out


def steps_for(size: int, batch: int, epochs: int, min_step_budget: int) -> tuple[int, int]:
    """Epochs and step budget for a training set of ``size`` images: the config's epochs, or
    enough epochs for ``min_step_budget`` steps on a small set."""
    per_epoch = math.ceil(size / batch)
    epochs = max(epochs, math.ceil(min_step_budget / per_epoch))
    return epochs, epochs * per_epoch


@renamed_kwargs(min_steps="min_step_budget")
def run_vit_vs_cnn(
    out: str | Path,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    min_step_budget: int = 600,
    max_minutes: float | None = None,
    threads: int = 0,
) -> dict[str, Any]:
    """Train both models at each size; returns (and writes) the test accuracies, each run's step
    budget, the steps it took and whether the time budget stopped it early."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"sizes": list(sizes), "runs": {name: [] for name in MODELS}}
    runs: list[Path] = []
    for size in sizes:
        for name, config in MODELS.items():
            cfg = load_config(config)
            epochs, steps = steps_for(size, cfg.data.batch_size, cfg.train.epochs, min_step_budget)
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
            stopped = summary.get("stopped") or ""
            results["runs"][name].append(
                {
                    "train_images": size,
                    "steps": summary.get("step"),
                    "step_budget": steps,
                    "minutes": round((time.monotonic() - started) / 60, 2),
                    "test_accuracy": scores["accuracy"],
                    "stopped": stopped,
                    "stopped_early": stopped.startswith("time budget")
                    and summary.get("step", 0) < steps,
                    "precision": summary.get("precision"),
                }
            )
            runs.append(run_dir)
            results["precision"], results["machine"] = run_precision(runs)
            atomic_write_text(out / "vit_vs_cnn.json", json.dumps(results, indent=2))
    done = [r["train_images"] for r in results["runs"]["vit"]]
    plot_vit_vs_cnn(done, results["runs"], out / "vit_vs_cnn.png")
    return results


def plot_vit_vs_cnn(sizes: list[int], runs: dict[str, list[dict]], path: Path) -> Path:
    """Test accuracy (%) of each model against the training-set size, on a log axis ticked at
    each size trained."""
    import torch

    return plot_lines(
        torch.tensor(sizes, dtype=torch.float),
        {
            LABELS[name]: torch.tensor([100 * r["test_accuracy"] for r in rows])
            for name, rows in runs.items()
        },
        path,
        xlabel="training images (log scale)",
        ylabel="MNIST test accuracy (%)",
        title="ViT vs CNN as the training set grows",
        logx=True,
    )


def summary(results: dict[str, Any]) -> list[str]:
    """One sentence per training-set size (which model is ahead, and any run the time budget
    stopped before its step budget), then the paper's two claims, at the smallest and the
    largest size trained."""
    pairs = list(zip(results["runs"]["vit"], results["runs"]["cnn"], strict=True))
    lines = []
    for vit, cnn in pairs:
        ranked = sorted(
            ((vit, "ViT"), (cnn, "CNN")), key=lambda run: run[0]["test_accuracy"], reverse=True
        )
        (best, ahead), (other, behind) = ranked
        line = (
            f"{vit['train_images']:,} training images: {ahead} ahead, test accuracy "
            f"{percent(best['test_accuracy'])} vs {behind} {percent(other['test_accuracy'])}"
        )
        early = [
            f"{label} after {r['steps']} of its {r['step_budget']} steps"
            for r, label in ((vit, "ViT"), (cnn, "CNN"))
            if r.get("stopped_early")
        ]
        if early:
            line += f"; the time budget stopped {' and '.join(early)}"
        lines.append(line)
    for (vit, cnn), text, cnn_wins in (
        (pairs[0], "with little data CNNs win", True),
        (pairs[-1], "with much data ViT wins", False),
    ):
        held = (cnn["test_accuracy"] > vit["test_accuracy"]) == cnn_wins
        lines.append(
            claim(
                text,
                held and cnn["test_accuracy"] != vit["test_accuracy"],
                f"at {vit['train_images']:,} images CNN {percent(cnn['test_accuracy'])}, "
                f"ViT {percent(vit['test_accuracy'])}",
            )
        )
    return lines
