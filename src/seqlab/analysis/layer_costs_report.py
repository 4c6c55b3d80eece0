"""The layer costs of :mod:`seqlab.analysis.layer_costs`, read and written: the ``--lengths``
option (:func:`parse_lengths`), the table with each layer's fitted log–log slope against its
textbook complexity (:func:`format_layer_costs`), the attention-memory summary, the log–log
figure with O(n) and O(n²) guides (:func:`plot_layer_costs`) and the JSON + PNG pair that
``seqlab bench layers --out`` writes (:func:`save_layer_costs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqlab.analysis.summary import claim, num
from seqlab.atomic import atomic_write_json
from seqlab.runtime.machine import machine


# ------------------------------------------------------------------------- reading and writing
def parse_lengths(text: str) -> list[int]:
    """``"64,128,256"`` -> [64, 128, 256]; ``"64,128,...,4096"`` continues the ratio (×2).

    Raises:
        ValueError: naming the bad item.
    """
    items = [s.strip() for s in text.split(",") if s.strip()]
    if "..." not in items:
        try:
            values = [int(s) for s in items]
        except ValueError:
            raise ValueError(
                f"lengths must be integers separated by commas, got {text!r}"
            ) from None
        if not values or min(values) < 1:
            raise ValueError(f"lengths must be positive, got {text!r}")
        return values
    if len(items) != 4 or items[2] != "...":
        raise ValueError(
            f"use 'a,b,...,c' for a geometric series (e.g. 64,128,...,4096), got {text!r}"
        )
    a, b, c = int(items[0]), int(items[1]), int(items[3])
    if not 0 < a < b <= c or b % a:
        raise ValueError(f"'a,b,...,c' needs 0 < a < b <= c with b a multiple of a, got {text!r}")
    values, n = [], a
    while n <= c:
        values.append(n)
        n *= b // a
    return values


def _num(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.2f}"


#: a fitted log–log slope "matches" a layer's complexity when within this of the power of n it
#: predicts (1 for O(nd²), 2 for O(n²d)); at short lengths fixed per-call costs flatten the curves
SLOPE_TOLERANCE = 0.3


def _power(complexity: str) -> int:
    """The power of n in a complexity: 2 for O(n²d) and O(hn²), else 1."""
    return 2 if "n²" in complexity else 1


def format_layer_costs(results: dict[str, Any]) -> str:
    """A plain-text table, time (ms) and peak memory (MiB) per layer and length to 3 significant
    digits, then one sentence per layer and measure: its log–log slope against the power of n
    its complexity predicts."""
    lengths = results["lengths"]
    names = list(results["layers"])
    head = f"{'n':>6}  " + "  ".join(f"{name:>22s}" for name in names)
    lines = [
        f"width d={results['width']}, batch {results['batch']}, k={results['kernel_size']}, "
        f"h={results['heads']}, {results['threads']} thread(s); "
        "forward+backward ms / peak MiB",
        head,
    ]
    for i, n in enumerate(lengths):
        cells = []
        for name in names:
            rec = results["layers"][name]
            mem = num(rec["peak_bytes"][i] / 2**20) if rec["peak_bytes"] else "-"
            cells.append(f"{num(rec['time_s'][i] * 1e3):>9s} / {mem:>8s}")
        lines.append(f"{n:>6}  " + "  ".join(f"{c:>22s}" for c in cells))
    fit = results["fit_lengths"]
    span = f"n = {fit[0]} to {fit[-1]}"
    lines.append(f"log-log slopes over {span} (matching within {SLOPE_TOLERANCE:g} of the power):")
    for name in names:
        rec = results["layers"][name]
        for what, key, cx in (
            ("time", "time_slope", "complexity"),
            ("memory", "memory_slope", "memory_complexity"),
        ):
            slope, last = rec[key], rec[f"{key}_last"]
            if slope is None:
                continue
            power = _power(rec[cx])
            lines.append(
                "  "
                + claim(
                    f"{name}'s {what} grows as n^{power} ({rec[cx]})",
                    abs(slope - power) <= SLOPE_TOLERANCE,
                    f"slope {num(slope, 2)}, {num(last, 2)} between the last two lengths",
                )
            )
    return "\n".join(lines)


def attention_memory_summary(report: dict[str, Any]) -> str:
    """:func:`~seqlab.analysis.layer_costs.attention_memory_report` in one sentence, in MiB to 3
    significant digits."""

    def mib(key: str) -> str:
        return f"{num(report[key] / 2**20)} MiB"

    return claim(
        "fused self-attention needs less memory than its n × n attention matrices",
        report["fused_below_matrix"],
        f"at n = {report['length']}, forward + backward: fused peak {mib('fused_peak_bytes')}, "
        f"explicit {mib('explicit_peak_bytes')}, the n × n matrices of all {report['heads']} "
        f"heads {mib('matrix_bytes')}",
    )


def plot_layer_costs(results: dict[str, Any], path: str | Path) -> Path:
    """Log–log time (ms) and peak memory (MiB), the units of :func:`format_layer_costs`'s table,
    against n, with fitted slopes and O(n), O(n²) guides."""
    from seqlab import plotting  # deferred: matplotlib (pyplot, Agg backend)

    plt = plotting.plt

    lengths = results["lengths"]
    fit = results["fit_lengths"]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(13, 5.5), layout="constrained")
    panels = [(ax_t, "time_s", "time_slope", "complexity", "forward + backward time (ms)")]
    if any(rec["peak_bytes"] for rec in results["layers"].values()):
        panels.append(
            (ax_m, "peak_bytes", "memory_slope", "memory_complexity", "peak memory (MiB)")
        )
    else:
        ax_m.set_visible(False)
    for ax, key, slope_key, cx_key, ylabel in panels:
        for name, rec in results["layers"].items():
            style = "--" if name == "attention_explicit" else "-"
            ax.plot(
                lengths,
                [v * UNITS[key] for v in rec[key]],
                style,
                marker="o",
                label=f"{name} {rec[cx_key]}: slope {_num(rec[slope_key]).strip()}, "
                f"last {_num(rec[slope_key + '_last']).strip()}",
            )
        _guides(ax, results, key, fit)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, labels=[str(n) for n in lengths])  # the table's n
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    ax_t.set_title("Time per layer")
    ax_m.set_title("Peak memory per layer")
    fig.suptitle(
        f"Width d = {results['width']}, batch {results['batch']}, k = {results['kernel_size']}, "
        f"h = {results['heads']}, forward + backward, {results['threads']} thread(s); slopes "
        f"fitted on n ≥ {fit[0]}, 'last' between the two longest n"
    )
    return plotting.save_figure(fig, path)


#: each measurement's factor to the unit the table prints and the figure draws: ms, MiB
UNITS = {"time_s": 1e3, "peak_bytes": 1 / 2**20}


def _guides(ax: Any, results: dict[str, Any], key: str, fit: list[int]) -> None:
    """Dotted reference lines ∝ n (through conv, else a recurrent layer) and ∝ n² (through the
    explicit attention's memory, else attention), drawn over the fitted lengths (in
    :data:`UNITS`)."""
    layers, lengths = results["layers"], results["lengths"]
    lo, hi = fit[0], fit[-1]
    linear = next((n for n in ("conv", "rnn", "gru") if n in layers), None)
    order = ("attention_explicit", "attention") if key == "peak_bytes" else ("attention",)
    quadratic = next((n for n in order if n in layers), None)
    # ∝ n labelled below its start, ∝ n² above: the two starts can lie close together
    for name, power, label, dy, va in (
        (linear, 1, "∝ n", -4, "top"),
        (quadratic, 2, "∝ n²", 4, "bottom"),
    ):
        if name is None or not layers[name][key]:
            continue
        anchor = layers[name][key][lengths.index(hi)] * UNITS[key]
        ys = [anchor * (n / hi) ** power for n in (lo, hi)]
        ax.plot([lo, hi], ys, ":", color="gray", linewidth=2)
        ax.annotate(
            label, (lo, ys[0]), textcoords="offset points", xytext=(-4, dy), ha="right", va=va
        )


def save_layer_costs(
    results: dict[str, Any], out_dir: str | Path, report: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    """Write ``layer_costs.json`` (results, plus the attention memory report if given) and
    ``layer_costs.png`` into ``out_dir``; return both paths."""
    out_dir = Path(out_dir)

    payload = {**results, "machine": machine("fp32")}
    if report is not None:
        payload["attention_memory"] = report
    json_path = out_dir / "layer_costs.json"
    atomic_write_json(json_path, payload)
    return json_path, plot_layer_costs(results, out_dir / "layer_costs.png")
