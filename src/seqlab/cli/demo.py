"""``seqlab demo``: the self-contained demonstrations (no download), one command per record of
:data:`seqlab.demos.DEMOS` (:data:`DEMO_COMMANDS`: the options each adds and the function it
calls); ``seqlab demo --list`` lists them with their sources."""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from pathlib import Path

from seqlab.analysis.summary import files_line, numbers_line
from seqlab.atomic import atomic_write_json
from seqlab.cli.common import (
    OUT_HELP,
    check_writable_dir,
    non_negative_int,
    positive_float,
    positive_int,
    seed_int,
    writes_into,
)
from seqlab.demos import DEMOS
from seqlab.deprecation import SeqlabDeprecationWarning
from seqlab.errors import SeqlabError


def cmd_demo_kernel_regression(args: argparse.Namespace) -> int:
    from seqlab.demos.kernel_regression import kernel_regression_demo  # deferred: torch

    check_writable_dir(args.out, "--out")
    kernel_regression_demo(args.out, seed=args.seed)
    return 0


def cmd_demo_dates(args: argparse.Namespace) -> int:
    from seqlab.demos.dates import run_dates_demo  # deferred: torch

    check_writable_dir(args.out, "--out")
    results = run_dates_demo(args.out, threads=args.threads)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def cmd_demo_forecasting(args: argparse.Namespace) -> int:
    from seqlab.demos.forecasting import run_forecasting_demo  # deferred: torch

    check_writable_dir(args.out, "--out")
    run_forecasting_demo(args.out, threads=args.threads)
    return 0


def _demo_json(out: str, name: str, result: dict, precision: str) -> None:
    """Write ``OUT/NAME.json`` (the full-precision numbers, with the machine and ``precision``
    they came from), then print that machine and where the files are."""
    from seqlab.runtime.machine import machine  # deferred: torch

    result["machine"] = machine(precision)
    atomic_write_json(Path(out) / f"{name}.json", result)
    print(numbers_line(precision, result["machine"]))
    print(files_line(result.get("figures", []), Path(out) / f"{name}.json"))


def cmd_demo_positional_encoding(args: argparse.Namespace) -> int:
    from seqlab.analysis.positional import run_positional_demo, summary  # deferred: torch

    check_writable_dir(args.out, "--out")
    result = run_positional_demo(args.out, args.max_len, args.d_model)
    print("\n".join(summary(result)))
    _demo_json(args.out, "positional_encoding", result, "fp32 table, float64 cosines")
    return 0


def cmd_demo_attention_scaling(args: argparse.Namespace) -> int:
    from seqlab.analysis.attention_scaling import run_scaling_demo, summary  # deferred: torch

    check_writable_dir(args.out, "--out")
    result = run_scaling_demo(args.out)
    print("\n".join(summary(result)))
    _demo_json(args.out, "attention_scaling", result, "float64")
    return 0


def cmd_demo_self_attention(args: argparse.Namespace) -> int:
    from seqlab.analysis.self_attention_example import worked_example  # deferred: torch

    check_writable_dir(args.out, "--out")
    _demo_json(args.out, "self_attention_example", worked_example(seed=args.seed), "fp32")
    return 0


def cmd_demo_lm(args: argparse.Namespace) -> int:
    from seqlab.demos import lm_comparisons  # deferred: torch

    check_writable_dir(args.out, "--out")
    run = {
        "positions": lm_comparisons.positions_demo,
        "norm-placement": lm_comparisons.norm_demo,
        "training-choices": lm_comparisons.training_choices_demo,
    }[args.demo_command]
    summarize = {
        "positions": lm_comparisons.positions_summary,
        "norm-placement": lm_comparisons.norm_summary,
        "training-choices": lm_comparisons.choices_summary,
    }[args.demo_command]
    kwargs = {"threads": args.threads} | ({"steps": args.steps} if args.steps else {})
    result = run(args.out, **kwargs)
    print("\n".join(summarize(result)))
    print(numbers_line(result["precision"], result["machine"]))
    json_name = args.demo_command.replace("-", "_")
    print(files_line(result["figures"], Path(args.out) / f"{json_name}.json"))
    return 0


def cmd_demo_layer_paths(args: argparse.Namespace) -> int:
    from seqlab.analysis.layer_paths import run_layer_paths_demo, summary  # deferred: torch

    check_writable_dir(args.out, "--out")
    result = run_layer_paths_demo(args.out)
    print("\n".join(summary(result)))
    _demo_json(args.out, "layer_paths", result, "fp32 (counts of operations: any CPU alike)")
    return 0


def cmd_demo_list(args: argparse.Namespace) -> int:
    if not args.list:
        raise SeqlabError("name a demo (seqlab demo --list shows them)")
    width = max(map(len, DEMOS))
    source_width = max(len(demo.source) for demo in DEMOS.values())
    print(f"{'demo':{width}s}  {'source':{source_width}s}  section → what it shows")
    for name, demo in DEMOS.items():
        print(f"{name:{width}s}  {demo.source:{source_width}s}  {demo.section} → {demo.shows}")
    return 0


def cmd_demo_vit_vs_cnn(args: argparse.Namespace) -> int:
    from seqlab.demos.vit_vs_cnn import run_vit_vs_cnn, summary  # deferred: torch

    if args.min_steps is not None:  # the old name: it never was a minimum of steps taken
        warnings.warn(
            "--min-steps is renamed --min-step-budget: the time budget (--max-minutes) can stop "
            "a run before it",
            SeqlabDeprecationWarning,
            stacklevel=2,
        )
        args.min_step_budget = args.min_steps
    check_writable_dir(args.out, "--out")
    results = run_vit_vs_cnn(
        args.out, tuple(args.sizes), args.min_step_budget, args.max_minutes, args.threads
    )
    print("\n".join(summary(results)))
    print(numbers_line(results["precision"], results["machine"]))
    print(files_line([Path(args.out) / "vit_vs_cnn.png"], Path(args.out) / "vit_vs_cnn.json"))
    return 0


def cmd_demo_spoken_digits(args: argparse.Namespace) -> int:
    from seqlab.demos.spoken_digits import run_spoken_digits, summary  # deferred: torch

    check_writable_dir(args.out, "--out")
    results = run_spoken_digits(args.out, args.epochs, args.max_minutes, args.threads, args.seed)
    print("\n".join(summary(results)))
    print(numbers_line(results["precision"], results["machine"]))
    out = Path(args.out)
    figures = [out / name for name in ("pipeline.png", "attention.png", "confusion.png")]
    print(files_line(figures, out / "spoken_digits.json"))
    return 0


def cmd_demo_length_extrapolation(args: argparse.Namespace) -> int:
    from seqlab.demos import length_extrapolation as demo  # deferred: torch

    check_writable_dir(args.out, "--out")
    known = [name for name, _, _ in demo.VARIANTS]
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in known]
    if unknown or not variants:
        raise SeqlabError(
            f"--variants: unknown {', '.join(unknown) or 'nothing'}; choose from {', '.join(known)}"
        )
    result = demo.length_extrapolation_demo(
        args.out,
        steps=args.steps,
        seeds=tuple(range(1, args.seeds + 1)),
        eval_chars=args.eval_chars,
        variants=variants,
        threads=args.threads,
    )
    print("\n".join(demo.summary(result)))
    print(numbers_line(result["precision"], result["machine"]))
    print(files_line(result["figures"], Path(args.out) / "length_extrapolation.json"))
    return 0


def _length_extrapolation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--steps", type=positive_int, default=1500, help="optimizer steps per model (default 1500)"
    )
    p.add_argument(
        "--seeds", type=positive_int, default=3, help="seeds 1..N per variant (default 3)"
    )
    p.add_argument(
        "--variants",
        default="sinusoidal,learned,rope,alibi,t5_bias,none,linear",
        help="comma-separated variants to train (default all seven)",
    )
    p.add_argument(
        "--eval-chars",
        type=positive_int,
        default=16384,
        help="validation characters scored at each length (default 16384)",
    )
    _threads(p)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not sizes or min(sizes) < 1 or max(sizes) > 55000:
        raise argparse.ArgumentTypeError(
            "sizes must be between 1 and 55000 (60,000 - 5,000 held out)"
        )
    return sizes


# -------------------------------------------------------------------------------------- demos
def _no_options(p: argparse.ArgumentParser) -> None:
    pass


def _seed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=seed_int, default=0, help="random seed, 0 to 2**32 - 1")


def _threads(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads", type=non_negative_int, default=0, help="torch threads (0: PyTorch's default)"
    )


def _int_in(low: int, high: int, even: bool = False) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high`` (even, if asked)."""

    def parse(text: str) -> int:
        value = non_negative_int(text)
        if not low <= value <= high or (even and value % 2):
            kind = "an even number" if even else "a number"
            raise argparse.ArgumentTypeError(f"must be {kind} from {low} to {high}, got {value}")
        return value

    return parse


def _positional_options(p: argparse.ArgumentParser) -> None:
    # the figures show offsets up to 30 and columns 6-9; the rotation needs an even width; the
    # L × L cosine heatmap stays drawable
    p.add_argument(
        "--max-len", type=_int_in(31, 2000), default=60, help="positions, 31 to 2000 (default 60)"
    )
    p.add_argument(
        "--d-model",
        type=_int_in(10, 2048, even=True),
        default=32,
        help="encoding width, an even number from 10 to 2048 (default 32)",
    )


def _lm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=positive_int, help="optimizer steps per model")
    _threads(p)


def _dates_options(p: argparse.ArgumentParser) -> None:
    _threads(p)
    p.add_argument("--json", action="store_true", help="also print the results as JSON")


def _vit_vs_cnn_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sizes",
        type=_sizes,
        default="500,2000,10000,55000",
        metavar="N,N,...",
        help="training-set sizes",
    )
    p.add_argument(
        "--min-step-budget",
        type=positive_int,
        default=600,
        metavar="STEPS",
        help="each run's step budget is at least this (small training sets get more epochs); "
        "the time budget can stop a run before it, and the summary says so (default 600)",
    )
    p.add_argument("--min-steps", type=positive_int, help=argparse.SUPPRESS)  # the old name
    p.add_argument(
        "--max-minutes",
        type=positive_float,
        help="time budget of each run (default: the config's train.max_minutes)",
    )
    _threads(p)


def _spoken_digits_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--epochs", type=positive_int, default=12, help="training epochs (default 12)")
    p.add_argument(
        "--max-minutes",
        type=positive_float,
        default=1.5,
        help="time budget of the training run (default 1.5)",
    )
    _seed(p)
    _threads(p)


Options = Callable[[argparse.ArgumentParser], None]
#: how the command line runs each demo of :data:`seqlab.demos.DEMOS` (whose record gives its
#: name, help and output folder): the options it adds besides ``--out``, and its command
DEMO_COMMANDS: dict[str, tuple[Options, Callable[[argparse.Namespace], int]]] = {
    "dates": (_dates_options, cmd_demo_dates),
    "kernel-regression": (_seed, cmd_demo_kernel_regression),
    "forecasting": (_threads, cmd_demo_forecasting),
    "positional-encoding": (_positional_options, cmd_demo_positional_encoding),
    "attention-scaling": (_no_options, cmd_demo_attention_scaling),
    "self-attention-example": (_seed, cmd_demo_self_attention),
    "positions": (_lm_options, cmd_demo_lm),
    "norm-placement": (_lm_options, cmd_demo_lm),
    "training-choices": (_lm_options, cmd_demo_lm),
    "layer-paths": (_no_options, cmd_demo_layer_paths),
    "length-extrapolation": (_length_extrapolation_options, cmd_demo_length_extrapolation),
    "vit-vs-cnn": (_vit_vs_cnn_options, cmd_demo_vit_vs_cnn),
    "spoken-digits": (_spoken_digits_options, cmd_demo_spoken_digits),
}


def add_commands(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="self-contained demonstrations (no download)")
    demo.add_argument(
        "--list", action="store_true", help="list the demos with the source and section of each"
    )
    demo.set_defaults(func=cmd_demo_list)
    demo_sub = demo.add_subparsers(dest="demo_command", metavar="DEMO")
    if set(DEMOS) != set(DEMO_COMMANDS):  # a demo without a command, or a command without a record
        raise AssertionError(
            f"seqlab.demos.DEMOS and seqlab.cli.demo.DEMO_COMMANDS differ: "
            f"{sorted(set(DEMOS) ^ set(DEMO_COMMANDS))}"
        )
    for name, record in DEMOS.items():
        add_options, command = DEMO_COMMANDS[name]
        p = demo_sub.add_parser(name, help=f"{record.shows} ({record.source})")
        p.add_argument("--out", default=record.out or f"runs/{name}", metavar="DIR", help=OUT_HELP)
        add_options(p)
        p.set_defaults(func=writes_into("out", command))
