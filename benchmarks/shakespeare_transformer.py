"""seqlab vs a plain-PyTorch nanoGPT reference on Tiny Shakespeare, at the same wall-clock budget.

In one process, with the same number of threads:

1. the reference (``benchmarks/nanogpt_reference.py``: nanoGPT's CPU recipe, 2000 iterations)
   trains; its training-loop time is the budget W;
2. seqlab trains ``configs/shakespeare-char-transformer.yaml`` through the normal training path
   (``seqlab.experiment.train``, as ``seqlab train`` does) with ``train.max_minutes = W / 60``;
3. both final models are evaluated the same way: fp32, seqlab's ``evaluate_lm`` over the whole
   validation split (the last 10% of the characters), nats per character, once in windows of 64
   characters (the reference's context) and once in windows of the seqlab model's context.

What the budget counts. Reference: its training loop (no periodic evaluation). seqlab: the
trainer's clock, which starts when the ``Trainer`` is built and includes any evaluation or
checkpoint during training; the config evaluates only once, after the last step, and that final
evaluation is outside the budget, as the reference's is. Loading the corpus is outside both.
``train_s`` below is the measured time to the end of the last optimizer step of each.

Steps in the budget. The cosine schedule decays over ``train.max_steps``, so the step count has
to fit the budget: before seqlab's run, :func:`calibrate_steps` times a few training steps of the
config's model on this machine, now (a throw-away copy; nothing it learns is kept) and sets
``max_steps = 0.95 · W / step time``; ``max_minutes = W / 60`` stays as the hard stop
(``--no-calibrate`` keeps the config's own ``max_steps``). The probe takes about 2% of W and is
not counted in the budget.

    SEQLAB_DATA_DIR=/work/shared/data .venv/bin/python benchmarks/shakespeare_transformer.py

Writes ``benchmarks/results/shakespeare_transformer.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nanogpt_reference import shakespeare_corpus, train_reference, validation_loss  # noqa: E402
from seqlab import load  # noqa: E402
from seqlab.config import ExperimentConfig, load_config  # noqa: E402
from seqlab.experiment import train  # noqa: E402
from seqlab.runtime.machine import machine  # noqa: E402
from seqlab.runtime.precision import autocast, resolve_precision  # noqa: E402
from seqlab.tasks.language_modeling import (  # noqa: E402
    build_experiment,
    lm_loss,
    load_corpus,
)
from seqlab.training.optim import build_optimizer
from seqlab.training.trainer import Callback, Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "shakespeare-char-transformer.yaml"
RESULTS = Path(__file__).resolve().parent / "results"
GOAL = 1.75


class _StepClock(Callback):
    """Trainer time at the end of the last optimizer step (excludes the final evaluation)."""

    def __init__(self) -> None:
        self.train_s = 0.0

    def on_step(self, trainer: Trainer, loss: float) -> None:
        self.train_s = trainer.elapsed()


def calibrate_steps(
    cfg: ExperimentConfig, budget_s: float, probe_steps: int = 50, safety: float = 0.95
) -> tuple[int, float]:
    """Optimizer steps of ``cfg``'s model that fit in ``budget_s`` here and now, and the step time.

    Times ``probe_steps`` steps (after 5 warm-up steps) of a throw-away model on real batches,
    with the config's precision, optimizer and gradient clipping.
    """
    exp = build_experiment(cfg)
    model, optimizer = exp.model, build_optimizer(exp.model, cfg.train)
    model.train()
    precision = resolve_precision(cfg.train.precision)
    batches = iter(exp.train_batches)
    start = 0.0
    for i in range(5 + probe_steps):
        if i == 5:
            start = time.perf_counter()
        with autocast(precision):
            loss = lm_loss(model, next(batches), None).loss
        optimizer.zero_grad(set_to_none=True)
        loss.float().backward()
        if cfg.train.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
        optimizer.step()
    step_s = (time.perf_counter() - start) / probe_steps
    return max(1, int(safety * budget_s / step_s)), step_s


def run_seqlab(
    budget_s: float, threads: int, run_dir: Path, overrides: list[str], calibrate: bool = True
) -> dict[str, Any]:
    """Train the seqlab config within ``budget_s`` seconds; evaluate it like the reference."""
    overrides = [f"train.max_minutes={budget_s / 60:.6f}", f"train.threads={threads}", *overrides]
    probe_s = None
    if calibrate:
        steps, probe_s = calibrate_steps(load_config(CONFIG, overrides), budget_s)
        overrides += [f"train.max_steps={steps}", f"train.eval_every={steps}"]
    cfg = load_config(CONFIG, overrides)
    clock = _StepClock()
    summary = train(cfg, run_dir, callbacks=[clock])
    trained = load(run_dir, "latest")
    model, corpus = trained.model, load_corpus(cfg, trained.tokenizer, trained.vocab)
    context = cfg.data.num_steps
    return {
        "config": str(CONFIG.relative_to(ROOT)),
        "overrides": overrides,
        "probe_step_s": probe_s,
        "steps": summary["step"],
        "max_steps": cfg.train.max_steps,
        "stopped": summary["stopped"],
        "train_s": clock.train_s,
        "val_loss": validation_loss(model, corpus, context),
        "val_loss_window64": validation_loss(model, corpus, 64),
        "context": context,
        "trainer_val_loss": summary["best"],
        "precision": summary["precision"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--iters", type=int, default=2000, help="reference iterations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", type=Path, default=None, help="keep seqlab's run here")
    parser.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="keep the config's max_steps instead of fitting it to the budget",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "shakespeare_transformer.json")
    parser.add_argument("overrides", nargs="*", help="extra seqlab overrides, key=value")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = shakespeare_corpus()
    load_before = os.getloadavg()
    ref = train_reference(iters=args.iters, seed=args.seed, corpus=corpus)
    budget = ref["wall_s"]
    print(f"reference: val loss {ref['val_loss']:.4f} after {budget:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        ours = run_seqlab(budget, args.threads, run_dir, args.overrides, args.calibrate)
    result = {
        "goal": GOAL,
        "budget_s": budget,
        "reference": {
            "recipe": "nanoGPT CPU: 4 layers, 4 heads, 128 wide, block 64, batch 12, lr 1e-3",
            "val_loss": ref["val_loss"],
            "train_s": budget,
            "iters": ref["iters"],
        },
        "seqlab": ours,
        "seqlab_meets_goal": ours["val_loss"] <= GOAL,
        "seqlab_meets_goal_window64": ours["val_loss_window64"] <= GOAL,
        "threads": args.threads,
        "torch": torch.__version__,
        "machine": machine(ours["precision"]),
        "load_average_before_after": [load_before[0], os.getloadavg()[0]],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
