"""Experiment config files: the YAML they are written in, where a named one is found, the
``key=value`` overrides given beside them and the report of what is wrong in one.

:mod:`seqlab.config` holds the typed sections that a file is validated into and reads a file
(:func:`seqlab.config.load_config`) with these:

- YAML with unique keys and YAML 1.2 floats (``3e-4`` is a number), naming the file and line of a
  problem (:func:`read_yaml`, :func:`parse_yaml`);
- a config shipped with seqlab, found by its name (:func:`find_config`, :data:`PACKAGED_CONFIGS`);
- dotted overrides (``train.lr=3e-4``) set into the raw mapping before validation
  (:func:`apply_overrides`);
- the keys a file must set itself (:data:`REQUIRED_KEYS`, :func:`missing_keys`) and pydantic's
  report turned into one line per key (:func:`format_validation_error`).
"""

from __future__ import annotations

import copy
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ValidationError

from seqlab.config.archs import model_config
from seqlab.errors import ConfigError


# ------------------------------------------------------------------------------------ errors
def _allowed_keys(loc: tuple[Any, ...], raw: Any, root: type[BaseModel]) -> list[str] | None:
    """Field names of the (nested) section of ``root`` that holds the key at ``loc[-1]``, if it
    can be found; a section with an ``arch`` key (``model``) has those of the class registered
    for its ``arch`` (read from ``raw``, the mapping that was validated)."""
    current: Any = root
    node = raw
    for part in loc[:-1]:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        if part not in current.model_fields:
            return None
        current = _strip_optional(current.model_fields[part].annotation)
        node = node.get(part) if isinstance(node, dict) else None
        if isinstance(current, type) and "arch" in getattr(current, "model_fields", {}):
            arch = node.get("arch") if isinstance(node, dict) else None
            current = model_config(arch)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _strip_optional(tp: Any) -> Any:
    tp = _strip_annotated(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return _strip_annotated(members[0])
    return tp


def format_validation_error(
    err: ValidationError, source: str, raw: Any = None, root: type[BaseModel] | None = None
) -> str:
    """Turn pydantic's report into lines of ``source: key: problem (got value; allowed ...)``;
    ``raw``, the mapping validated, and ``root``, the class it was validated into, let an
    unknown key list the keys allowed beside it (those of its architecture in the ``model``
    section)."""
    lines = [f"invalid configuration in {short(source, 300)}:"]
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc) or "<top level>"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc, raw, root) if root is not None else None
            hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            lines.append(f"  {key}: unknown key (value {short(e['input'])}){hint}")
        elif isinstance(e["input"], dict):
            lines.append(f"  {key}: {msg}")  # a cross-field rule: its message names the keys
        else:
            lines.append(f"  {key}: {msg} (got {short(e['input'])})")
    return "\n".join(lines)


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: error messages stay readable."""
    text = value if isinstance(value, str) and limit > 80 else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------------------ overrides
def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(
            f"override {short(item)} is not of the form section.key=value (e.g. train.lr=3e-4)"
        )
    key, raw = item.split("=", 1)
    path = key.strip().split(".")
    if not all(path):
        raise ConfigError(f"override {short(item)}: empty key segment in {key!r}")
    try:
        value = parse_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"override {short(item)}: value {short(raw)} is not valid YAML: {exc}"
        ) from exc
    return path, value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set dotted ``key=value`` overrides into a raw config dict (validation happens after)."""
    out = copy.deepcopy(raw)
    for item in overrides:
        path, value = _parse_override(item)
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"override {short(item)}: {part!r} is a value, not a section")
            node = child
        node[path[-1]] = value
    return out


# ----------------------------------------------------------------------------------- YAML
class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{self.name}:{line}: key {key!r} appears twice in one section "
                    f"(first on line {seen[key]}); keep one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 floats: PyYAML (YAML 1.1) reads "3e-4" and "1e5" as strings, the way people write rates
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def parse_yaml(text: str, name: str = "<string>") -> Any:
    """YAML with unique keys and YAML 1.2 floats (see :class:`_UniqueKeyLoader`)."""
    loader = _UniqueKeyLoader(text)
    loader.name = name
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, naming the file and line of any problem (duplicate keys included)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}{_where(path)}") from None
    except IsADirectoryError:
        raise ConfigError(f"config path is a directory, not a YAML file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return parse_yaml(text, str(path))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


# ------------------------------------------------------------------ shipped and required
PACKAGED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def _where(path: Path) -> str:
    """What a missing relative config path was read against, and the shipped config of its
    name when there is one (``configs/dates-transformer.yaml`` from another folder)."""
    if path.is_absolute():
        return ""
    said = f" (a relative path is read from the working directory, {Path.cwd()}"
    if (PACKAGED_CONFIGS / path.name).is_file():
        said += f"; seqlab ships a config of that name: give it as {path.stem}, from any folder"
    return said + ")"


def find_config(name: str | Path) -> Path:
    """A config file path, or the name of a config shipped with seqlab (``dates-bahdanau``)."""
    path = Path(name)
    if path.exists() or len(path.parts) > 1:
        return path
    packaged = PACKAGED_CONFIGS / (path.name if path.suffix else f"{path.name}.yaml")
    if packaged.is_file():
        return packaged
    shipped = ", ".join(sorted(p.stem for p in PACKAGED_CONFIGS.glob("*.yaml")))
    raise ConfigError(f"config file not found: {path} (configs shipped with seqlab: {shipped})")


#: keys a config file must set itself (here or by an override): a run never trains a built-in
#: default dataset or model because a section was left out
REQUIRED_KEYS = ("data.dataset", "model.arch")
_EXAMPLES = {
    "data.dataset": "data: {dataset: text, path: my.txt}",
    "model.arch": "model: {arch: rnn_lm}",
}


def missing_keys(raw: dict[str, Any]) -> list[str]:
    """One error line for each of :data:`REQUIRED_KEYS` that ``raw`` leaves out."""
    missing = []
    for key in REQUIRED_KEYS:
        node: Any = raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            missing.append(key)
    return [
        f"  {key}: missing; a config file names its {key.split('.')[0]} itself (e.g. "
        f"{_EXAMPLES[key]}): seqlab never trains a built-in default"
        for key in missing
    ]
