"""Trainer callbacks: progress bar, ``metrics.jsonl``, training curves as PNG."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from tqdm import tqdm

from seqlab.atomic import atomic_write_text
from seqlab.errors import CheckpointError
from seqlab.training.trainer import Callback, Trainer


class ProgressBar(Callback):
    """A tqdm bar with loss, perplexity (where it means something) and throughput; plain lines
    when not on a terminal.

    Args:
        unit: what the trainer's token counts count (``tok``, ``ex`` for examples).
        perplexity: show exp(loss) (only meaningful for a per-token cross-entropy).
    """

    def __init__(self, stream: Any = None, unit: str = "tok", perplexity: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.bar: tqdm | None = None
        self.unit, self.perplexity = unit, perplexity

    def on_train_start(self, trainer: Trainer) -> None:
        print(
            f"device: {trainer.device}; precision: {trainer.precision.precision} "
            f"({trainer.precision.reason}); "
            f"{trainer.world} process(es), {trainer.steps_per_epoch} steps per epoch, "
            f"{trainer.total_steps} steps at most",
            file=self.stream,
            flush=True,
        )
        if self.stream.isatty():
            self.bar = tqdm(
                total=trainer.total_steps,
                initial=trainer.state.step,
                unit="step",
                file=self.stream,
                dynamic_ncols=True,
            )

    def on_step(self, trainer: Trainer, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def on_log(self, trainer: Trainer, record: dict[str, Any]) -> None:
        ppl = f"  ppl {_shown_perplexity(record['ppl'])}" if self.perplexity else ""
        gnorm = f"  gnorm {record['grad_norm']:.2f}" if "grad_norm" in record else ""
        text = f"loss {record['loss']:.4f}{ppl}{gnorm}  {record['tokens_per_s']:,.0f} {self.unit}/s"
        if self.bar is not None:
            self.bar.set_postfix_str(text)
        else:
            print(
                f"step {record['step']:>7}  epoch {record['epoch']:6.2f}  {text}",
                file=self.stream,
                flush=True,
            )

    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None:
        select = trainer.select  # the best so far, named with its metric and direction
        best = f"best ({'lowest' if select.mode == 'min' else 'highest'} {select.metric})"
        shown = "  ".join(
            f"{best if k == 'best' else k} {_shown_value(k, v)}"
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


#: perplexities above this are shown as ">1e6": the loss line carries the value (exp(loss) of an
#: untrained or diverging model is a huge number that says nothing more)
SHOWN_PERPLEXITY = 1e6


def _shown_perplexity(ppl: float) -> str:
    if math.isnan(ppl) or ppl <= SHOWN_PERPLEXITY:
        return f"{ppl:.2f}"
    return f">{SHOWN_PERPLEXITY:.0e}".replace("+0", "")


def _shown_value(name: str, value: Any) -> str:
    """A validation value as the eval line prints it: 4 decimals; a perplexity past
    :data:`SHOWN_PERPLEXITY` as ``>1e6`` (``val_ppl`` of a diverged run has 40 digits)."""
    if not isinstance(value, float):
        return str(value)
    if name.endswith("ppl"):
        return _shown_perplexity(value)
    return f"{value:.4f}"


#: the name of the throughput field in ``metrics.jsonl`` for each unit the trainer can count
RATE_KEYS = {"tok": "tokens_per_s", "ex": "examples_per_s"}


class MetricsLog(Callback):
    """Append each log and evaluation record as one JSON line to ``RUN_DIR/metrics.jsonl``.

    Non-finite numbers are written as ``null`` (the file stays valid JSON). On resume, records
    written after the restored checkpoint (by the interrupted run) are dropped first, so the file
    reads as one uninterrupted run; a fresh run starts an empty file. Training records name their
    throughput by what is counted (``tokens_per_s``, ``examples_per_s``) and carry ``ppl`` only
    where the loss is a per-token cross-entropy.

    Args:
        unit: what the trainer's counts count (``tok``, ``ex`` for examples).
        perplexity: record exp(loss) as ``ppl``.
    """

    def __init__(self, path: Path, unit: str = "tok", perplexity: bool = True) -> None:
        if unit not in RATE_KEYS:
            raise ValueError(f"unit must be one of {sorted(RATE_KEYS)}, got {unit!r}")
        self.path = Path(path)
        self.rate_key, self.perplexity = RATE_KEYS[unit], perplexity

    def on_train_start(self, trainer: Trainer) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = []
        if self.path.exists() and trainer.state.step:
            kept = [r for r in read_metrics(self.path) if r.get("step", 0) <= trainer.state.step]
            kept = [r for r in kept if r.get("kind") not in ("end", "average")]
        atomic_write_text(self.path, "".join(_dumps(r) + "\n" for r in kept))
        self.fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed at train end

    def write(self, kind: str, record: dict[str, Any]) -> None:
        self.fh.write(_dumps({"kind": kind, **record}) + "\n")
        self.fh.flush()

    def on_log(self, trainer: Trainer, record: dict[str, Any]) -> None:
        shown = {k: v for k, v in record.items() if k != "tokens_per_s"}
        if not self.perplexity:
            shown.pop("ppl", None)
        shown[self.rate_key] = record["tokens_per_s"]
        self.write("train", shown)

    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None:
        self.write("eval", record)

    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self.write("end", summary)
        self.fh.close()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(_finite(record), allow_nan=False)


def append_record(path: Path, kind: str, record: dict[str, Any]) -> None:
    """Append one record to a ``metrics.jsonl`` after training (the checkpoint average)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(_dumps({"kind": kind, **record}) + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``; a last line cut by a kill is skipped.

    Raises:
        CheckpointError: any other line that is not a JSON object (naming the line).
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            if number == len(lines):  # written when the process was killed
                break
            raise CheckpointError(
                f"{path}:{number}: not a JSON object ({line[:60]!r}); seqlab writes one per line. "
                "Move the file away to start a new one."
            )
        records.append(record)
    return records


class CurvePlot(Callback):
    """Redraw ``RUN_DIR/curves.png`` after each evaluation: loss, train and validation, beside
    perplexity (``perplexity=True``) or the other validation metrics (accuracy, F1, MAE, …)."""

    def __init__(self, metrics_path: Path, out_path: Path, perplexity: bool = True) -> None:
        self.metrics_path, self.out_path = Path(metrics_path), Path(out_path)
        self.perplexity = perplexity

    def on_eval(self, trainer: Trainer, record: dict[str, Any]) -> None:
        self.draw()

    def on_train_end(self, trainer: Trainer, summary: dict[str, Any]) -> None:
        self.draw()

    def draw(self) -> None:
        """Plot; a failure (disk full, no permission) is a warning, never a lost run."""
        try:
            from seqlab.plotting import plot_curves  # deferred: matplotlib

            plot_curves(read_metrics(self.metrics_path), self.out_path, self.perplexity)
        except (OSError, ValueError, RuntimeError) as exc:
            warnings.warn(f"could not draw {self.out_path}: {exc}", stacklevel=2)
