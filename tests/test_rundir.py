"""RunDir: one description of a run directory, used by training, loading, demos and export."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from cli_checks import fails, snapshot, subprocess_env, succeeds, write_config
from seqlab import load
from seqlab.cli import main
from seqlab.config import config_from_dict
from seqlab.errors import CheckpointError, ConfigError, SeqlabError
from seqlab.experiment import train
from seqlab.storage.rundir import RunDir, RunLock
from seqlab.tasks import artefacts
from seqlab.training.trainer import Callback
from tiny_runs import LM_TEXT as TEXT
from tiny_runs import lm_raw


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


def test_train_never_writes_into_a_users_folder(tmp_path, capsys, runs):
    out = tmp_path / "mine"
    out.mkdir()
    for name in ("config.yaml", "vocab.json", "metrics.jsonl", "curves.png"):
        (out / name).write_text(f"my own {name}")  # names seqlab would write
    before = snapshot(out)
    cfg = write_config(tmp_path / "c.yaml", lm_raw(runs / "corpus.txt"))
    fails(capsys, ["train", cfg, "--out", out], out, "not a seqlab run", "nothing was written")
    assert snapshot(out) == before


def test_a_run_without_its_vocabulary_is_refused(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    (run / "vocab.json").unlink()
    fails(capsys, ["generate", "--run", run], run / "vocab.json", "never rebuilt")
    fails(capsys, ["evaluate", "--run", run], run / "vocab.json")
    fails(capsys, ["train", "--resume", run, "train.max_steps=8"], run / "vocab.json")
    assert not (run / "vocab.json").exists()


def test_damaged_checkpoint_metadata(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    meta_path = RunDir(run).checkpoint("best") / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["step"] = "twelve"
    meta_path.write_text(json.dumps(meta))
    fails(capsys, ["generate", "--run", run], meta_path, "step", "twelve")
    (run / "checkpoints" / "best.json").write_text('{"steps": 4}')
    fails(capsys, ["generate", "--run", run], "best.json", "expected")
    fails(
        capsys,
        ["generate", "--run", runs / "lm", "--which", "newest"],
        "best, latest or a step number",
    )


def test_best_without_best_json_is_an_error_not_latest(runs, tmp_path, capsys):
    run = tmp_path / "mt"
    shutil.copytree(runs / "mt", run)
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n")
    expected = succeeds(capsys, ["translate", "--run", run, "--input", src]).out
    (run / "checkpoints" / "best.json").unlink()
    base = ["translate", "--run", run, "--input", src]
    fails(capsys, base, run / "checkpoints" / "best.json", "--which latest")
    with pytest.raises(SeqlabError, match="best.json is missing"):
        load(run)
    assert succeeds(capsys, [*base, "--which", "latest"]).out == expected


class CtrlC(Callback):
    def on_step(self, trainer, loss):
        if trainer.state.step == 1:
            os.kill(os.getpid(), signal.SIGINT)


def test_a_run_not_yet_validated_uses_latest_with_a_warning(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    with pytest.raises(SeqlabError, match="saved a checkpoint at step 1"):
        train(config_from_dict(lm_raw(corpus, eval_every=3)), run, callbacks=[CtrlC()])
    assert RunDir(run).pointer("best") is None
    with pytest.warns(UserWarning, match="no validated checkpoint yet .* step 1"):
        lm = load(run)
    assert lm.generate("the", tokens=3).startswith("the")


HOLD = """
import sys, time
from seqlab.storage.rundir import RunLock
lock = RunLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_one_writer_per_run_directory(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    before = snapshot(run)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        argv = ["train", "--resume", run, "train.max_steps=6"]
        start = time.monotonic()
        fails(capsys, argv, run, f"pid {holder.pid}", "one writer")
        assert time.monotonic() - start < 10  # at once, not after training
        assert snapshot(run) == before
        new = tmp_path / "new"  # a new run whose directory another process writes
        new.mkdir()
        cfg = tmp_path / "c.yaml"
        cfg.write_text(yaml.safe_dump(lm_raw(runs / "corpus.txt")))
        with RunLock(new):
            fails(capsys, ["train", cfg, "--out", new], new, "another seqlab process")
        assert not RunDir(new).steps()
    finally:
        holder.kill()
        holder.wait()
    assert main(["train", "--resume", str(run), "train.max_steps=6"]) == 0  # lock gone with it
    assert RunDir(run).pointer("latest") == 6


def test_a_demo_never_deletes_a_run_another_process_is_training(runs, tmp_path):
    from seqlab.demos.dates import clear_earlier_run

    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    before = snapshot(run)
    with RunLock(run), pytest.raises(SeqlabError, match="another seqlab process"):
        clear_earlier_run(run)
    assert snapshot(run) == before
    clear_earlier_run(run)  # once no one writes it, an earlier demo run may be replaced
    assert not run.exists()
