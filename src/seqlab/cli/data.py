"""``seqlab data``: list, fetch and describe datasets."""

from __future__ import annotations

import argparse
import json

from seqlab import catalog
from seqlab.cli.common import add_force, add_renamed_flags, positive_int, writes_file
from seqlab.data import registry
from seqlab.errors import SeqlabError
from seqlab.storage.outputs import FILE_RULE


def cmd_data_list(args: argparse.Namespace) -> int:
    """Every dataset a config can name (:func:`seqlab.catalog.datasets`), by task: what it is,
    and for those with files to fetch (the record's ``files``, found by
    :mod:`seqlab.data.registry`), where each file was found."""
    records = sorted(catalog.datasets().values(), key=lambda d: (d.task, d.name))
    for record in records:
        task = record.task.replace("_", " ")
        print(f"{record.name:20s} {task:18s} {record.summary}")
        if record.folder:
            print(f"{'':20s} a folder: seqlab data fetch {record.name}; licence: {record.licence}")
            continue
        if not record.files:
            where = "your file, data.path" if record.needs_path else "nothing to fetch"
            print(f"{'':20s} {where}")
            continue
        found = registry.status(record.name)
        have = sum(p is not None for _, p in found)
        print(f"{'':20s} {have}/{len(found)} files local; licence: {record.licence}")
        for name, path in found:
            print(f"{'':22s}{name:28s} {path if path else 'missing'}")
    return 0


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from seqlab.data import readers  # deferred: torch (the readers)

    names = list(registry.downloadable()) if args.names == ["all"] else args.names
    for name in names:
        record = catalog.datasets().get(name)
        if record is not None and not record.files and not record.folder:
            what = "reads your file (data.path)" if record.needs_path else "has no files"
            print(f"{name}: {what}; nothing to fetch")
            continue
        for path in readers.fetch(name):
            print(f"{name}: {path}")
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    from seqlab.data.stats import (  # deferred: torch, numpy
        LM_FILES,
        dataset_stats,
        format_stats,
        zipf_stats,
    )

    if args.png:
        if args.name not in LM_FILES:
            raise SeqlabError(
                f"--png draws word-frequency (Zipf) curves of a single text: "
                f"{', '.join(LM_FILES)}; not {args.name}"
            )
        zipf = zipf_stats(args.name, args.png)  # checked before (writes_file)
        if args.json:
            print(json.dumps(zipf, indent=2))
            return 0
        print(f"{args.name}: {zipf['words']} words (letters only, lower case)")
        for label, z in zipf["zipf"].items():
            print(
                f"  {label:8s} {z['distinct']:>8,} distinct, log-log slope (ranks 10-1000) "
                f"{z['slope_10_1000']:.2f}"
            )
        print(f"  plot: {args.png}")
        return 0
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
    p.add_argument(
        "--png",
        metavar="FILE",
        help=f"language-model texts: word n-gram frequency vs rank (Zipf), drawn into {FILE_RULE}",
    )
    add_renamed_flags(p, "data stats")
    add_force(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=writes_file("png", cmd_data_stats))
