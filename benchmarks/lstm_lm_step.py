"""Per-step training time of seqlab's LSTM language model vs a plain nn.LSTM loop.

The reference is the model and loop one writes by hand from the PyTorch docs: embedding →
nn.LSTM → linear, cross-entropy, backward, clip, Adam step. seqlab's model runs through its
trainer's loss function with the ``fused`` backend (same nn.LSTM underneath) and, for the record,
the ``scratch`` backend (the equations in Python). Steps alternate between the contenders in
one process so machine noise hits both alike; the reported number is the ratio of medians.

    .venv/bin/python benchmarks/lstm_lm_step.py [--steps 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from seqlab.config import RNNLMConfig
from seqlab.models.rnn_lm import RNNLanguageModel
from seqlab.runtime.machine import machine
from seqlab.tasks.language_modeling import lm_loss

V, E, H, L, B, T = 65, 64, 256, 2, 32, 64


class PlainLSTMLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, E)
        self.lstm = nn.LSTM(E, H, L, batch_first=True)
        self.out = nn.Linear(H, V)

    def forward(self, x, state=None):
        y, state = self.lstm(self.embed(x), state)
        return self.out(y), state


def plain_step(model, opt, x, y, state):
    logits, state = model(x, state)
    loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return tuple(s.detach() for s in state)


def seqlab_step(model, opt, x, y, state):
    out = lm_loss(model, (x, y), state)
    opt.zero_grad(set_to_none=True)
    out.loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return tuple(s.detach() for s in out.state)


def run(steps: int = 30, warmup: int = 5) -> dict:
    torch.manual_seed(0)
    contenders = {
        "reference": (PlainLSTMLM(), plain_step),
        "seqlab_fused": (
            RNNLanguageModel(
                V,
                RNNLMConfig(cell="lstm", backend="fused", embed_dim=E, hidden_size=H, num_layers=L),
            ),
            seqlab_step,
        ),
        "seqlab_scratch": (
            RNNLanguageModel(
                V,
                RNNLMConfig(
                    cell="lstm", backend="scratch", embed_dim=E, hidden_size=H, num_layers=L
                ),
            ),
            seqlab_step,
        ),
    }
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-3) for k, (m, _) in contenders.items()}
    states = dict.fromkeys(contenders)
    times: dict[str, list[float]] = {k: [] for k in contenders}
    g = torch.Generator().manual_seed(0)
    for i in range(warmup + steps):
        x = torch.randint(0, V, (B, T), generator=g)
        y = torch.randint(0, V, (B, T), generator=g)
        for name, (model, step) in contenders.items():
            start = time.perf_counter()
            states[name] = step(model, opts[name], x, y, states[name])
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "shape": {"vocab": V, "embed": E, "hidden": H, "layers": L, "batch": B, "steps": T},
        "median_step_s": med,
        "ratio_fused_vs_reference": med["seqlab_fused"] / med["reference"],
        "ratio_scratch_vs_reference": med["seqlab_scratch"] / med["reference"],
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {**run(args.steps), "machine": machine("fp32")}
    out = Path(__file__).resolve().parent / "results" / "lstm_lm_step.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        m = result["median_step_s"]
        print(f"LSTM LM training step (B={B}, T={T}, H={H}, {L} layers), median of {args.steps}:")
        for k, v in m.items():
            print(f"  {k:16s} {1000 * v:8.1f} ms")
        print(f"  fused / reference   = {result['ratio_fused_vs_reference']:.3f}  (goal ≤ 1.10)")
        print(f"  scratch / reference = {result['ratio_scratch_vs_reference']:.3f}")


if __name__ == "__main__":
    main()
