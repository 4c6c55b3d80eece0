"""The worked example of Jay Alammar's "The Illustrated Transformer" (2018), "Thinking Machines",
computed step by step from the real module.

Two words, d_model = 512 and 8 heads, so d_k = 64 and √d_k = 8 (the explainer's "÷ 8"). For the
first head and the first word, its six steps of self-attention:

1. q, k, v of each word: x W^Q, x W^K, x W^V (rows of the module's packed ``in_proj``);
2. scores q_1·k_1 and q_1·k_2;
3. divide by √d_k = 8;
4. softmax;
5. weight each value vector by its softmax score;
6. sum: z_1, the head's output for "Thinking".

Then all heads' z, concatenated and multiplied by W^O, are checked against the module's output.
The embeddings are random (seeded): the numbers show the mechanics, not a trained model.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from seqlab.analysis.summary import claim, num
from seqlab.nn.attention import MultiHeadAttention

WORDS = ("Thinking", "Machines")


def _fmt(t: torch.Tensor, n: int = 4) -> str:
    values = ", ".join(f"{v:+.3f}" for v in t.flatten()[:n].tolist())
    return f"[{values}{', …' if t.numel() > n else ''}]"


def worked_example(d_model: int = 512, num_heads: int = 8, seed: int = 0, log=print) -> dict:
    """Print the six steps and return their numbers and the check against the module."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_model, num_heads).eval()
    x = torch.randn(1, len(WORDS), d_model)  # (1, 2, d): the two word embeddings
    d_k = mha.head_dim
    w_q, w_k, w_v = mha.in_proj.weight.split(d_model)  # 3 × (d, d)
    b_q, b_k, b_v = mha.in_proj.bias.split(d_model)
    heads = []
    steps: dict[str, Any] = {"d_model": d_model, "num_heads": num_heads, "d_k": d_k}
    with torch.no_grad():
        for h in range(num_heads):
            rows = slice(h * d_k, (h + 1) * d_k)
            q = x[0] @ w_q[rows].T + b_q[rows]  # (2, d_k)
            k = x[0] @ w_k[rows].T + b_k[rows]  # (2, d_k)
            v = x[0] @ w_v[rows].T + b_v[rows]  # (2, d_k)
            scores = q @ k.T  # (2, 2)
            scaled = scores / math.sqrt(d_k)
            weights = torch.softmax(scaled, dim=-1)  # (2, 2)
            weighted = weights[:, :, None] * v[None]  # (2, 2, d_k)
            z = weighted.sum(dim=1)  # (2, d_k)
            heads.append(z)
            if h == 0:
                log(f"head 0 of {num_heads}, d_k = {d_model} / {num_heads} = {d_k}")
                for i, word in enumerate(WORDS):
                    log(
                        f"1. {word}: q{i + 1} = {_fmt(q[i])}  k{i + 1} = {_fmt(k[i])}  "
                        f"v{i + 1} = {_fmt(v[i])}"
                    )
                log(f"2. score: q1·k1 = {scores[0, 0]:.3f}, q1·k2 = {scores[0, 1]:.3f}")
                log(
                    f"3. divide by √d_k = {math.sqrt(d_k):g}: {scaled[0, 0]:.3f}, {scaled[0, 1]:.3f}"
                )
                log(f"4. softmax: {weights[0, 0]:.4f}, {weights[0, 1]:.4f}")
                log(f"5. weighted values: {_fmt(weighted[0, 0])}, {_fmt(weighted[0, 1])}")
                log(f"6. sum: z1 = {_fmt(z[0])}")
                steps.update(
                    scores=scores[0].tolist(),
                    divisor=math.sqrt(d_k),
                    scaled=scaled[0].tolist(),
                    softmax=weights[0].tolist(),
                    z1_first=z[0, :4].tolist(),
                )
        concat = torch.cat(heads, dim=-1)  # (2, d)
        by_hand = concat @ mha.out_proj.weight.T + mha.out_proj.bias  # (2, d)
        module_out, module_weights = mha(x, x, x, need_weights=True)  # (1, 2, d), (1, h, 2, 2)
    error = float((by_hand - module_out[0]).abs().max())
    weight_error = float((module_weights[0, 0, 0] - torch.tensor(steps["softmax"])).abs().max())
    log(
        claim(
            f"by hand, all {num_heads} heads → concat → W^O give the module's output",
            error < 1e-5 and weight_error < 1e-6,  # fp32 rounding of 512-term sums
            f"largest difference {num(error, 2)}; head-0 weights differ by {num(weight_error, 2)}",
        )
    )
    steps.update(max_abs_error=error, weight_error=weight_error)
    return steps
