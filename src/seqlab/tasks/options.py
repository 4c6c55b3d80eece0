"""The command-line options a task offers, declared once next to its predictor.

Each :class:`~seqlab.tasks.base.Predictor` lists its options (:class:`Option`): the flag, its
help, the ``seqlab`` commands it belongs to, the type of its value and its role. The commands that
use trained runs (:mod:`seqlab.cli.infer`) build their parsers from the declarations of every task,
and an option that the loaded run's task does not declare is refused by one check, which names
the runs it applies to (:func:`undeclared`). Each option reaches the task's method as the keyword
argument :attr:`Option.dest`, so the method's signature and the declaration stay one list.

Roles:

- ``option``: a keyword argument of the command's method (``--beam`` → ``beam=``);
- ``cli``: read by the command line itself (the inputs, ``--json``), never passed on;
- ``file``: a file scored by ``evaluate`` (``--src``, ``--ref``): an entry of its ``files``;
- ``output``: a file written (``--output``), checked before any work;
- ``figure`` / ``figure_dir``: a PNG file / a directory of PNG files, checked before any work;
  ``figure`` names what is drawn (printed with the path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

#: what a value is read as (the command line maps each to its argument type)
ValueType = Literal[
    "str", "int", "positive_int", "non_negative_int", "non_negative_float", "flag", "paths"
]
Role = Literal["option", "cli", "file", "output", "figure", "figure_dir"]


@dataclass(frozen=True)
class Option:
    """One command-line option of a task (see the module docstring).

    Attributes:
        flag: ``--beam``; a name without dashes (``files``) is a positional list of arguments.
        help: the help text.
        commands: the ``seqlab`` commands that take it.
        type: how the value is read.
        role: where the value goes.
        choices: the values allowed (empty: any).
        default: the value when the option is not given.
        metavar: the value's name in the help.
        required: whether the command needs it.
        dest: the keyword argument it becomes (default: the flag, ``-`` → ``_``).
        figure: for figures, what is drawn (``confusion matrix``).
    """

    flag: str
    help: str
    commands: tuple[str, ...]
    type: ValueType = "str"
    role: Role = "option"
    choices: tuple[str, ...] = ()
    default: Any = None
    metavar: str | None = None
    required: bool = False
    dest: str = ""
    figure: str = ""

    def __post_init__(self) -> None:
        if not self.dest:
            object.__setattr__(self, "dest", self.flag.lstrip("-").replace("-", "_"))

    @property
    def attr(self) -> str:
        """Where the command line keeps the value (``--png`` → ``args.png``): one place per flag,
        whichever keyword argument each task's method names it (``evaluate --png`` is ``plot=`` of
        a forecaster, ``confusion_png=`` of a classifier)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def positional(self) -> bool:
        return not self.flag.startswith("-")

    @property
    def name(self) -> str:
        """How messages name it."""
        return f"{self.flag} (arguments)" if self.positional else self.flag

    def given(self, value: Any) -> bool:
        """Whether ``value`` (the parsed one) was asked for, rather than left at the default."""
        if self.positional or self.type == "flag":
            return bool(value)
        return value is not None and value != self.default


#: options every task takes, with the same meaning (the checkpoint options are the CLI's own)
COMMON = (
    Option(
        "--split",
        "a split of the run's dataset (default: val; classifiers: the dataset's evaluation "
        "split; forecasters: test)",
        ("evaluate",),
        role="cli",
        choices=("train", "val", "dev", "test"),
    ),
    Option("--json", "print JSON", ("evaluate",), type="flag", role="cli"),
)


def given_options(
    options: Iterable[Option], values: Mapping[str, Any], roles: Iterable[str]
) -> dict[str, Any]:
    """``{dest: value}`` of the ``options`` with one of ``roles`` that were given in
    ``values`` (keyed by dest)."""
    wanted = set(roles)
    return {
        o.dest: values[o.dest]
        for o in options
        if o.role in wanted and o.dest in values and o.given(values[o.dest])
    }


def applies_to(flag: str, kinds: list[str]) -> str:
    """``--beam applies to translation runs`` (what :func:`undeclared` says of one option)."""
    names = " and ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)
    return f"{flag} to {names} runs"


def undeclared(
    given: Iterable[Option], declared: Iterable[Option], where: Mapping[str, list[str]]
) -> str | None:
    """The message refusing the options of ``given`` that are not ``declared`` by the loaded
    run's task, or None when every one is: ``--beam applies to translation runs``, one clause
    per option (``where``: flag -> the kinds of run that declare it)."""
    known = {o.flag for o in declared}
    bad = [o for o in given if o.flag not in known]
    if not bad:
        return None
    first, *rest = bad
    clauses = [applies_to(f"{first.name} applies", where.get(first.flag, []))]
    clauses += [applies_to(o.name, where.get(o.flag, [])) for o in rest]
    return ", ".join(clauses)
