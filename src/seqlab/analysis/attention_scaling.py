"""Why scaled dot-product attention divides by √d_k (Vaswani et al. 2017, §3.2.1; d2l.ai §11.3.3).

With query and key entries independent, mean 0, variance 1, q·k = Σ_i q_i k_i has variance d:
the scores grow with the width. Then the softmax saturates (one key takes nearly all the weight)
and its Jacobian diag(p) − p pᵀ, through which every gradient to q and k flows, goes to zero.
Dividing by √d keeps the variance at 1 whatever d. Everything is measured from random draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def measure(widths: list[int], num_keys: int = 16, samples: int = 2000, seed: int = 0) -> dict:
    """Score variance, largest softmax weight and softmax-Jacobian norm by width, both ways.

    Returns lists aligned with ``widths``: ``variance``, ``max_weight``, ``jacobian`` for
    ``unscaled`` (q·k) and ``scaled`` (q·k/√d).
    """
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {"widths": widths, "num_keys": num_keys, "samples": samples}
    for name in ("unscaled", "scaled"):
        out[name] = {"variance": [], "max_weight": [], "jacobian": []}
    for d in widths:
        q = torch.randn(samples, 1, d, generator=gen, dtype=torch.float64)  # (N, 1, d)
        k = torch.randn(samples, num_keys, d, generator=gen, dtype=torch.float64)  # (N, n, d)
        raw = (q @ k.transpose(1, 2)).squeeze(1)  # (N, n)
        for name, scores in (("unscaled", raw), ("scaled", raw / d**0.5)):
            p = torch.softmax(scores, dim=-1)  # (N, n)
            jac = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (N, n, n)
            out[name]["variance"].append(float(scores.var()))
            out[name]["max_weight"].append(float(p.max(dim=-1).values.mean()))
            out[name]["jacobian"].append(float(jac.flatten(1).norm(dim=1).mean()))
    return out


def run_scaling_demo(out_dir: str | Path) -> dict[str, Any]:
    from seqlab.plotting import plot_lines

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    widths = [2**i for i in range(1, 11)]
    result = measure(widths)
    x = torch.tensor(widths, dtype=torch.float32)
    panels = {
        "variance": ("variance of the scores", "scaling_variance.png"),
        "max_weight": ("mean largest softmax weight (16 keys)", "scaling_saturation.png"),
        "jacobian": ("‖∂softmax/∂scores‖_F (gradient passed on)", "scaling_gradient.png"),
    }
    for key, (label, name) in panels.items():
        plot_lines(
            x,
            {
                "q·k": torch.tensor(result["unscaled"][key]),
                "q·k / √d": torch.tensor(result["scaled"][key]),
            },
            out / name,
            title=label,
            xlabel="d_k",
            ylabel=key,
            logx=True,
        )
    result["figures"] = [str(out / name) for _, name in panels.values()]
    return result
