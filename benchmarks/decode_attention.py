"""One decoding step's attention scores on CPU: q Kᵀ (what seqlab computes) against K qᵀ (what
it computed before), on one thread.

A decoding step asks for one query per row and head against that row's cached keys: R rows ×
h heads of (1 × d_k) · (d_k × Tk) products. The keys are seqlab's self-attention cache as the
search holds it, a ``(B, h, Tk, d_k)`` view of time-major storage (``seqlab.nn.kv_cache``). Both
forms give the same scores (checked here); PyTorch's batched product takes different kernels for
them. Milliseconds per call, best of ``--repeats`` loops of ``--calls`` calls, the two forms
taking turns; the ratio is K qᵀ / q Kᵀ (> 1: q Kᵀ is faster).

    .venv/bin/python benchmarks/decode_attention.py [--rows 128,640] [--lengths 8,14,16,24,32]

Prints one line per shape; writes nothing.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from seqlab.runtime.machine import cpu_model

HEADS, HEAD_DIM = 4, 64  # the README model (d 256, 4 heads)


def q_kt(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Shape: query ``(R, h, 1, d_k)``, key ``(R, h, Tk, d_k)`` -> ``(R, h, 1, Tk)``."""
    return query @ key.transpose(-2, -1)


def k_qt(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """The same scores as :func:`q_kt`, as ``(K qᵀ)ᵀ``."""
    return (key @ query.transpose(-2, -1)).transpose(-2, -1)


def _best_ms(calls: int, repeats: int, *forms) -> list[float]:
    best = [float("inf")] * len(forms)
    for form in forms:
        form()  # warm-up
    for _ in range(repeats):
        for i, form in enumerate(forms):
            start = time.perf_counter()
            for _ in range(calls):
                form()
            best[i] = min(best[i], (time.perf_counter() - start) / calls * 1e3)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="128,640", help="decoding rows R, comma-separated")
    parser.add_argument("--lengths", default="8,14,16,24,32", help="cached positions Tk")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"# {cpu_model()}, fp32, 1 thread, {HEADS} heads of {HEAD_DIM}")
    for rows in (int(r) for r in args.rows.split(",")):
        for length in (int(t) for t in args.lengths.split(",")):
            g = torch.Generator().manual_seed(0)
            storage = torch.randn(length, rows, HEADS, HEAD_DIM, generator=g)  # (Tk, R, h, d_k)
            key = storage.permute(1, 2, 0, 3)  # (R, h, Tk, d_k), as the cache's view
            query = torch.randn(rows, HEADS, 1, HEAD_DIM, generator=g)  # (R, h, 1, d_k)

            forms = (partial(q_kt, query, key), partial(k_qt, query, key))
            torch.testing.assert_close(forms[0](), forms[1]())
            new, old = _best_ms(args.calls, args.repeats, *forms)
            print(
                f"R {rows:4d}  Tk {length:3d}:  q Kᵀ {new:7.3f} ms   K qᵀ {old:7.3f} ms   "
                f"K qᵀ / q Kᵀ {old / new:5.2f}×",
                flush=True,
            )


if __name__ == "__main__":
    main()
