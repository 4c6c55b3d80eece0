"""Sequential operations and maximum path length of CNN, RNN and self-attention, *measured*
from the layers' own computation graphs (d2l.ai §11.6.2; Vaswani et al. 2017, Table 1).

Each position of the input is its own leaf tensor, so the autograd graph of the output shows
which computations connect which positions:

- **sequential operations**: the longest chain of position-mixing operations (matrix products,
  convolutions, attention kernels) from any input to any output, i.e. how many such operations
  must run one after another. A recurrent layer's chain grows with n (one step per position);
  a convolution's and self-attention's do not.
- **maximum path length**: for the first input x_1 and the last output y_n, the chain of
  position-mixing operations joining them in the shallowest stack of the layer in which y_n
  depends on x_1 at all (found numerically: a nonzero gradient). A centred width-k convolution
  widens the receptive field by ⌊k/2⌋ positions on each side, so ⌈(n−1)/⌊k/2⌋⌉ layers are
  needed (O(n/k)); a recurrent layer passes x_1 through n − 1 recurrent steps (O(n)); one
  self-attention layer joins any two positions (O(1)).

The layers are :class:`seqlab.nn.rnn.RNN` (scratch backend, whose time loop is visible in the
graph), ``nn.Conv1d`` and :class:`seqlab.nn.attention.MultiHeadAttention`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from seqlab.analysis.summary import claim
from seqlab.nn.attention import MultiHeadAttention
from seqlab.nn.rnn import RNN

#: autograd node names that mix information across positions or features
MIXING = ("Mm", "Addmm", "Bmm", "Convolution", "Attention", "Linear")


def _is_mixing(node: Any) -> bool:
    return any(key in type(node).__name__ for key in MIXING)


class _Stack(nn.Module):
    def __init__(self, kind: str, width: int, depth: int, kernel: int = 3):
        super().__init__()
        self.kind = kind
        if kind == "cnn":
            self.layers = nn.ModuleList(
                nn.Conv1d(width, width, kernel, padding=kernel // 2) for _ in range(depth)
            )
        elif kind == "rnn":
            self.layers = nn.ModuleList(RNN("rnn", width, width) for _ in range(depth))
        else:
            self.layers = nn.ModuleList(MultiHeadAttention(width, 2) for _ in range(depth))

    def forward(self, x: Tensor) -> Tensor:  # (1, n, d) -> (1, n, d)
        for layer in self.layers:
            if self.kind == "cnn":
                x = layer(x.transpose(1, 2)).transpose(1, 2)
            elif self.kind == "rnn":
                x, _ = layer(x)
            else:
                x, _ = layer(x, x, x)
        return x


def _graph(n: int, kind: str, depth: int, width: int, kernel: int):
    torch.manual_seed(0)
    stack = _Stack(kind, width, depth, kernel)
    leaves = [torch.randn(1, 1, width, requires_grad=True) for _ in range(n)]
    out = stack(torch.cat(leaves, dim=1))  # (1, n, d)
    return leaves, out


def _inputs(node: Any) -> list[Any]:
    return [nxt for nxt, _ in getattr(node, "next_functions", ()) if nxt is not None]


def critical_path(output: Tensor) -> int:
    """The longest chain of position-mixing operations below ``output``'s graph node."""
    memo: dict[Any, int] = {}
    order: list[Any] = []
    stack, seen = [output.grad_fn], set()
    while stack:  # iterative post-order: children before parents
        node = stack.pop()
        if node in seen:
            order.append(node)
            continue
        seen.add(node)
        stack.append(node)
        stack.extend(c for c in _inputs(node) if c not in seen)
    for node in order:
        if node not in memo:
            below = max((memo.get(c, 0) for c in _inputs(node)), default=0)
            memo[node] = below + int(_is_mixing(node))
    return memo[output.grad_fn]


def depends(output: Tensor, leaf: Tensor) -> bool:
    """Whether ``output`` numerically depends on ``leaf`` (a nonzero gradient)."""
    (grad,) = torch.autograd.grad(output, leaf, retain_graph=True, allow_unused=True)
    return grad is not None and bool(grad.abs().sum() > 0)


def measure(kind: str, n: int, width: int = 8, kernel: int = 5) -> dict[str, int]:
    """Sequential operations of one layer, and the maximum path length: the chain of
    position-mixing operations from x_1 to y_n in the shallowest stack where y_n depends on x_1
    (found numerically, by its gradient)."""
    _, out = _graph(n, kind, 1, width, kernel)
    sequential = critical_path(out[:, -1].sum())
    depth = 1
    while True:
        leaves, out = _graph(n, kind, depth, width, kernel)
        y_n = out[:, -1].sum()
        if depends(y_n, leaves[0]):
            return {"sequential": sequential, "depth": depth, "path": critical_path(y_n)}
        depth += 1


def run_layer_paths_demo(out_dir: str, lengths: tuple[int, ...] = (4, 8, 16, 32)) -> dict:
    from pathlib import Path

    from seqlab.plotting import plot_lines  # deferred: matplotlib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"lengths": list(lengths), "kernel": 5, "layers": {}}
    for kind in ("cnn", "rnn", "self_attention"):
        result["layers"][kind] = [measure(kind, n) for n in lengths]
    x = torch.tensor(lengths, dtype=torch.float32)
    for key, title, name in (
        ("sequential", "sequential position-mixing operations, one layer", "paths_sequential.png"),
        ("path", "fewest operations joining x_1 and y_n", "paths_max_length.png"),
    ):
        plot_lines(
            x,
            {
                k: torch.tensor([float(r[key]) for r in rows])
                for k, rows in result["layers"].items()
            },
            out / name,
            title=title,
            xlabel="sequence length n",
            ylabel=key,
        )
    result["figures"] = [str(out / "paths_sequential.png"), str(out / "paths_max_length.png")]
    return result


def summary(result: dict[str, Any]) -> list[str]:
    """Vaswani et al. 2017, Table 1's sequential operations and maximum path lengths, each
    claim against the measured counts (integers: exact)."""
    lengths, k = result["lengths"], result["kernel"]
    conv, rnn, att = (result["layers"][name] for name in ("cnn", "rnn", "self_attention"))
    ns = f"n = {', '.join(map(str, lengths))}"

    def listed(rows: list[dict[str, int]], key: str) -> str:
        return ", ".join(str(r[key]) for r in rows)

    return [
        claim(
            f"a convolution (width {k}) takes O(1) sequential operations",
            len({r["sequential"] for r in conv}) == 1,
            f"{listed(conv, 'sequential')} for {ns}",
        ),
        claim(
            "its maximum path length is O(n/k): ⌈(n−1)/⌊k/2⌋⌉ stacked layers",
            [r["depth"] for r in conv] == [-(-(n - 1) // (k // 2)) for n in lengths],
            f"y_n reaches x_1 through {listed(conv, 'depth')} layers for {ns}",
        ),
        claim(
            "an RNN takes O(n) sequential operations, one per position",
            [r["sequential"] for r in rnn] == lengths,
            f"{listed(rnn, 'sequential')} for {ns}",
        ),
        claim(
            "self-attention takes O(1) sequential operations and joins any two positions in "
            "one layer",
            len({r["sequential"] for r in att}) == 1 and all(r["depth"] == 1 for r in att),
            f"{listed(att, 'sequential')} operations, {listed(att, 'depth')} layer(s) for {ns}",
        ),
    ]
