"""``seqlab train``: a new run from a config, or ``--resume`` an interrupted one."""

from __future__ import annotations

import argparse
import json
import sys

from seqlab.config import load_config
from seqlab.errors import ConfigError


def cmd_train(args: argparse.Namespace) -> int:
    from seqlab.experiment import train  # deferred: torch
    from seqlab.training import distributed  # deferred: torch

    if args.resume:
        if args.config and args.config.endswith((".yaml", ".yml")):
            raise ConfigError(
                "with --resume the run's own config.yaml is used; drop CONFIG (overrides are allowed)"
            )
        if args.out:
            raise ConfigError("--resume continues the run in place; drop --out")
        overrides = ([args.config] if args.config else []) + args.overrides
        summary = train(None, args.resume, resume=True, overrides=overrides)
        out = args.resume
    else:
        if not args.config or not args.out:
            raise ConfigError(
                "usage: seqlab train CONFIG [key=value ...] --out RUN_DIR  (or --resume RUN_DIR)"
            )
        cfg = load_config(args.config, args.overrides)
        summary = train(cfg, args.out)
        out = args.out
    if distributed.is_main():
        print(json.dumps(summary))
        print(f"run directory: {out} (metrics.jsonl, curves.png, checkpoints/)", file=sys.stderr)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train an experiment: seqlab train CONFIG [key=value ...] --out RUN_DIR"
    )
    p.add_argument("config", nargs="?", metavar="CONFIG", help="experiment YAML (see configs/)")
    p.add_argument(
        "overrides", nargs="*", metavar="key=value", help="dotted overrides, e.g. train.lr=3e-4"
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory to create")
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue an interrupted run exactly (budgets, train.lr and decode.* may change)",
    )
    p.set_defaults(func=cmd_train)
