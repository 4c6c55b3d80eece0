"""The docs site's generated reference pages (an mkdocs hook, ``hooks:`` in ``mkdocs.yml``).

Nothing on these pages is written by hand, so nothing on them can drift from the code. At build
time :func:`on_files` adds:

- ``reference/cli.md``: every ``seqlab`` command and option, walked from the argparse parsers
  (:func:`seqlab.cli.build_parser`; the inference commands' options as the tasks declare them);
- ``reference/config.md``: every config key with its type, default, allowed values and
  description, from the pydantic schema (:class:`seqlab.config.ExperimentConfig`, and the config
  class of each architecture registered in :mod:`seqlab.catalog`); a key whose field has no
  description takes the comment of the same key in ``configs/reference.yaml``;
- ``reference/http.md`` and ``reference/openapi.json``: the HTTP API, from the OpenAPI schema of
  the FastAPI application (:func:`seqlab.serve.app.create_app`, built with no model: the routes
  and their types do not depend on the models served).

``tests/test_docs.py`` uses :func:`commands` and :func:`config_keys` to check that every command,
flag and config key the docs and the README write exists.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_YAML = ROOT / "src" / "seqlab" / "configs" / "reference.yaml"
#: the pages this hook generates (path under docs/ → the function writing it)
GENERATED = (
    "reference/cli.md",
    "reference/config.md",
    "reference/http.md",
    "reference/openapi.json",
)


def cell(text: Any) -> str:
    """``text`` for one cell of a Markdown table (or one paragraph): one line; outside code spans,
    pipes, ``*`` and HTML escaped (inside, Markdown shows every character as it is)."""
    parts = re.split(r"(`[^`]+`)", " ".join(str(text).split()))
    for i, part in enumerate(parts):
        if i % 2 == 0:
            for old, new in (
                ("&", "&amp;"),
                ("<", "&lt;"),
                (">", "&gt;"),
                ("|", "\\|"),
                ("*", "\\*"),
            ):
                part = part.replace(old, new)
            parts[i] = part
    return "".join(parts)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):`~?([\w.]+)`")


def prose(docstring: str) -> str:
    """A docstring as Markdown: Sphinx roles and ````literals```` become code spans
    (``:class:`~seqlab.x.Name``` → ```Name```, the way Sphinx shows a ``~`` target)."""

    def short(match: re.Match[str]) -> str:
        target = match.group(1)
        return f"`{target.rsplit('.', 1)[-1] if match.group(0).count('~') else target}`"

    return _ROLE.sub(short, docstring).replace("``", "`")


# ------------------------------------------------------------------------------- command line
def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand of ``parser``, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, ""), p) for name, p in action.choices.items()]
    return []


def commands(
    parser: argparse.ArgumentParser | None = None,
    path: tuple[str, ...] = ("seqlab",),
    help: str = "",
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every command, as (``("seqlab", "data", "stats")``, its help, its parser), depth first.

    Formatting a parser's help first makes an inference command add the options its tasks
    declare (:class:`seqlab.cli.infer.DeclaredParser` adds them on first use)."""
    if parser is None:
        from seqlab.cli import build_parser

        parser = build_parser()
    parser.format_help()
    yield path, help, parser
    for name, sub_help, sub in subcommands(parser):
        yield from commands(sub, (*path, name), sub_help)


def options(parser: argparse.ArgumentParser, hidden: bool = False) -> list[argparse.Action]:
    """The arguments of ``parser`` a user gives (not ``--help``, not the subcommand); the ones
    hidden from ``--help`` (old names kept working) only when ``hidden``."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and (hidden or a.help != argparse.SUPPRESS)
    ]


def flags(parser: argparse.ArgumentParser, hidden: bool = False) -> set[str]:
    """The ``--long`` option strings of ``parser`` (and ``-h``/``--help``)."""
    found = {"-h", "--help"}
    for action in options(parser, hidden):
        found.update(action.option_strings)
    return found


def _anchor(path: tuple[str, ...]) -> str:
    return "-".join(path)


def _argument_row(parser: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    formatter = parser._get_formatter()
    if action.option_strings:
        name = formatter._format_action_invocation(action)
    else:
        name = action.metavar if isinstance(action.metavar, str) else action.dest
        name += " ..." if action.nargs in ("*", "+") else ""
    help_text = formatter._expand_help(action) if action.help else ""
    default = action.default
    if default is None or default is False or default == argparse.SUPPRESS:
        shown = ""
    else:
        shown = default if isinstance(default, str) else json.dumps(default)
    if not action.option_strings:
        shown = ""
    if action.required:
        help_text = "(required) " + help_text
    return [cell(f"`{name}`") if name else "", cell(shown), cell(help_text)]


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def cli_reference() -> str:
    """``reference/cli.md``."""
    found = list(commands())
    lines = [
        "# Command line",
        "",
        "Every `seqlab` command and option, generated from the argparse parsers when the site "
        "is built (`seqlab.cli.build_parser`; the options of `evaluate`, `translate`, "
        "`classify`, `forecast` and `generate` as the tasks declare them). `seqlab COMMAND "
        "--help` prints the same.",
        "",
        *table(
            ["command", "what it does"],
            [[f"[`{' '.join(p)}`](#{_anchor(p)})", cell(h)] for p, h, _ in found if len(p) == 2],
        ),
    ]
    for path, help_text, parser in found:
        if len(path) == 1:
            continue
        heading = "#" * min(len(path), 4)
        lines += [f"{heading} `{' '.join(path)}` {{#{_anchor(path)}}}", ""]
        text = parser.description or help_text
        if text:
            lines += [cell(text), ""]
        lines += ["```text", _usage(parser), "```", ""]
        rows = [_argument_row(parser, a) for a in options(parser)]
        if rows:
            lines += table(["argument", "default", "description"], rows)
        children = subcommands(parser)
        if children:
            names = ", ".join(f"[`{n}`](#{_anchor((*path, n))})" for n, _, _ in children)
            lines += [f"Subcommands: {names}.", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ configuration
def yaml_comments(path: Path = REFERENCE_YAML) -> tuple[dict[str, str], dict[str, str]]:
    """The comment of each ``section.key`` of ``configs/reference.yaml`` (continuation lines
    joined), and each key's value as written."""
    comments: dict[str, str] = {}
    values: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    last: str | None = None
    key_line = re.compile(r"^( *)([A-Za-z_]\w*):\s*([^#]*?)\s*(?:#\s?(.*))?$")
    for line in path.read_text(encoding="utf-8").splitlines():
        match = key_line.match(line)
        if match:
            indent, key, value, comment = match.groups()
            while stack and stack[-1][0] >= len(indent):
                stack.pop()
            dotted = ".".join([k for _, k in stack] + [key])
            if not value:
                stack.append((len(indent), key))
            comments[dotted], values[dotted] = (comment or "").strip(), value
            last = dotted if comment else None
            continue
        more = re.match(r"^( *)#\s?(.*)$", line)
        if more and last is not None and len(more.group(1)) >= 20:  # aligned: a continuation
            comments[last] += " " + more.group(2).strip()
        else:
            last = None
    return comments, values


_BOUNDS = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"), ("max_length", "length ≤"))


def _bounds(meta: Any) -> list[str]:
    from pydantic.fields import FieldInfo

    if isinstance(meta, FieldInfo):
        return [b for m in meta.metadata for b in _bounds(m)]
    return [f"{sym} {getattr(meta, a)}" for a, sym in _BOUNDS if getattr(meta, a, None) is not None]


def type_text(tp: Any, bounds: list[str], choices: list[str]) -> str:
    """How a config field's annotation reads (``int | null``); its bounds and the values of a
    ``Literal`` are appended to ``bounds`` and ``choices``."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(tp)
        for m in meta:
            bounds.extend(_bounds(m))
        return type_text(base, bounds, choices)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a, bounds, choices) for a in typing.get_args(tp))
    if origin is typing.Literal:
        values = typing.get_args(tp)
        choices.extend(str(v) for v in values)
        return type(values[0]).__name__
    if origin is not None:
        args = ", ".join(type_text(a, bounds, choices) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', origin)}[{args}]"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _default_text(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        return ""
    if field.default is PydanticUndefined:
        return "required"
    default = field.default
    return json.dumps(list(default) if isinstance(default, tuple) else default)


def config_keys() -> dict[str, tuple[type, Any]]:
    """Every config key (``train.lr``, ``data.subword.vocab_size``, ``model.d_model``) → (the
    config class holding it, its pydantic field). A ``model`` key is listed once for every
    architecture that has it; this mapping keeps the first."""
    rows: dict[str, tuple[type, Any]] = {}
    for prefix, cls in _sections():
        for key, field in _fields(cls, prefix):
            rows.setdefault(key, (cls, field))
    return rows


def _sections() -> list[tuple[str, type]]:
    from seqlab import catalog
    from seqlab.config import DataConfig, DecodeConfig, ExperimentConfig, TrainConfig

    archs = [("model", spec.config) for spec in catalog.models().values()]
    return [
        ("", ExperimentConfig),
        ("data", DataConfig),
        *archs,
        ("train", TrainConfig),
        ("decode", DecodeConfig),
    ]


def _fields(cls: type, prefix: str) -> Iterator[tuple[str, Any]]:
    """(dotted key, field) of ``cls``; a nested section's keys instead of the section."""
    from pydantic import BaseModel

    for name, field in cls.model_fields.items():  # type: ignore[attr-defined]
        key = f"{prefix}.{name}" if prefix else name
        nested = field.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            if prefix:  # a top-level section is a table of its own
                yield from _fields(nested, key)
            continue
        yield key, field


def _config_table(cls: type, prefix: str, comments: dict[str, str], yaml_arch: bool) -> list[str]:
    from seqlab import catalog

    registered = {
        "data.dataset": sorted(catalog.datasets()),
        "model.cell": list(catalog.cells()),
        "model.positions": list(catalog.positions()),
    }
    rows = []
    for key, field in _fields(cls, prefix):
        bounds: list[str] = list(_bounds(field))
        choices: list[str] = []
        kind = type_text(field.annotation, bounds, choices)
        choices = registered.get(key, choices)
        allowed = ", ".join(f"`{c}`" for c in choices) if choices else ", ".join(bounds)
        own_comment = not key.startswith("model.") or yaml_arch
        text = field.description or (comments.get(key, "") if own_comment else "")
        default = _default_text(field)
        shown = cell(f"`{default}`") if default else ""
        rows.append([f"`{key}`", cell(kind), shown, cell(allowed), cell(text)])
    return table(["key", "type", "default", "allowed", "description"], rows)


def config_reference() -> str:
    """``reference/config.md``."""
    comments, values = yaml_comments()
    lines = [
        "# Configuration keys",
        "",
        "Every key of an experiment config, generated from the pydantic schema when the site is "
        "built (`seqlab.config`; the `model` keys from the config class each architecture "
        "registers in `seqlab.catalog`). Any key can be overridden on the command line with its "
        "dotted path: `seqlab train CONFIG train.lr=3e-4 model.num_layers=3`. Unknown keys and "
        "values outside *allowed* are errors naming the key. The same keys, with comments, in "
        "one YAML file to copy: `configs/reference.yaml` (in the package: "
        "`seqlab/configs/reference.yaml`).",
        "",
    ]
    for prefix, cls in _sections():
        if prefix == "model":
            continue
        title = f"`{prefix}`" if prefix else "top level"
        lines += [f"## {title}", "", cell(prose(inspect.getdoc(cls) or "")).split(". ")[0], ""]
        lines += _config_table(cls, prefix, comments, yaml_arch=False)
        if prefix == "data":
            lines += _models(comments, values.get("model.arch", ""))
    return "\n".join(lines)


def _models(comments: dict[str, str], yaml_arch: str) -> list[str]:
    from seqlab import catalog

    lines = [
        "## `model`",
        "",
        "One architecture per config, chosen by `model.arch`; each has its own keys.",
        "",
    ]
    for arch, spec in catalog.models().items():
        summary = prose(inspect.getdoc(spec.config) or "").split("\n\n")[0]
        task = spec.task.replace("_", " ")
        lines += [f"### `model.arch: {arch}` {{#model-{arch.replace('_', '-')}}}", ""]
        lines += [f"{task}, reads {spec.inputs}. {cell(summary)}", ""]
        lines += _config_table(spec.config, "model", comments, yaml_arch=arch == yaml_arch)
    return lines


# ----------------------------------------------------------------------------------- HTTP API
def openapi_schema() -> dict[str, Any]:
    """The OpenAPI schema of ``seqlab serve``'s application (built with no model)."""
    from seqlab.serve.app import create_app

    return create_app({}).openapi()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _schema_anchor(name: str) -> str:
    return "schema-" + _slug(name)


def json_type(schema: dict[str, Any]) -> str:
    """How a JSON schema reads: ``string``, ``array of number``, a link to a named schema."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_schema_anchor(name)})"
    if "anyOf" in schema:
        return " or ".join(json_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {json_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {json_type(schema['additionalProperties'])}"
    return str(kind)


_JSON_BOUNDS = (
    ("exclusiveMinimum", ">"),
    ("minimum", "≥"),
    ("exclusiveMaximum", "<"),
    ("maximum", "≤"),
    ("minLength", "length ≥"),
    ("maxLength", "length ≤"),
    ("minItems", "items ≥"),
    ("maxItems", "items ≤"),
)


def _json_bounds(schema: dict[str, Any]) -> list[str]:
    found = [f"{sym} {schema[k]}" for k, sym in _JSON_BOUNDS if k in schema]
    for member in schema.get("anyOf", []):
        found += _json_bounds(member)
    return found


def _schema_rows(schema: dict[str, Any]) -> list[list[str]]:
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        default = json.dumps(prop["default"]) if "default" in prop else ""
        note = "; ".join(_json_bounds(prop))
        text = prop.get("description", "") + (f" ({note})" if note else "")
        rows.append(
            [
                f"`{name}`",
                cell(json_type(prop)),
                "yes" if name in required else "",
                cell(f"`{default}`") if default else "",
                cell(text),
            ]
        )
    return rows


def http_reference(schema: dict[str, Any]) -> str:
    """``reference/http.md``, from the application's OpenAPI ``schema``."""
    import seqlab.serve.app
    import seqlab.serve.schemas

    lines = [
        "# HTTP API",
        "",
        "What `seqlab serve RUN_DIR ...` answers, generated from the OpenAPI schema of its "
        "FastAPI application when the site is built (the schema itself: "
        "[openapi.json](openapi.json); a running server shows it at `/docs`). How to start a "
        "server and call it: [Serve and call the API](../howto/serve.md).",
        "",
        prose(inspect.getdoc(seqlab.serve.app) or "").split("\n\n", 1)[1],
        "",
        prose(inspect.getdoc(seqlab.serve.schemas) or ""),
        "",
    ]
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            name = f"{method.upper()} {path}"
            lines += [f"## `{name}` {{#{_slug(name)}}}", ""]
            if op.get("summary"):
                lines += [op["summary"] + ".", ""]
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                lines += [f"Request body (JSON): {json_type(body['schema'])}.", ""]
            rows = []
            for status, response in op.get("responses", {}).items():
                kinds = response.get("content", {})
                shown = [
                    json_type(c["schema"]) if c.get("schema") else f"`{media}`"
                    for media, c in kinds.items()
                ]
                rows.append([status, cell(response.get("description", "")), ", ".join(shown)])
            lines += table(["status", "meaning", "body"], rows)
    lines += ["## Schemas", ""]
    for name, component in schema.get("components", {}).get("schemas", {}).items():
        lines += [f"### `{name}` {{#{_schema_anchor(name)}}}", ""]
        if component.get("description"):
            lines += [cell(component["description"]), ""]
        rows = _schema_rows(component)
        if rows:
            lines += table(["field", "type", "required", "default", "description"], rows)
    return "\n".join(lines)


# --------------------------------------------------------------------------------- the hook
def pages() -> dict[str, str]:
    """Each generated page: path under docs/ → its text."""
    schema = openapi_schema()
    return {
        "reference/cli.md": cli_reference(),
        "reference/config.md": config_reference(),
        "reference/http.md": http_reference(schema),
        "reference/openapi.json": json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
    }


def on_files(files: Any, config: Any) -> Any:
    """mkdocs: add the generated pages to the site's files (they exist in the build only)."""
    from mkdocs.structure.files import File

    for uri, text in pages().items():
        files.append(File.generated(config, uri, content=text))
    return files
