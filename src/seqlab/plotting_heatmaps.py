"""Heatmaps written as PNG files: one attention heatmap for every kind of attention (an RNN
decoder's alignment over the source, Bahdanau et al. 2014; a Transformer head's weights, Vaswani
et al. 2017, §3.2), each head of one self-attention layer, any matrix as an image (positional
encodings, bits), a Vision Transformer's attention rollout over its image (Abnar & Zuidema
2020) and a confusion matrix.

Each is written by :func:`seqlab.figure_files.save_figure` (atomically, tokens drawn as written
and in a CJK font where they need one); all are importable from :mod:`seqlab.plotting` too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

from seqlab.figure_files import save_figure  # noqa: E402
from seqlab.fonts import use_cjk_fonts  # noqa: E402


def attention_png_name(number: int) -> str:
    """File name of input ``number``'s attention heatmap, the same for ``seqlab translate
    --attention-png`` and the demos: ``attention-0001.png`` (inputs counted from 1)."""
    return f"attention-{number:04d}.png"


def attention_figure(
    weights: Tensor,
    x_tokens: Sequence[str] | None = None,
    y_tokens: Sequence[str] | None = None,
    title: str = "Attention weights",
    xlabel: str = "Keys",
    ylabel: str = "Queries",
) -> Figure:
    """Heatmap of one attention matrix: row i = query i, column j = key j; the colour bar is
    the attention weight, from 0.

    Any attention fits: pick one layer/head of a stack's per-layer weights, e.g.
    ``weights[layer][batch, head]``, or a kernel-regression matrix.

    Shape:
        weights ``(Tq, Tk)``; ``x_tokens`` has Tk labels, ``y_tokens`` Tq labels.
    """
    if weights.dim() != 2:
        raise ValueError(
            f"expected one (Tq, Tk) attention matrix, got shape {tuple(weights.shape)}"
        )
    num_q, num_k = weights.shape
    if x_tokens is not None and len(x_tokens) != num_k:
        raise ValueError(f"x_tokens has {len(x_tokens)} labels for {num_k} keys")
    if y_tokens is not None and len(y_tokens) != num_q:
        raise ValueError(f"y_tokens has {len(y_tokens)} labels for {num_q} queries")
    data = weights.detach().float().cpu().numpy()
    # room for each tick label when tokens are shown, a fixed size otherwise
    width = min(max(3.0, 0.3 * num_k + 1.5), 16.0) if x_tokens is not None else 6.0
    height = min(max(2.5, 0.3 * num_q + 1.0), 16.0) if y_tokens is not None else 5.0
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(data, cmap="Reds", vmin=0, aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    if x_tokens is not None:
        ax.set_xticks(range(num_k), labels=list(x_tokens), rotation=90)
    if y_tokens is not None:
        ax.set_yticks(range(num_q), labels=list(y_tokens))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    use_cjk_fonts(fig)  # tokens in Chinese: glyphs from a CJK font, not boxes
    return fig


def plot_attention(
    weights: Tensor,
    path: str | Path,
    x_tokens: Sequence[str] | None = None,
    y_tokens: Sequence[str] | None = None,
    title: str = "Attention weights",
    xlabel: str = "Keys",
    ylabel: str = "Queries",
) -> Path:
    """Draw :func:`attention_figure` and write it to ``path`` (PNG, atomically).

    Shape:
        weights ``(Tq, Tk)``.
    """
    fig = attention_figure(weights, x_tokens, y_tokens, title, xlabel, ylabel)
    return save_figure(fig, path)


def plot_heatmap(
    matrix: Tensor,
    path: str | Path,
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    cmap: str = "RdBu_r",
    symmetric: bool = True,
    colorbar_label: str = "",
    levels: Sequence[str] | None = None,
) -> Path:
    """A matrix as an image (row 0 at the top), rows and columns ticked at whole indices, colour
    scale centred on 0 when ``symmetric``; with ``levels`` the entries are 0, 1, … and each gets
    one colour, named on the colour bar (bits: ``["0", "1"]``).

    Shape:
        matrix ``(R, C)``.
    """
    data = matrix.detach().float().cpu().numpy()
    fig, ax = plt.subplots(figsize=(6.0, 4.5))
    limit = float(abs(data).max()) or 1.0
    bounds = {"vmin": -limit, "vmax": limit} if symmetric else {}
    colours: str | matplotlib.colors.Colormap = cmap
    if levels is not None:
        colours = matplotlib.colors.ListedColormap(
            plt.get_cmap(cmap)(torch.linspace(0.2, 0.8, len(levels)).tolist())
        )
        bounds = {"vmin": -0.5, "vmax": len(levels) - 0.5}
    image = ax.imshow(data, cmap=colours, aspect="auto", interpolation="nearest", **bounds)
    bar = fig.colorbar(image, ax=ax, shrink=0.8, label=colorbar_label)
    if levels is not None:
        bar.set_ticks(range(len(levels)), labels=list(levels))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return save_figure(fig, path)


def plot_self_attention(
    weights: Tensor, tokens: Sequence[str], path: str | Path, title: str = "Self-attention"
) -> Path:
    """One layer's self-attention, one heatmap per head ("why multiple heads": each head
    attends differently), the heads in a near-square grid (2 × 2 for 4) so that the token labels
    read at a web page's width (about 800 px at the saved 120 dpi).

    Shape:
        weights ``(h, T, T)``; ``tokens`` has T labels.
    """
    if weights.dim() != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"expected (heads, T, T) weights, got shape {tuple(weights.shape)}")
    heads, t, _ = weights.shape
    if len(tokens) != t:
        raise ValueError(f"{len(tokens)} token labels for {t} positions")
    show = t <= 60  # tick labels only where they fit
    cols = math.ceil(math.sqrt(heads))
    rows = math.ceil(heads / cols)
    side = min(max(2.9, 0.2 * t), 8.0)  # 0.2 in a token: room for 9 pt labels
    labels = 0.09 * max(map(len, tokens), default=1) if show else 0.0  # the rotated x labels
    fig, axes = plt.subplots(
        rows, cols, figsize=(side * cols + 1.6, (side + 0.25) * rows + 0.6 + labels),
        squeeze=False, sharex=True, sharey=True, layout="constrained",
    )  # fmt: skip
    top = float(weights.max()) or 1.0  # one colour scale for every head
    for h, ax in enumerate(axes.flat):
        if h >= heads:  # the grid's unused corner
            ax.set_visible(False)
            continue
        image = ax.imshow(
            weights[h].float().cpu().numpy(), cmap="Reds", vmin=0, vmax=top, interpolation="nearest"
        )
        ax.set_title(f"head {h}", fontsize=11)
        row, col = divmod(h, cols)
        last_row = h + cols >= heads  # nothing below it: it carries the key labels
        if show:
            ax.set_xticks(range(t), labels=list(tokens), rotation=90, fontsize=9)
            ax.set_yticks(range(t), labels=list(tokens), fontsize=9)
            ax.tick_params(labelbottom=last_row, labelleft=col == 0)
        else:
            ax.set_xticks([])
            ax.set_yticks([])
        if last_row:
            ax.set_xlabel("key", fontsize=10)
        if col == 0:
            ax.set_ylabel("query", fontsize=10)
    fig.colorbar(image, ax=list(axes.flat), shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, path)


def plot_rollout(image: Tensor, share: Tensor, path: str | Path, title: str = "") -> Path:
    """An image with the attention rollout of its patches drawn over it.

    Shape:
        image ``(C, H, W)`` in [0, 1]; share ``(N,)`` over a square grid of N patches.
    """
    grid = math.isqrt(share.numel())
    if grid * grid != share.numel():
        raise ValueError(f"{share.numel()} patch values do not form a square grid")
    heat = share.reshape(1, 1, grid, grid).float()
    heat = torch.nn.functional.interpolate(heat, size=tuple(image.shape[-2:]), mode="nearest")[0, 0]
    fig, axes = plt.subplots(1, 2, figsize=(6.5, 3.4))
    picture = image.permute(1, 2, 0).squeeze(-1).cpu().numpy()
    for ax in axes:
        ax.imshow(picture, cmap="gray")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[1].imshow(heat.numpy(), cmap="inferno", alpha=0.55)
    axes[0].set_title("input")
    axes[1].set_title("attention rollout ([CLS] → patches)")
    fig.suptitle(title[:80])
    return save_figure(fig, path)


def plot_confusion(
    confusion: Sequence[Sequence[int]], labels: Sequence[str], path: str | Path, title: str = ""
) -> Path:
    """A confusion matrix (rows: true class, columns: predicted), counts written in the cells."""
    import numpy as np

    data = np.asarray(confusion)
    n = len(labels)
    side = min(max(3.5, 0.5 * n + 2.0), 12.0)
    fig, ax = plt.subplots(figsize=(side, side))
    ax.imshow(data, cmap="Blues")
    ax.set_xticks(range(n), labels=list(labels), rotation=45, ha="right")
    ax.set_yticks(range(n), labels=list(labels))
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    top = data.max() if data.size else 0
    for i in range(n):
        for j in range(n):
            ax.text(
                j,
                i,
                str(data[i, j]),
                ha="center",
                va="center",
                fontsize=8,
                color="white" if data[i, j] > top / 2 else "black",
            )
    ax.set_title(title[:80] or "confusion matrix")
    return save_figure(fig, path)
