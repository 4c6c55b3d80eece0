"""The ``seqlab`` command line.

Each subcommand is a small function that parses nothing itself: argparse hands it the
namespace, it calls the library and prints. User-facing errors (:class:`SeqlabError`) are printed
without a traceback and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from seqlab.errors import SeqlabError


# ---------------------------------------------------------------------------------------- data
def cmd_data_list(args: argparse.Namespace) -> int:
    from seqlab.data import registry

    for ds in registry.DATASETS.values():
        found = registry.status(ds.name)
        have = sum(p is not None for _, p in found)
        print(f"{ds.name:16s} {have}/{len(found)} files local   {ds.description}")
        print(f"{'':16s} licence: {ds.licence}")
        for name, path in found:
            print(f"{'':18s}{name:28s} {path if path else 'missing'}")
    return 0


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from seqlab.data import registry

    names = list(registry.DATASETS) if args.names == ["all"] else args.names
    for name in names:
        for path in registry.fetch(name):
            print(f"{name}: {path}")
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    from seqlab.data.stats import dataset_stats, format_stats

    stats = dataset_stats(
        args.name,
        src=args.src,
        tgt=args.tgt,
        batch_tokens=args.batch_tokens,
        tokenizer=args.tokenizer,
    )
    print(json.dumps(stats, indent=2, ensure_ascii=False) if args.json else format_stats(stats))
    return 0


# ------------------------------------------------------------------------------ train, evaluate
def cmd_train(args: argparse.Namespace) -> int:
    from seqlab.config import load_config
    from seqlab.errors import ConfigError
    from seqlab.experiment import train

    if args.resume:
        if args.config and args.config.endswith((".yaml", ".yml")):
            raise ConfigError(
                "with --resume the run's own config.yaml is used; drop CONFIG (overrides are allowed)"
            )
        overrides = ([args.config] if args.config else []) + args.overrides
        summary = train(None, args.resume, resume=True, overrides=overrides)
        out = args.resume
    else:
        if not args.config or not args.out:
            raise ConfigError(
                "usage: seqlab train CONFIG [key=value ...] --out RUN_DIR  (or --resume RUN_DIR)"
            )
        cfg = load_config(args.config, args.overrides)
        summary = train(cfg, args.out, overrides=args.overrides)
        out = args.out
    from seqlab.training import distributed

    if distributed.is_main():
        print(json.dumps(summary))
        print(f"run directory: {out} (metrics.jsonl, curves.png, checkpoints/)", file=sys.stderr)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from seqlab.experiment import load_run
    from seqlab.tasks.language_modeling import LM_ARCHS, evaluate_lm

    cfg, model, exp, path = load_run(args.checkpoint, args.which)
    if cfg.model.arch not in LM_ARCHS:
        return _evaluate_translation(args, cfg, model, exp, path)
    if args.split == "test":
        raise SeqlabError("language-model corpora have train and val splits only; use --split val")
    ids = exp.corpus.val if args.split == "val" else exp.corpus.train
    metrics = evaluate_lm(model, ids, cfg.data.batch_size, cfg.data.num_steps)
    result = {
        "checkpoint": str(path),
        "split": args.split,
        "loss": metrics["val_loss"],
        "perplexity": metrics["val_ppl"],
        "tokens": len(ids) - 1,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{args.split}: loss {result['loss']:.4f} nats/token, perplexity {result['perplexity']:.3f} ({path})"
        )
    return 0


def _decode_config(cfg, args: argparse.Namespace):
    decode = cfg.decode.model_copy()
    if getattr(args, "beam", None):
        decode.strategy, decode.beam_size = "beam", args.beam
    if getattr(args, "nbest", None):
        decode.nbest = args.nbest
        if decode.strategy != "beam":
            decode.strategy = "beam"
        decode.beam_size = max(decode.beam_size, args.nbest)
    return decode


def _evaluate_translation(args, cfg, model, exp, path) -> int:
    from seqlab.tasks.translation import detokenize, score_translations, translate

    if args.split not in exp.splits:
        raise SeqlabError(
            f"{cfg.data.dataset} has no {args.split!r} split; choose from {', '.join(exp.splits)}"
        )
    pairs = exp.splits[args.split]
    decode = _decode_config(cfg, args)
    hyps = translate(model, exp.vocabs, [s for s, _ in pairs], decode, cfg.data.max_len)
    outputs = [detokenize(h[0].tokens, exp.vocabs) for h in hyps]
    scores = score_translations(outputs, [t for _, t in pairs])
    result = {
        "checkpoint": str(path),
        "split": args.split,
        "decode": decode.strategy,
        "beam_size": decode.beam_size if decode.strategy == "beam" else 1,
        **scores,
    }
    if args.output:
        from seqlab.io import atomic_write_text

        atomic_write_text(args.output, "".join(o + "\n" for o in outputs))
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{args.split}: BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  "
            f"(lowercased BLEU {scores['bleu_lc']:.2f}; exact match {scores['exact_match']:.1%}; "
            f"{scores['sentences']} sentences)"
        )
        print(f"  {scores['bleu_signature']}")
        print(f"  {scores['chrf_signature']}")
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from seqlab.experiment import load_run
    from seqlab.tasks.language_modeling import LM_ARCHS
    from seqlab.tasks.translation import detokenize, translate

    cfg, model, exp, _ = load_run(args.checkpoint, args.which)
    if cfg.model.arch in LM_ARCHS:
        raise SeqlabError(f"{args.checkpoint} holds a language model; use `seqlab generate`")
    decode = _decode_config(cfg, args)
    want_attention = bool(args.attention_png)
    counter = [0]

    def run(lines: list[str]) -> None:
        results = translate(
            model, exp.vocabs, lines, decode, cfg.data.max_len, need_attention=want_attention
        )
        for line, hyps in zip(lines, results, strict=True):
            counter[0] += 1
            if decode.nbest > 1:
                for rank, h in enumerate(hyps[: decode.nbest]):
                    print(
                        f"{counter[0]}\t{rank}\t{h.score:.4f}\t{detokenize(h.tokens, exp.vocabs)}"
                    )
            else:
                print(detokenize(hyps[0].tokens, exp.vocabs), flush=True)
            if want_attention and hyps[0].attention is not None:
                _write_alignment(args.attention_png, counter[0], line, hyps[0], exp, cfg)

    source = open(args.input, encoding="utf-8") if args.input else sys.stdin  # noqa: SIM115
    try:
        if source.isatty():
            print(
                "seqlab translate: type a sentence and press Enter (Ctrl-D to quit)",
                file=sys.stderr,
            )
            while True:
                print("> ", end="", file=sys.stderr, flush=True)
                line = source.readline()
                if not line:
                    break
                if line.strip():
                    run([line.rstrip("\n")])
        else:
            lines = [line.rstrip("\n") for line in source]
            if lines:
                run(lines)
    finally:
        if args.input:
            source.close()
    if want_attention:
        print(f"attention heatmaps: {args.attention_png}/", file=sys.stderr)
    return 0


def _write_alignment(directory: str, index: int, line: str, hyp, exp, cfg) -> None:
    from pathlib import Path

    from seqlab.plotting import plot_attention
    from seqlab.tasks.translation import encode_sources

    vocabs = exp.vocabs
    src_ids, _ = encode_sources([line], vocabs, cfg.data.max_len)
    x_tokens = vocabs.src_vocab.to_tokens(src_ids[0])
    y_tokens = vocabs.tgt_vocab.to_tokens(hyp.tokens) + ["<eos>"]
    weights = hyp.attention[: len(y_tokens), : len(x_tokens)]
    plot_attention(
        weights,
        Path(directory) / f"attention-{index:04d}.png",
        x_tokens=x_tokens,
        y_tokens=y_tokens,
        title=f"{line}",
        xlabel="source",
        ylabel="output",
    )


def cmd_generate(args: argparse.Namespace) -> int:
    from seqlab.experiment import load_run
    from seqlab.tasks.language_modeling import generate_text

    cfg, model, exp, _ = load_run(args.checkpoint, args.which)
    strategy = "sample" if (args.temperature is not None or args.top_k) else "greedy"
    text = generate_text(
        model,
        exp.corpus,
        args.prefix,
        args.tokens,
        strategy=strategy,
        temperature=args.temperature or 1.0,
        top_k=args.top_k,
        seed=args.seed,
    )
    print(text)
    return 0


def cmd_diagnose_gradients(args: argparse.Namespace) -> int:
    from seqlab.analysis.gradients import run_gradient_diagnosis

    cells = [c.strip() for c in args.cells.split(",") if c.strip()]
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
        print(
            f"||dL_T/dh_1|| / ||dL_T/dh_T|| over T={args.seq_len} steps (<< 1: vanishing, >> 1: exploding)"
        )
        for cell, r in ratios.items():
            print(f"  {cell:14s} {r:.2e}")
        print(f"plot: {args.out}/gradients.png   numbers: {args.out}/gradients.json")
    return 0


def _lengths(text: str) -> list[int]:
    from seqlab.analysis.layer_costs import parse_lengths

    try:
        return parse_lengths(text)  # "64,128,...,4096" doubles up to 4096
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_bench_layers(args: argparse.Namespace) -> int:
    import torch

    from seqlab.analysis.layer_costs import (
        attention_memory_report,
        format_layer_costs,
        measure_layer_costs,
        save_layer_costs,
    )

    if args.threads:
        torch.set_num_threads(args.threads)
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
        print(
            f"self-attention at n={report['length']}, forward + backward: fused peak "
            f"{report['fused_peak_bytes'] / 2**20:.1f} MiB, explicit {report['explicit_peak_bytes'] / 2**20:.1f} MiB, "
            f"one n×n matrix per head {report['matrix_bytes'] / 2**20:.1f} MiB"
        )
    return 0


def cmd_demo_kernel_regression(args: argparse.Namespace) -> int:
    from seqlab.demos.kernel_regression import kernel_regression_demo

    kernel_regression_demo(args.out, seed=args.seed)
    return 0


def cmd_demo_dates(args: argparse.Namespace) -> int:
    from seqlab.demos.dates import run_dates_demo

    results = run_dates_demo(args.out, threads=args.threads)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


# -------------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seqlab", description="Sequence models from RNNs to the Transformer."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = sub.add_parser("data", help="list, fetch and describe datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    p = data_sub.add_parser("list", help="known datasets and where their files are")
    p.set_defaults(func=cmd_data_list)
    p = data_sub.add_parser("fetch", help="find or download a dataset (checksums verified)")
    p.add_argument("names", nargs="+", metavar="NAME", help="dataset name(s), or 'all'")
    p.set_defaults(func=cmd_data_fetch)
    p = data_sub.add_parser("stats", help="sentence/token counts, vocabulary, length percentiles")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--src", choices=["en", "de", "fr"], help="source language (multi30k)")
    p.add_argument("--tgt", choices=["en", "de", "fr"], help="target language (multi30k)")
    p.add_argument("--tokenizer", choices=["word", "char"], default="word")
    p.add_argument("--batch-tokens", type=int, help="also report padded/real tokens of batches")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_data_stats)
    p = sub.add_parser(
        "train", help="train an experiment: seqlab train CONFIG [key=value ...] --out RUN_DIR"
    )
    p.add_argument("config", nargs="?", metavar="CONFIG", help="experiment YAML (see configs/)")
    p.add_argument(
        "overrides", nargs="*", metavar="key=value", help="dotted overrides, e.g. train.lr=3e-4"
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory to create")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run exactly")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser(
        "evaluate", help="perplexity of a language model; BLEU/chrF of a translation model"
    )
    p.add_argument("--checkpoint", required=True, metavar="RUN_DIR")
    p.add_argument("--which", default="best", help="best | latest | a step number")
    p.add_argument("--split", choices=["train", "val", "test"], default="val")
    p.add_argument(
        "--beam", type=int, help="translation: beam size (default: the config's decode section)"
    )
    p.add_argument("--output", metavar="FILE", help="translation: also write the hypotheses here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "translate", help="translate lines from a file or stdin with a trained model"
    )
    p.add_argument("--checkpoint", required=True, metavar="RUN_DIR")
    p.add_argument("--which", default="best", help="best | latest | a step number")
    p.add_argument("--input", metavar="FILE", help="one sentence a line (default: stdin)")
    p.add_argument("--beam", type=int, help="beam size (default: the config's decode section)")
    p.add_argument(
        "--nbest", type=int, help="print the K best hypotheses: index, rank, score, text"
    )
    p.add_argument(
        "--attention-png", metavar="DIR", help="write one source×output heatmap per sentence"
    )
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("generate", help="continue a text prefix with a trained language model")
    p.add_argument("--checkpoint", required=True, metavar="RUN_DIR")
    p.add_argument("--which", default="best", help="best | latest | a step number")
    p.add_argument("--prefix", default="", help="text to warm up on")
    p.add_argument("--tokens", type=int, default=200, help="tokens to generate")
    p.add_argument(
        "--temperature", type=float, help="sample with this temperature (default: greedy)"
    )
    p.add_argument("--top-k", type=int, default=0, help="sample from the k most likely tokens")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_generate)
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
    p.add_argument("--seq-len", type=int, default=50)
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument(
        "--gate-bias", type=float, default=1.0, help="initial forget/update-gate bias (gated cells)"
    )
    p.add_argument(
        "--recurrent-scale",
        type=float,
        default=1.0,
        help="multiply W_h: e.g. 4 with rnn_relu explodes",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/gradients", metavar="DIR")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_diagnose_gradients)

    demo = sub.add_parser("demo", help="self-contained demonstrations (no download)")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True, metavar="DEMO")
    p = demo_sub.add_parser(
        "dates", help="train Bahdanau + Transformer to turn written dates into ISO dates"
    )
    p.add_argument("--out", default="runs/demo", metavar="DIR", help="output folder (replaced)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: PyTorch's default)")
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    p.set_defaults(func=cmd_demo_dates)
    p = demo_sub.add_parser(
        "kernel-regression", help="Nadaraya–Watson kernel regression (d2l §10.2): two plots"
    )
    p.add_argument("--out", default="runs/kernel-regression", metavar="DIR")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo_kernel_regression)

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
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--kernel-size", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads; 0 = PyTorch's default")
    p.add_argument(
        "--memory-length", type=int, default=4096, help="length of the attention memory report"
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", metavar="DIR", help="also write layer_costs.json and layer_costs.png")
    p.set_defaults(func=cmd_bench_layers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except SeqlabError as exc:
        print(f"seqlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("seqlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
