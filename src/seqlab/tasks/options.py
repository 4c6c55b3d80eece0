"""The command-line options a task offers, declared once next to its predictor.

Each :class:`~seqlab.tasks.base.Predictor` lists its options (:class:`Option`): the flag, its
help, the ``seqlab`` commands it belongs to, the type of its value and its role. The commands that
use trained runs (:mod:`seqlab.cli.infer`) build their parsers from the declarations of every task,
and an option that the loaded run's task does not declare is refused by one check, which names
the runs it applies to (:func:`undeclared`). Each option reaches the task's method as the keyword
argument :attr:`Option.dest`, so the method's signature and the declaration stay one list.

**Options models.** A command's options that every surface takes (translation's ``beam``,
``nbest``, ``length_penalty``) are one frozen pydantic model (a :class:`CommandOptions`) next to
the predictor, declared once: the command line's flags (:meth:`CommandOptions.declarations`,
after fairseq's ``gen_parser_from_dataclass``: flag, type, help, bounds checked by the argument
type, choices from a ``Literal``), the server's request body (which inherits the model, so the
OpenAPI schema shows each field with its description and bounds), the reference pages (made from
the parsers and the schema), the predictor's keyword arguments (:meth:`CommandOptions.of`) and
the server's batches (a frozen model is hashable: requests with equal options decode together)
all come from its fields. Values are validated once, where they enter (the argument parser, the
request's parse, the Python method's call), and the model is handed down as it is.

Roles:

- ``option``: a keyword argument of the command's method (``--beam`` → ``beam=``);
- ``cli``: read by the command line itself (the inputs, ``--json``), never passed on;
- ``file``: a file scored by ``evaluate`` (``--src``, ``--ref``): an entry of its ``files``;
- ``output``: a file written (``--output``), checked before any work;
- ``figure`` / ``figure_dir``: a PNG file / a directory of PNG files, checked before any work;
  ``figure`` names what is drawn (printed with the path).
"""

from __future__ import annotations

import argparse
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from seqlab.errors import SeqlabError

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
        convert: the argument type that reads and checks the value (an options model's field,
            :meth:`CommandOptions.declarations`); None: the one of ``type``.
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
    convert: Callable[[str], Any] | None = None

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


# ------------------------------------------------------------------------------ options models
def _schema_words(prop: Mapping[str, Any]) -> str:
    """What a JSON schema property of an options field expects, in words: ``a whole number >=
    1``, ``a number from 0 to 10``, ``one of a, b``."""
    kinds = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    p = kinds[0] if kinds else prop
    if "enum" in p:
        return "one of " + ", ".join(map(str, p["enum"]))
    integer = p.get("type") == "integer"
    low = p.get("minimum")
    if "exclusiveMinimum" in p:
        low = p["exclusiveMinimum"] + 1 if integer else None
    high = p.get("maximum")
    noun = {"integer": "a whole number", "number": "a number", "boolean": "true or false"}
    words = noun.get(str(p.get("type")), "a text")
    if low is not None and high is not None:
        return f"{words} from {_number(low)} to {_number(high)}"
    if low is not None:
        return f"{words} >= {_number(low)}"
    if "exclusiveMinimum" in p:
        return f"{words} > {p['exclusiveMinimum']:g}"
    return f"{words} <= {_number(high)}" if high is not None else words


def _number(value: float) -> str:
    """A bound as messages write it: whole numbers in full, with thousands separated
    (``100,000``), others as ``%g``."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


class CommandOptions(BaseModel):
    """The options of one command, declared once (see the module docstring): a field per option,
    with its type, bounds, default and ``description`` (the help text everywhere); ``title``
    names it in messages (``beam size must be a whole number >= 1, got 2.5``).

    Subclasses are frozen (hashable, never changed once validated) and strict (``"5"`` is no
    beam size; ``True`` is no number)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")
    #: a field's value in ``--help`` (``ALPHA``), where not its name in capitals
    metavars: ClassVar[dict[str, str]] = {}
    #: a field's flag, where not its name (``steps`` → ``--horizon``)
    flags: ClassVar[dict[str, str]] = {}
    #: a field's role (:data:`Role`), where not ``option``: ``cli`` for one the command line
    #: alone reads (``--threads``), ``figure_dir`` for a folder of figures (``--attention-png``)
    roles: ClassVar[dict[str, Role]] = {}
    #: what a ``figure`` or ``figure_dir`` field draws (``attention heatmaps``)
    figures: ClassVar[dict[str, str]] = {}
    #: for a field of the command line alone (role ``cli``), what Python code does instead
    in_python: ClassVar[dict[str, str]] = {}

    @classmethod
    def expects(cls, name: str) -> str:
        """What field ``name`` takes, in words (from the model's own JSON schema)."""
        return _schema_words(cls.model_json_schema()["properties"][name])

    @classmethod
    def title_of(cls, name: str) -> str:
        return cls.model_fields[name].title or name.replace("_", " ")

    @classmethod
    def of(cls, values: Mapping[str, Any] | None = None, **keywords: Any) -> Self:
        """``values`` and ``keywords`` validated into the model: the one check of these options
        in Python code (a keyword argument of a predictor's method). A wrong value is one
        :class:`~seqlab.errors.SeqlabError` naming the option, what it takes and what was
        given; a value of None is the option not given."""
        given = {k: v for k, v in {**(values or {}), **keywords}.items() if v is not None}
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            # a flag whose field has another name (--horizon is steps=): say which
            spelt = {flag.lstrip("-").replace("-", "_"): f for f, flag in cls.flags.items()}
            hint = (
                f" (the command line's --{unknown[0].replace('_', '-')} is {spelt[unknown[0]]}= "
                "here)"
                if unknown[0] in spelt
                else ""
            )
            raise SeqlabError(
                f"unknown option {unknown[0]!r}{hint}; the options are "
                + ", ".join(cls.model_fields)
            )
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            name = str(err["loc"][0])
            if name not in cls.model_fields:  # a check of the whole model
                raise SeqlabError(str(err["msg"]).removeprefix("Value error, ")) from None
            raise SeqlabError(
                f"{cls.title_of(name)} must be {cls.expects(name)}, got {given[name]!r}"
            ) from None

    @classmethod
    def of_call(cls, given: CommandOptions | None, keywords: dict[str, Any]) -> Self:
        """The options of a Python call: ``given`` (validated already, taken as it is) with the
        keyword arguments that name this model's fields taken out of ``keywords`` (the others
        are left for the call's other model) and validated here. A field of the command line
        alone (role ``cli``) is refused, saying what Python code does instead."""
        mine = {k: keywords.pop(k) for k in list(keywords) if k in cls.model_fields}
        for name, value in mine.items():
            if cls.roles.get(name) == "cli" and value is not None:
                instead = cls.in_python.get(name)
                raise SeqlabError(
                    f"{name}= is an option of the command line (--{name.replace('_', '-')}), "
                    "not of a Python call" + (f"; in Python use {instead}" if instead else "")
                )
        if isinstance(given, cls) and not mine:
            return given
        return cls.of({**(given.given() if given is not None else {}), **mine})

    @classmethod
    def taken_from(cls, source: BaseModel) -> Self:
        """The options held by ``source``, a request body that inherits this model and was
        validated when it was parsed: taken as they are (not checked again)."""
        return cls.model_construct(**{name: getattr(source, name) for name in cls.model_fields})

    def given(self) -> dict[str, Any]:
        """The options given (not None), by field."""
        return {k: v for k, v in self if v is not None}

    @classmethod
    def declarations(cls, command: str) -> tuple[Option, ...]:
        """The command-line options of ``command`` made from the fields
        (``length_penalty`` → ``--length-penalty``, or the flag :attr:`CommandOptions.flags` names; a field
        without a default is a required option, a ``bool`` field a flag); each value is read and checked by the
        field's own type and bounds (:func:`argument_type`)."""
        return tuple(
            Option(
                cls.flags.get(name, "--" + name.replace("_", "-")),
                field.description or "",
                (command,),
                type=_value_type(field),
                role=cls.roles.get(name, "option"),
                choices=_choices(field),
                default=None if field.is_required() else field.default,
                metavar=cls.metavars.get(name),
                required=field.is_required(),
                dest=name,
                figure=cls.figures.get(name, ""),
                convert=None if _value_type(field) != "str" else argument_type(cls, name, field),
            )
            for name, field in cls.model_fields.items()
        )

    @classmethod
    def called(cls) -> tuple[str, ...]:
        """The fields that are keyword arguments of the command's Python method (every one but
        those the command line alone reads, role ``cli``)."""
        return tuple(n for n in cls.model_fields if cls.roles.get(n, "option") != "cli")


def _value_type(field: FieldInfo) -> ValueType:
    """How the command line reads a field: a ``bool`` is a flag, a tuple one or more paths
    (``--ensemble RUN RUN``), anything else one value checked by the field's type."""
    if field.annotation is bool:
        return "flag"
    kinds = (field.annotation, *typing.get_args(field.annotation))
    return "paths" if any(typing.get_origin(k) is tuple for k in kinds) else "str"


def _choices(field: FieldInfo) -> tuple[str, ...]:
    """The values of a ``Literal`` field (or ``Literal | None``), else none."""
    for arg in (field.annotation, *typing.get_args(field.annotation)):
        if typing.get_origin(arg) is Literal:
            return tuple(map(str, typing.get_args(arg)))
    return ()


def argument_type(cls: type[CommandOptions], name: str, field: FieldInfo) -> Callable[[str], Any]:
    """An argparse type reading field ``name`` of ``cls`` from its text by the field's own type
    and bounds: ``--beam 0`` is ``argument --beam: must be a whole number >= 1, got '0'``."""
    kind = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
    adapter: TypeAdapter[Any] = TypeAdapter(kind)

    def read(text: str) -> Any:
        try:
            return adapter.validate_strings(text)
        except ValidationError:
            raise argparse.ArgumentTypeError(
                f"must be {cls.expects(name)}, got {text[:40]!r}"
            ) from None

    read.__name__ = name  # argparse names a type by it in its own messages
    return read


def show_options(method: Callable[..., Any], *models: type[CommandOptions]) -> None:
    """Give ``method`` (which takes the fields of ``models`` as ``**keywords``, validated by
    :meth:`CommandOptions.of`) the signature that lists them: one keyword-only parameter per
    field that is a keyword argument (:meth:`CommandOptions.called`), with its default and type,
    so that ``help()``, ``inspect.signature`` and the API reference show the options the models
    declare."""
    signature = inspect.signature(method)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    names = {p.name for p in kept}
    fields = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.annotation
        )
        for model in models
        for name, f in model.model_fields.items()
        if name not in names and name in model.called()
    ]
    method.__signature__ = signature.replace(parameters=[*kept, *fields])  # type: ignore[attr-defined]
