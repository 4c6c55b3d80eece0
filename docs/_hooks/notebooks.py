"""Run the tutorials (``docs/tutorials/*.md``) top to bottom, as Jupyter would.

Each tutorial is a notebook in jupytext's Markdown form: ```` ```python ```` blocks are code cells,
```` ```sh ```` blocks are ``%%sh`` cells, everything else is Markdown. This runner executes the code
cells in order in one namespace (shell cells with bash), so a page runs without a Jupyter kernel:

    python docs/_hooks/notebooks.py --budget smoke docs/tutorials/*.md      # seconds a page
    python docs/_hooks/notebooks.py --budget full docs/tutorials/01-*.md    # ~1 min a page
    make figures                                                            # every page, full

Two comments in a page's Markdown steer a run without showing on the site:

- ``<!-- smoke: ARGS -->`` just before a shell block: at the smoke budget, ``ARGS`` are appended to
  each ``seqlab`` command of that block (``<!-- smoke: --steps 3 -->``, ``train.max_steps=2``);
- the exercises' worked answers, ```` ```py ```` blocks folded in ``<details>``, are not cells;
  ``--answers`` runs them after the page, each in a copy of the page's namespace.

Figures go to ``--figures`` (``$SEQLAB_FIGURES``; default: the site's ``figures/`` beside the
page), runs to ``--runs`` (``$SEQLAB_RUNS``), the budget to ``$SEQLAB_BUDGET``, the seed of the models a page trains to ``--seed``
(``$SEQLAB_SEED``, default 0): :mod:`seqlab.demos.notebook` reads them. Three seeds of one page,
away from the committed figures::

    for s in 0 1 2; do python docs/_hooks/notebooks.py --seed $s --figures /tmp/f$s --runs /tmp/r$s PAGE; done

A shell cell's ``seqlab`` is the one of the Python running this script, as in a Jupyter kernel
(:func:`seqlab.demos.notebook.kernel_seqlab`).
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jupytext

from seqlab.demos.notebook import kernel_seqlab

SMOKE = re.compile(r"<!--\s*smoke:\s*(.*?)\s*-->", re.S)
ANSWER = re.compile(r"<details[^>]*>.*?</details>", re.S)
PY_FENCE = re.compile(r"^([ \t]*)```py\n(.*?)^\1```", re.M | re.S)


def smoke_args(markdown: str) -> str | None:
    """The ``ARGS`` of the last ``<!-- smoke: ARGS -->`` comment in ``markdown``, if any."""
    found = SMOKE.findall(markdown)
    return found[-1] if found else None


def with_args(script: str, args: str) -> str:
    """``script`` with ``args`` appended to each of its ``seqlab`` commands (a command continued
    with ``\\`` ends on its last line; a comment after it stays last)."""
    lines = script.replace("\\\n", "\x00").split("\n")
    out = []
    for line in lines:
        if re.match(r"\s*(\$\s*)?seqlab\s", line):
            code, hash_, comment = line.partition(" #")
            line = f"{code.rstrip()} {args}" + (f"  #{comment}" if hash_ else "")
        out.append(line)
    return "\n".join(out).replace("\x00", "\\\n")


def answers(markdown: str) -> list[str]:
    """The ```` ```py ```` blocks inside ``<details>`` (the exercises' worked answers)."""
    return [
        textwrap.dedent(code)
        for block in ANSWER.findall(markdown)
        for _, code in PY_FENCE.findall(block)
    ]


def run_page(page: Path, run_answers: bool = False, log=print) -> None:
    """Execute ``page``'s code cells in order; raise on the first failing cell, naming it."""
    notebook = jupytext.read(page)
    namespace: dict = {"__name__": "__main__"}
    markdown = ""
    for number, cell in enumerate(notebook.cells, 1):
        if cell.cell_type == "markdown":
            markdown = cell.source
            continue
        if cell.cell_type != "code":
            continue
        where = f"{page}: cell {number}"
        start = time.monotonic()
        if cell.source.startswith("%%sh"):
            script = cell.source.split("\n", 1)[1] if "\n" in cell.source else ""
            args = smoke_args(markdown)
            if args and os.environ.get("SEQLAB_BUDGET") == "smoke":
                script = with_args(script, args)
            kernel_seqlab()  # `seqlab` is this Python's, as in a Jupyter kernel
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], check=False)
            if done.returncode:
                raise RuntimeError(f"{where}: shell cell exited {done.returncode}:\n{script}")
        else:
            exec(compile(cell.source, where, "exec"), namespace)  # noqa: S102 - our own pages
        log(f"{where}: {time.monotonic() - start:.1f} s")
        markdown = ""
    if run_answers:
        text = page.read_text(encoding="utf-8")
        for number, code in enumerate(answers(text), 1):
            where = f"{page}: answer {number}"
            start = time.monotonic()
            exec(compile(code, where, "exec"), copy.copy(namespace))  # noqa: S102
            log(f"{where}: {time.monotonic() - start:.1f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--budget", choices=("full", "smoke"), default="full")
    parser.add_argument("--figures", type=Path, help="figure folder (default: figures/ per page)")
    parser.add_argument("--runs", type=Path, help="run folder (default: runs/tutorials/)")
    parser.add_argument("--answers", action="store_true", help="also run the worked answers")
    parser.add_argument("--seed", type=int, help="seed of the models a page trains (default 0)")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    os.environ["SEQLAB_BUDGET"] = args.budget
    if args.runs:
        os.environ["SEQLAB_RUNS"] = str(args.runs.resolve())
    if args.seed is not None:
        os.environ["SEQLAB_SEED"] = str(args.seed)
    for page in args.pages:
        page = page.resolve()
        figures = args.figures or page.parent / "figures"
        os.environ["SEQLAB_FIGURES"] = str(figures.resolve())
        start = time.monotonic()
        run_page(page, args.answers)
        print(f"{page.name}: {time.monotonic() - start:.1f} s at the {args.budget} budget")


if __name__ == "__main__":
    sys.exit(main())
