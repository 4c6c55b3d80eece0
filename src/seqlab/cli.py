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
    from seqlab import distributed

    if distributed.is_main():
        print(json.dumps(summary))
        print(f"run directory: {out} (metrics.jsonl, curves.png, checkpoints/)", file=sys.stderr)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from seqlab.experiment import load_run
    from seqlab.language_modeling import evaluate_lm

    cfg, model, exp, path = load_run(args.checkpoint, args.which)
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


def cmd_generate(args: argparse.Namespace) -> int:
    from seqlab.experiment import load_run
    from seqlab.language_modeling import generate_text

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

    p = sub.add_parser("evaluate", help="loss and perplexity of a trained language model")
    p.add_argument("--checkpoint", required=True, metavar="RUN_DIR")
    p.add_argument("--which", default="best", help="best | latest | a step number")
    p.add_argument("--split", choices=["train", "val"], default="val")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)

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
