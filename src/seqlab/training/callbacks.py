"""Trainer callbacks: progress bar, ``metrics.jsonl``, loss/perplexity curves as PNG."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from seqlab.io import atomic_write_text
from seqlab.training.trainer import Callback, Trainer


class ProgressBar(Callback):
    """A tqdm bar with loss, perplexity and tokens/s; plain lines when not on a terminal."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.bar: tqdm | None = None

    def on_train_start(self, trainer: Trainer) -> None:
        if self.stream.isatty():
            self.bar = tqdm(
                total=trainer.total_steps,
                initial=trainer.pos.step,
                unit="step",
                file=self.stream,
                dynamic_ncols=True,
            )

    def on_step(self, trainer: Trainer, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def on_log(self, trainer: Trainer, record: dict[str, Any]) -> None:
        text = f"loss {record['loss']:.4f}  ppl {record['ppl']:.2f}  {record['tokens_per_s']:,.0f} tok/s"
        if self.bar is not None:
            self.bar.set_postfix_str(text)
        else:
            print(
                f"step {record['step']:>7}  epoch {record['epoch']:6.2f}  {text}",
                file=self.stream,
                flush=True,
            )

    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None:
        shown = "  ".join(
            f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
            for k, v in record.items()
            if k not in ("step", "epoch", "elapsed_s")
        )
        line = f"eval @ step {record['step']}: {shown}"
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, file=self.stream, flush=True)

    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        if self.bar is not None:
            self.bar.close()


class MetricsLog(Callback):
    """Append each log and evaluation record as one JSON line to ``RUN_DIR/metrics.jsonl``.

    On resume, records written after the restored checkpoint (by the interrupted run) are
    dropped first, so the file reads as one uninterrupted run.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def on_train_start(self, trainer: Trainer) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            kept = [
                line
                for line in self.path.read_text().splitlines()
                if _complete(line) and json.loads(line)["step"] <= trainer.pos.step
            ]
            atomic_write_text(self.path, "".join(line + "\n" for line in kept))
        self.fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed at train end

    def write(self, kind: str, record: dict[str, Any]) -> None:
        self.fh.write(json.dumps({"kind": kind, **record}) + "\n")
        self.fh.flush()

    def on_log(self, trainer: Trainer, record: dict[str, Any]) -> None:
        self.write("train", record)

    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None:
        self.write("eval", record)

    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self.write("end", summary)
        self.fh.close()


def _complete(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:  # a line cut by a kill
        return False


def read_metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if _complete(line)]


class CurvePlot(Callback):
    """Redraw ``RUN_DIR/curves.png`` (loss and perplexity, train and validation) after each evaluation."""

    def __init__(self, metrics_path: Path, out_path: Path) -> None:
        self.metrics_path, self.out_path = Path(metrics_path), Path(out_path)

    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None:
        plot_curves(read_metrics(self.metrics_path), self.out_path)

    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        plot_curves(read_metrics(self.metrics_path), self.out_path)


def plot_curves(records: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval" and "val_loss" in r]
    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(10, 4))
    if train:
        steps = [r["step"] for r in train]
        ax_loss.plot(steps, [r["loss"] for r in train], label="train")
        ax_ppl.plot(steps, [r["ppl"] for r in train], label="train")
    if evals:
        steps = [r["step"] for r in evals]
        ax_loss.plot(steps, [r["val_loss"] for r in evals], "o-", label="validation")
        ax_ppl.plot(
            steps, [math.exp(min(r["val_loss"], 50)) for r in evals], "o-", label="validation"
        )
    ax_loss.set(xlabel="step", ylabel="loss (nats/token)", title="Cross-entropy")
    ax_ppl.set(xlabel="step", ylabel="perplexity", title="Perplexity", yscale="log")
    for ax in (ax_loss, ax_ppl):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
