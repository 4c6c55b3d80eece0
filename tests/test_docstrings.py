"""Docstrings name things that exist and cite sources a reader can open.

Every dotted ``seqlab.…`` name in a docstring of the package, and every Sphinx role
(``:class:`…```, ``:func:`…```, ``:mod:`…```, ``:meth:`…```, ``:data:`…```, ``:attr:`…```,
``:exc:`…```), must resolve to a real module or object: a module renamed or moved leaves no stale
pointer behind. And no file of the package or the README cites our private study copies or uses
an option name that was replaced (old names live only in the deprecation table).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import seqlab

PACKAGE = Path(seqlab.__file__).parent
ROOT = PACKAGE.parents[1]
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(seqlab.__path__, "seqlab.")
    if not m.name.endswith("__main__")
)
#: ``seqlab.x.y`` written as a name (not a file such as ``seqlab.json`` or a format tag such as
#: ``seqlab.run/1``)
DOTTED = re.compile(r"(?<![\w./-])seqlab(?:\.[A-Za-z_]\w*)+(?![\w/-])")
FILE_SUFFIXES = {"json", "jsonl", "yaml", "yml", "txt", "png", "csv", "md", "pt", "log", "lock"}
ROLE = re.compile(r":(class|func|mod|meth|data|attr|exc|obj):`!?~?([^`<>]+?)(?:\(\))?`")


def _docstrings(module_name: str) -> list[tuple[str | None, int, str]]:
    """(enclosing class name or None, line, text) of every docstring in the module's source."""
    module = importlib.import_module(module_name)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    found: list[tuple[str | None, int, str]] = []

    def visit(node: ast.AST, cls: str | None) -> None:
        # a class's own docstring, and those of its methods, may name its members
        inner = node.name if isinstance(node, ast.ClassDef) and cls is None else cls
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append((inner, node.body[0].lineno, doc))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, None)
    return found


def _has_attribute(obj: object, name: str) -> bool:
    """``getattr`` that also knows annotated fields (dataclasses, NamedTuples, pydantic models),
    which a class does not always hold as attributes."""
    if hasattr(obj, name):
        return True
    if isinstance(obj, type):
        if dataclasses.is_dataclass(obj) and name in {f.name for f in dataclasses.fields(obj)}:
            return True
        if name in getattr(obj, "model_fields", {}):
            return True
        return any(name in getattr(k, "__annotations__", {}) for k in obj.__mro__)
    return False


def _walk(obj: object, parts: list[str]) -> bool:
    for i, part in enumerate(parts):
        if not _has_attribute(obj, part):
            return False
        if i < len(parts) - 1:
            obj = getattr(obj, part)
    return True


def _resolve_absolute(name: str) -> bool:
    """Import the longest module prefix of ``name``, then look up the rest as attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        return _walk(module, parts[cut:])
    return False


def _resolve(target: str, module_name: str, cls: str | None) -> bool:
    """As Sphinx would: an absolute dotted name, or a name in the module, the enclosing class,
    or the builtins."""
    if target.split(".")[0] in ("seqlab", "torch", "numpy", "pydantic", "yaml"):
        return _resolve_absolute(target)
    module = importlib.import_module(module_name)
    parts = target.split(".")
    scopes: list[object] = [module]
    if cls is not None and hasattr(module, cls):
        scopes.insert(0, getattr(module, cls))
    scopes.append(builtins)
    return any(_walk(scope, parts) for scope in scopes)


def _references(module_name: str) -> list[tuple[str, str | None, int]]:
    refs = []
    for cls, line, doc in _docstrings(module_name):
        for match in DOTTED.finditer(doc):
            name = match.group(0)
            if name.rsplit(".", 1)[-1] not in FILE_SUFFIXES:
                refs.append((name, cls, line))
        for match in ROLE.finditer(doc):
            refs.append((match.group(2).strip(), cls, line))
    return refs


@pytest.mark.parametrize("module_name", MODULES)
def test_every_reference_in_a_docstring_resolves(module_name):
    path = Path(importlib.import_module(module_name).__file__).relative_to(ROOT)
    broken = [
        f"{path}:{line}: {name}"
        for name, cls, line in _references(module_name)
        if not _resolve(name, module_name, cls)
    ]
    assert not broken, "docstrings name things that do not exist:\n" + "\n".join(broken)


def test_the_reference_check_catches_a_stale_name():
    """The check itself fails on the kinds of names it exists to catch."""
    assert _resolve("seqlab.nn.rnn.RNN", "seqlab.models.rnn_lm", None)
    assert not _resolve("seqlab.rnn.RNN", "seqlab.models.rnn_lm", None)  # before the restructure
    assert not _resolve("seqlab.nn.rnn.NoSuchCell", "seqlab.nn.rnn", None)
    assert _resolve("RNN", "seqlab.nn.rnn", None)  # relative to the module
    assert _resolve("encode", "seqlab.models.bahdanau", "Bahdanau")  # relative to the class
    assert not _resolve("encoder_step", "seqlab.models.bahdanau", "Bahdanau")
    doc = '"""See :class:`~seqlab.rnn.RNN` and ``seqlab.json`` (``seqlab.run/1``)."""'
    assert DOTTED.findall(doc) == ["seqlab.rnn.RNN", "seqlab.json"]
    assert [m.group(2) for m in ROLE.finditer(doc)] == ["seqlab.rnn.RNN"]


# ------------------------------------------------------------------------- public sources only
#: what the issue's check greps for: citations of our private study copies, and a replaced name
FORBIDDEN = re.compile(r"seeds? 00|shared/seeds|gru_notes", re.IGNORECASE)
#: the one place in the code that must spell the old names: the table that maps them
DEPRECATION_TABLE = PACKAGE / "deprecation.py"
#: the one table of renamed options for users: old names may be written there
CHANGELOG = ROOT / "docs" / "changelog.md"
RENAMES_HEADING = "## Renamed options"


def _text_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".md", ".txt", ".json"):
            files.append(path)
    return files


def _renames_table(lines: list[str]) -> set[int]:
    """Line numbers (1-based) of the changelog's table of renamed options."""
    start = lines.index(RENAMES_HEADING)  # the table must exist
    allowed = set()
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("#"):
            break
        if line.startswith("|"):
            allowed.add(number)
    return allowed


def test_no_private_sources_or_replaced_names_outside_the_deprecation_tables():
    hits = []
    for path in _text_files():
        if path == DEPRECATION_TABLE:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        allowed = set()  # old names are written in the changelog only, which is not read here
        for number, line in enumerate(lines, 1):
            if FORBIDDEN.search(line) and number not in allowed:
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "cite d2l.ai sections or papers, use the current names:\n" + "\n".join(hits)


def test_every_old_name_in_the_code_table_is_also_in_the_changelogs_table():
    from seqlab.deprecation import RENAMED_VALUES

    lines = CHANGELOG.read_text(encoding="utf-8").splitlines()
    table = "\n".join(lines[i - 1] for i in sorted(_renames_table(lines)))
    for key, renames in RENAMED_VALUES.items():
        for old, new in renames.items():
            assert re.search(rf"`{key}={old}`.*`{key}={new}`", table), (key, old, new)


def test_every_renamed_flag_is_in_the_changelogs_table():
    """Each old flag of :data:`~seqlab.deprecation.RENAMED_FLAGS` has a row of the changelog's table
    naming its command, the old flag and then the new one."""
    from seqlab.deprecation import RENAMED_FLAGS

    lines = CHANGELOG.read_text(encoding="utf-8").splitlines()
    rows = [lines[i - 1] for i in sorted(_renames_table(lines))]
    for command, renames in RENAMED_FLAGS.items():
        for old, new in renames.items():
            flags = rf"{old}\b.*\|.*{new}\b"
            assert any(re.search(rf"`{command}\b|\b{command} -", r) and re.search(flags, r)
                       for r in rows), (command, old, new)  # fmt: skip


def test_every_renamed_key_is_in_the_changelogs_table():
    """Each old key of :data:`~seqlab.deprecation.RENAMED_KEYS` (``model.positional``) has a row
    of the changelog's table naming the old key and then the new one."""
    from seqlab.deprecation import RENAMED_KEYS

    lines = CHANGELOG.read_text(encoding="utf-8").splitlines()
    rows = [lines[i - 1] for i in sorted(_renames_table(lines))]
    for old, new in RENAMED_KEYS.items():
        row = rf"(?<![\w.]){re.escape(old)}(?![\w.]).*\|.*`{re.escape(new)}`"
        assert any(re.search(row, r) for r in rows), (old, new)


def test_every_test_the_readme_names_exists():
    """The README's tables point at the tests that pin each claim down; a renamed test must not
    leave a dangling pointer."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = []
    for row in text.splitlines():
        current = None
        for match in re.finditer(r"`(?:(test_\w+\.py))?::(\w+)`", row):
            current = match.group(1) or current
            path = ROOT / "tests" / (current or "")
            if current is None or not path.is_file():
                missing.append(f"{current}::{match.group(2)} (no such file)")
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            if match.group(2) not in names:
                missing.append(f"{current}::{match.group(2)}")
    assert not missing, "README names tests that do not exist:\n" + "\n".join(missing)
