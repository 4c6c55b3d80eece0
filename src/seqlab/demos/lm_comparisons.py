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

What each prints (:func:`positions_summary`, :func:`norm_summary`, :func:`choices_summary`) is one
rounded sentence per model and claim; a validation loss that diverged
(:func:`seqlab.analysis.summary.diverged`) reads "diverged", and its JSON row has ``"diverged":
true`` and no perplexity.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from seqlab.analysis import summary as S
from seqlab.atomic import atomic_write_json
from seqlab.config import config_from_dict
from seqlab.data.vocab import Vocab
from seqlab.demos.dates import clear_earlier_run
from seqlab.experiment import train
from seqlab.nn.losses import perplexity
from seqlab.plotting import plot_series
from seqlab.storage.rundir import RunDir
from seqlab.tasks import load
from seqlab.tasks.language_modeling import load_corpus
from seqlab.training.trainer import TrainingDiverged

DATA = {"dataset": "timemachine", "tokenizer": "char", "normalize": "letters"}


def _train(out: Path, name: str, spec: dict[str, Any], threads: int) -> tuple[Path, list[dict]]:
    """Train ``spec`` (a config dict) into ``out/name``; return the run and its metrics.

    A run whose loss or gradient became NaN or infinite stops there (:class:`TrainingDiverged`)
    and the demo goes on: its metrics end with a validation loss of None, which reads as
    diverged (:func:`seqlab.analysis.summary.diverged`)."""
    run_dir = out / name
    clear_earlier_run(run_dir)
    spec = {**spec, "name": name}
    spec["train"] = {**spec["train"], "threads": threads}
    stopped = None
    try:
        train(config_from_dict(spec), run_dir)
    except TrainingDiverged as exc:
        stopped = str(exc).split(";")[0]
        print(f"{name}: diverged, training stopped: {stopped}")
    path = RunDir(run_dir).metrics_path
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    records = [json.loads(line) for line in text.splitlines()]
    if stopped is not None:
        records.append({"kind": "eval", "val_loss": None, "stopped": stopped})
    return run_dir, records


def _vocab_size(run_dir: Path) -> int:
    """|V| of a language-model run (its ``vocab.json``)."""
    return len(Vocab.load(run_dir / "vocab.json"))


def _recorded(result: dict[str, Any], runs: list[Path]) -> None:
    """Add to ``result`` the training precision and the machine the runs recorded (their
    ``run.json``), and the rule that calls a loss diverged for this vocabulary."""
    result["precision"], result["machine"] = S.run_precision(runs)
    if "vocab_size" in result:
        result["diverged_rule"] = S.diverged_rule(result["vocab_size"])


def _curve(records: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [r for r in records if r.get("kind") == "train" and "loss" in r]
    steps = torch.tensor([float(r["step"]) for r in rows])
    return steps, torch.tensor([min(float(r["loss"]), 10.0) for r in rows])


def _val_loss(records: list[dict]) -> float | None:
    """The last validation loss; None when there is none (training diverged first)."""
    evals = [r for r in records if r.get("kind") == "eval" and "val_loss" in r]
    return evals[-1]["val_loss"] if evals else None


def _trained_row(run_dir: Path, records: list[dict], result: dict[str, Any]) -> dict[str, Any]:
    """A trained model's numbers for the JSON: the last validation loss, its perplexity (None
    once diverged: the exp of such a loss is no number to read, or overflows), whether it
    diverged and the first logged training step whose loss did. Sets ``result["vocab_size"]``."""
    result["vocab_size"] = vocab_size = _vocab_size(run_dir)
    loss = _val_loss(records)
    bad = S.diverged(loss, vocab_size)
    return {
        "val_loss": loss,
        "val_ppl": None if bad or loss is None else perplexity(loss),
        "diverged": bad,
        "diverged_at_step": S.first_diverged_step(records, vocab_size),
    }


# ----------------------------------------------------------------------------- positions
def unigram_loss(train: torch.Tensor, val: torch.Tensor, vocab_size: int) -> float:
    """Cross-entropy (nats/token) of ``val`` under the unigram model of ``train``: each token's
    frequency there (add-one smoothed), whatever came before it.

    Shape: ``(N_train,), (N_val,) -> scalar``.
    """
    counts = torch.bincount(train, minlength=vocab_size).double() + 1.0  # (V,)
    return float(-(counts / counts.sum()).log()[val].mean())


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
    """``seqlab demo positions``: char Transformers with sinusoidal and with learned positions,
    trained ``steps`` steps on windows of 64 characters, scored on windows of 64, 128 and 256
    and position by position (Vaswani et al. 2017, §3.5). Writes figures, JSON and runs under
    ``out_dir``; returns the numbers."""
    out = Path(out_dir)
    lengths, trained = (64, 128, 256), 64
    result: dict[str, Any] = {"trained_length": trained, "steps": steps, "models": {}}
    curves = {}
    runs = []
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
                "positions": kind,
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
        run_dir, records = _train(out, f"positions-{kind}", spec, threads)
        runs.append(run_dir)
        result["vocab_size"] = vocab_size = _vocab_size(run_dir)
        row: dict[str, Any] = {"seconds": round(time.monotonic() - start, 1)}
        if _val_loss(records) is None:  # stopped on a NaN/infinite loss: nothing to evaluate
            result["models"][kind] = {**row, "diverged": True}
            continue
        lm = load(run_dir)
        corpus = load_corpus(lm.cfg, lm.tokenizer, lm.vocab)
        unigram = unigram_loss(corpus.train, corpus.val, len(lm.vocab))  # the figure's floor
        result["unigram_loss"] = unigram  # what "no use of the context" scores
        for length in lengths:
            losses = loss_by_position(lm.model.eval(), corpus.val, length)  # (L,)
            row[str(length)] = {
                "loss": float(losses.mean()),
                "loss_before_64": float(losses[:trained].mean()),
                "loss_from_64": float(losses[trained:].mean()) if length > trained else None,
                "diverged": S.diverged(float(losses.mean()), vocab_size),
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
        hlines={f"unigram model (character frequencies): {unigram:.2f}": unigram}
        if curves
        else None,
        vlines={f"trained length {trained}": trained},
    )
    result["figures"] = [str(out / "positions_extrapolation.png")]
    _recorded(result, runs)
    atomic_write_json(out / "positions.json", result)
    return result


# ---------------------------------------------------------------------------------- norms
def norm_demo(out_dir: str | Path, steps: int = 600, threads: int = 0) -> dict[str, Any]:
    """``seqlab demo norm-placement``: the same char Transformer with post-norm and with pre-norm
    (Xiong et al. 2020), ``steps`` steps each at one learning rate; writes the loss curves, JSON
    and runs under ``out_dir`` and returns the numbers."""
    out = Path(out_dir)
    result: dict[str, Any] = {"steps": steps, "models": {}}
    curves = {}
    runs = []
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
        run_dir, records = _train(out, f"norm-{norm}", spec, threads)
        runs.append(run_dir)
        curves[f"{norm}-norm"] = _curve(records)
        result["models"][norm] = _trained_row(run_dir, records, result)
    plot_series(
        curves,
        out / "norm_placement.png",
        title="char Transformer LM, 4 layers, lr 3e-3 with 30 warm-up steps",
        xlabel="step",
        ylabel="training loss",
    )
    result["figures"] = [str(out / "norm_placement.png")]
    _recorded(result, runs)
    atomic_write_json(out / "norm_placement.json", result)
    return result


# ------------------------------------------------------------------------ training choices
def training_choices_demo(
    out_dir: str | Path, steps: int = 500, threads: int = 0
) -> dict[str, Any]:
    out = Path(out_dir)
    result: dict[str, Any] = {"steps": steps, "models": {}}
    curves = {}
    runs = []
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
            run_dir, records = _train(out, f"choices-{name}", spec, threads)
            runs.append(run_dir)
            curves[name] = _curve(records)
            result["models"][name] = _trained_row(run_dir, records, result)
    plot_series(
        curves,
        out / "training_choices.png",
        title="tanh RNN char LM, SGD lr 1: sampling and gradient clipping (θ = 1)",
        xlabel="step",
        ylabel="training loss (capped at 10)",
        dashes=True,  # runs that clip nothing draw the same curve
    )
    result["figures"] = [str(out / "training_choices.png")]
    _recorded(result, runs)
    atomic_write_json(out / "training_choices.json", result)
    return result


# ------------------------------------------------------------------------- what is printed
def positions_summary(result: dict[str, Any]) -> list[str]:
    """One sentence per model and the claim of Vaswani et al. 2017, §3.5, rounded for reading.

    Sinusoidal positions "extrapolate" when, past the trained length, the model keeps more than
    half of what it gained over the unigram model (which ignores the context) before it."""
    v, trained = result["vocab_size"], result["trained_length"]
    lines, longest = [], None
    for kind, row in result["models"].items():
        if row.get("diverged"):
            lines.append(f"{kind} positions: training diverged ({S.diverged_rule(v)})")
            continue
        longest = max((k for k in row if k.isdigit()), key=int)
        r = row[longest]
        lines.append(
            f"{kind} positions, trained on windows of {trained}: validation loss "
            f"{S.loss_text(r['loss_before_64'], v)} at positions below {trained}, "
            f"{S.loss_text(r['loss_from_64'], v)} at positions {trained} to {int(longest) - 1}"
        )
    sinusoidal = result["models"].get("sinusoidal", {}).get(longest or "", {})
    before, after = sinusoidal.get("loss_before_64"), sinusoidal.get("loss_from_64")
    unigram = result.get("unigram_loss")
    held = (
        unigram is not None
        and not S.diverged(after, v)
        and not S.diverged(before, v)
        and after - before < (unigram - before) / 2
    )
    lines.append(
        S.claim(
            f"sinusoidal positions extrapolate past the trained length {trained}",
            held,
            f"loss {S.loss_text(after, v)} past it, {S.loss_text(before, v)} before it, "
            f"{S.num(unigram)} for the unigram model; holds if over half the gain on the "
            "unigram model remains past it",
        )
    )
    return lines


def norm_summary(result: dict[str, Any]) -> list[str]:
    """Which placement ends ahead after the same steps, in one sentence."""
    v, rows = result["vocab_size"], result["models"]
    post, pre = rows["post"], rows["pre"]
    steps = f"after {result['steps']} steps"
    if post["diverged"] and pre["diverged"]:
        return [f"post-norm and pre-norm both diverged {steps} ({S.diverged_rule(v)})"]
    if post["diverged"] or pre["diverged"]:
        bad, good = ("post", pre) if post["diverged"] else ("pre", post)
        other = "pre" if bad == "post" else "post"
        return [
            f"{other}-norm ends ahead {steps}: {bad}-norm diverged ({S.diverged_rule(v)}), "
            f"{other}-norm reached validation loss {S.num(good['val_loss'])}"
        ]
    first, second = sorted(rows, key=lambda name: rows[name]["val_loss"])
    return [
        f"{first}-norm ends ahead {steps}: validation loss {S.num(rows[first]['val_loss'])} "
        f"vs {S.num(rows[second]['val_loss'])} ({second}-norm)"
    ]


def choices_summary(result: dict[str, Any]) -> list[str]:
    """One sentence per training choice, and whether clipping kept SGD at lr 1 from diverging
    (d2l.ai §9.5.3)."""
    v, rows = result["vocab_size"], result["models"]
    lines = []
    for name, row in rows.items():
        sampling, clip = name.split("-")
        what = (
            f"{'sequential partitioning' if sampling == 'sequential' else 'random sampling'} "
            f"{'with clipping (θ = 1)' if clip == 'clip' else 'without clipping'}"
        )
        if row["diverged"]:
            step = row.get("diverged_at_step")
            when = f"within {step} steps" if step else f"by step {result['steps']}"
            lines.append(f"{what} diverged {when} ({S.diverged_rule(v)})")
        else:
            lines.append(
                f"{what}: validation loss {S.num(row['val_loss'])} "
                f"(perplexity {S.num(row['val_ppl'])}) after {result['steps']} steps"
            )
    clipped = [row for name, row in rows.items() if name.endswith("-clip")]
    unclipped = [row for name, row in rows.items() if name.endswith("-noclip")]
    lines.append(
        S.claim(
            "gradient clipping keeps SGD at learning rate 1 from diverging",
            not any(r["diverged"] for r in clipped),
            f"{sum(r['diverged'] for r in clipped)} of {len(clipped)} clipped runs diverged, "
            f"{sum(r['diverged'] for r in unclipped)} of {len(unclipped)} unclipped",
        )
    )
    return lines
