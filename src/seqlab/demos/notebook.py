"""What a tutorial page reads to size itself, and where it puts its runs and figures.

The tutorials of the docs site (``docs/tutorials/*.md``) are Jupyter notebooks kept as Markdown
(jupytext's ``markdown`` format): the site shows them as pages, Jupyter opens them as notebooks
(``pip install jupyterlab jupytext``, then open the ``.md`` file), and ``make figures`` or the test
suite runs them top to bottom (``docs/_hooks/notebooks.py``). One environment variable sizes every
page:

- ``SEQLAB_BUDGET=full`` (the default): the budget a learner waits for, about a minute a page on
  2 cores; ``make figures`` draws the site's figures at this budget;
- ``SEQLAB_BUDGET=smoke``: seconds a page, tiny steps and data; the test suite runs every page so.

Figures go to ``$SEQLAB_FIGURES`` and runs to ``$SEQLAB_RUNS`` (default ``runs/tutorials/``):
a page trains its models anew on every run (:func:`run_path`), or, for recipes that take longer
than a page should, once, reusing the finished run after (:func:`trained`, page 10c).
The site's figures (``docs/tutorials/figures/``) are drawn only by ``make figures`` and the page
runner, which name that folder; a page run in Jupyter, with ``$SEQLAB_FIGURES`` unset, writes its
figures to a scratch folder, ``runs/tutorials/figures/`` (ignored by git), and never over the
committed ones. ``$SEQLAB_SEED`` (default 0) seeds the models a page trains (:func:`seed`,
``train.seed``): the pages' figures and numbers are seed 0's, and
``docs/_hooks/notebooks.py --seed 1`` reruns a page with another seed to see what varies.

A page's shell cells (``%%sh``) call ``seqlab``: importing this module puts first on ``PATH`` a
``seqlab`` command that runs ``python -m seqlab`` with the Python running the kernel
(:func:`kernel_seqlab`), so that a kernel started without its virtual environment activated still
runs its own seqlab, not another one or none.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from seqlab.config import load_config
from seqlab.errors import ConfigError, SeqlabError

T = TypeVar("T")

BUDGET = "SEQLAB_BUDGET"
FIGURES = "SEQLAB_FIGURES"
RUNS = "SEQLAB_RUNS"
SEED = "SEQLAB_SEED"
BUDGETS = ("full", "smoke")
#: where a page run outside ``make figures`` and the runner puts its figures
SCRATCH_FIGURES = Path("runs") / "tutorials" / "figures"


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


def seed() -> int:
    """The seed of the models a page trains, from ``$SEQLAB_SEED`` (unset or empty: 0); a page
    passes it as ``f"train.seed={seed()}"``, which also draws its generated data."""
    text = os.environ.get(SEED, "").strip() or "0"
    if not text.isdigit() or int(text) > 2**32 - 1:
        raise ConfigError(f"${SEED}={text!r}: expected a whole number from 0 to 2**32 - 1")
    return int(text)


def figure_path(name: str) -> Path:
    """Where a page writes its figure ``name``: ``$SEQLAB_FIGURES/name``, and when that is unset
    (a page run in Jupyter) the scratch folder ``runs/tutorials/figures/name``, never the site's
    committed ``figures/``."""
    folder = Path(os.environ.get(FIGURES, "") or SCRATCH_FIGURES)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def run_path(name: str) -> Path:
    """A run directory for a page's model, ``$SEQLAB_RUNS/name`` (default ``runs/tutorials/``);
    an earlier tutorial run there is removed first, anything else is refused."""
    from seqlab.demos.dates import clear_earlier_run  # deferred: torch (training)

    path = Path(os.environ.get(RUNS, "") or "runs/tutorials") / name
    clear_earlier_run(path)
    return path


#: config keys that say how or where a run was trained, not what: a finished run that differs
#: from the config asked for only in these is still that run (:func:`trained`); ``max_minutes``
#: only caps the work that ``epochs``/``max_steps`` set
HOW_TRAINED = (
    "train.threads",
    "train.device",
    "train.compile",
    "train.log_every",
    "train.max_minutes",
)


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def finished_run(path: str | Path) -> bool:
    """Whether ``path`` holds a seqlab run whose training ended: its ``run.json`` marker, a
    ``best`` checkpoint, and the ``end`` record in ``metrics.jsonl`` (and the ``average`` record
    after it, when the run averages its last checkpoints, ``train.average_last``). A run that
    is still training, or was stopped, holds no ``end`` record."""
    from seqlab.storage.rundir import RunDir  # deferred: torch (checkpoints)
    from seqlab.training.callbacks import read_metrics  # deferred: torch (training)

    run = RunDir(path)
    if not run.is_run() or not run.metrics_path.is_file():
        return False
    try:
        run.checkpoint("best")
        kinds = {r.get("kind") for r in read_metrics(run.metrics_path)}
        averages = run.read_config().train.average_last > 1
    except SeqlabError:
        return False
    return "end" in kinds and (not averages or "average" in kinds)


def trained(
    config: str | Path, overrides: list[str] | None = None, name: str | None = None
) -> Path:
    """The run directory ``$SEQLAB_RUNS/name`` (default ``runs/tutorials/``; ``name``: the
    config's name) of ``config`` trained with ``overrides``, trained only when that folder holds
    no finished run: a page whose models are long recipes trains them once and every later run
    of the page reuses them (:func:`run_path` trains anew every time).

    - no folder: the run is trained there;
    - a finished run (:func:`finished_run`) of the same config is reused as it is (keys of
      :data:`HOW_TRAINED` may differ: ``train.threads``, …); nothing is trained;
    - an earlier run that did not finish (stopped, crashed) is removed and trained again, saying
      so; one that another process is training right now is refused
      (:class:`~seqlab.errors.SeqlabError`);
    - a finished run of another config (a smoke run where the full one is asked for, another
      seed) is refused, naming the keys that differ: a finished run is never deleted here;
    - a folder that is not a seqlab run (no ``run.json``), or an unfinished run holding files
      seqlab did not write, is refused, deleting nothing (:class:`~seqlab.errors.ConfigError`).
    """
    from seqlab.demos.dates import clear_earlier_run  # deferred: torch (training)
    from seqlab.experiment import absolute_data_path, train  # deferred: torch (training)
    from seqlab.storage.rundir import RunDir  # deferred: torch (checkpoints)

    cfg = absolute_data_path(load_config(config, list(overrides or [])))
    path = Path(os.environ.get(RUNS, "") or "runs/tutorials") / (name or cfg.name)
    if path.exists():
        if not RunDir(path).is_run():
            raise ConfigError(
                f"{path} exists and is not a seqlab run (no run.json); a page keeps its trained "
                "models there: move it away or choose another name (nothing was deleted)"
            )
        if finished_run(path):
            ran = _flat(RunDir(path).read_config().model_dump(mode="json"))
            asked = _flat(cfg.model_dump(mode="json"))
            differ = sorted(
                k
                for k in ran.keys() | asked.keys()
                if ran.get(k) != asked.get(k) and k not in HOW_TRAINED
            )
            if not differ:
                print(f"{path}: a finished run of {cfg.name}, reused")
                return path
            shown = ", ".join(f"{k}={ran.get(k)!r} (asked {asked.get(k)!r})" for k in differ[:4])
            more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
            raise ConfigError(
                f"{path} holds a finished run of another config ({shown}{more}); remove it to "
                "train this one there, or choose another name (nothing was deleted)"
            )
        print(f"{path}: an earlier run that did not finish; training it anew")
        clear_earlier_run(path)
    train(cfg, path)
    return path


def show(path: str | Path) -> Any:
    """The figure at ``path`` shown in Jupyter (an ``IPython.display.Image``), or the path itself
    outside it."""
    try:
        from IPython.display import Image
    except ImportError:
        return Path(path)
    return Image(filename=str(path))


def kernel_seqlab() -> Path:
    """Put first on ``PATH`` (``os.environ``, which shell cells inherit) a folder whose ``seqlab``
    runs ``sys.executable -m seqlab``; return that folder. The same Python every time gives the
    same folder (under the system's temporary folder)."""
    python = str(Path(sys.executable).absolute())
    digest = hashlib.sha256(python.encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"seqlab-kernel-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    if os.name == "nt":
        script, text = folder / "seqlab.cmd", f'@"{python}" -m seqlab %*\n'
    else:
        script, text = folder / "seqlab", f'#!/bin/sh\nexec {shlex.quote(python)} -m seqlab "$@"\n'
    if not script.is_file() or script.read_text(encoding="utf-8") != text:
        partial = script.with_name(f".{script.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        partial.chmod(0o755)
        partial.replace(script)  # atomic: two kernels starting together both see a whole file
    entries = [e for e in os.environ.get("PATH", "").split(os.pathsep) if e and e != str(folder)]
    os.environ["PATH"] = os.pathsep.join([str(folder), *entries])
    return folder


kernel_seqlab()
