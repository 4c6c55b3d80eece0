"""What a command imports, measured in a fresh process: validating a config imports no task and
no model (each task's rules across sections and each architecture's config class live with the
config: :data:`seqlab.config.experiment.TASK_RULES`, :mod:`seqlab.config.models`); and
:func:`seqlab.load` imports the task its run needs and no other task, nor another task's
architecture (a task's package may import its other architectures: image classification's
attention rollout is the Vision Transformer's). The catalog
imports one of seqlab's own tasks or architectures when its name is asked for
(:func:`seqlab.catalog.task`, :func:`seqlab.catalog.model`), and all of them only to list them.
The counts are printed (``pytest -s``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from seqlab import catalog
from seqlab.config import load_config

SCRIPT = """
import json, sys
import seqlab
{before}
{call}
names = sorted(n for n in sys.modules if n in ("seqlab", "torch") or n.startswith("seqlab."))
print(json.dumps(names))
"""


def imported(call: str, *args: str, before: str = "") -> list[str]:
    """The seqlab modules a fresh process has imported after ``call``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SEQLAB_OFFLINE": "1"}
    script = textwrap.dedent(SCRIPT).format(call=call, before=before)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: the package of each of seqlab's own tasks, and the module of each architecture, by name
TASK_PACKAGES = {name: load().__name__ for name, load in catalog.BUILTIN_TASKS.items()}
MODEL_MODULES = {arch: load().__name__ for arch, load in catalog.BUILTIN_MODELS.items()}


def _under(names: list[str], package: str) -> list[str]:
    return [n for n in names if n == package or n.startswith(package + ".")]


def _task_packages(names: list[str]) -> set[str]:
    """The packages of seqlab's own tasks among ``names``."""
    return set(TASK_PACKAGES.values()) & set(names)


def _arch_modules(names: list[str]) -> set[str]:
    """The modules of seqlab's own architectures among ``names``."""
    return set(MODEL_MODULES.values()) & set(names)


@pytest.mark.parametrize(
    "config",
    [
        "dates-transformer",
        "sst2-bilstm",
        "sunspots-gru",
        "fsdd-vit",
        "mnist-cnn",
        "timemachine-char-lstm",
    ],
)
def test_validating_a_config_imports_no_task_and_no_model(config):
    names = imported(
        "seqlab.config.load_config(sys.argv[1])", config, before="import seqlab.config"
    )
    print(f"load_config({config!r}): {len(names)} seqlab modules")
    assert _under(names, "seqlab.tasks") == [], "validating a config imported tasks"
    assert _under(names, "seqlab.models") == [], "validating a config imported models"
    # the records of datasets, cells and position schemes are plain data: no reader, no PyTorch
    assert _under(names, "seqlab.data") == [], "validating a config imported dataset readers"
    assert _under(names, "seqlab.nn") == [], "validating a config imported building blocks"
    assert "torch" not in names, "validating a config imported PyTorch"


@pytest.mark.parametrize(
    ("run", "task"),
    [
        ("mt", "translation"),
        ("lm", "language_modeling"),
        ("fc", "forecasting"),
        ("cls", "classification"),
    ],
)
def test_loading_a_run_imports_its_task_and_no_other_nor_their_models(tiny_runs, run, task):
    names = imported("seqlab.load(sys.argv[1])", str(tiny_runs[run]))
    print(f"load({run}): {len(names)} seqlab modules")
    arch = load_config(tiny_runs[run] / "config.yaml").model.arch
    assert _task_packages(names) == {TASK_PACKAGES[task]}
    others = {
        MODEL_MODULES[a]
        for a, spec in catalog.models().items()
        if a in catalog.BUILTIN_MODELS and spec.task != task
    }
    assert MODEL_MODULES[arch] in names
    assert _arch_modules(names) & others == set(), "another task's architecture was imported"
    assert _under(names, "seqlab.training") == [], "loading a run imported training code"


def test_the_measurement_sees_another_task(tiny_runs):
    """The same measurement reports a second task when something on the way imports it."""
    names = imported(
        "seqlab.load(sys.argv[1])", str(tiny_runs["fc"]), before="import seqlab.tasks.audio"
    )
    assert _task_packages(names) == {"seqlab.tasks.forecasting", "seqlab.tasks.audio"}


def test_listing_the_tasks_still_finds_every_one():
    """The catalog's listing imports every built-in task (``seqlab list``, the docs)."""
    names = imported(
        "print(sorted(seqlab.catalog.tasks()), file=sys.stderr)", before="import seqlab.catalog"
    )
    assert _task_packages(names) == {
        f"seqlab.tasks.{t}"
        for t in ("translation", "language_modeling", "classification", "audio", "forecasting")
    }


def test_the_catalog_names_the_module_that_registers_each_of_its_own_records():
    """:data:`~seqlab.catalog.BUILTIN_MODELS` and :data:`~seqlab.catalog.BUILTIN_TASKS` import,
    for each of seqlab's architectures and tasks, the module that registers it, and miss none."""
    registered = {arch: spec.build.__module__ for arch, spec in catalog.models().items()}
    assert {a: m for a, m in registered.items() if a in catalog.BUILTIN_MODELS} == MODEL_MODULES
    assert set(catalog.BUILTIN_MODELS) <= set(registered)
    for name, package in TASK_PACKAGES.items():
        spec = catalog.tasks()[name]
        assert all(p.__module__.startswith(package + ".") for p in spec.predictors), name
    assert not any(
        m.startswith("seqlab.") for m in registered.values() if m not in MODEL_MODULES.values()
    )


TRAIN = """
import seqlab.training.trainer as trainer


class Stop(Exception):
    pass


def fit(self):  # the data, the model and the run directory are ready: stop before step 1
    raise Stop


trainer.Trainer.fit = fit
from seqlab.cli import main

try:
    main(["train", sys.argv[1], "--out", sys.argv[2]])
except Stop:
    pass
"""


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        ("", {"seqlab.tasks.translation"}),
        ("import seqlab.tasks.audio", {"seqlab.tasks.translation", "seqlab.tasks.audio"}),
    ],
    ids=["as-shipped", "planted-import"],
)
def test_training_a_translation_config_imports_no_other_task(tmp_path, plant, expected):
    """``seqlab train`` of a translation config, up to its first step, imports the translation
    task alone (no listing of every task on the way: the run directory's files are asked of the
    run's own task); the same measurement with an import of another task planted sees it."""
    names = imported(
        textwrap.dedent(TRAIN), "dates-transformer", str(tmp_path / "run"), before=plant
    )
    print(f"seqlab train dates-transformer: {len(names)} seqlab modules by the first step")
    assert _task_packages(names) == expected


def test_checking_an_output_in_a_run_imports_no_task(tiny_runs):
    """Whether a file may be written in a run directory is read from the run's task's record of
    its files (``seqlab.builtin_records.RUN_FILES``), so the check imports no task, and still
    refuses the task's own file."""
    call = (
        "import seqlab.storage.outputs as o, pathlib; run = pathlib.Path(sys.argv[1]); "
        "o.check_not_run_file(run / 'new.txt', '--output')\n"
        "try:\n    o.check_not_run_file(run / 'series.json', '--output')\n"
        "except seqlab.errors.SeqlabError as e:\n    print('refused:', e, file=sys.stderr)"
    )
    names = imported(call, str(tiny_runs["fc"]))
    assert _task_packages(names) == set()
    assert not _under(names, "seqlab.tasks")
    from seqlab.errors import SeqlabError
    from seqlab.storage.outputs import check_not_run_file

    with pytest.raises(SeqlabError, match=r"is a file of the training run .* \(series\.json\)"):
        check_not_run_file(tiny_runs["fc"] / "series.json", "--output")


def test_each_task_s_run_files_are_its_record_s():
    """Each of seqlab's own tasks writes the files its record names (its ``TaskSpec`` reads
    them from there)."""
    from seqlab.builtin_records import RUN_FILES

    assert {n: set(t.artefacts) for n, t in catalog.tasks().items()} == {
        n: set(f) for n, f in RUN_FILES.items()
    }
