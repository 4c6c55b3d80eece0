"""RunDir: one description of a run directory, used by training, loading, demos and export."""

import json
import shutil

import pytest

from seqlab.errors import CheckpointError, ConfigError, SeqlabError
from seqlab.storage.rundir import RunDir
from seqlab.tasks import artefacts


@pytest.fixture
def run(tiny_runs, tmp_path):
    """A copy of a tiny trained forecaster run."""
    copy = tmp_path / "fc"
    shutil.copytree(tiny_runs["fc"], copy)
    return RunDir(copy)


def test_a_trained_run_answers_from_its_files(run):
    marker = run.read_marker()
    assert run.is_run() and marker["format"] == RunDir.FORMAT
    assert run.recorded_precision() == marker["precision"]["train"] in ("fp32", "bf16")
    steps = run.steps()
    assert steps and run.pointer("latest") == steps[-1]
    assert run.checkpoint("latest") == run.step_dir(steps[-1]) == run.checkpoint(str(steps[-1]))
    assert run.checkpoint("best") == run.step_dir(run.pointer("best"))
    opened = run.open("latest")
    assert opened.cfg.model.arch == "ar" and opened.checkpoint == run.checkpoint("latest")
    assert opened.file("series.json") == run.path / "series.json"
    assert run.export_dir("ctranslate2", opened.checkpoint) == (
        run.path / "exports" / f"ctranslate2-{opened.checkpoint.name}"
    )
    # the files a run holds are seqlab's own or the task's artefacts
    assert run.foreign_files(artefacts()) == []


def test_what_is_not_a_run_is_told_apart(tmp_path):
    plain = RunDir(tmp_path / "plain")
    plain.path.mkdir()
    assert not plain.is_run() and not plain.holds_training_files() and plain.steps() == []
    (plain.path / "run.json").write_text('{"format": "something else"}')
    assert not plain.is_run() and plain.holds_training_files()  # export must not replace it
    (plain.path / "run.json").write_text("\xff not json")
    assert plain.read_marker() is None
    with pytest.raises(CheckpointError, match="no config.yaml"):
        plain.open()
    with pytest.raises(CheckpointError, match="not found"):
        RunDir(tmp_path / "missing").checkpoint()


def test_a_new_run_goes_only_where_nothing_is_in_the_way(run, tmp_path):
    RunDir(tmp_path / "new" / "run").check_new(artefacts())  # not there yet: fine
    with pytest.raises(ConfigError, match="already holds checkpoints.*--resume"):
        run.check_new(artefacts())
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match=r"not empty and not a seqlab run \(notes.txt\)"):
        RunDir(mine).check_new(artefacts())
    started = RunDir(tmp_path / "started")  # a run that wrote its files but no checkpoint
    started.path.mkdir()
    started.write_marker({"precision": {"train": "fp32"}})
    (started.path / "vocab.json").write_text("{}")
    started.check_new(artefacts())


def test_clearing_an_earlier_run_deletes_nothing_else(run, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not an earlier demo run.*nothing was deleted"):
        RunDir(mine).clear(artefacts(), what="demo run")
    assert (mine / "notes.txt").read_text() == "keep"

    (run.path / "attention-0.png").write_bytes(b"png")
    (run.path / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match=r"files the demo run did not write \(notes.txt\)"):
        run.clear(artefacts(), also=("attention-*.png",), what="demo run")
    assert (run.path / "notes.txt").is_file() and run.steps()
    (run.path / "notes.txt").unlink()
    with pytest.raises(ConfigError, match="attention-0.png"):  # not the caller's own pattern
        run.clear(artefacts())
    with run.lock(), pytest.raises(SeqlabError, match="another seqlab process"):
        run.clear(artefacts(), also=("attention-*.png",))
    assert run.is_run()
    run.clear(artefacts(), also=("attention-*.png",))
    assert not run.path.exists()
    RunDir(tmp_path / "never-there").clear(artefacts())  # nothing to clear


def test_the_best_checkpoint_is_never_guessed(run):
    (run.checkpoints / "best.json").unlink()
    with pytest.raises(CheckpointError, match="best.json is missing, but the run has validated"):
        run.checkpoint("best")
    (run.checkpoints / "latest.json").write_text(json.dumps({"step": "x"}))
    with pytest.raises(CheckpointError, match='expected {"step": <number>}'):
        run.pointer("latest")
