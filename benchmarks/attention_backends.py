"""Attention forward + backward on CPU: seqlab's kernel choice vs PyTorch's own, per precision.

``seqlab.nn.attention.scaled_dot_product_attention`` runs PyTorch's math kernel when a bf16/fp16
forward will be differentiated on CPU (training in reduced precision), because the kernel
PyTorch picks by itself there (flash attention) has a slow reduced-precision backward. This
measures both on the shapes of the Multi30k recipes (4 heads of 32, padded batches of ~4k
tokens) at several lengths, with padding masks, alternating the contenders so machine noise
hits both alike; the reported numbers are ratios of medians (PyTorch's choice / seqlab's), so
> 1 means seqlab's choice is faster. fp32 is measured too: there seqlab leaves PyTorch's choice
alone, and the ratio shows what the math kernel would cost instead.

    .venv/bin/python benchmarks/attention_backends.py [--repeats 20] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from seqlab.nn.attention import padding_mask, scaled_dot_product_attention
from seqlab.runtime.machine import machine

HEADS, HEAD_DIM, TOKENS = 4, 32, 4096
LENGTHS = (16, 32, 64, 128)


def _inputs(length: int, dtype: torch.dtype, seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    batch = max(TOKENS // length, 1)
    shape = (batch, HEADS, length, HEAD_DIM)
    qkv = [torch.randn(shape, generator=g).to(dtype).requires_grad_() for _ in range(3)]
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=g)
    return qkv, padding_mask(lengths, length)[:, None]  # (B, 1, 1, T)


def _seqlab(qkv: list[torch.Tensor], mask: torch.Tensor) -> None:
    out, _ = scaled_dot_product_attention(*qkv, mask)
    out.sum().backward()


def _pytorch_choice(qkv: list[torch.Tensor], mask: torch.Tensor) -> None:
    F.scaled_dot_product_attention(*qkv, attn_mask=mask).sum().backward()


def _math(qkv: list[torch.Tensor], mask: torch.Tensor) -> None:
    with sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(*qkv, attn_mask=mask).sum().backward()


def run(repeats: int = 20, warmup: int = 3) -> dict:
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for length in LENGTHS:
            qkv, mask = _inputs(length, dtype, seed=length)
            contenders = {"seqlab": _seqlab, "pytorch_choice": _pytorch_choice, "math": _math}
            times: dict[str, list[float]] = {k: [] for k in contenders}
            for i in range(warmup + repeats):
                for name, fn in contenders.items():
                    start = time.perf_counter()
                    fn(qkv, mask)
                    if i >= warmup:
                        times[name].append(time.perf_counter() - start)
                    for t in qkv:
                        t.grad = None
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "length": length,
                    "batch": qkv[0].shape[0],
                    "median_s": med,
                    "pytorch_choice_over_seqlab": med["pytorch_choice"] / med["seqlab"],
                    "math_over_pytorch_choice": med["math"] / med["pytorch_choice"],
                }
            )
    return {"heads": HEADS, "head_dim": HEAD_DIM, "tokens_per_batch": TOKENS, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    result = {**run(args.repeats), "machine": machine("bf16 and fp32")}
    out = Path(__file__).resolve().parent / "results" / "attention_backends.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"attention forward + backward, {HEADS} heads of {HEAD_DIM}, ~{TOKENS} tokens a batch:")
    print(f"  {'dtype':9s} {'T':>4s} {'seqlab':>9s} {'PyTorch':>9s} {'PyTorch/seqlab':>15s}")
    for row in result["rows"]:
        med = row["median_s"]
        print(
            f"  {row['dtype']:9s} {row['length']:4d} {1000 * med['seqlab']:7.2f}ms "
            f"{1000 * med['pytorch_choice']:7.2f}ms {row['pytorch_choice_over_seqlab']:15.2f}"
        )


if __name__ == "__main__":
    main()
