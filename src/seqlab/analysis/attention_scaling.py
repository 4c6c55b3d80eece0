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

from seqlab.analysis.summary import claim, num


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
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = measure([2**i for i in range(1, 11)])
    result["figures"] = [str(path) for path in plot_scaling(result, out)]
    return result


def plot_scaling(result: dict[str, Any], out: Path) -> list[Path]:
    """The three measurements of :func:`measure` against d_k (log axis), unscaled and scaled:
    the score variance on a log axis too (d_k against 1, three decades apart), the largest
    softmax weight and the Jacobian norm."""
    from seqlab.plotting import plot_lines  # deferred: matplotlib

    x = torch.tensor(result["widths"], dtype=torch.float32)
    panels = {
        "variance": ("variance of the scores", "scaling_variance.png", True),
        "max_weight": ("mean largest softmax weight (16 keys)", "scaling_saturation.png", False),
        "jacobian": ("‖∂softmax/∂scores‖_F (gradient passed on)", "scaling_gradient.png", False),
    }
    paths = []
    for key, (label, name, logy) in panels.items():
        paths.append(
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
                logy=logy,
            )
        )
    return paths


def summary(result: dict[str, Any]) -> list[str]:
    """The module docstring's claims, one sentence each, for the widest and narrowest d. A
    variance "is" d (or 1) within 15%, as ``samples`` draws measure it."""
    widths, raw, scaled = result["widths"], result["unscaled"], result["scaled"]
    lo, hi, keys = widths[0], widths[-1], result["num_keys"]
    var_raw = [v / d for v, d in zip(raw["variance"], widths, strict=True)]
    return [
        claim(
            "unscaled scores q·k have variance d",
            all(abs(r - 1) < 0.15 for r in var_raw),
            f"{num(raw['variance'][0])} at d = {lo}, {num(raw['variance'][-1])} at d = {hi}",
        ),
        claim(
            "divided by √d, their variance stays 1",
            all(abs(v - 1) < 0.15 for v in scaled["variance"]),
            f"{num(min(scaled['variance']))} to {num(max(scaled['variance']))} for d = {lo} to {hi}",
        ),
        claim(
            "unscaled, the softmax saturates as d grows",
            raw["max_weight"][-1] > 0.9 > scaled["max_weight"][-1],
            f"mean largest weight of {keys} keys at d = {hi}: {num(raw['max_weight'][-1])} "
            f"unscaled, {num(scaled['max_weight'][-1])} scaled",
        ),
        claim(
            "unscaled, the gradient through the softmax vanishes; scaled, it does not",
            raw["jacobian"][-1] < 0.25 * raw["jacobian"][0]
            and abs(scaled["jacobian"][-1] / scaled["jacobian"][0] - 1) < 0.1,
            f"‖J‖ from d = {lo} to {hi}: {num(raw['jacobian'][0])} to "
            f"{num(raw['jacobian'][-1])} unscaled, {num(scaled['jacobian'][0])} to "
            f"{num(scaled['jacobian'][-1])} scaled",
        ),
    ]
