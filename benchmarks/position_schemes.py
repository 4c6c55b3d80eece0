"""What each ``model.positions`` scheme costs a Transformer LM to train, and where causal linear
attention overtakes softmax attention as the length grows.

**Part ``schemes``.** A char-LM-sized ``transformer_lm`` (4 layers, d_model 128, 4 heads, d_ff
512, vocabulary 65, pre-norm, tied head) trains on a fixed batch of 32 × 64 and 32 × 256 random
tokens, once per registered scheme (:func:`seqlab.catalog.positions`). A training step is the
trainer's (``seqlab.training.trainer.Trainer.train_step``): forward under the precision's
autocast, backward, gradient clipping at 1.0, an AdamW step. After warm-up rounds, the schemes take
turns step by step, for several rounds (the starting scheme rotates), so machine noise hits them
alike; each scheme's tokens/s is from its median step time, reported as a ratio to sinusoidal
measured in the same rounds. Measured in fp32 and in bf16 autocast where this CPU runs bf16
natively (:func:`seqlab.runtime.precision.native_bf16`, the trainer's test; ``SEQLAB_NATIVE_BF16``
overrides it); where it does not, bf16 is emulated and many times slower, so it is left out unless
``--precisions fp32,bf16`` asks for it (the JSON says which, and why).

**Part ``linear``.** Positions ``none`` for both (linear attention takes no bias or rotation),
the same widths, 2 layers, batch 1, fp32, at lengths 64, 128, …, 16384: the training step's time
and peak memory per token, and generating one token after a context of that length (softmax
attention: a key/value cache of that length, then one token, which appends to it; linear
attention: its fixed-size state, then one token). The crossing is the first length where linear
attention is faster. A training point whose memory (or step time), extrapolated from the two
shorter lengths before it, would pass ``--max-gib`` (``--max-step-seconds``) is skipped, as are
the longer ones, and recorded as skipped with the reason (expected only for softmax where its
kernel forms the ``(h, n, n)`` matrices, i.e. bf16 training, which seqlab runs on the math kernel;
fp32 keeps PyTorch's flash kernel, O(n) memory). Generation is never skipped: its cache holds
2 · layers · n · d_model floats.

**Memory.** :func:`seqlab.analysis.layer_costs.peak_memory_bytes` (as ``benchmarks/layer_costs.py``):
``torch.profiler`` records every allocation and free of PyTorch's CPU allocator during one step;
the peak of their running sum is the memory the step needs beyond what existed before it
(activations saved for backward, gradients, an ALiBi or T5 bias ``(h, T, T)``, kernels'
temporaries). Not seen: memory allocated outside PyTorch's allocator (oneDNN scratch space); the
parameters and optimizer state, which exist before the step (the same for every scheme up to the
learned table and T5's buckets), are not counted.

    .venv/bin/python benchmarks/position_schemes.py [--part schemes|linear|both] [--threads N]
    .venv/bin/python benchmarks/position_schemes.py --quick --out /tmp/x   # seconds: a smoke run

Writes ``position_schemes.json`` / ``.png`` (part ``schemes``) and ``position_schemes_linear.json``
/ ``.png`` (part ``linear``) under ``benchmarks/results/`` (``--out``); ``--quick`` names them
``position_schemes-quick*`` so that a smoke run never replaces a measurement.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from seqlab import catalog
from seqlab.analysis.layer_costs import fitted_slope, peak_memory_bytes
from seqlab.analysis.layer_costs_report import parse_lengths
from seqlab.analysis.summary import claim, numbers_line
from seqlab.atomic import atomic_write_json
from seqlab.config import TrainConfig
from seqlab.models.transformer_lm import TransformerLanguageModel, TransformerLMConfig
from seqlab.nn.attention import KVCache
from seqlab.nn.linear_attention import LinearAttentionState
from seqlab.runtime.machine import machine, set_threads
from seqlab.runtime.precision import Resolved, autocast, native_bf16, resolve_precision
from seqlab.tasks.language_modeling import lm_loss
from seqlab.training.optim import build_optimizer

RESULTS = Path(__file__).resolve().parent / "results"
VOCAB = 65  # Tiny Shakespeare's characters
REFERENCE = "sinusoidal"
GOAL = 0.9  # RoPE's training tokens/s at least this share of sinusoidal's
#: the char-LM recipe's optimizer (configs/shakespeare-char-transformer.yaml), lr lower: the
#: steps run on random tokens and must stay finite
TRAIN = TrainConfig(optimizer="adamw", lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99))
GRAD_CLIP = 1.0
MEMORY_METHOD = (
    "torch.profiler(profile_memory=True): peak of the running sum of CPU-allocator allocations "
    "and frees during one training step (seqlab.analysis.layer_costs.peak_memory_bytes); "
    "excludes parameters, optimizer state and memory allocated outside PyTorch's allocator"
)
GiB = 2**30


# --------------------------------------------------------------------------------- the steps
def build_model(
    sizes: dict[str, int], positions: str, attention: str, max_len: int
) -> TransformerLanguageModel:
    """The LM with ``sizes`` (d_model, num_heads, num_layers, d_ff), initialised the same way
    for every scheme."""
    torch.manual_seed(0)
    cfg = TransformerLMConfig(
        **sizes, max_len=max_len, positions=positions, attention=attention, dropout=0.0
    )
    return TransformerLanguageModel(VOCAB, cfg)


def training_step(
    model: TransformerLanguageModel, batch: int, length: int, precision: Resolved
) -> Callable[[], None]:
    """One step of the trainer's kind on a fixed batch of random tokens (module docstring)."""
    g = torch.Generator().manual_seed(length)
    tokens = torch.randint(VOCAB, (batch, length + 1), generator=g)
    x, y = tokens[:, :-1], tokens[:, 1:]  # (B, T) each
    optimizer = build_optimizer(model, TRAIN)
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision):
            loss = lm_loss(model, (x, y), None).loss
        loss.float().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()

    return step


def _seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(
    steps: dict[str, Callable[[], Any]], rounds: int, warmup: int, budget_s: float = math.inf
) -> dict[str, list[float]]:
    """Seconds of each step, the contenders taking turns: ``warmup`` untimed rounds, then up to
    ``rounds`` timed ones (at least one; no new round once ``budget_s`` is spent), each starting
    one contender further on."""
    names = list(steps)
    for _ in range(warmup):
        for fn in steps.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in names}
    start = time.perf_counter()
    for r in range(rounds):
        if r and time.perf_counter() - start > budget_s:
            break
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(_seconds(steps[name]))
    return times


# ------------------------------------------------------------------------------ part: schemes
def measure_schemes(
    schemes: Sequence[str],
    lengths: Sequence[int],
    precisions: Sequence[str],
    sizes: dict[str, int],
    batch: int,
    rounds: int,
    warmup: int,
) -> list[dict[str, Any]]:
    """Per precision and length, each scheme's median step, tokens/s and peak memory, and their
    ratios to :data:`REFERENCE` (which must be among ``schemes``)."""
    rows = []
    for name in precisions:
        precision = resolve_precision(name)
        for length in lengths:
            steps = {
                s: training_step(
                    build_model(sizes, s, "softmax", max(lengths)), batch, length, precision
                )
                for s in schemes
            }
            times = interleaved(steps, rounds, warmup)
            peaks = {s: peak_memory_bytes(fn) for s, fn in steps.items()}
            med = {s: statistics.median(t) for s, t in times.items()}
            tokens = batch * length
            rows.append(
                {
                    "precision": name,
                    "length": length,
                    "tokens_per_step": tokens,
                    "schemes": {
                        s: {
                            "median_step_s": med[s],
                            "tokens_per_s": tokens / med[s],
                            "tokens_per_s_vs_sinusoidal": med[REFERENCE] / med[s],
                            "peak_bytes": peaks[s],
                            "peak_vs_sinusoidal": peaks[s] / peaks[REFERENCE],
                            "step_s": times[s],
                        }
                        for s in schemes
                    },
                }
            )
            print(format_schemes_row(rows[-1]), flush=True)
    return rows


def format_schemes_row(row: dict[str, Any]) -> str:
    lines = [
        f"{row['precision']}, batch × length = {row['tokens_per_step']} tokens "
        f"(T = {row['length']}):",
        f"  {'scheme':11s} {'ms/step':>8s} {'tokens/s':>9s} {'× sin':>6s} "
        f"{'peak MiB':>9s} {'× sin':>6s}",
    ]
    for s, r in row["schemes"].items():
        lines.append(
            f"  {s:11s} {1e3 * r['median_step_s']:8.1f} {r['tokens_per_s']:9.0f} "
            f"{r['tokens_per_s_vs_sinusoidal']:6.3f} {r['peak_bytes'] / 2**20:9.1f} "
            f"{r['peak_vs_sinusoidal']:6.3f}"
        )
    return "\n".join(lines)


def rope_goal_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The goal, one line per precision and length (rows without RoPE give none)."""
    lines = []
    for row in rows:
        if "rope" not in row["schemes"]:
            continue
        ratio = row["schemes"]["rope"]["tokens_per_s_vs_sinusoidal"]
        lines.append(
            claim(
                f"RoPE trains at {ratio:.2f}× the tokens/s of sinusoidal (goal ≥ {GOAL}×)",
                ratio >= GOAL,
                f"{row['precision']}, batch × length {row['tokens_per_step'] // row['length']} "
                f"× {row['length']}",
            )
        )
    return lines


def _rope_goal_met(rows: list[dict[str, Any]]) -> bool | None:
    """Whether RoPE met the goal at every precision and length (None: RoPE not measured)."""
    ratios = [
        r["schemes"]["rope"]["tokens_per_s_vs_sinusoidal"] for r in rows if "rope" in r["schemes"]
    ]
    return all(x >= GOAL for x in ratios) if ratios else None


def plot_schemes(result: dict[str, Any], path: Path) -> Path:
    """Grouped bars, each labelled: each scheme's tokens/s and peak memory as a ratio to
    sinusoidal, per precision and length."""
    from seqlab import plotting  # deferred: matplotlib

    plt = plotting.plt
    rows = result["rows"]
    schemes = list(rows[0]["schemes"])
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.2), layout="constrained")
    width = 0.8 / len(schemes)
    groups = [f"{r['precision']}, T = {r['length']}" for r in rows]
    for ax, key, ylabel in (
        (axes[0], "tokens_per_s_vs_sinusoidal", "training tokens/s ÷ sinusoidal's"),
        (axes[1], "peak_vs_sinusoidal", "peak memory of a step ÷ sinusoidal's"),
    ):
        for i, s in enumerate(schemes):
            xs = [g + (i - (len(schemes) - 1) / 2) * width for g in range(len(rows))]
            bars = ax.bar(xs, [r["schemes"][s][key] for r in rows], width, label=s)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, rotation=90, padding=2)
        ax.axhline(1.0, color="0.3", linewidth=1)
        if key == "tokens_per_s_vs_sinusoidal":
            ax.axhline(GOAL, color="0.3", linestyle="--", linewidth=1, label=f"RoPE goal {GOAL}×")
        ax.set_ylim(0, 1.2 * max(max(r["schemes"][s][key] for s in schemes) for r in rows))
        ax.set_xticks(range(len(rows)), labels=groups)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, axis="y")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    axes[0].set_title("Training throughput (median step, schemes interleaved)")
    axes[1].set_title("Peak memory of a training step (torch.profiler)")
    m = result["model"]
    fig.suptitle(
        f"transformer_lm, {m['num_layers']} layer(s) × {m['d_model']}, {m['num_heads']} heads, "
        f"d_ff {m['d_ff']}, batch {result['batch']}, AdamW; {result['machine']['threads']} "
        f"thread(s), {result['machine']['cpu']}"
    )
    return plotting.save_figure(fig, path)


# ------------------------------------------------------------------------------- part: linear
def _predicted(lengths: list[int], values: list[float], n: int) -> float:
    """``values`` extrapolated to length ``n`` along the log–log slope of the last two (at least
    1, linear growth; with one point, 2: quadratic, the most attention grows)."""
    if not values:
        return 0.0
    slope = 2.0 if len(values) < 2 else max(1.0, fitted_slope(lengths[-2:], values[-2:]) or 1.0)
    return values[-1] * (n / lengths[-1]) ** slope


def state_bytes(cache: Any) -> int:
    """Bytes carried from one generated token to the next: every layer's key/value cache, or
    linear attention's state."""
    total = 0
    for kv in cache.self_kv:
        if isinstance(kv, KVCache):
            parts = (kv.key, kv.value)  # (B, h, P, d_k) each
        elif isinstance(kv, LinearAttentionState):
            parts = (kv.s, kv.z)  # (B, h, d_k, d_k), (B, h, d_k)
        else:
            raise TypeError(f"unknown self-attention state {type(kv).__name__}")
        total += sum(t.numel() * t.element_size() for t in parts)
    return total


@torch.no_grad()
def generation_step(model: TransformerLanguageModel, context: int) -> tuple[Callable[[], Any], int]:
    """Generating one token after ``context`` tokens: the step, and the bytes it carries."""
    model.eval()
    g = torch.Generator().manual_seed(context)
    prefix = torch.randint(VOCAB, (1, context), generator=g)
    _, cache = model(prefix, model.init_cache(1))  # the cache / state after the context
    token = torch.randint(VOCAB, (1, 1), generator=g)

    @torch.no_grad()
    def step() -> Any:
        return model(token, cache)[0]  # (1, 1, V); the grown cache is dropped

    return step, state_bytes(cache)


def measure_linear(
    lengths: Sequence[int],
    sizes: dict[str, int],
    batch: int,
    precision: str,
    repeats: int,
    gen_repeats: int,
    point_seconds: float,
    max_gib: float,
    max_step_seconds: float,
) -> list[dict[str, Any]]:
    """Training and one-token generation, softmax vs linear attention, at each length."""
    kinds = ("softmax", "linear")
    resolved = resolve_precision(precision)
    seen: dict[str, dict[str, list[float]]] = {k: {"n": [], "peak": [], "s": []} for k in kinds}
    stopped: dict[str, str | None] = dict.fromkeys(kinds)
    rows = []
    for n in lengths:
        row: dict[str, Any] = {"length": n, "train": {}, "generate": {}}
        steps = {}
        for kind in kinds:
            past = seen[kind]
            peak = _predicted(past["n"], past["peak"], n)
            secs = _predicted(past["n"], past["s"], n)
            if stopped[kind] is None and peak > max_gib * GiB:
                stopped[kind] = (
                    f"skipped from n = {n}: its training step would need ~{peak / GiB:.1f} GiB "
                    f"(> --max-gib {max_gib:g}), extrapolated from the shorter lengths"
                )
            elif stopped[kind] is None and secs > max_step_seconds:
                stopped[kind] = (
                    f"skipped from n = {n}: its training step would take ~{secs:.0f} s "
                    f"(> --max-step-seconds {max_step_seconds:g}), extrapolated from the shorter "
                    "lengths"
                )
            if stopped[kind] is not None:
                row["train"][kind] = {"skipped": stopped[kind]}
                continue
            model = build_model(sizes, "none", kind, max(lengths))
            steps[kind] = training_step(model, batch, n, resolved)
        times = interleaved(steps, repeats, warmup=1, budget_s=point_seconds) if steps else {}
        for kind, fn in steps.items():
            med, peak = statistics.median(times[kind]), peak_memory_bytes(fn)
            tokens = batch * n
            row["train"][kind] = {
                "median_step_s": med,
                "s_per_token": med / tokens,
                "peak_bytes": peak,
                "peak_bytes_per_token": peak / tokens,
                "repeats": len(times[kind]),
            }
            for key, value in (("n", n), ("peak", peak), ("s", med)):
                seen[kind][key].append(value)
        gens, carried = {}, {}
        for kind in kinds:
            model = build_model(sizes, "none", kind, max(lengths))
            gens[kind], carried[kind] = generation_step(model, n)
        gtimes = interleaved(gens, gen_repeats, warmup=2, budget_s=point_seconds)
        for kind, fn in gens.items():
            row["generate"][kind] = {
                "median_token_s": statistics.median(gtimes[kind]),
                "state_bytes": carried[kind],
                "step_peak_bytes": peak_memory_bytes(fn),
            }
        del steps, gens
        rows.append(row)
        print(format_linear_row(row), flush=True)
    return rows


def _cell(rec: dict[str, Any], key: str, scale: float, fmt: str) -> str:
    return "skipped" if "skipped" in rec else format(rec[key] * scale, fmt)


def format_linear_row(row: dict[str, Any]) -> str:
    t, g = row["train"], row["generate"]
    return (
        f"  n = {row['length']:6d}  train µs/token softmax {_cell(t['softmax'], 's_per_token', 1e6, '.2f')}"
        f" linear {_cell(t['linear'], 's_per_token', 1e6, '.2f')}; KiB/token softmax "
        f"{_cell(t['softmax'], 'peak_bytes_per_token', 1 / 1024, '.1f')} linear "
        f"{_cell(t['linear'], 'peak_bytes_per_token', 1 / 1024, '.1f')} | generate ms/token "
        f"softmax {1e3 * g['softmax']['median_token_s']:.3f} linear "
        f"{1e3 * g['linear']['median_token_s']:.3f}; carried KiB softmax "
        f"{g['softmax']['state_bytes'] / 1024:.0f} linear {g['linear']['state_bytes'] / 1024:.0f}"
    )


def crossing(rows: list[dict[str, Any]], part: str, key: str) -> dict[str, Any]:
    """The first length where linear attention is faster than softmax (both measured), and
    whether it stays faster at every longer length measured for both."""
    both = [
        (r["length"], r[part]["softmax"][key], r[part]["linear"][key])
        for r in rows
        if "skipped" not in r[part]["softmax"] and "skipped" not in r[part]["linear"]
    ]
    first = next((i for i, (_, s, lin) in enumerate(both) if lin < s), None)
    skipped = [r["length"] for r in rows if "skipped" in r[part]["softmax"]]
    return {
        "first_length_linear_faster": None if first is None else both[first][0],
        "linear_faster_from_then_on": first is not None
        and all(lin < s for _, s, lin in both[first:]),
        "softmax_skipped_lengths": skipped,
    }


def crossing_line(what: str, c: dict[str, Any]) -> str:
    n = c["first_length_linear_faster"]
    if n is None:
        text = f"{what}: linear attention is not faster than softmax at any length measured"
    else:
        stays = (
            "and stays faster" if c["linear_faster_from_then_on"] else "but not at every longer one"
        )
        text = f"{what}: linear attention is faster than softmax from n = {n} ({stays})"
    if c["softmax_skipped_lengths"]:
        text += f"; softmax skipped at n = {', '.join(map(str, c['softmax_skipped_lengths']))}"
    return text


def plot_linear(result: dict[str, Any], path: Path) -> Path:
    """Log–log, against the length: time per token (training; generating one token after a
    context of that length) and memory (training peak per token; generation: what is carried
    between tokens, solid, and what one token's step allocates, dashed)."""
    from matplotlib import ticker

    from seqlab import plotting  # deferred: matplotlib

    plt = plotting.plt
    rows = result["rows"]
    lengths = [r["length"] for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9), layout="constrained")
    panels = [
        (axes[0, 0], "train", ("s_per_token",), 1e6, "training step time per token (µs)"),
        (axes[0, 1], "generate", ("median_token_s",), 1e3, "time to generate one token (ms)"),
        (axes[1, 0], "train", ("peak_bytes_per_token",), 1 / 2**10, "peak memory per token (KiB)"),
        (axes[1, 1], "generate", ("state_bytes", "step_peak_bytes"), 1 / 2**20, "memory (MiB)"),
    ]
    what = {"state_bytes": "carried between tokens", "step_peak_bytes": "allocated by one step"}
    for ax, part, keys, scale, ylabel in panels:
        for kind, marker, colour in (("softmax", "o", "C0"), ("linear", "s", "C1")):
            for key, line in zip(keys, ("-", "--"), strict=False):
                pts = [
                    (r["length"], r[part][kind][key] * scale)
                    for r in rows
                    if "skipped" not in r[part][kind]
                ]
                label = f"{kind} attention" + (f", {what[key]}" if key in what else "")
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker + line, color=colour, label=label)
        c = result["crossing"][part]
        n = c["first_length_linear_faster"]
        if keys[0] in ("s_per_token", "median_token_s") and n is not None:
            plotting.reference_lines(ax, vlines={f"linear faster from n = {n}": n})
        if part == "train" and c["softmax_skipped_lengths"]:
            skipped = f"softmax skipped at n ≥ {c['softmax_skipped_lengths'][0]} (see the JSON)"
            ax.plot([], [], " ", label=skipped)  # a legend entry, no line
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, labels=[str(n) for n in lengths])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.set_yscale("log")
        plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        low, high = ax.get_ylim()
        if high < 30 * low:  # a decade or so: one major tick or none, so label the minor ones
            ax.yaxis.set_minor_formatter(plain)
            ax.tick_params(axis="y", which="minor", labelsize=7)
        else:
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(
            "sequence length n" if part == "train" else "context length n (tokens before)"
        )
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    axes[0, 0].set_title("Training (forward + backward + AdamW)")
    axes[0, 1].set_title("Generation: one token after n (cache or state of n)")
    m = result["model"]
    fig.suptitle(
        f"Causal softmax vs linear attention, positions none: {m['num_layers']} layer(s) × "
        f"{m['d_model']}, {m['num_heads']} heads, batch {result['batch']}, {result['precision']}; "
        f"{result['machine']['threads']} thread(s), {result['machine']['cpu']}"
    )
    return plotting.save_figure(fig, path)


# ------------------------------------------------------------------------------------- main
def _precisions(text: str) -> tuple[list[str], dict[str, str]]:
    """``auto``: fp32, and bf16 where native; else the listed ones. Returns the precisions to
    measure and the ones left out, with why."""
    native, why = native_bf16()
    if text == "auto":
        if native:
            return ["fp32", "bf16"], {}
        return ["fp32"], {"bf16": f"emulated here ({why}); --precisions fp32,bf16 measures it"}
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in ("fp32", "bf16")]
    if bad or not names:
        raise ValueError(f"--precisions takes auto or a list of fp32, bf16; got {text!r}")
    return names, {}


def _context(args: argparse.Namespace, precision: str, load_before: float) -> dict[str, Any]:
    return {
        "quick": args.quick,
        "machine": machine(precision),
        "bf16_native": dict(zip(("native", "why"), native_bf16(), strict=True)),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def run_schemes(args: argparse.Namespace, sizes: dict[str, int], out: Path) -> dict[str, Any]:
    precisions, left_out = _precisions(args.precisions)
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    rows = measure_schemes(
        args.schemes, args.scheme_lengths, precisions, sizes, args.batch, args.rounds, args.warmup
    )
    lines = rope_goal_lines(rows)
    result = {
        "benchmark": "position_schemes",
        "model": sizes,
        "vocab": VOCAB,
        "batch": args.batch,
        "lengths": args.scheme_lengths,
        "rounds": args.rounds,
        "warmup_rounds": args.warmup,
        "optimizer": f"AdamW lr {TRAIN.lr}, weight decay {TRAIN.weight_decay}, betas "
        f"{list(TRAIN.betas)}, gradient clipping {GRAD_CLIP}",
        "timing": "median step of interleaved rounds; ratios = sinusoidal's median / the scheme's",
        "memory_method": MEMORY_METHOD,
        "precisions": precisions,
        "precisions_left_out": left_out,
        "rows": rows,
        "goal": {
            "rope_tokens_per_s_vs_sinusoidal_at_least": GOAL,
            "lines": lines,
            "met": _rope_goal_met(rows),
        },
        "wall_s": time.monotonic() - start,
        **_context(args, "fp32 and bf16 autocast" if "bf16" in precisions else "fp32", load_before),
    }
    atomic_write_json(out.with_suffix(".json"), result)
    plot_schemes(result, out.with_suffix(".png"))
    for line in lines:
        print(line)
    for name, why in left_out.items():
        print(f"{name} not measured: {why}")
    print(numbers_line(" and ".join(precisions), result["machine"]))
    return result


def run_linear(args: argparse.Namespace, sizes: dict[str, int], out: Path) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    rows = measure_linear(
        args.lengths,
        sizes,
        args.linear_batch,
        args.linear_precision,
        args.repeats,
        args.gen_repeats,
        args.point_seconds,
        args.max_gib,
        args.max_step_seconds,
    )
    result = {
        "benchmark": "position_schemes_linear",
        "model": sizes,
        "positions": "none",
        "vocab": VOCAB,
        "batch": args.linear_batch,
        "precision": args.linear_precision,
        "lengths": args.lengths,
        "repeats": args.repeats,
        "generation_repeats": args.gen_repeats,
        "point_seconds": args.point_seconds,
        "max_gib": args.max_gib,
        "max_step_seconds": args.max_step_seconds,
        "memory_method": MEMORY_METHOD,
        "generation": "one token after a context of n tokens (softmax: key/value cache of n, "
        "appended to; linear: the fixed-size state); state_bytes = what is carried",
        "rows": rows,
        "crossing": {
            "train": crossing(rows, "train", "median_step_s"),
            "generate": crossing(rows, "generate", "median_token_s"),
        },
        "wall_s": time.monotonic() - start,
        **_context(args, args.linear_precision, load_before),
    }
    atomic_write_json(out.with_suffix(".json"), result)
    plot_linear(result, out.with_suffix(".png"))
    print(crossing_line("training", result["crossing"]["train"]))
    print(crossing_line("generation", result["crossing"]["generate"]))
    print(numbers_line(args.linear_precision, result["machine"]))
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--part", choices=("schemes", "linear", "both"), default="both")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: all CPUs)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a seconds-long smoke run: tiny sizes (overrides the size flags)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON and PNG files")
    g = p.add_argument_group("model (both parts)")
    g.add_argument("--d-model", type=int, default=128)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--d-ff", type=int, default=512)
    g = p.add_argument_group("part schemes")
    g.add_argument("--schemes", default="all", help="comma-separated (sinusoidal always included)")
    g.add_argument("--scheme-lengths", default="64,256")
    g.add_argument("--batch", type=int, default=32)
    g.add_argument("--layers", type=int, default=4)
    g.add_argument("--rounds", type=int, default=15, help="timed rounds per length")
    g.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    g.add_argument(
        "--precisions", default="auto", help="auto (fp32, + bf16 where native) or a list"
    )
    g = p.add_argument_group("part linear")
    g.add_argument("--lengths", default="64,128,...,16384")
    g.add_argument("--linear-batch", type=int, default=1)
    g.add_argument("--linear-layers", type=int, default=2)
    g.add_argument("--linear-precision", choices=("fp32", "bf16"), default="fp32")
    g.add_argument("--repeats", type=int, default=5, help="timed training rounds per length")
    g.add_argument("--gen-repeats", type=int, default=50, help="timed generation rounds")
    g.add_argument("--point-seconds", type=float, default=15.0, help="no new round after this")
    g.add_argument(
        "--max-gib", type=float, default=3.0, help="skip a training point predicted above this"
    )
    g.add_argument("--max-step-seconds", type=float, default=60.0, help="and above this")
    args = p.parse_args(argv)
    if args.quick:
        args.d_model, args.heads, args.d_ff, args.batch, args.layers = 32, 2, 64, 4, 1
        args.scheme_lengths, args.lengths = "16,32", "16,32,64"
        args.rounds, args.warmup, args.repeats, args.gen_repeats = 2, 1, 2, 3
        args.linear_layers = 1
    try:
        args.scheme_lengths = parse_lengths(args.scheme_lengths)
        args.lengths = parse_lengths(args.lengths)
        _precisions(args.precisions)
    except ValueError as exc:
        p.error(str(exc))
    known = list(catalog.positions())
    chosen = known if args.schemes == "all" else [s.strip() for s in args.schemes.split(",")]
    unknown = [s for s in chosen if s not in known]
    if unknown:
        p.error(f"--schemes: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    args.schemes = [REFERENCE] + [s for s in chosen if s != REFERENCE]
    for flag in (
        "d_model",
        "heads",
        "d_ff",
        "batch",
        "layers",
        "rounds",
        "linear_batch",
        "linear_layers",
        "repeats",
        "gen_repeats",
    ):
        if getattr(args, flag) < 1:
            p.error(f"--{flag.replace('_', '-')} must be at least 1, got {getattr(args, flag)}")
    if args.warmup < 0 or args.threads < 0:
        p.error("--warmup and --threads must not be negative")
    for flag in ("point_seconds", "max_gib", "max_step_seconds"):
        if not getattr(args, flag) > 0:
            p.error(f"--{flag.replace('_', '-')} must be positive, got {getattr(args, flag)}")
    if args.d_model % args.heads:
        p.error(f"--d-model {args.d_model} is not a multiple of --heads {args.heads}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    set_threads(args.threads, "--threads")
    stem = "position_schemes-quick" if args.quick else "position_schemes"
    width = {"d_model": args.d_model, "num_heads": args.heads, "d_ff": args.d_ff}
    if args.part in ("schemes", "both"):
        run_schemes(args, {**width, "num_layers": args.layers}, args.out / stem)
    if args.part in ("linear", "both"):
        run_linear(args, {**width, "num_layers": args.linear_layers}, args.out / f"{stem}_linear")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
