"""Every module of the package reads in one sitting: no module is longer than
:data:`MAX_MODULE_LINES` lines, no class longer than :data:`MAX_CLASS_LINES` (counted by ``ast``,
from the ``class`` line, its decorators not included, to its last line)."""

from __future__ import annotations

import ast
from pathlib import Path

import seqlab

PACKAGE = Path(seqlab.__file__).parent
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300


def module_lines() -> list[tuple[int, str]]:
    """(lines, path) of every module, longest first."""
    found = [
        (len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(PACKAGE.parent)))
        for p in PACKAGE.rglob("*.py")
    ]
    return sorted(found, reverse=True)


def class_lines() -> list[tuple[int, str]]:
    """(lines, path:Class) of every class, nested ones too, longest first."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((size, f"{path.relative_to(PACKAGE.parent)}:{node.name}"))
    return sorted(found, reverse=True)


def test_no_module_is_longer_than_500_lines():
    sizes = module_lines()
    over = [f"{n} {name}" for n, name in sizes if n > MAX_MODULE_LINES]
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them along a seam): {over}"
    print("largest module:", *sizes[0])


def test_no_class_is_longer_than_300_lines():
    sizes = class_lines()
    over = [f"{n} {name}" for n, name in sizes if n > MAX_CLASS_LINES]
    assert not over, f"classes over {MAX_CLASS_LINES} lines: {over}"
    print("largest class:", *sizes[0])
