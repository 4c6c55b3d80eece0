"""Plots written as PNG files: line plots (curves over x, series over time, training curves,
ranks on log–log axes, a metric over wall time) and, importable from here too, the heatmaps of
:mod:`seqlab.plotting_heatmaps` (one for every kind of attention, matrices, confusion).

Every figure is written by :func:`~seqlab.figure_files.save_figure` (:mod:`seqlab.figure_files`):
matplotlib's non-interactive Agg backend, each file written atomically (a temporary file in the
same folder, then ``os.replace``), so a reader never sees a half-written image. Chinese, Japanese
and Korean text is drawn in an installed CJK font (:func:`seqlab.fonts.use_cjk_fonts`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from torch import Tensor  # noqa: E402

from seqlab.figure_files import (  # noqa: E402, F401 (exported)
    DRAWING,
    USER_TICK_LABELS,
    literal_user_text,
    save_figure,
)
from seqlab.fonts import MissingGlyphWarning, use_cjk_fonts  # noqa: E402, F401 (exported)
from seqlab.plotting_heatmaps import (  # noqa: E402, F401 (exported)
    attention_figure,
    attention_png_name,
    plot_attention,
    plot_confusion,
    plot_heatmap,
    plot_rollout,
    plot_self_attention,
)


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
