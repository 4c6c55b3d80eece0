"""``seqlab curves``, ``diagnose``, ``bench`` and ``ngram``: analysis of runs, models and layers
(``seqlab demo``: :mod:`seqlab.cli.demo`)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from seqlab import catalog
from seqlab.analysis.summary import claim, files_line, num, numbers_line
from seqlab.cli.common import (
    OUT_HELP,
    add_force,
    add_renamed_flags,
    check_writable_dir,
    finite_float,
    non_negative_int,
    positive_float,
    positive_int,
    seed_int,
    writes_file,
    writes_into,
)
from seqlab.config import load_config
from seqlab.deprecation import renamed_value
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.storage.outputs import FILE_RULE, RULE


def cmd_diagnose_gradients(args: argparse.Namespace) -> int:
    from seqlab.analysis.gradients import run_gradient_diagnosis  # deferred: torch

    known = catalog.cells()
    cells = [renamed_value("model.cell", c.strip()) for c in args.cells.split(",") if c.strip()]
    unknown = [c for c in cells if c not in known]
    if unknown or not cells:
        raise SeqlabError(
            f"--cells: unknown cell(s) {', '.join(repr(c[:20]) for c in unknown[:5]) or '(none given)'}; "
            f"choose from {', '.join(known)}"
        )
    check_writable_dir(args.out, "--out")
    norms = run_gradient_diagnosis(
        cells,
        seq_len=args.seq_len,
        hidden_size=args.hidden_size,
        out_dir=args.out,
        seed=args.seed,
        gate_bias=args.gate_bias,
        recurrent_scale=args.recurrent_scale,
    )
    ratios = {cell: values[0] / values[-1] for cell, values in norms.items()}
    if args.json:
        print(json.dumps({"out": args.out, "norms": norms, "ratio_first_to_last": ratios}))
    else:
        from seqlab.analysis.gradients import summary  # deferred: torch

        report = json.loads((Path(args.out) / "gradients.json").read_text())
        print("\n".join(summary(report)))
        print(numbers_line("float64", report["machine"]))
        print(files_line([Path(args.out) / "gradients.png"], Path(args.out) / "gradients.json"))
    return 0


def _lengths(text: str) -> list[int]:
    from seqlab.analysis.layer_costs_report import parse_lengths  # deferred: torch

    try:
        return parse_lengths(text)  # "64,128,...,4096" doubles up to 4096
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_bench_layers(args: argparse.Namespace) -> int:
    from seqlab.analysis.layer_costs import (  # deferred: torch
        attention_memory_report,
        measure_layer_costs,
    )
    from seqlab.analysis.layer_costs_report import (  # deferred: torch
        attention_memory_summary,
        format_layer_costs,
        save_layer_costs,
    )

    if args.width % args.heads:
        fits = [h for h in range(1, min(args.width, 16) + 1) if args.width % h == 0]
        raise SeqlabError(
            f"--heads {args.heads} does not divide --width {args.width}: multi-head attention "
            f"gives each head width/heads dimensions; heads that divide {args.width}: "
            + ", ".join(map(str, fits))
            + (", ..." if args.width > 16 else "")
        )
    if args.out:
        check_writable_dir(args.out, "--out")
    if args.threads:
        from seqlab.runtime.machine import set_threads  # deferred: torch

        set_threads(args.threads, "--threads")
    results = measure_layer_costs(
        args.lengths,
        width=args.width,
        batch=args.batch,
        kernel_size=args.kernel_size,
        heads=args.heads,
        repeats=args.repeats,
    )
    report = attention_memory_report(args.memory_length, args.width, args.heads, args.batch)
    if args.out:
        json_path, png_path = save_layer_costs(results, args.out, report)
        print(f"wrote {json_path} and {png_path}", file=sys.stderr)
    if args.json:
        print(json.dumps({**results, "attention_memory": report}))
    else:
        print(format_layer_costs(results))
        print(attention_memory_summary(report))
        print(numbers_line("fp32"))
    return 0


def cmd_ngram(args: argparse.Namespace) -> int:
    import torch

    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS, ngram_models  # deferred: torch

    if args.tokens > MAX_GENERATE_TOKENS:
        raise SeqlabError(f"--tokens is at most {MAX_GENERATE_TOKENS:,}, got {args.tokens:,}")
    if args.k is not None and args.smoothing != "add_k":
        raise SeqlabError("--k is add-k's pseudo-count: it applies with --smoothing add_k")
    cfg = load_config(args.config, args.overrides)
    if cfg.task != "language_modeling":
        raise SeqlabError(
            f"{args.config} is a {cfg.task.replace('_', ' ')} config; n-gram "
            "models need a language-modelling config (its data section)"
        )
    k = 1.0 if args.k is None else args.k
    corpus, found = ngram_models(cfg, args.orders, args.smoothing, k)
    rows = {n: {k: v for k, v in r.items() if k != "model"} for n, r in found.items()}
    if args.json:
        print(
            json.dumps(
                {
                    "config": str(args.config),
                    "smoothing": args.smoothing,
                    "vocab_size": len(corpus.vocab),
                    "orders": rows,
                }
            )
        )
    else:
        data = f"{cfg.data.dataset} ({cfg.data.tokenizer} tokens, |V| = {len(corpus.vocab)})"
        print("\n".join(_ngram_summary(data, len(corpus.vocab), args.smoothing, rows)))
        print(numbers_line("float64 counts"))
    if args.generate is not None:
        lm = found[max(found)]["model"]
        pieces = corpus.tokenizer.tokenize(args.generate)
        unknown = [t for t in pieces if t not in corpus.vocab]
        if unknown:
            print(
                f"seqlab: warning: {len(unknown)} token(s) of the prefix are not in the "
                f"vocabulary ({', '.join(map(repr, dict.fromkeys(unknown)))[:80]}): each is "
                "read as <unk>, and the text shows it so",
                file=sys.stderr,
            )
        ids = corpus.vocab[pieces]
        reserved = range(corpus.vocab.num_reserved)  # <unk>, <pad>, ...: never in the text
        out = lm.sample(ids, args.tokens, torch.Generator().manual_seed(args.seed), reserved)
        print(corpus.tokenizer.detokenize(corpus.vocab.to_tokens(list(ids) + out)))
    return 0


def _ngram_summary(data: str, vocab_size: int, smoothing: str, rows: dict[int, dict]) -> list[str]:
    """One sentence per order of the n-gram models of ``data`` (the corpus, named) and whether
    perplexity falls as the order grows (d2l.ai §9.3), rounded for reading (``--json`` has the
    full numbers)."""

    smoothed = {"kneser_ney": "Kneser–Ney", "add_k": "add-k"}[smoothing]
    lines = [f"{data}, {smoothed} smoothing; the uniform model's perplexity is {vocab_size}"]
    for n, r in rows.items():
        lines.append(
            f"{n}-gram: validation perplexity {num(r['val_ppl'])} ({num(r['val_loss'])} "
            f"nats/token over {r['tokens']:,} tokens)"
        )
    ppl = [r["val_ppl"] for r in rows.values()]
    if len(ppl) > 1:
        lines.append(
            claim(
                "a longer context predicts better: perplexity falls with each order",
                all(b < a for a, b in zip(ppl, ppl[1:], strict=False)),
                ", ".join(f"{n}-gram {num(r['val_ppl'])}" for n, r in rows.items()),
            )
        )
    return lines


def _orders(text: str) -> list[int]:
    try:
        orders = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated orders, got {text!r}") from None
    if not orders or orders[0] < 1 or orders[-1] > 9:
        raise argparse.ArgumentTypeError("orders must be between 1 and 9")
    return orders


def selection_metric(runs: list[str]) -> str:
    """The validation metric ``runs`` choose their checkpoints by (each its task's, read from
    its ``config.yaml``: :func:`seqlab.tasks.selection_of`): what ``seqlab curves`` draws unless
    ``--metric`` says. Runs that choose by different metrics need ``--metric``."""
    from seqlab.storage.rundir import RunDir  # deferred: torch
    from seqlab.tasks import selection_of  # deferred: torch

    chosen = {run: selection_of(RunDir(run).read_config()).metric for run in runs}
    if len(set(chosen.values())) > 1:
        each = ", ".join(f"{run}: {metric}" for run, metric in chosen.items())
        raise SeqlabError(
            f"the runs choose their checkpoints by different metrics ({each}); give --metric, "
            "one that every run records (val_loss does)"
        )
    return next(iter(chosen.values()))


#: what a validation record holds besides its metrics
_NOT_METRICS = {"kind", "step", "epoch", "best", "elapsed_s"}


def metric_over_time(run: Path, metric: str) -> tuple[list[float], list[float]]:
    """(minutes, values) of ``metric`` at each validation of ``run`` (its ``metrics.jsonl``)."""
    from seqlab.training.callbacks import read_metrics  # deferred: torch

    path = Path(run) / "metrics.jsonl"
    if not path.is_file():
        raise SeqlabError(f"{run}: no metrics.jsonl; is it a seqlab run directory?")
    try:
        records = read_metrics(path)
    except CheckpointError as exc:
        raise SeqlabError(str(exc)) from None
    points = [
        (r["elapsed_s"] / 60, float(r[metric]))
        for r in records
        if r.get("kind") == "eval" and metric in r and "elapsed_s" in r
    ]
    if not points:
        known = sorted({k for r in records if r.get("kind") == "eval" for k in r} - _NOT_METRICS)
        raise SeqlabError(
            f"{path} has no validation with {metric!r}; its validations record: "
            + (", ".join(known) + " (choose one with --metric)" if known else "nothing yet")
        )
    return [m for m, _ in points], [v for _, v in points]


def curve_summary(metric: str, minutes: list[float], values: list[float]) -> str:
    """The last value of ``metric`` and its best, named with the direction that makes it best
    (``best (lowest) val_loss``, :func:`seqlab.objective.best_of`); for a metric of unknown
    direction, its lowest and highest values, neither called the best."""
    from seqlab.objective import best_of  # deferred: torch, only when a command needs it

    n = len(values)
    last = f"{metric} {values[-1]:.2f} after {minutes[-1]:.1f} min, the last of {n} validation"
    last += "s" if n > 1 else ""
    found = best_of(metric, values)
    if found is not None:
        i, word = found
        return f"{last}; best ({word}) {values[i]:.2f} at {minutes[i]:.1f} min"
    finite = [i for i, v in enumerate(values) if math.isfinite(v)]
    if not finite:
        return f"{last}; no finite value"
    lo, hi = min(finite, key=values.__getitem__), max(finite, key=values.__getitem__)
    return (
        f"{last}; lowest {values[lo]:.2f} at {minutes[lo]:.1f} min, highest {values[hi]:.2f} at "
        f"{minutes[hi]:.1f} min (whether lower or higher {metric} is better is not known to "
        "seqlab, so neither is called the best)"
    )


def cmd_curves(args: argparse.Namespace) -> int:
    from seqlab.plotting import plot_metric_over_time  # deferred: matplotlib

    if args.metric is None:  # the runs' own: the metric that chose their checkpoints
        args.metric = selection_metric(args.runs)
    labels = [Path(r).name or str(r) for r in args.runs]
    if len(set(labels)) < len(labels):  # two runs of one name: use the paths as given
        labels = [str(r) for r in args.runs]
    curves = {
        label: metric_over_time(Path(r), args.metric)
        for label, r in zip(labels, args.runs, strict=True)
    }
    plot_metric_over_time(curves, args.png, args.metric)
    for label, (minutes, values) in curves.items():
        print(f"{label}: {curve_summary(args.metric, minutes, values)}")
    print(f"wrote {args.png}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "curves",
        help="a validation metric of one or more runs against training wall time, as a PNG",
    )
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="trained (or training) runs")
    p.add_argument(
        "--metric",
        help="a validation metric (default: the one that chooses the runs' checkpoints: val_bleu "
        "for translation, val_loss for language models, val_acc for classification, val_rmse "
        "for forecasting)",
    )
    # --png, as every figure file is named (--out names a folder: a run's, a demo's, an export)
    p.add_argument("--png", required=True, metavar="FILE", help=f"the figure: {FILE_RULE}")
    add_renamed_flags(p, "curves")
    add_force(p)
    p.set_defaults(func=writes_file("png", cmd_curves))

    diagnose = sub.add_parser("diagnose", help="diagnostics (vanishing/exploding gradients)")
    diagnose_sub = diagnose.add_subparsers(dest="diagnose_command", required=True, metavar="WHAT")
    p = diagnose_sub.add_parser(
        "gradients", help="||dL_T/dh_k|| for k=1..T, per cell, same data; PNG + JSON"
    )
    p.add_argument(
        "--cells",
        default="rnn,gru,lstm",
        help="comma-separated: rnn,rnn_relu,gru,lstm,peephole_lstm",
    )
    p.add_argument("--seq-len", type=positive_int, default=50)
    p.add_argument("--hidden-size", type=positive_int, default=64)
    p.add_argument(
        "--gate-bias",
        type=finite_float,
        default=1.0,
        help="initial forget/update-gate bias (gated cells)",
    )
    p.add_argument(
        "--recurrent-scale",
        type=finite_float,
        default=1.0,
        help="multiply W_h: e.g. 4 with rnn_relu explodes",
    )
    p.add_argument("--seed", type=seed_int, default=0, help="random seed, 0 to 2**32 - 1")
    p.add_argument("--out", default="runs/gradients", metavar="DIR", help=OUT_HELP)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=writes_into("out", cmd_diagnose_gradients))

    p = sub.add_parser(
        "ngram",
        help="count n-gram LMs on a language-model config's data: validation perplexity, samples",
    )
    p.add_argument("config", help="a language-modelling config (its data section is used)")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    p.add_argument("--orders", type=_orders, default="1,2,3,4,5", metavar="N,N,...")
    p.add_argument("--smoothing", choices=["kneser_ney", "add_k"], default="kneser_ney")
    p.add_argument(
        "--k", type=positive_float, help="add-k's pseudo-count, a finite number > 0 (default 1)"
    )
    p.add_argument(
        "--generate",
        metavar="PREFIX",
        help="sample from the highest order (never <unk>, <pad>, <bos> or <eos>)",
    )
    p.add_argument(
        "--tokens",
        type=non_negative_int,
        default=200,
        help="tokens --generate writes, at most 100,000",
    )
    p.add_argument("--seed", type=seed_int, default=0, help="random seed, 0 to 2**32 - 1")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_ngram)

    bench = sub.add_parser("bench", help="measure the cost of layers")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, metavar="WHAT")
    p = bench_sub.add_parser(
        "layers", help="time and peak memory of conv / RNN / GRU / self-attention as n grows"
    )
    p.add_argument(
        "--lengths",
        type=_lengths,
        default="64,128,...,4096",
        metavar="N,N,...",
        help="comma-separated; a,b,...,c continues the ratio b/a up to c",
    )
    p.add_argument("--width", type=positive_int, default=256)
    p.add_argument("--heads", type=positive_int, default=4)
    p.add_argument("--batch", type=positive_int, default=1)
    p.add_argument("--kernel-size", type=positive_int, default=3)
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument(
        "--threads", type=non_negative_int, default=1, help="torch threads; 0 = PyTorch's default"
    )
    p.add_argument(
        "--memory-length",
        type=positive_int,
        default=4096,
        help="length of the attention memory report",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--out",
        metavar="DIR",
        help=f"also write layer_costs.json and layer_costs.png into this folder: {RULE}",
    )
    p.set_defaults(func=writes_into("out", cmd_bench_layers))
