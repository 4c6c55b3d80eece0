"""``seqlab evaluate``, ``translate``, ``classify``, ``forecast``, ``generate`` and ``predict``:
trained models, from their run directory.

Each command is load → call → print: it loads the run (:func:`seqlab.load`), calls the
predictor's ``evaluate`` or ``predict`` with the options given, and prints what comes back
(:mod:`seqlab.tasks.report`). Nothing here knows a task's options: the parsers are built from
what every kind of run declares (:class:`seqlab.tasks.options.Option`), files to be written are
checked before any work by the role each option declares, and an option that the loaded run's
task does not declare is refused by one check (``--beam applies to translation runs; RUN holds a
text classification model``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import seqlab
from seqlab.cli.common import (
    STDIN,
    Parser,
    add_force,
    add_renamed_flags,
    check_writable,
    check_writable_dir,
    non_negative_float,
    non_negative_int,
    positive_int,
    read_lines,
    read_stdin_line,
    read_stdin_lines,
    writes_file,
    writes_into,
)
from seqlab.errors import SeqlabError
from seqlab.storage.outputs import check_not_input

if TYPE_CHECKING:  # the tasks are imported when a command runs, not to build the parser
    from seqlab.tasks.base import Predictor
    from seqlab.tasks.options import Option

#: one option as each kind of run declares it: (the kind, its declaration)
Declared = list[tuple[type["Predictor"], "Option"]]

#: each command: its help and description (its options come from the tasks' declarations)
COMMANDS: dict[str, dict[str, str]] = {
    "evaluate": {
        "help": "score a trained model: BLEU/chrF (translation), accuracy (classification), "
        "perplexity (language models), errors by horizon (forecasting)",
    },
    "translate": {"help": "translate lines from a file or stdin with a trained model"},
    "classify": {
        "help": "label sentences (a file or stdin), image files or recordings (WAV) with a "
        "classifier",
        "description": "Label each line of --input (or standard input, UTF-8) with the most "
        "probable class: one output line LABEL<TAB>PROBABILITY<TAB>TEXT per input line. Blank "
        "lines are skipped, with a warning naming them; lines longer than the model's "
        "data.max_len tokens are cut to it, with a warning. Runs that read files (images, "
        "recordings) take them as arguments (or one a line of --input) and print the file in "
        "place of TEXT.",
    },
    "forecast": {
        "help": "predict the next values of a series (CSV or the run's own) k steps on",
    },
    "predict": {
        "help": "use a trained run of a task that has no command of its own (a task registered "
        "from outside seqlab)",
        "description": "Run the model on the INPUTS given as arguments, else on each line of "
        "--input (or standard input), and print its outputs.",
    },
    "generate": {
        "help": "continue a text prefix with a trained language model",
        "description": "Continue --prefix by --tokens tokens. The reserved tokens (<unk>, <pad>, "
        "<bos>, <eos>) are never generated.",
    },
}

#: argument types of the declared value types
TYPES: dict[str, Callable[[str], Any] | None] = {
    "str": None,
    "int": int,
    "positive_int": positive_int,
    "non_negative_int": non_negative_int,
    "non_negative_float": non_negative_float,
}
#: the roles whose values are keyword arguments of ``evaluate`` / ``predict``
CALLED = ("option", "output", "figure", "figure_dir")


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


# ------------------------------------------------------------------------ load, check, call
def declared(command: str) -> dict[str, Declared]:
    """Every option of ``command`` by flag: the (kind of run, declaration) pairs."""
    from seqlab.tasks import declarations  # deferred: torch (the tasks)

    merged: dict[str, Declared] = {}
    for kind, option in declarations(command):
        merged.setdefault(option.flag, []).append((kind, option))
    return merged


def load_run(args: argparse.Namespace) -> tuple[Predictor, dict[str, Any]]:
    """Load ``--run`` and refuse what its kind of run does not offer: the command, and
    any option given that its task does not declare for the command; then the task's own checks
    of the options (:meth:`seqlab.tasks.base.Predictor.check`), which give the keyword
    arguments of the command's method, validated once."""
    from seqlab.tasks import predictors  # deferred: torch (the tasks)
    from seqlab.tasks.options import undeclared  # deferred: torch (the tasks)

    command = args.command
    options = declared(command)
    values = {o.dest: _value(args, entries) for entries in options.values() for _, o in entries}
    for kind in {k: None for e in options.values() for k, o in e if o.given(_value(args, e))}:
        kind.before_load(command, values)  # before PyTorch's first work: a layout of the cores
    model = seqlab.load(args.run, args.which, args.precision, args.device)
    holds = f"{model.kind} model (model.arch={model.cfg.model.arch})"
    if command not in model.commands:
        tasks = {k.task.replace("_", " "): None for k in predictors() if command in k.commands}
        use = " or ".join(f"`seqlab {c}`" for c in model.commands)
        needs = f"a {' or '.join(tasks)} run" if tasks else "a run of a task with no command"
        raise SeqlabError(
            f"`seqlab {command}` needs {needs}, but {args.run} holds "
            f"{_article(model.kind)} {holds}; use {use}"
        )
    given = [
        entries[0][1] for entries in options.values() if entries[0][1].given(_value(args, entries))
    ]
    where = {flag: [kind.kind for kind, _ in entries] for flag, entries in options.items()}
    refused = undeclared(given, model.options_for(command), where)
    if refused:
        usage = model.usage.get(command)
        raise SeqlabError(
            f"{refused}; {args.run} holds {_article(model.kind)} {holds}"
            + (f": {usage}" if usage else "")
        )
    mine = {o.dest: getattr(args, o.attr) for o in model.options_for(command)}
    model = model.for_command(
        command, mine, lambda run: seqlab.load(run, args.which, args.precision, args.device)
    )
    called = call_options(args, model)
    checked = model.check(command, called)
    return model, called if checked is None else checked  # a check that returns nothing: as given


def _value(args: argparse.Namespace, entries: Declared) -> Any:
    return getattr(args, entries[0][1].attr)


def call_options(args: argparse.Namespace, model: Predictor) -> dict[str, Any]:
    """The keyword arguments of the loaded run's method for this command: every option its task
    declares that is passed on (given or at its default)."""
    return {
        o.dest: getattr(args, o.attr) for o in model.options_for(args.command) if o.role in CALLED
    }


def evaluated_files(args: argparse.Namespace, model: Predictor) -> dict[str, str]:
    """The files given to ``evaluate`` (``{"src": FILE, "ref": FILE}``)."""
    return {
        o.dest: getattr(args, o.attr)
        for o in model.options_for("evaluate")
        if o.role == "file" and o.given(getattr(args, o.attr))
    }


def run_command(args: argparse.Namespace) -> int:
    """Run ``args.command`` once every file or folder it may write is checked, before any work;
    files and folders of figures are held to the rule of :mod:`seqlab.storage.outputs`
    (:func:`writes_file`, :func:`writes_into`)."""
    func = RUNS[args.command]
    inputs = _inputs(args)
    for entries in declared(args.command).values():
        option, value = entries[0][1], _value(args, entries)
        if value and option.role in ("output", "figure"):
            check_writable(value, option.flag)
            check_not_input(value, inputs, option.flag)
            func = writes_file(option.attr, func, option.flag)
        elif value and option.role == "figure_dir":
            check_writable_dir(value, option.flag)
            func = writes_into(option.attr, func)
    return func(args)


def _inputs(args: argparse.Namespace) -> dict[str, str]:
    """The files the command reads, by option: ``--input``, the files ``evaluate`` scores
    (``--src``, ``--ref``, ...) and the file arguments (images)."""
    found = {}
    for entries in declared(args.command).values():
        option, value = entries[0][1], _value(args, entries)
        if option.flag == "--input" or option.role == "file":
            if isinstance(value, str) and value:
                found[option.flag] = value
        elif option.positional and value:
            found.update({f"(file argument {i})": str(v) for i, v in enumerate(value, 1)})
    return found


def print_figures(args: argparse.Namespace, model: Predictor, figures: list[Path]) -> None:
    """Where the figures of a prediction went (standard error: the output is on stdout)."""
    for o in model.options_for(args.command):
        value = getattr(args, o.attr)
        if o.role == "figure_dir" and value:
            print(f"{o.figure}: {len(figures)} PNG file(s) in {value}/", file=sys.stderr)
        elif o.role == "figure" and value:
            print(f"{o.figure}: {value}", file=sys.stderr)


# ------------------------------------------------------------------------------ commands
def cmd_evaluate(args: argparse.Namespace) -> int:
    model, options = load_run(args)
    report = model.evaluate(args.split, evaluated_files(args, model), **options)
    print(json.dumps(report.to_json(), ensure_ascii=False) if args.json else report.format())
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    """Each line of ``--input`` or standard input, typed lines answered one by one."""
    lines = read_lines(args.input) if args.input else None  # checked before loading the model
    model, options = load_run(args)
    figures: list[Path] = []

    def run(batch: list[str], first: int) -> None:
        out = model.predict(batch, numbers=range(first, first + len(batch)), **options)
        for line in out.lines():
            print(line, flush=True)
        figures.extend(out.figures)

    if lines is not None:
        run(lines, 1)
    elif sys.stdin.isatty():
        print("seqlab translate: type a sentence and press Enter (Ctrl-D to quit)", file=sys.stderr)
        for number in itertools.count(1):
            print("> ", end="", file=sys.stderr, flush=True)
            line = read_stdin_line(number)
            if line is None:
                break
            run([line], number)
    else:
        batch = read_stdin_lines()
        if batch:
            run(batch, 1)
    print_figures(args, model, figures)
    return 0


def cmd_classify(args: argparse.Namespace) -> int:
    """Label each input line, or each file argument of a run that reads files (images)."""
    lines = read_lines(args.input) if args.input else None
    model, options = load_run(args)
    takes_files = any(o.positional for o in model.options_for("classify"))
    if takes_files:
        items: list[str] = list(args.files) or lines or []
        if not items:
            raise SeqlabError(model.usage["classify"])
    else:
        items = lines if lines is not None else read_stdin_lines()
    numbers = list(range(1, len(items) + 1))  # input line of each item
    if not args.files:
        blank = [n for n, item in zip(numbers, items, strict=True) if not item.strip()]
        if blank:
            shown = ", ".join(map(str, blank[:10])) + (", ..." if len(blank) > 10 else "")
            warnings.warn(
                f"skipped {len(blank)} blank line(s) of {args.input or STDIN} "
                f"(line{'s' if len(blank) > 1 else ''} {shown}): "
                "a blank line has nothing to classify",
                stacklevel=2,
            )
            kept = [(n, item) for n, item in zip(numbers, items, strict=True) if item.strip()]
            numbers, items = [n for n, _ in kept], [item for _, item in kept]
    out = model.predict(items, numbers=numbers, **options)
    for note in out.notes:
        print(f"seqlab: note: {note}", file=sys.stderr)
    for line in out.lines():
        print(line)
    print_figures(args, model, out.figures)
    return 0


def cmd_forecast(args: argparse.Namespace) -> int:
    """The next ``--horizon`` values after a series (a CSV, or the run's own), each fed back."""
    model, options = load_run(args)
    out = model.predict(args.input, **options)
    print_figures(args, model, out.figures)
    print(json.dumps(out.to_json(), ensure_ascii=False) if args.json else out.format())
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    model, options = load_run(args)
    print(model.predict(args.prefix, **options).format())
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """The run's ``predict`` on the arguments, or on the lines of ``--input`` or stdin."""
    lines = read_lines(args.input) if args.input else None
    model, options = load_run(args)
    items = list(args.inputs) or (lines if lines is not None else read_stdin_lines())
    if not items:
        raise SeqlabError("give inputs: as arguments, with --input FILE, or on standard input")
    out = model.predict(items, **options)
    print(json.dumps(out.to_json(), ensure_ascii=False) if args.json else out.format())
    print_figures(args, model, out.figures)
    return 0


RUNS = {
    "evaluate": cmd_evaluate,
    "predict": cmd_predict,
    "translate": cmd_translate,
    "classify": cmd_classify,
    "forecast": cmd_forecast,
    "generate": cmd_generate,
}


# -------------------------------------------------------------------------------- parser
def _help(command: str, entries: Declared) -> str:
    """One option's help: as declared when every kind of run of ``command`` declares it alike,
    else each help after the runs it is for (``translation: …; classification: …``: a task's
    name when all its kinds declare it alike)."""
    from seqlab.tasks import predictors  # deferred: torch (the tasks)

    kinds = [k for k in predictors() if command in k.commands]
    helps = {o.help for _, o in entries}
    if len(helps) == 1 and len(entries) == len(kinds):
        return entries[0][1].help
    by_help: dict[str, list[type[Predictor]]] = {}
    for kind, o in entries:
        by_help.setdefault(o.help, []).append(kind)
    parts = []
    for text, group in by_help.items():
        tasks = {k.task for k in group}
        whole = len(tasks) == 1 and set(group) == {k for k in kinds if k.task in tasks}
        names = [group[0].task.replace("_", " ")] if whole else [k.kind for k in group]
        parts.append(f"{', '.join(names)}: {text}")
    return "; ".join(parts)


def add_declared(p: argparse.ArgumentParser, command: str) -> None:
    """The options of ``command``, as the tasks declare them (``--json`` last), and
    ``--force`` if one of them writes a file (:func:`seqlab.cli.common.add_force`)."""
    entries = declared(command)
    if any(o.role in ("output", "figure") for group in entries.values() for _, o in group):
        add_force(p)
    flags = sorted(entries, key=lambda f: f == "--json")
    for flag in flags:
        option = entries[flag][0][1]
        for _, other in entries[flag][1:]:
            same = (other.type, other.role, other.choices, other.default)
            if same != (option.type, option.role, option.choices, option.default):
                raise AssertionError(f"{flag} of `seqlab {command}` is declared two ways")
        help_text = _help(command, entries[flag])
        if option.positional:
            p.add_argument(flag, nargs="*", help=help_text)
        elif option.type == "flag":
            p.add_argument(flag, action="store_true", dest=option.attr, help=help_text)
        elif option.type == "paths":  # one or more
            p.add_argument(
                flag, nargs="+", metavar=option.metavar, dest=option.attr, help=help_text
            )
        else:
            p.add_argument(
                flag,
                type=option.convert or TYPES[option.type],
                choices=list(option.choices) or None,
                default=option.default,
                metavar=option.metavar,
                required=option.required,
                dest=option.attr,
                help=help_text,
            )


class DeclaredParser(Parser):
    """A command's parser that adds the tasks' options when it is first used (parsing or help):
    the tasks, and PyTorch with them, are imported by the commands that need them only, not by
    ``seqlab --help`` or ``seqlab data list``."""

    def __init__(self, command: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.command, self.declared = command, False

    def _declare(self) -> None:
        if not self.declared:
            self.declared = True
            add_declared(self, self.command)
            add_renamed_flags(self, self.command)  # the old names of its flags, hidden

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._declare()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._declare()
        return super().format_help()


def add_commands(sub: argparse._SubParsersAction) -> None:
    for command, texts in COMMANDS.items():
        listed = sub.add_parser(command, **texts)  # its line in `seqlab --help`
        p = DeclaredParser(command, prog=listed.prog, description=texts.get("description"))
        sub.choices[command] = p  # parsed by the declaring parser
        p.add_argument("--run", required=True, metavar="RUN_DIR", help="a trained run's directory")
        p.add_argument("--which", default="best", help="best | latest | a step number")
        p.add_argument(
            "--precision",
            choices=["fp32", "bf16"],
            help="inference precision (default: the run's decode.precision, fp32 unless set): "
            "bf16 is faster where the CPU has native bf16, and its outputs agree with fp32 up "
            "to near-tied tokens",
        )
        p.add_argument(
            "--device",
            default="auto",
            metavar="DEVICE",
            help="where the model computes: auto (a CUDA GPU when present, else the CPU), cpu, "
            "cuda or cuda:N; any run loads on any device",
        )
        if command == "predict":  # the generic command: its inputs are its own
            p.add_argument("inputs", nargs="*", metavar="INPUT", help="inputs to run the model on")
            p.add_argument("--input", metavar="FILE", help="a file of inputs, one per line")
            p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=run_command)  # its declared options come on first use
