"""Claims of d2l.ai and Vaswani et al. 2017 that need training, measured on the Time Machine
character LM.

Each comparison trains small models with seqlab's own trainer and configs (one change between
them, the same step budget and seed) and writes the loss curves, a JSON of the numbers and the
run directories under ``OUT``:

- :func:`positions_demo` (Vaswani et al. 2017, §3.5): learned vs sinusoidal positions in a char
  Transformer trained on windows of 64, evaluated on windows of 64, 128 and 256. Sinusoidal
  positions past 64 are computed from the formula; learned rows past 64 were never trained (they
  keep their initial values), so the learned model has nothing to go on there.
- :func:`norm_demo`: post-norm (Vaswani et al. 2017 and d2l.ai §11.7.3: x + Sublayer →
  LayerNorm) vs pre-norm (LayerNorm → Sublayer, Xiong et al. 2020; every shipped seqlab result)
  at a learning rate that suits pre-norm.
- :func:`training_choices_demo` (the iterators of d2l 0.17 §8.3.4; clipping, d2l.ai §9.5.3): a
  tanh RNN trained with SGD at d2l's learning rate 1, with sequential partitioning or random
  sampling, with or without gradient clipping (θ = 1).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from seqlab import load
from seqlab.config import config_from_dict
from seqlab.demos.dates import clear_earlier_run
from seqlab.experiment import train
from seqlab.io import atomic_write_json
from seqlab.plotting import plot_series
from seqlab.rundir import RunDir
from seqlab.tasks.language_modeling import load_corpus

DATA = {"dataset": "timemachine", "tokenizer": "char", "normalize": "letters"}


def _train(out: Path, name: str, spec: dict[str, Any], threads: int) -> tuple[Path, list[dict]]:
    """Train ``spec`` (a config dict) into ``out/name``; return the run and its metrics."""
    run_dir = out / name
    clear_earlier_run(run_dir)
    spec = {**spec, "name": name}
    spec["train"] = {**spec["train"], "threads": threads}
    train(config_from_dict(spec), run_dir)
    text = RunDir(run_dir).metrics_path.read_text(encoding="utf-8")
    records = [json.loads(line) for line in text.splitlines()]
    return run_dir, records


def _curve(records: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [r for r in records if r.get("kind") == "train" and "loss" in r]
    steps = torch.tensor([float(r["step"]) for r in rows])
    return steps, torch.tensor([min(float(r["loss"]), 10.0) for r in rows])


def _val_loss(records: list[dict]) -> float:
    return [r for r in records if r.get("kind") == "eval" and "val_loss" in r][-1]["val_loss"]


# ----------------------------------------------------------------------------- positions
@torch.no_grad()
def loss_by_position(model: torch.nn.Module, ids: torch.Tensor, length: int) -> torch.Tensor:
    """Mean next-token loss at each position 0 … length−1 of non-overlapping windows of ``ids``.

    Shape: ``(N,) -> (length,)``.
    """
    n = (len(ids) - 1) // length
    x = ids[: n * length].view(n, length)  # (n, L)
    y = ids[1 : n * length + 1].view(n, length)  # (n, L)
    total = torch.zeros(length)
    for i in range(0, n, 32):
        logits, _ = model(x[i : i + 32])  # (b, L, V)
        total += F.cross_entropy(logits.transpose(1, 2), y[i : i + 32], reduction="none").sum(0)
    return total / n  # (L,)


def positions_demo(out_dir: str | Path, steps: int = 600, threads: int = 0) -> dict[str, Any]:
    out = Path(out_dir)
    lengths, trained = (64, 128, 256), 64
    result: dict[str, Any] = {"trained_length": trained, "steps": steps, "models": {}}
    curves = {}
    for kind in ("sinusoidal", "learned"):
        spec = {
            "data": {**DATA, "num_steps": trained, "batch_size": 32, "sampling": "random"},
            "model": {
                "arch": "transformer_lm",
                "d_model": 64,
                "num_heads": 4,
                "num_layers": 2,
                "d_ff": 256,
                "max_len": max(lengths) if kind == "learned" else trained,
                "positional": kind,
            },
            "train": {
                "optimizer": "adamw",
                "lr": 0.003,
                "schedule": "cosine",
                "warmup_steps": 50,
                "max_steps": steps,
                "epochs": 1000,
                "log_every": 25,
                "eval_every": steps,
            },
        }
        start = time.monotonic()
        run_dir, _ = _train(out, f"positions-{kind}", spec, threads)
        lm = load(run_dir)
        corpus = load_corpus(lm.cfg, lm.tokenizer, lm.vocab)
        row: dict[str, Any] = {"seconds": round(time.monotonic() - start, 1)}
        for length in lengths:
            losses = loss_by_position(lm.model.eval(), corpus.val, length)  # (L,)
            row[str(length)] = {
                "loss": float(losses.mean()),
                "loss_before_64": float(losses[:trained].mean()),
                "loss_from_64": float(losses[trained:].mean()) if length > trained else None,
            }
            if length == max(lengths):
                curves[kind] = (torch.arange(length), losses)
        result["models"][kind] = row
    plot_series(
        curves,
        out / "positions_extrapolation.png",
        title=f"validation loss by position, windows of 256, trained on {trained}",
        xlabel="position in the window",
        ylabel="loss (nats/char)",
    )
    result["figures"] = [str(out / "positions_extrapolation.png")]
    atomic_write_json(out / "positions.json", result)
    return result


# ---------------------------------------------------------------------------------- norms
def norm_demo(out_dir: str | Path, steps: int = 600, threads: int = 0) -> dict[str, Any]:
    out = Path(out_dir)
    result: dict[str, Any] = {"steps": steps, "models": {}}
    curves = {}
    for norm in ("post", "pre"):
        spec = {
            "data": {**DATA, "num_steps": 64, "batch_size": 32, "sampling": "random"},
            "model": {
                "arch": "transformer_lm",
                "d_model": 64,
                "num_heads": 4,
                "num_layers": 4,
                "d_ff": 256,
                "max_len": 64,
                "norm": norm,
            },
            "train": {
                "optimizer": "adamw",
                "lr": 0.003,
                "schedule": "cosine",
                "warmup_steps": 30,
                "max_steps": steps,
                "epochs": 1000,
                "log_every": 25,
                "eval_every": steps,
            },
        }
        _, records = _train(out, f"norm-{norm}", spec, threads)
        curves[f"{norm}-norm"] = _curve(records)
        result["models"][norm] = {"val_loss": _val_loss(records)}
    plot_series(
        curves,
        out / "norm_placement.png",
        title="char Transformer LM, 4 layers, lr 3e-3 with 30 warm-up steps",
        xlabel="step",
        ylabel="training loss",
    )
    result["figures"] = [str(out / "norm_placement.png")]
    atomic_write_json(out / "norm_placement.json", result)
    return result


# ------------------------------------------------------------------------ training choices
def training_choices_demo(
    out_dir: str | Path, steps: int = 500, threads: int = 0
) -> dict[str, Any]:
    out = Path(out_dir)
    result: dict[str, Any] = {"steps": steps, "models": {}}
    curves = {}
    for sampling in ("sequential", "random"):
        for clip in (1.0, None):
            name = f"{sampling}-{'clip' if clip else 'noclip'}"
            spec = {
                "data": {**DATA, "num_steps": 35, "batch_size": 32, "sampling": sampling},
                "model": {"arch": "rnn_lm", "cell": "rnn", "hidden_size": 256, "num_layers": 1},
                "train": {
                    "optimizer": "sgd",
                    "lr": 1.0,
                    "max_steps": steps,
                    "epochs": 1000,
                    "grad_clip": clip,
                    "log_every": 10,
                    "eval_every": steps,
                },
            }
            _, records = _train(out, f"choices-{name}", spec, threads)
            curves[name] = _curve(records)
            loss = _val_loss(records)
            result["models"][name] = {
                "val_loss": loss,
                "val_ppl": math.exp(loss) if loss < 50 else float("inf"),
            }
    plot_series(
        curves,
        out / "training_choices.png",
        title="tanh RNN char LM, SGD lr 1: sampling and gradient clipping (θ = 1)",
        xlabel="step",
        ylabel="training loss (capped at 10)",
    )
    result["figures"] = [str(out / "training_choices.png")]
    atomic_write_json(out / "training_choices.json", result)
    return result
