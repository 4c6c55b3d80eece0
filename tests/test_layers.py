"""The package's layers: dependencies point one way, nothing imports in a circle, and inference
never imports training code.

Read from the sources, every ``import`` (those inside functions too; not those under ``if
TYPE_CHECKING:``, which never run):

- **no cycle** between modules (:func:`cycles`);
- **layers** (:data:`LAYERS`, lowest first): a module imports only modules of its own layer or
  below; within a layer its parts (the prefixes listed) import each other one way only, and some
  parts that the order allows to meet are kept apart (:data:`APART`);
- **an import of seqlab inside a function** is there only to defer a heavy dependency, and says
  which on its line: ``# deferred: <reason>``, the reason naming a dependency of :data:`HEAVY`
  that the imported module brings (when imported: through its packages and their imports too)
  and the importing module does not already import (:func:`deferral_violations`). A cycle is
  never dodged that way: it is fixed by moving code to its layer.

And measured in a fresh process: loading a trained run with :func:`seqlab.load` and using it
imports no ``seqlab.training`` module.

The order, as the modules use each other:

1. ``errors``, ``tokens``, ``deprecation``, ``catalog``: the words every layer shares. They import
   nothing of seqlab, so that every layer can register its models, datasets, cells and task
   rules in the catalog.
2. ``runtime`` (precision, machine, progress, allocator), ``storage.atomic``, ``storage.text``,
   ``storage.config_files``: the process, and safe file reading and writing (of config files
   too), used from the data readers to the CLI.
3. ``config``, ``plotting``: the experiment's configuration and the figures, written with layer 2;
   the dataset statistics draw figures, so plotting sits below ``data``.
4. ``nn``: the building blocks (they read their cell records in the catalog).
5. ``models`` (built from blocks and a model config), ``data``: neither knows the other.
6. ``storage`` (the run directory, checkpoints, outputs), ``objective`` (what a task hands the
   trainer), ``export`` (a run's model written for CTranslate2): below both tasks and training.
7. ``tasks``, with the parts of ``serve`` a task's handler uses (``serve.limits``,
   ``serve.batching``, ``serve.schemas``, ``serve.service``, ``serve.handlers``): data + model +
   loss + inference for one problem, and the registry of them.
8. ``training``, ``experiment``: the trainer knows no model, dataset or task; an experiment joins
   a task's data and model to the trainer.
9. ``analysis``, ``demos.summary``: measurements of the building blocks, and the sentences every
   analysis and demo prints (about a run directory).
10. ``demos``: train, load and measure, end to end (one of them draws an analysis).
11. the entry points: ``seqlab`` itself (:func:`seqlab.load`), ``serve``, ``serve.app`` and
    ``serve.http`` (the HTTP application over the tasks' registry), ``cli`` and ``__main__``.
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
    {"errors", "tokens", "deprecation", "catalog", "audio_limits"},
    {"runtime", "storage.atomic", "storage.text", "storage.config_files"},
    {"config", "plotting"},
    {"nn"},
    {"models", "data"},
    {"storage", "objective", "export"},
    {"tasks", "serve.limits", "serve.batching", "serve.schemas", "serve.service", "serve.handlers"},
    {"training", "experiment"},
    {"analysis", "demos.summary"},
    {"demos"},
    {"", "__main__", "serve", "serve.app", "serve.http", "cli"},
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
    """One ``seqlab`` module that a module imports, where, and the comments on those lines."""

    target: str
    line: int
    local: bool  # inside a function: runs when called, not when the module is imported
    comment: str


@dataclass(frozen=True)
class Source:
    """What a module imports when it is itself imported or run."""

    imports: tuple[Import, ...]
    external: frozenset[str]  # other packages' top-level names, imported at module level


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = PACKAGE.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _comments(text: str) -> dict[int, str]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def _imported(node: ast.stmt, package: str) -> tuple[list[str], list[str]]:
    """The seqlab modules and the other packages an import statement names (``from seqlab import
    load`` is the package itself, ``from seqlab import tokens`` the module)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return [n for n in names if n.split(".")[0] == "seqlab"], [
            n.split(".")[0] for n in names if n.split(".")[0] != "seqlab"
        ]
    if not isinstance(node, ast.ImportFrom):
        return [], []
    module = node.module or ""
    if node.level:  # relative: from the importing module's package
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join([*base, module] if module else base)
    if module.split(".")[0] != "seqlab":
        return [], [module.split(".")[0]]
    subs = [f"{module}.{a.name}" for a in node.names]
    return [s if _is_module(s) else module for s in subs], []


def read_source(path: Path) -> Source:
    text = path.read_text(encoding="utf-8")
    comments = _comments(text)
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imports: list[Import] = []
    external: set[str] = set()

    def visit(nodes: list[ast.AST], local: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                visit(list(node.orelse), local)
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                ours, theirs = _imported(node, package)
                lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
                comment = " ".join(comments[n] for n in lines if n in comments)
                found = (Import(t, node.lineno, local, comment) for t in ours)
                imports.extend(i for i in dict.fromkeys(found) if i not in imports)
                if not local:
                    external.update(theirs)
            inner = local or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(list(ast.iter_child_nodes(node)), inner)

    visit(list(ast.parse(text).body), False)
    return Source(tuple(imports), frozenset(external))


def import_graph() -> dict[str, Source]:
    """Every module of the package (under :data:`PACKAGE`) and what it imports."""
    return {_module_name(p): read_source(p) for p in sorted(PACKAGE.rglob("*.py"))}


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
        for imp in source.imports:
            theirs = layer_of(imp.target)
            where = f"{module}:{imp.line} imports {imp.target}"
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


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


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
        todo += [i.target for i in graph[name].imports if not i.local] + _parents(name)
    return found


def deferral_violations(graph: dict[str, Source]) -> list[str]:
    bad = []
    for module, source in sorted(graph.items()):
        for imp in (i for i in source.imports if i.local):
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


def _fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """A package ``seqlab`` of ``files`` (every folder a package) that the checks read."""
    fake = tmp_path / "seqlab"
    for name, text in {"__init__.py": "", **files}.items():
        path = fake / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for folder in [path.parent, *path.parent.parents][: len(Path(name).parts)]:
            (folder / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)


def test_the_cycle_check_sees_a_cycle_also_through_an_import_inside_a_function(
    tmp_path, monkeypatch
):
    _fake_package(
        tmp_path,
        monkeypatch,
        {
            "tasks/__init__.py": "from seqlab.tasks import a\n",
            "tasks/a.py": "def f():\n    from seqlab.tasks import b  # deferred: torch\n",
            "tasks/b.py": "from seqlab.tasks.a import f\n",
            "tasks/c.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            "    from seqlab.tasks import d\n",
            "tasks/d.py": "from seqlab.tasks import c\n",
        },
    )
    assert cycles(import_graph()) == ["seqlab.tasks.a -> seqlab.tasks.b -> seqlab.tasks.a"]


def test_the_layering_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The check finds an import that breaks the order, also one inside a function, two parts of
    one layer importing each other, parts kept apart, and a module in no layer."""
    _fake_package(
        tmp_path,
        monkeypatch,
        {
            "models/toy.py": "from seqlab.nn import attention\n\ndef f():\n"
            "    from seqlab.training import trainer  # deferred: torch\n",
            "models/near.py": "import seqlab.data.text\n",
            "nn/attention.py": "from seqlab import tokens\n",
            "tokens.py": "",
            "training/trainer.py": "from seqlab.objective import Selection\n",
            "data/text.py": "from seqlab.storage.atomic import atomic_open\n",
            "storage/atomic.py": "",
            "objective.py": "from seqlab.export import e1\n",
            "export/e1.py": "",
            "export/e2.py": "from seqlab import objective\n",
            "extra.py": "",
        },
    )
    assert layering_violations(import_graph()) == [
        "seqlab.extra is in no layer: add it to LAYERS",
        "seqlab.models.near:1 imports seqlab.data.text: models and data are kept apart",
        "seqlab.models.toy:4 imports seqlab.training.trainer, of a higher layer (training above "
        "models)",
        "parts of one layer import each other: export -> objective -> export",
    ]


def test_the_deferral_check_sees_an_import_inside_a_function_that_defers_nothing_heavy(
    tmp_path, monkeypatch
):
    _fake_package(
        tmp_path,
        monkeypatch,
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
    assert deferral_violations(import_graph()) == [
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
