"""The package's layers: dependencies point one way, nothing imports in a circle, each folder is
one layer, and inference never imports training code.

Read from the sources (:func:`import_graph`, which any package root can be given), every import
that can run, and those written for the type checker:

- ``import`` statements, those inside functions too;
- the packages an import runs: ``import seqlab.x.y`` and ``from seqlab.x import y`` run
  ``seqlab/x/__init__.py`` first, so the importing module depends on that ``__init__`` and on
  everything it imports (except the packages the importing module sits in, whose ``__init__``
  ran before it did);
- ``importlib.import_module("seqlab.…")`` with a literal target, or an f-string or ``+`` whose
  text starts with a constant ``seqlab.…`` prefix (then the longest module that prefix names);
  with any other argument, every module named in the module's tables (module-level dicts whose
  values are all ``"seqlab.…"`` strings), so a module that imports by a name read from a table
  imports every module the table names (seqlab itself has none: :mod:`seqlab.builtin` imports
  each task and architecture with a plain ``import``);
- imports under ``if TYPE_CHECKING:``. They never run, but a type one module names from another
  is a dependency of its design all the same: a circle of types is a circle (it is dodged, not
  fixed, by hiding one side from the interpreter), and a lower layer naming a type of a higher
  one is an upward dependency. They count for the cycles and the layers, not for what a module
  brings at run time (:func:`brings`) nor for the deferral rule.

What is checked:

- **no cycle** between modules (:func:`cycles`);
- **layers** (:data:`LAYERS`, lowest first): a module imports only modules of its own layer or
  below; within a layer its parts (the prefixes listed) import each other one way only, and some
  parts that the order allows to meet are kept apart (:data:`APART`); **every folder is in one
  layer** (no prefix places part of a folder elsewhere), and every prefix names a module;
- **an import of seqlab inside a function** is there only to defer a heavy dependency, and says
  which on its line: ``# deferred: <reason>``, the reason naming a dependency of :data:`HEAVY`
  that the imported module brings (when imported: through its packages and their imports too)
  and the importing module does not already import (:func:`deferral_violations`). A cycle is
  never dodged that way: it is fixed by moving code to its layer.

And measured in a fresh process: loading a trained run with :func:`seqlab.load` and using it
imports no ``seqlab.training`` module (how many modules config validation and loading import:
``tests/test_imports.py``).

The order, as the modules use each other:

1. ``errors``, ``tokens``, ``deprecation``, ``catalog`` (its ``records``, and ``builtin_records``:
   seqlab's own datasets and position schemes as plain records), ``audio_limits``: the words every layer
   shares. They import nothing of seqlab, so that every layer can register its models, datasets,
   cells and task rules in the catalog.
2. ``runtime`` (precision, machine, progress, allocator), ``atomic``: the process, and safe file
   writing, used from the data readers to the CLI.
3. ``config`` (its sections, the experiment, its YAML files and overrides), ``plotting`` (the
   line plots), ``plotting_heatmaps`` (attention and other matrices), ``figure_files`` (a figure
   written as a PNG), ``fonts``: the experiment's configuration and the figures (with the fonts
   their CJK text needs), written with layer 2; the dataset statistics draw figures, so plotting
   sits below ``data``.
4. ``nn``: the building blocks (they read their cell records in the catalog).
5. ``models`` (built from blocks and a model config), ``data``: neither knows the other.
6. ``storage`` (the run directory, checkpoints, outputs, the user's text files), ``objective``
   (what a task hands the trainer), ``export`` (a run's model written for CTranslate2),
   ``serving`` (what a task declares to be served, and the named limits; no HTTP): below both
   tasks and training.
7. ``tasks``: data + model + loss + inference for one problem, and the registry of them.
7b. ``builtin``: seqlab's own tasks and architectures by name, each module imported when its
   name is first asked for (``import seqlab`` hands the tables to the catalog).
8. ``training``, ``experiment``: the trainer knows no model, dataset or task; an experiment joins
   a task's data and model to the trainer.
9. ``analysis``: measurements of the building blocks, and the sentences every analysis and demo
   prints (``analysis.summary``, about a run directory).
10. ``demos``: train, load and measure, end to end (one of them draws an analysis).
11. the entry points: ``seqlab`` itself (:func:`seqlab.load`), ``serve`` (the HTTP application
    over the tasks' registry), ``cli`` and ``__main__``.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

import seqlab

PACKAGE = Path(seqlab.__file__).parent

#: the layers, lowest first (the module docstring says why): module prefixes below ``seqlab``,
#: ``""`` being the package's own ``__init__``; a module belongs to the longest prefix naming it
LAYERS: list[set[str]] = [
    {"errors", "tokens", "deprecation", "catalog", "records", "builtin_records", "audio_limits"},
    {"runtime", "atomic"},
    {"config", "plotting", "plotting_heatmaps", "figure_files", "fonts"},
    {"nn"},
    {"models", "data"},
    {"storage", "objective", "export", "serving"},
    {"tasks"},
    {"builtin"},
    {"training", "experiment"},
    {"analysis"},
    {"demos"},
    {"", "__main__", "serve", "cli"},
]
#: parts that never import the others named, though the order would allow it
APART: dict[str, set[str]] = {
    "training": {"models", "data", "tasks"},  # the trainer knows no model, dataset or task
    "models": {"data"},
    "data": {"models"},
}
#: what an import inside a function may defer: dependencies slow to import (PyTorch takes a
#: second, matplotlib and FastAPI a fifth) or optional (the ``serve`` and ``export`` extras)
HEAVY = {
    "torch",
    "numpy",
    "matplotlib",
    "PIL",
    "fastapi",
    "uvicorn",
    "starlette",
    "ctranslate2",
    "sentencepiece",
    "sacrebleu",
    "safetensors",
}
DEFERRED = re.compile(r"#\s*deferred:\s*(.*)")


@dataclass(frozen=True)
class Import:
    """One ``seqlab`` module that a module imports, where, how, and the comments on those lines.

    ``implicit``: a package whose ``__init__`` the written import runs first (``import a.b.c``
    runs ``a/b/__init__.py``); ``typing_only``: under ``if TYPE_CHECKING:``, never run."""

    target: str
    line: int
    local: bool  # inside a function: runs when called, not when the module is imported
    comment: str
    implicit: bool = False
    typing_only: bool = False

    @property
    def runs_on_import(self) -> bool:
        """Whether importing the module runs this import."""
        return not (self.local or self.typing_only)


@dataclass(frozen=True)
class Source:
    """What a module imports when it is itself imported or run."""

    imports: tuple[Import, ...]
    external: frozenset[str]  # other packages' top-level names, imported at module level


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


class Package:
    """A package's sources under ``root`` (the folder of its ``__init__.py``), read as modules."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name

    def module_name(self, path: Path) -> str:
        parts = path.relative_to(self.root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    def is_module(self, dotted: str) -> bool:
        base = self.root.parent.joinpath(*dotted.split("."))
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

    def is_package(self, dotted: str) -> bool:
        return (self.root.parent.joinpath(*dotted.split(".")) / "__init__.py").is_file()

    def ours(self, dotted: str) -> bool:
        return dotted.split(".")[0] == self.name

    def longest_module(self, dotted: str) -> str | None:
        """The longest prefix of ``dotted`` that names one of our modules."""
        for name in [dotted, *reversed(_parents(dotted))]:
            if self.ours(name) and self.is_module(name):
                return name
        return None

    def imported(self, node: ast.stmt, package: str) -> tuple[list[str], list[str]]:
        """Our modules and the other packages an import statement names (``from seqlab import
        load`` is the package itself, ``from seqlab import tokens`` the module)."""
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
            return [n for n in names if self.ours(n)], [
                n.split(".")[0] for n in names if not self.ours(n)
            ]
        if not isinstance(node, ast.ImportFrom):
            return [], []
        module = node.module or ""
        if node.level:  # relative: from the importing module's package
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, module] if module else base)
        if not self.ours(module):
            return [], [module.split(".")[0]]
        subs = [f"{module}.{a.name}" for a in node.names]
        return [s if self.is_module(s) else module for s in subs], []

    def dynamic(self, node: ast.Call, tables: list[str]) -> list[str]:
        """The modules an ``importlib.import_module(...)`` call imports: its argument's when it
        is a literal, or an f-string or ``+`` that starts with constant text naming our package;
        else every module of the module's ``tables``."""
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name != "import_module" or not node.args:
            return []
        arg = node.args[0]
        while isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
            arg = arg.left
        if isinstance(arg, ast.JoinedStr):
            arg = arg.values[0] if arg.values else arg
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            return [m for m in tables if self.is_module(m)]
        text = arg.value if node.args[0] is arg else arg.value.rstrip(".")
        found = self.longest_module(text) if self.ours(text) else None
        return [found] if found else []

    def tables(self, tree: ast.Module) -> list[str]:
        """The modules named by the module-level dicts whose values are all our modules' names."""
        found: list[str] = []
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if not isinstance(value, ast.Dict) or not value.values:
                continue
            names = [v.value for v in value.values if isinstance(v, ast.Constant)]
            if len(names) == len(value.values) and all(
                isinstance(n, str) and self.ours(n) for n in names
            ):
                found += [n for n in names if n not in found]
        return found

    def read(self, path: Path) -> Source:
        text = path.read_text(encoding="utf-8")
        comments = _comments(text)
        name = self.module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        mine = {name, *_parents(name)}  # packages whose __init__ ran before this module
        imports: list[Import] = []
        external: set[str] = set()

        def add(node: ast.AST, targets: list[str], local: bool, typing_only: bool) -> None:
            lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            comment = " ".join(comments[n] for n in lines if n in comments)
            found = [Import(t, node.lineno, local, comment, False, typing_only) for t in targets]
            found += [
                Import(p, node.lineno, local, comment, True, typing_only)
                for t in targets
                for p in _parents(t)
                if p not in mine and p not in targets and self.is_package(p)
            ]
            imports.extend(i for i in dict.fromkeys(found) if i not in imports)

        def visit(nodes: list[ast.AST], local: bool, typing_only: bool) -> None:
            for node in nodes:
                if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                    visit(list(node.body), local, True)
                    visit(list(node.orelse), local, typing_only)
                    continue
                if isinstance(node, ast.Import | ast.ImportFrom):
                    ours, theirs = self.imported(node, package)
                    add(node, ours, local, typing_only)
                    if not local and not typing_only:
                        external.update(theirs)
                if isinstance(node, ast.Call) and (targets := self.dynamic(node, tables)):
                    add(node, targets, local, typing_only)
                inner = local or isinstance(
                    node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                )
                visit(list(ast.iter_child_nodes(node)), inner, typing_only)

        tree = ast.parse(text)
        tables = self.tables(tree)
        visit(list(tree.body), False, False)
        return Source(tuple(imports), frozenset(external))


def _comments(text: str) -> dict[int, str]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def import_graph(root: Path | None = None) -> dict[str, Source]:
    """Every module of the package at ``root`` (:data:`PACKAGE` unless given) and what it
    imports."""
    package = Package(root or PACKAGE)
    return {package.module_name(p): package.read(p) for p in sorted(package.root.rglob("*.py"))}


def _cycle_paths(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle of each strongly connected group of ``edges`` (Tarjan's algorithm), from its
    first node in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while not group or w != v:
                w = stack.pop()
                group.add(w)
            groups.append(group)

    for v in sorted(edges):
        if v not in index:
            connect(v)
    paths = []
    for group in (g for g in groups if len(g) > 1):
        start = min(group)
        came: dict[str, str] = {}
        frontier = [start]
        while start not in came:  # breadth first, inside the group, back to start
            frontier = [
                came.setdefault(w, v) and w
                for v in frontier
                for w in sorted(edges[v] & group)
                if w not in came
            ]
        path, node = [start], came[start]
        while node != start:
            path.append(node)
            node = came[node]
        paths.append([start, *reversed(path[1:]), start])
    return sorted(paths)


def cycles(graph: dict[str, Source]) -> list[str]:
    """A cycle of imports, ``a -> b -> a``, for each group of modules that import each other."""
    edges = {m: {i.target for i in s.imports if i.target in graph} - {m} for m, s in graph.items()}
    return [" -> ".join(path) for path in _cycle_paths(edges)]


def _under(relative: str, prefix: str) -> bool:
    return relative == prefix or (prefix != "" and relative.startswith(prefix + "."))


def layer_of(module: str) -> tuple[int, str] | None:
    """The layer of a module (its index in :data:`LAYERS`) and the prefix placing it there."""
    relative = module.removeprefix("seqlab").removeprefix(".")
    found = [(len(p), rank, p) for rank, ps in enumerate(LAYERS) for p in ps if _under(relative, p)]
    return max(found)[1:] if found else None


def layering_violations(graph: dict[str, Source]) -> list[str]:
    bad = []
    parts: dict[str, set[str]] = {}  # within a layer: which part imports which
    for module, source in sorted(graph.items()):
        mine = layer_of(module)
        if mine is None:
            bad.append(f"{module} is in no layer: add it to LAYERS")
            continue
        # a package that an import runs is in the layer of the module imported (each folder is
        # one layer), and what its __init__ imports is checked there
        for imp in (i for i in source.imports if not i.implicit):
            theirs = layer_of(imp.target)
            where = f"{module}:{imp.line} imports {imp.target}"
            if imp.typing_only:
                where += " (for the type checker)"
            if theirs is None:
                continue  # reported as a module of its own
            if theirs[0] > mine[0]:
                bad.append(f"{where}, of a higher layer ({theirs[1] or 'seqlab'} above {mine[1]})")
            elif theirs[0] == mine[0] and theirs[1] != mine[1]:
                parts.setdefault(mine[1], set()).add(theirs[1])
            target = imp.target.removeprefix("seqlab.")
            if any(_under(target, p) for p in APART.get(mine[1], ())):
                bad.append(f"{where}: {mine[1]} and {target.split('.')[0]} are kept apart")
    for path in _cycle_paths(parts):
        bad.append(f"parts of one layer import each other: {' -> '.join(path)}")
    return bad


def brings(module: str, graph: dict[str, Source]) -> set[str]:
    """The other packages that importing ``module`` imports: its own and its packages' imports
    at module level, and theirs, all the way down."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [module, *_parents(module)]
    while todo:
        name = todo.pop()
        if name in seen or name not in graph:
            continue
        seen.add(name)
        found |= graph[name].external
        todo += [i.target for i in graph[name].imports if i.runs_on_import] + _parents(name)
    return found


def deferral_violations(graph: dict[str, Source]) -> list[str]:
    bad = []
    for module, source in sorted(graph.items()):
        for imp in (i for i in source.imports if i.local and not (i.implicit or i.typing_only)):
            where = f"{module}:{imp.line} imports {imp.target} inside a function"
            reason = DEFERRED.search(imp.comment)
            if reason is None:
                bad.append(f"{where} with no '# deferred: <reason>' comment on its line")
                continue
            named = {w for w in HEAVY if re.search(rf"\b{re.escape(w)}\b", reason.group(1))}
            if not named:
                bad.append(f"{where}: its reason names no heavy dependency (one of HEAVY)")
            elif not named & brings(imp.target, graph) - brings(module, graph):
                bad.append(
                    f"{where}: it defers none of {', '.join(sorted(named))} (not brought by "
                    f"{imp.target}, or imported by {module} already)"
                )
    return bad


def test_no_modules_import_each_other_in_a_circle():
    found = cycles(import_graph())
    assert not found, "modules that import each other:\n" + "\n".join(found)


def test_every_layer_imports_only_its_own_and_the_layers_below_it():
    found = layering_violations(import_graph())
    assert not found, "\n".join(found)


def test_an_import_inside_a_function_defers_a_heavy_dependency_and_says_which():
    found = deferral_violations(import_graph())
    assert not found, "\n".join(found)


def folders_in_two_layers(graph: dict[str, Source]) -> list[str]:
    """Each folder (a package below the top one) whose modules are not all in one layer."""
    layers: dict[str, set[int]] = {}
    for module in graph:
        rank = layer_of(module)
        for folder in [*_parents(module)[1:], module]:
            if rank is not None and folder in graph and _is_folder(folder, graph):
                layers.setdefault(folder, set()).add(rank[0])
    return [f"{f} spans layers {sorted(r)}" for f, r in sorted(layers.items()) if len(r) > 1]


def _is_folder(module: str, graph: dict[str, Source]) -> bool:
    return any(other.startswith(module + ".") for other in graph)


def test_every_folder_is_in_exactly_one_layer():
    found = folders_in_two_layers(import_graph())
    assert not found, "\n".join(found)


def test_every_prefix_of_the_layers_names_a_module_of_the_package():
    package = Package(PACKAGE)
    missing = sorted(
        p for ps in LAYERS for p in ps if p and not package.is_module(f"{package.name}.{p}")
    )
    assert not missing, f"LAYERS names modules that do not exist: {missing}"
    named = [p for ps in LAYERS for p in ps]
    assert len(named) == len(set(named)), "a prefix is in two layers"


def _fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``seqlab`` of ``files`` (every folder a package) for the checks to read; its
    root."""
    fake = tmp_path / "seqlab"
    for name, text in {"__init__.py": "", **files}.items():
        path = fake / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents][: len(Path(name).parts)]:
            (folder / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    return fake


def test_the_cycle_check_sees_each_of_three_planted_cycles(tmp_path):
    """Three circles that a reading of ``import`` statements alone misses: one through a
    package's ``__init__`` (``from seqlab.data import text`` runs ``data/__init__.py``, which
    imports the model), one through ``importlib.import_module``, one under ``TYPE_CHECKING``;
    and what is no circle: a module importing its sibling through its own package."""
    root = _fake_package(
        tmp_path,
        {
            # 1. through a package __init__
            "data/__init__.py": "from seqlab.models import rnn\n",
            "data/text.py": "",
            "models/rnn.py": "from seqlab.data import text\n",
            # 2. through importlib, a literal and an f-string with a constant prefix
            "tasks/a.py": "import importlib\n\nimportlib.import_module('seqlab.tasks.b')\n",
            "tasks/b.py": "from importlib import import_module\n\n"
            "def f(name):\n    return import_module(f'seqlab.tasks.a.{name}')\n",
            # 3. under TYPE_CHECKING
            "training/trainer.py": "from seqlab.training import steps\n",
            "training/steps.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from seqlab.training.trainer import Trainer\n",
            # no circle: a sibling imported through the package's own __init__
            "nn/__init__.py": "from seqlab.nn import cells\n",
            "nn/cells.py": "from seqlab.nn import gates\n",
            "nn/gates.py": "",
        },
    )
    assert cycles(import_graph(root)) == [
        "seqlab.data -> seqlab.models.rnn -> seqlab.data",
        "seqlab.tasks.a -> seqlab.tasks.b -> seqlab.tasks.a",
        "seqlab.training.steps -> seqlab.training.trainer -> seqlab.training.steps",
    ]


def test_an_import_by_a_name_read_from_a_table_imports_every_module_of_the_table(tmp_path):
    """``import_module(name)`` with a name read from a module's table of module names is an
    import of each of them: a planted table in a lower layer naming a task is an upward import,
    and the same call with no table imports nothing the graph can name."""
    table = (
        "from importlib import import_module\n\n"
        "MODULES = {'a': 'seqlab.tasks.x', 'b': 'seqlab.nn.cells'}\n\n\n"
        "def load(name):\n    import_module(MODULES[name])  # deferred: torch\n"
    )
    root = _fake_package(
        tmp_path,
        {
            "data/plugins.py": table,
            "data/bare.py": "from importlib import import_module\n\nimport_module(NAME)\n",
            "nn/cells.py": "",
            "tasks/x.py": "",
        },
    )
    graph = import_graph(root)
    assert {i.target for i in graph["seqlab.data.plugins"].imports if not i.implicit} == {
        "seqlab.tasks.x",
        "seqlab.nn.cells",
    }
    assert graph["seqlab.data.bare"].imports == ()
    assert layering_violations(graph) == [
        "seqlab.data.plugins:7 imports seqlab.tasks.x, of a higher layer (tasks above data)"
    ]


def test_seqlab_s_own_tasks_and_models_are_imported_by_builtin_and_nowhere_lower():
    """The graph sees :mod:`seqlab.builtin` import every task package and architecture module its
    tables load, ``import seqlab`` import it, and the catalog import nothing but its records."""
    from seqlab import builtin

    graph = import_graph()
    targets = {i.target for i in graph["seqlab.builtin"].imports}
    loads = [*builtin.TASKS.values(), *builtin.MODELS.values()]
    assert {load().__name__ for load in loads} <= targets
    assert "seqlab.builtin" in {i.target for i in graph["seqlab"].imports}
    assert {i.target for i in graph["seqlab.catalog"].imports} == {
        "seqlab.records",
        "seqlab.builtin_records",
    }


def test_the_layering_check_sees_an_upward_import_through_a_package_or_importlib(tmp_path):
    """An ``importlib`` call or a type named for the type checker can import upward; an import
    of a package's module runs the package's ``__init__`` too (whose own imports are checked
    where they are written); a folder whose modules sit in two layers is found."""
    root = _fake_package(
        tmp_path,
        {
            "nn/__init__.py": "from seqlab.training import trainer\n",
            "nn/cells.py": "",
            "models/toy.py": "from seqlab.nn import cells\n",
            "data/text.py": "import importlib\n\nimportlib.import_module('seqlab.tasks.x')\n",
            "tokens.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from seqlab.config import C\n",
            "config.py": "",
            "tasks/x.py": "",
            "training/trainer.py": "",
        },
    )
    graph = import_graph(root)
    assert layering_violations(graph) == [
        "seqlab.data.text:3 imports seqlab.tasks.x, of a higher layer (tasks above data)",
        "seqlab.nn:1 imports seqlab.training.trainer, of a higher layer (training above nn)",
        "seqlab.tokens:4 imports seqlab.config (for the type checker), of a higher layer (config "
        "above tokens)",
    ]
    assert [i.target for i in graph["seqlab.models.toy"].imports] == [
        "seqlab.nn.cells",
        "seqlab.nn",
    ]
    assert folders_in_two_layers(graph) == []
    (root / "nn" / "fused.py").write_text("")
    LAYERS[1].add("nn.fused")
    try:
        assert folders_in_two_layers(import_graph(root)) == ["seqlab.nn spans layers [1, 3]"]
    finally:
        LAYERS[1].discard("nn.fused")


def test_the_cycle_check_sees_a_cycle_also_through_an_import_inside_a_function(tmp_path):
    root = _fake_package(
        tmp_path,
        {
            "tasks/__init__.py": "from seqlab.tasks import a\n",
            "tasks/a.py": "def f():\n    from seqlab.tasks import b  # deferred: torch\n",
            "tasks/b.py": "from seqlab.tasks.a import f\n",
        },
    )
    assert cycles(import_graph(root)) == ["seqlab.tasks.a -> seqlab.tasks.b -> seqlab.tasks.a"]


def test_the_layering_check_sees_an_upward_import(tmp_path):
    """The check finds an import that breaks the order, also one inside a function, two parts of
    one layer importing each other, parts kept apart, and a module in no layer."""
    root = _fake_package(
        tmp_path,
        {
            "models/toy.py": "from seqlab.nn import attention\n\ndef f():\n"
            "    from seqlab.training import trainer  # deferred: torch\n",
            "models/near.py": "import seqlab.data.text\n",
            "nn/attention.py": "from seqlab import tokens\n",
            "tokens.py": "",
            "training/trainer.py": "from seqlab.objective import Selection\n",
            "data/text.py": "from seqlab.atomic import atomic_open\n",
            "atomic.py": "",
            "objective.py": "from seqlab.export import e1\n",
            "export/e1.py": "",
            "export/e2.py": "from seqlab import objective\n",
            "extra.py": "",
        },
    )
    assert layering_violations(import_graph(root)) == [
        "seqlab.extra is in no layer: add it to LAYERS",
        "seqlab.models.near:1 imports seqlab.data.text: models and data are kept apart",
        "seqlab.models.toy:4 imports seqlab.training.trainer, of a higher layer (training above "
        "models)",
        "parts of one layer import each other: export -> objective -> export",
    ]


def test_the_deferral_check_sees_an_import_inside_a_function_that_defers_nothing_heavy(tmp_path):
    root = _fake_package(
        tmp_path,
        {
            "errors.py": "",
            "plotting.py": "import matplotlib\n",
            "tasks/base.py": "import torch\n",
            "tasks/a.py": """\
                import torch

                def ok():
                    from seqlab.plotting import plot  # deferred: matplotlib
                    from seqlab.plotting import (  # deferred: matplotlib, on the first line
                        line,
                    )

                def bare():
                    from seqlab.errors import SeqlabError

                def vague():
                    from seqlab.plotting import plot  # deferred: it is slow

                def untrue():
                    from seqlab.errors import SeqlabError  # deferred: torch

                def already():
                    from seqlab.tasks import base  # deferred: torch
                """,
        },
    )
    assert deferral_violations(import_graph(root)) == [
        "seqlab.tasks.a:10 imports seqlab.errors inside a function with no '# deferred: <reason>' "
        "comment on its line",
        "seqlab.tasks.a:13 imports seqlab.plotting inside a function: its reason names no heavy "
        "dependency (one of HEAVY)",
        "seqlab.tasks.a:16 imports seqlab.errors inside a function: it defers none of torch (not "
        "brought by seqlab.errors, or imported by seqlab.tasks.a already)",
        "seqlab.tasks.a:19 imports seqlab.tasks.base inside a function: it defers none of torch "
        "(not brought by seqlab.tasks.base, or imported by seqlab.tasks.a already)",
    ]


# ------------------------------------------------------------------ inference, measured
#: for each task, a tiny run (tests/tiny_runs.py) and what is done with it once loaded
USES = {
    "translation": ("mt", "m.translate(['saturday 9 may 1998']), m.evaluate_split('val')"),
    "text classification": ("cls", "m.classify(['a great film']), m.evaluate_split('val')"),
    "image classification": ("vit", "m.classify(torch.rand(2, 1, 28, 28))"),
    "language model": ("lm", "m.generate('the time', tokens=5), m.evaluate_split('val')"),
    "forecaster": ("fc", "m.forecast([0.0, 0.5, 1.0, 0.5], 3), m.evaluate_split('test')"),
}

SCRIPT = """
import json, sys, warnings
import torch
import seqlab
{before}
warnings.simplefilter("ignore")
m = seqlab.load(sys.argv[1])
out = ({use},)
training = sorted(
    name for name in sys.modules
    if name in ("seqlab.training", "seqlab.experiment") or name.startswith("seqlab.training.")
)
print(json.dumps({{"training": training, "type": type(m).__name__, "results": len(out[0])}}))
"""


def _load_in_fresh_process(run: Path, use: str, before: str = "") -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SEQLAB_OFFLINE": "1"}
    script = textwrap.dedent(SCRIPT).format(use=use, before=before)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(run)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("task", USES)
def test_loading_and_using_a_run_imports_no_training_module(tiny_runs, task):
    name, use = USES[task]
    found = _load_in_fresh_process(tiny_runs[name], use)
    assert found["results"] > 0  # the model was used, not only loaded
    assert found["training"] == [], f"{task}: inference imported {found['training']}"


def test_the_measurement_sees_a_training_import(tiny_runs):
    """The same measurement reports the trainer when something on the way imports it."""
    name, use = USES["forecaster"]
    found = _load_in_fresh_process(tiny_runs[name], use, before="import seqlab.experiment")
    assert "seqlab.training.trainer" in found["training"] and found["type"] == "Forecaster"


def test_the_inference_commands_name_no_task():
    """``cli/infer.py`` (evaluate, translate, classify, generate, forecast, predict) imports no
    task's package and no export: what a task adds to a command (translation's core layout and
    ensembles) comes through the predictor's hooks (``before_load``, ``for_command``, ``check``).
    ``cli/serve.py`` (the server's engine settings) and ``cli/tools.py`` (n-gram baselines) still
    name translation and language modelling."""
    tasks = [f"seqlab.{p}" for p in ("export", "tasks.translation", "tasks.classification")] + [
        f"seqlab.tasks.{t}" for t in ("audio", "language_modeling", "forecasting")
    ]
    source = import_graph()["seqlab.cli.infer"]
    named = [i.target for i in source.imports if any(i.target.startswith(t) for t in tasks)]
    assert named == []
    text = (PACKAGE / "cli" / "infer.py").read_text(encoding="utf-8")
    assert not re.search(r"ctranslate2|ensemble|give_cores", text)
