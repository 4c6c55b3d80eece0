"""Convolution vs RNN/GRU vs self-attention: time and peak memory as the length n grows.

Writes ``benchmarks/results/layer_costs.json`` and ``layer_costs.png`` (log–log, fitted slopes,
O(n) and O(n²) guides) and prints a table; see :mod:`seqlab.layer_costs` for the method.
One thread by default: the slopes then reflect the work, not how well each kernel parallelises,
and a process on a shared machine's other core disturbs the timings far less (with two threads
and a busy second core, waits between threads made some layers 5–10× slower).

    .venv/bin/python benchmarks/layer_costs.py [--lengths 64,128,...,4096] [--width 256]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from seqlab.layer_costs import (
    attention_memory_report,
    format_layer_costs,
    measure_layer_costs,
    parse_lengths,
    save_layer_costs,
)

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=parse_lengths, default="64,128,...,4096")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--kernel-size", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (0: PyTorch's default)"
    )
    parser.add_argument("--memory-length", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    results = measure_layer_costs(
        args.lengths,
        width=args.width,
        batch=args.batch,
        kernel_size=args.kernel_size,
        heads=args.heads,
        repeats=args.repeats,
    )
    report = attention_memory_report(args.memory_length, args.width, args.heads, args.batch)
    json_path, png_path = save_layer_costs(results, args.out, report)
    print(format_layer_costs(results))
    print("attention memory, forward + backward:", json.dumps(report))
    print(f"wrote {json_path} and {png_path}")


if __name__ == "__main__":
    main()
