"""``make bench``: every benchmark, each as its own process, one summary at the end.

Each benchmark reports a ratio against a reference measured in the same run, never an absolute
time. Results are written as JSON under ``benchmarks/results/``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    ("LSTM LM training step: seqlab fused / plain nn.LSTM loop", ["lstm_lm_step.py"]),
    (
        "Layer cost comparison (conv / RNN / self-attention)",
        ["layer_costs.py", "--lengths", "64,128,256,512,1024,2048,4096"],
    ),
    (
        "Tiny Shakespeare Transformer vs nanoGPT reference, same wall clock",
        ["shakespeare_transformer.py"],
    ),
    (
        "Attention forward + backward on CPU: seqlab's kernel choice vs PyTorch's, bf16 and fp32",
        ["attention_backends.py"],
    ),
    (
        "Position schemes' training cost vs sinusoidal; linear vs softmax attention by length",
        ["position_schemes.py"],
    ),
    (
        "Multi30k en→de Transformer training: vs nn.Transformer, and share of the matmul peak",
        ["translation_training.py"],
    ),
    (
        "Multi30k en→de decoding: seqlab vs CTranslate2 fp32 and int8, greedy and beam 5",
        ["translation_decoding.py"],
    ),
    (
        "Page faults of a beam-5 decoding pass, with and without seqlab's process settings",
        ["page_faults.py"],
    ),
    (
        "The searches' token choice: torch.topk / max against the two-stage selection, vs amax",
        ["vocab_select.py"],
    ),
    (
        "One decoding step's attention scores: q K^T against K q^T on the cache's layout",
        ["decode_attention.py"],
    ),
    ("Every seqlab demo's wall time against the 2-minute goal", ["demo_times.py"]),
]


def main() -> int:
    failed = []
    for title, argv in BENCHMARKS:
        print(f"\n=== {title} ===", flush=True)
        start = time.monotonic()
        rc = subprocess.call([sys.executable, str(HERE / argv[0]), *argv[1:]], cwd=HERE.parent)
        print(f"--- {time.monotonic() - start:.0f} s, exit {rc}", flush=True)
        if rc:
            failed.append(title)
    if failed:
        print("failed: " + "; ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
