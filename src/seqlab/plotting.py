"""Plots written as PNG files: one attention heatmap for every kind of attention, and line plots.

Uses matplotlib's non-interactive Agg backend; every file is written atomically (a temporary file
in the same folder, then ``os.replace``), so a reader never sees a half-written image. Chinese,
Japanese and Korean text is drawn in an installed CJK font (:func:`seqlab.fonts.use_cjk_fonts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import torch  # noqa: E402
from matplotlib import category, ticker  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from torch import Tensor  # noqa: E402

from seqlab.atomic import atomic_open  # noqa: E402
from seqlab.fonts import MissingGlyphWarning, use_cjk_fonts  # noqa: E402, F401 (exported)

#: while drawing: no LaTeX runs whatever the user's matplotlibrc says, and the tick labels
#: matplotlib makes while drawing are mathtext (a log axis's ``$\mathdefault{10^{2}}$``)
DRAWING = {"text.usetex": False, "text.parse_math": True}
#: formatters whose tick labels are the caller's own strings (tokens, class names), not numbers
USER_TICK_LABELS = (
    ticker.FixedFormatter,
    ticker.FuncFormatter,
    ticker.StrMethodFormatter,
    ticker.FormatStrFormatter,
    category.StrCategoryFormatter,
)


def literal_user_text(fig: Figure) -> None:
    """Draw every text of ``fig`` as written except what matplotlib's number formatters make.

    Titles, axis labels, legend entries, annotations and tick labels given as strings (tokens
    holding ``$``: ``$x_{2}$``, ``$\\frac{$``) are not mathtext; the tick labels and offset text
    of a number formatter (log axes ``10^{2}``, colour bars, ``×10^6``) are, so they render
    instead of showing ``$\\mathdefault{…}$`` (matplotlib decides per text:
    ``Text.get_parse_math``). Tick labels shown later are made now, so that each gets its axis's
    setting (a new one would take :data:`DRAWING`'s).
    """
    for text in fig.findobj(matplotlib.text.Text):
        text.set_usetex(False)
        text.set_parse_math(False)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            made = not isinstance(axis.get_major_formatter(), USER_TICK_LABELS)
            axis.offsetText.set_parse_math(made)
            axis.get_major_ticks(len(axis.get_majorticklocs()))
            axis.get_minor_ticks(len(axis.get_minorticklocs()))
            for ticks, formatter in (
                (axis.majorTicks, axis.get_major_formatter()),
                (axis.minorTicks, axis.get_minor_formatter()),
            ):
                made = not isinstance(formatter, USER_TICK_LABELS)
                for tick in ticks:
                    tick.label1.set_parse_math(made)
                    tick.label2.set_parse_math(made)


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` as a PNG at ``path`` atomically and close it; user text is drawn as
    written, matplotlib's own tick labels as math (:func:`literal_user_text`), CJK characters in
    an installed CJK font (:func:`~seqlab.fonts.use_cjk_fonts`: else a MissingGlyphWarning)."""
    path = Path(path)
    try:
        literal_user_text(fig)
        use_cjk_fonts(fig)
        with matplotlib.rc_context(DRAWING), atomic_open(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def attention_png_name(number: int) -> str:
    """File name of input ``number``'s attention heatmap, the same for ``seqlab translate
    --attention-png`` and the demos: ``attention-0001.png`` (inputs counted from 1)."""
    return f"attention-{number:04d}.png"


def reference_lines(
    ax: Axes,
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
) -> None:
    """Dashed reference lines, each named in the legend: horizontal at a value (a noise floor,
    a baseline's loss), vertical at an x (the trained length, where the test split starts)."""
    styles = iter(["--", ":", "-.", (0, (5, 2, 1, 2))] * 4)
    for name, y in (hlines or {}).items():
        ax.axhline(y, color="0.35", linestyle=next(styles), linewidth=1.2, label=name)
    for name, x in (vlines or {}).items():
        ax.axvline(x, color="0.35", linestyle=next(styles), linewidth=1.2, label=name)


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


def plot_lines(
    x: Tensor,
    series: dict[str, Tensor],
    path: str | Path,
    *,
    points: tuple[Tensor, Tensor] | None = None,
    title: str = "",
    xlabel: str = "x",
    ylabel: str = "y",
    logx: bool = False,
    logy: bool = False,
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
    ymin: float | None = None,
) -> Path:
    """Line plot of several named curves over ``x``, optionally with scattered points
    (``logx``: logarithmic x axis, each value marked and, up to 12 of them, ticked;
    ``logy``: logarithmic y axis, for curves that span decades; under two decades ticked at
    1, 2 and 5 times the powers of ten, in plain numbers), named reference lines
    (:func:`reference_lines`) and the y axis starting at ``ymin`` (an error from 0).

    Shape:
        x ``(N,)``, each series ``(N,)``, points ``((M,), (M,))``.
    """
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    xs = x.detach().cpu().numpy()
    for name, y in series.items():
        ax.plot(xs, y.detach().cpu().numpy(), "o-" if logx else "-", label=name)
    if logx:
        ax.set_xscale("log")
        if len(set(xs.tolist())) <= 12:
            ax.set_xticks(xs, labels=[f"{v:,g}" for v in xs.tolist()])
            ax.xaxis.set_minor_locator(ticker.NullLocator())
    if logy:
        ax.set_yscale("log")
        values = [float(v) for y in series.values() for v in y.detach().flatten().tolist() if v > 0]
        if values and max(values) / min(values) < 100:  # under two decades: 1-2-5 ticks, plain
            ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,g}"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    if points is not None:
        px, py = (p.detach().cpu().numpy() for p in points)
        ax.plot(px, py, "o", alpha=0.5, markersize=4, label="samples")
    reference_lines(ax, hlines, vlines)
    if ymin is not None:
        ax.set_ylim(bottom=ymin)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both" if logy else "major")
    ax.legend(fontsize="small")
    return save_figure(fig, path)


def plot_series(
    curves: dict[str, tuple[Tensor, Tensor]],
    path: str | Path,
    *,
    title: str = "",
    xlabel: str = "time step",
    ylabel: str = "value",
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
    dashes: bool = False,
) -> Path:
    """Named curves, each over its own x (observations, 1-step and k-step predictions, ...),
    and named reference lines (:func:`reference_lines`: where the test split starts, ...);
    ``dashes``: each curve its own line style, so that curves lying on one another stay visible.

    Shape:
        each curve ``((N_i,), (N_i,))``.
    """
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    styles = ["-", "--", "-.", ":"] if dashes else ["-"]
    for i, (name, (x, y)) in enumerate(curves.items()):
        ax.plot(
            x.detach().cpu().numpy(),
            y.detach().cpu().numpy(),
            linestyle=styles[i % len(styles)],
            label=name,
            linewidth=1.8 if dashes else 1.0,
        )
    reference_lines(ax, hlines, vlines)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    # beside the axes: a series fills its whole width, a legend inside would hide some of it
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path)


def plot_curves(records: Sequence[dict], path: str | Path, perplexity: bool = True) -> Path:
    """Training curves from ``metrics.jsonl`` records: loss, train and validation, beside
    perplexity (``perplexity=True``: the loss is a per-token cross-entropy; on a log axis once
    it spans a decade) or the validation metrics other than the loss."""
    train = [r for r in records if r.get("kind") == "train"]
    evals = [r for r in records if r.get("kind") == "eval" and "val_loss" in r]
    fig, (ax_loss, ax_right) = plt.subplots(1, 2, figsize=(10, 4))
    if train:
        steps = [r["step"] for r in train]
        ax_loss.plot(steps, [r["loss"] for r in train], label="train")
        if perplexity:
            ax_right.plot(steps, [math.exp(min(r["loss"], 50)) for r in train], label="train")
    if evals:
        steps = [r["step"] for r in evals]
        losses = [math.nan if r["val_loss"] is None else r["val_loss"] for r in evals]
        ax_loss.plot(steps, losses, "o-", label="validation")
        if perplexity:
            ax_right.plot(steps, [math.exp(min(v, 50)) for v in losses], "o-", label="validation")
        else:
            others = [k for k in evals[-1] if k.startswith("val_") and k != "val_loss"]
            for key in others:
                values = [r.get(key) for r in evals]
                ax_right.plot(
                    steps, [math.nan if v is None else v for v in values], "o-", label=key
                )
    ax_loss.set(xlabel="step", ylabel="loss (nats/token)" if perplexity else "loss", title="Loss")
    if perplexity:
        values = [v for line in ax_right.lines for v in line.get_ydata() if math.isfinite(v)]
        decades = bool(values) and max(values) >= 10 * min(values)
        ax_right.set(
            xlabel="step",
            ylabel="perplexity",
            title="Perplexity",
            yscale="log" if decades else "linear",
        )
    else:
        ax_right.set(xlabel="step", title="Validation metrics")
    for ax in (ax_loss, ax_right):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)


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


def plot_loglog(series: dict[str, Tensor], path: str | Path, title: str = "") -> Path:
    """Each series (values sorted largest first) against its rank 1, 2, … on log–log axes."""
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for name, values in series.items():
        ranks = torch.arange(1, len(values) + 1)
        ax.loglog(ranks.numpy(), values.detach().cpu().numpy(), label=name)
    ax.set_xlabel("rank")
    ax.set_ylabel("frequency")
    ax.set_title(title)
    ax.legend()
    return save_figure(fig, path)


def plot_metric_over_time(
    curves: dict[str, tuple[list[float], list[float]]], path: str | Path, metric: str
) -> Path:
    """A validation metric against training wall time, one line per run.

    Args:
        curves: run label -> (minutes since the run started, values), each in evaluation order.
    """
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for label, (minutes, values) in curves.items():
        ax.plot(minutes, values, "o-", markersize=3, label=label)
    ax.set_xlabel("training wall time (minutes)")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} as training goes")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
