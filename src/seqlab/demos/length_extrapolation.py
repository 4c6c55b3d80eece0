"""``seqlab demo length-extrapolation``: which position schemes let a Transformer read past the
length it was trained on (Press et al. 2022, "Train Short, Test Long", Table 2), measured on a
character LM small enough for a 2-core CPU.

One character-level Transformer LM (Tiny Shakespeare, 4 layers, d 128, 4 heads) is trained on
windows of ``trained`` characters with each position scheme of ``model.positions`` (sinusoidal,
learned, rope, alibi, t5_bias, none) and with causal linear attention (Katharopoulos et al. 2020,
positions none), the same steps, data order and learning rate for all, each with several seeds.
Each model is scored on the validation split at 1×, 2×, 4×, 8× and 16× the trained length:

- **non-overlapping** windows: every character of the scored text once, each window read from
  its start (so most characters have far less than the window as context);
- **sliding** windows advancing by ``trained`` characters, scoring only the last ``trained`` of
  each (the first window all of its own): every scored character sees at least
  ``L − trained`` characters before it (Press et al. §4's "sliding window evaluation").

A learned table has no trained rows past ``trained`` (the rows exist, ``max_len`` is the longest
evaluation, but never received a gradient). Also written: the loss at each position of the
longest non-overlapping windows (where along a window a scheme breaks down).

Runs are kept under ``OUT/<scheme>-s<seed>``; an earlier complete run with the same config is
read again instead of retrained, so that an interrupted demo goes on where it stopped and the
evaluation can be repeated (from Python, the training can also be split over processes with
``variants``, each in the same folder, and gathered by a last call).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from seqlab.analysis import summary as S
from seqlab.atomic import atomic_write_json
from seqlab.config import config_from_dict, load_config
from seqlab.demos.lm_comparisons import _train, _val_loss, _vocab_size
from seqlab.errors import SeqlabError
from seqlab.figure_files import save_figure
from seqlab.storage.rundir import RunDir
from seqlab.tasks import load
from seqlab.tasks.language_modeling import load_corpus

#: (name, model.positions, model.attention)
VARIANTS: tuple[tuple[str, str, str], ...] = (
    ("sinusoidal", "sinusoidal", "softmax"),
    ("learned", "learned", "softmax"),
    ("rope", "rope", "softmax"),
    ("alibi", "alibi", "softmax"),
    ("t5_bias", "t5_bias", "softmax"),
    ("none", "none", "softmax"),
    ("linear", "none", "linear"),
)
FACTORS = (1, 2, 4, 8, 16)
DATA = {"dataset": "tinyshakespeare", "tokenizer": "char", "val_fraction": 0.1}


def spec(positions: str, attention: str, seed: int, trained: int, steps: int) -> dict[str, Any]:
    """The config of one model (a dict for :func:`seqlab.config.config_from_dict`)."""
    longest = trained * max(FACTORS)
    return {
        "data": {**DATA, "num_steps": trained, "batch_size": 32, "sampling": "random"},
        "model": {
            "arch": "transformer_lm",
            "d_model": 128,
            "num_heads": 4,
            "num_layers": 4,
            "d_ff": 512,
            "dropout": 0.0,
            "max_len": longest,  # learned rows past `trained` exist but are never trained
            "positions": positions,
            "attention": attention,
            "norm": "pre",
        },
        "train": {
            "seed": seed,
            "optimizer": "adamw",
            "lr": 0.003,
            "weight_decay": 0.1,
            "schedule": "cosine",
            "warmup_steps": 100,
            "max_steps": steps,
            "epochs": 1000,
            "grad_clip": 1.0,
            "log_every": 100,
            "eval_every": steps,
        },
    }


def _complete(run_dir: Path, wanted: dict[str, Any], threads: int) -> bool:
    """An earlier run of exactly this config that finished (its last step checkpointed)."""
    run = RunDir(run_dir)
    if not run.config_path.is_file() or _val_loss(_records(run_dir)) is None:
        return False
    done = load_config(run.config_path)
    want = config_from_dict({**wanted, "name": run_dir.name})
    same_threads = want.train.model_copy(update={"threads": done.train.threads})
    return done.model == want.model and done.data == want.data and done.train == same_threads


def _written_again(run_dir: Path) -> None:
    """A reused run is part of this call's output: its files get this call's time, so that the
    command line's output folder (:mod:`seqlab.storage.output_dirs`) keeps them, as it keeps
    everything a command writes, rather than removing them as earlier files not written again."""
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.utime(path)


def _records(run_dir: Path) -> list[dict]:
    path = RunDir(run_dir).metrics_path
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return [json.loads(line) for line in text.splitlines()]


@torch.no_grad()
def window_losses(model: torch.nn.Module, ids: torch.Tensor, length: int, stride: int) -> Tensor:
    """Next-character losses of ``ids`` read in windows of ``length``: non-overlapping when
    ``stride == length``; otherwise each window advances by ``stride`` and scores its last
    ``stride`` positions (the first window all of them). Returns each scored character's loss
    once, in text order, and the loss at each position of the non-overlapping windows.

    Shape: ``(N,) -> (M,)``.
    """
    n = len(ids) - 1
    losses = []
    start = 0
    while start + length <= n:
        x = ids[start : start + length][None]  # (1, L)
        y = ids[start + 1 : start + length + 1][None]  # (1, L)
        logits, _ = model(x)  # (1, L, V)
        loss = F.cross_entropy(logits[0].float(), y[0], reduction="none")  # (L,)
        losses.append(loss if start == 0 else loss[length - stride :])
        start += stride
    return torch.cat(losses)


@torch.no_grad()
def position_losses(model: torch.nn.Module, ids: torch.Tensor, length: int) -> Tensor:
    """Mean next-character loss at each position of windows of ``length`` starting every
    ``length / 4`` characters (so that each position averages over four times as many windows
    as the text holds non-overlapping ones; every scheme reads the same windows).

    Shape: ``(N,) -> (length,)``."""
    starts = torch.arange(0, len(ids) - length, max(length // 4, 1))  # (n,)
    n = len(starts)
    offsets = torch.arange(length)  # (L,)
    x = ids[starts[:, None] + offsets]  # (n, L)
    y = ids[starts[:, None] + offsets + 1]  # (n, L)
    total = torch.zeros(length)
    for i in range(0, n, 8):
        logits, _ = model(x[i : i + 8])  # (b, L, V)
        total += F.cross_entropy(
            logits.float().transpose(1, 2), y[i : i + 8], reduction="none"
        ).sum(0)
    return total / n  # (L,)


def evaluate(run_dir: Path, trained: int, eval_chars: int) -> dict[str, Any]:
    """Loss at each factor × ``trained``, non-overlapping and sliding, on the first
    ``eval_chars`` characters of the validation split; the loss by position at the longest."""
    lm = load(run_dir)
    model = lm.model.eval()
    ids = load_corpus(lm.cfg, lm.tokenizer, lm.vocab).val[: eval_chars + 1]
    if len(ids) <= trained * max(FACTORS):
        raise SeqlabError(
            f"{run_dir}: the validation split has {len(ids)} characters, fewer than the longest "
            f"evaluation window ({trained * max(FACTORS)})"
        )
    row: dict[str, Any] = {"non_overlapping": {}, "sliding": {}}
    for factor in FACTORS:
        length = trained * factor
        row["non_overlapping"][str(factor)] = float(
            window_losses(model, ids, length, length).mean()
        )
        row["sliding"][str(factor)] = float(window_losses(model, ids, length, trained).mean())
    row["by_position"] = position_losses(model, ids, trained * max(FACTORS)).tolist()
    return row


def length_extrapolation_demo(
    out_dir: str | Path,
    steps: int = 1500,
    seeds: tuple[int, ...] = (1, 2, 3),
    trained: int = 64,
    eval_chars: int = 16384,
    variants: tuple[str, ...] | None = None,
    threads: int = 0,
) -> dict[str, Any]:
    """Train (or reuse) every variant × seed, evaluate, write figures and JSON under
    ``out_dir``; return the numbers (module docstring)."""
    longest = trained * max(FACTORS)
    if eval_chars < longest:
        raise SeqlabError(
            f"--eval-chars {eval_chars}: the longest evaluation window is {longest} characters "
            f"({max(FACTORS)} × the trained {trained}); score at least that many (nothing was "
            "trained)"
        )
    known = [name for name, _, _ in VARIANTS]
    unknown = [v for v in variants or () if v not in known]
    if unknown:
        raise SeqlabError(f"variants: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    out = Path(out_dir)
    chosen = [v for v in VARIANTS if variants is None or v[0] in variants]
    result: dict[str, Any] = {
        "trained_length": trained,
        "factors": list(FACTORS),
        "steps": steps,
        "seeds": list(seeds),
        "eval_chars": eval_chars,
        "models": {},
    }
    runs = []
    for name, positions, attention in chosen:
        rows = {}
        for seed in seeds:
            run_dir = out / f"{name}-s{seed}"
            config = spec(positions, attention, seed, trained, steps)
            if _complete(run_dir, config, threads):
                _written_again(run_dir)
            else:
                _train(out, run_dir.name, config, threads)
            started = time.monotonic()
            runs.append(run_dir)
            records = _records(run_dir)
            result["vocab_size"] = _vocab_size(run_dir)
            if _val_loss(records) is None or S.diverged(_val_loss(records), result["vocab_size"]):
                rows[str(seed)] = {"diverged": True}
                continue
            rows[str(seed)] = {
                **evaluate(run_dir, trained, eval_chars),
                "val_loss": _val_loss(records),
                "train_seconds": _train_seconds(records),
                "eval_seconds": round(time.monotonic() - started, 1),
            }
        result["models"][name] = {
            "positions": positions,
            "attention": attention,
            "seeds": rows,
            **_mean_sd(rows),
        }
    result["precision"], result["machine"] = S.run_precision(runs)
    result["figures"] = [str(p) for p in _figures(result, out)]
    atomic_write_json(out / "length_extrapolation.json", result)
    return result


def _train_seconds(records: list[dict]) -> float | None:
    times = [r.get("elapsed_s") for r in records if r.get("kind") == "train"]
    times = [t for t in times if t is not None]
    return round(float(times[-1]), 1) if times else None


def _mean_sd(rows: dict[str, dict]) -> dict[str, Any]:
    """Mean and standard deviation over the seeds that trained, per mode and factor."""
    ok = [r for r in rows.values() if not r.get("diverged")]
    stats: dict[str, Any] = {"diverged_seeds": len(rows) - len(ok)}
    for mode in ("non_overlapping", "sliding"):
        stats[mode] = {}
        for factor in FACTORS:
            values = torch.tensor([r[mode][str(factor)] for r in ok], dtype=torch.float64)
            sd = float(values.std()) if len(values) > 1 else None
            stats[mode][str(factor)] = {
                "mean": float(values.mean()) if len(values) else None,
                "sd": sd,
            }
    if ok:
        stats["by_position"] = torch.tensor([r["by_position"] for r in ok]).mean(0).tolist()
    return stats


def _figures(result: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib.pyplot as plt  # deferred: matplotlib

    trained = result["trained_length"]
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 3.8), sharey=True)
    for ax, mode, title in (
        (axes[0], "non_overlapping", "non-overlapping windows"),
        (axes[1], "sliding", f"sliding windows (stride {trained})"),
    ):
        for name, row in result["models"].items():
            points = [(f, row[mode][str(f)]) for f in FACTORS if row[mode][str(f)]["mean"]]
            if not points:
                continue
            x = [trained * f for f, _ in points]
            y = [p["mean"] for _, p in points]
            err = [p["sd"] or 0.0 for _, p in points]
            ax.errorbar(x, y, yerr=err, marker="o", markersize=3, capsize=2, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks([trained * f for f in FACTORS], [str(trained * f) for f in FACTORS])
        ax.axvline(trained, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("evaluation window (characters)")
        ax.set_title(title)
    axes[0].set_ylabel("validation loss (nats/char)")
    if axes[1].get_legend_handles_labels()[0]:  # every run diverged: nothing to name
        axes[1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"trained on windows of {trained}; mean ± s.d. over {len(result['seeds'])} seeds")
    by_length = save_figure(fig, out / "length_extrapolation.png")

    fig, ax = plt.subplots(figsize=(9.0, 3.6))
    longest = trained * max(FACTORS)
    bin_size = 32
    for name, row in result["models"].items():
        if "by_position" not in row:
            continue
        values = torch.tensor(row["by_position"])
        binned = values[: longest // bin_size * bin_size].view(-1, bin_size).mean(1)
        centres = torch.arange(len(binned)) * bin_size + bin_size / 2
        ax.plot(centres.numpy(), binned.numpy(), label=name, linewidth=1.2)
    ax.axvline(trained, color="grey", linestyle=":", linewidth=1, label=f"trained length {trained}")
    ax.set_xlabel(f"position in a window of {longest} characters (means over {bin_size})")
    ax.set_ylabel("validation loss (nats/char)")
    ax.set_title("where along a long window each scheme breaks down")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    by_position = save_figure(fig, out / "length_extrapolation_positions.png")
    return [by_length, by_position]


def summary(result: dict[str, Any]) -> list[str]:
    """One line per variant: the mean loss at each length, both ways, rounded for reading."""
    trained = result["trained_length"]
    lines = [
        f"validation loss (nats/char, mean ± s.d. over {len(result['seeds'])} seeds), trained on "
        f"{trained} characters, evaluated at {', '.join(f'{f}×' for f in FACTORS)}:"
    ]
    for name, row in result["models"].items():
        parts = []
        for mode, label in (("non_overlapping", "non-overlapping"), ("sliding", "sliding")):
            cells = []
            for f in FACTORS:
                p = row[mode][str(f)]
                cells.append("–" if p["mean"] is None else f"{p['mean']:.2f}")
            parts.append(f"{label} {' / '.join(cells)}")
        diverged = f" ({row['diverged_seeds']} seeds diverged)" if row["diverged_seeds"] else ""
        lines.append(f"  {name:<10} {'; '.join(parts)}{diverged}")
    return lines
