"""What a tutorial page reads to size itself, and where it puts its runs and figures.

The tutorials of the docs site (``docs/tutorials/*.md``) are Jupyter notebooks kept as Markdown
(jupytext's ``markdown`` format): the site shows them as pages, Jupyter opens them as notebooks
(``pip install jupyterlab jupytext``, then open the ``.md`` file), and ``make figures`` or the test
suite runs them top to bottom (``docs/_hooks/notebooks.py``). One environment variable sizes every
page:

- ``SEQLAB_BUDGET=full`` (the default): the budget a learner waits for, about a minute a page on
  2 cores; ``make figures`` draws the site's figures at this budget;
- ``SEQLAB_BUDGET=smoke``: seconds a page, tiny steps and data; the test suite runs every page so.

Figures go to ``$SEQLAB_FIGURES`` (default ``figures/`` beside the page, the folder the site shows)
and runs to ``$SEQLAB_RUNS`` (default ``runs/tutorials/``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

from seqlab.errors import ConfigError

T = TypeVar("T")

BUDGET = "SEQLAB_BUDGET"
FIGURES = "SEQLAB_FIGURES"
RUNS = "SEQLAB_RUNS"
BUDGETS = ("full", "smoke")


def budget_name() -> str:
    """``"full"`` or ``"smoke"``, from ``$SEQLAB_BUDGET`` (unset or empty: ``"full"``)."""
    name = os.environ.get(BUDGET, "").strip() or "full"
    if name not in BUDGETS:
        raise ConfigError(f"${BUDGET}={name!r}: expected one of {', '.join(BUDGETS)}")
    return name


def smoke() -> bool:
    """True when the page runs at the smoke budget (the test suite)."""
    return budget_name() == "smoke"


def budget(full: T, smoke: T) -> T:
    """``full`` at the full budget, ``smoke`` at the smoke budget: ``steps = budget(600, 5)``."""
    return smoke if budget_name() == "smoke" else full


def figure_path(name: str) -> Path:
    """Where a page writes its figure ``name`` (``$SEQLAB_FIGURES/name``, default ``figures/``)."""
    folder = Path(os.environ.get(FIGURES, "") or "figures")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def run_path(name: str) -> Path:
    """A run directory for a page's model, ``$SEQLAB_RUNS/name`` (default ``runs/tutorials/``);
    an earlier tutorial run there is removed first, anything else is refused."""
    from seqlab.demos.dates import clear_earlier_run  # deferred: torch (training)

    path = Path(os.environ.get(RUNS, "") or "runs/tutorials") / name
    clear_earlier_run(path)
    return path


def show(path: str | Path) -> Any:
    """The figure at ``path`` shown in Jupyter (an ``IPython.display.Image``), or the path itself
    outside it."""
    try:
        from IPython.display import Image
    except ImportError:
        return Path(path)
    return Image(filename=str(path))
