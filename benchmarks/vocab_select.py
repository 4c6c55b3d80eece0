"""The searches' token choice over a whole vocabulary: ``torch.topk`` / ``max`` with indices
against the two-stage selection of ``seqlab.models.vocab_select``, on one thread.

Scores of R rows × V tokens (default 640 × 8,000: 128 sentences in a beam of 5 over the README
model's vocabulary); milliseconds per call, best of ``--repeats`` loops of ``--calls`` calls,
and each as a multiple of ``amax`` measured in the same run:

- ``amax``: one vectorised pass, the floor;
- ``topk(10)`` per row and ``max(dim=1)`` with indices: what the searches called before;
- ``group_max``: the first stage; ``best_extensions`` (beam, 2K = 10 of each sentence's K rows,
  after ``group_max``) and ``best_tokens`` (greedy): the whole two-stage choice.

    .venv/bin/python benchmarks/vocab_select.py [--rows 640] [--vocab 8000] [--beam 5]

Prints one line per operation; writes nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from seqlab.models.vocab_select import best_extensions, best_tokens, group_max


def best_ms(call: Callable[[], object], calls: int, repeats: int) -> float:
    call()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=640)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    logits = torch.randn(args.rows, args.vocab) * 4  # (R, V)
    offsets = torch.randn(args.rows, 1)  # (R, 1)
    k = 2 * args.beam
    timed = {
        "amax": lambda: logits.amax(dim=1),
        f"topk({k}) per row": lambda: logits.topk(k, dim=1),
        "max(dim=1) with indices": lambda: logits.max(dim=1),
        "group_max": lambda: group_max(logits),
        f"group_max + best_extensions({k})": lambda: best_extensions(
            logits, offsets, group_max(logits), args.beam, k
        ),
        "best_tokens (greedy)": lambda: best_tokens(logits),
    }
    print(f"{args.rows} x {args.vocab} fp32 scores, 1 thread, ms per call (best of {args.repeats})")
    floor = None
    for name, call in timed.items():
        ms = best_ms(call, args.calls, args.repeats)
        floor = floor or ms
        print(f"{name:34s} {ms:7.2f} ms  {ms / floor:5.1f}x amax", flush=True)


if __name__ == "__main__":
    main()
