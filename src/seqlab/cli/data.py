"""``seqlab data``: list, fetch and describe datasets."""

from __future__ import annotations

import argparse
import json

from seqlab.cli.common import positive_int


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


def add_commands(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument(
        "--batch-tokens", type=positive_int, help="also report padded/real tokens of batches"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_data_stats)
