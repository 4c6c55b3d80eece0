"""The package's layers: dependencies point one way, and inference never imports training code.

Read from the sources (every ``import``, also those inside functions): building blocks (``nn/``),
models and data import nothing above them; the run directory (``rundir``, ``checkpoints``) and
the task-trainer contract (``objective``) sit below both ``tasks/`` and ``training/``; tasks never
import the trainer and the trainer knows no model or task; the catalog (``catalog``), where
every layer registers its models, datasets, cells and task rules, imports nothing of seqlab.
And measured in a fresh process: loading a trained run with :func:`seqlab.load` and using it
imports no ``seqlab.training`` module.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import seqlab

PACKAGE = Path(seqlab.__file__).parent

#: what each layer must never import (first dotted parts below ``seqlab``)
ABOVE_INFERENCE = {"tasks", "training", "experiment", "cli", "demos", "serve", "analysis"}
FORBIDDEN = {
    "nn": ABOVE_INFERENCE | {"models", "data", "config", "export", "rundir", "checkpoints"},
    "models": ABOVE_INFERENCE | {"data", "export", "rundir", "checkpoints"},
    "data": ABOVE_INFERENCE | {"models", "config", "export", "rundir", "checkpoints"},
    "objective": ABOVE_INFERENCE | {"rundir", "checkpoints"},
    "checkpoints": ABOVE_INFERENCE | {"rundir"},
    "rundir": ABOVE_INFERENCE,
    "precision": ABOVE_INFERENCE,
    "config": ABOVE_INFERENCE,
    "export": ABOVE_INFERENCE,
    "tasks": ABOVE_INFERENCE - {"tasks"},
    "training": ABOVE_INFERENCE - {"training"} | {"models", "data"},
    # every layer registers its records in the catalog: it imports no other part of seqlab
    "catalog": {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()} - {"catalog"},
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = PACKAGE.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def seqlab_imports(path: Path) -> set[str]:
    """The ``seqlab`` modules a source file imports, anywhere in it (``from seqlab import load``
    is the package itself, ``from seqlab import tokens`` the module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "seqlab"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "seqlab":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if _is_module(sub) else node.module)
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layering_violations() -> list[str]:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        forbidden = FORBIDDEN.get(_layer(module), set())
        for imported in sorted(seqlab_imports(path)):
            if _layer(imported) in forbidden:
                bad.append(f"{module} imports {imported}")
    return bad


def test_every_layer_imports_only_layers_below_it():
    assert layering_violations() == []


def test_the_layering_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The check above finds an import that breaks the rules, also one inside a function."""
    fake = tmp_path / "seqlab"
    (fake / "models").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "models" / "__init__.py").write_text("")
    (fake / "models" / "toy.py").write_text(
        "from seqlab.nn import attention\n\ndef f():\n    from seqlab.training import trainer\n"
    )
    (fake / "nn").mkdir()
    (fake / "nn" / "__init__.py").write_text("")
    (fake / "nn" / "ok.py").write_text("from seqlab import tokens\n")
    (fake / "tokens.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    assert layering_violations() == ["seqlab.models.toy imports seqlab.training"]


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
