"""Convolution vs RNN/GRU vs self-attention: time and peak memory as the length n grows.

Runs ``seqlab bench layers --out benchmarks/results/layer_costs`` (same options; an output folder
of its own, since seqlab writes only into a folder that holds nothing else), which writes
``layer_costs.json`` and ``layer_costs.png`` (log–log, fitted slopes, O(n) and O(n²) guides) and
prints a table; see :mod:`seqlab.analysis.layer_costs` for the method. One thread by default: the slopes
then reflect the work, not how well each kernel parallelises, and a process on a shared machine's
other core disturbs the timings far less (with two threads and a busy second core, waits between
threads made some layers 5–10× slower).

    .venv/bin/python benchmarks/layer_costs.py [--lengths 64,128,...,4096] [--width 256]
"""

from __future__ import annotations

import sys
from pathlib import Path

from seqlab.cli import main

RESULTS = Path(__file__).resolve().parent / "results" / "layer_costs"

if __name__ == "__main__":
    argv = sys.argv[1:]
    raise SystemExit(
        main(["bench", "layers", *([] if "--out" in argv else ["--out", str(RESULTS)]), *argv])
    )
