"""Checkpoints (seqlab.storage.checkpoints): weights checked against their checksum, and a full
or read-only disk ending training with one line, never a half-written checkpoint."""

import errno
import json
import os
import shutil
import stat

import pytest
import yaml

from cli_checks import fails_last_line as fails
from seqlab import load
from seqlab.cli import main
from seqlab.errors import CheckpointError
from seqlab.storage import checkpoints as ckpt
from seqlab.storage.rundir import RunDir
from tiny_runs import lm_raw

#: the ``runs`` fixture's translation model: a Transformer, as these checks were written for
RUNS_MT = "transformer-dates-2"


def test_weights_damaged_in_place_are_refused(runs, tmp_path, capsys):
    run = tmp_path / "mt"
    shutil.copytree(runs / "mt", run)
    weights = RunDir(run).checkpoint("best") / "model.safetensors"
    assert "sha256" in json.loads((weights.parent / "meta.json").read_text())
    data = bytearray(weights.read_bytes())
    size = len(data)
    data[-64:] = bytes(64)  # same size, bytes overwritten (the tensors' data, not the header)
    weights.write_bytes(bytes(data))
    assert weights.stat().st_size == size
    with pytest.raises(CheckpointError, match="model.safetensors is damaged"):
        load(run)
    fails(capsys, ["translate", "--run", run, "--input", os.devnull], weights, "SHA-256")
    fails(capsys, ["train", "--resume", run, "train.max_steps=4"], weights, "damaged")


def test_checkpoints_without_a_checksum_still_load(runs, tmp_path):
    run = tmp_path / "mt"
    shutil.copytree(runs / "mt", run)
    for step in RunDir(run).steps():
        meta_path = RunDir(run).step_dir(step) / "meta.json"
        meta = json.loads(meta_path.read_text())
        del meta["sha256"]  # as written before checksums
        meta_path.write_text(json.dumps(meta))
    assert load(run).translate(["may 9 1998"]) == load(runs / "mt").translate(["may 9 1998"])


def test_a_full_disk_during_training_stops_cleanly_and_resumes(runs, tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(lm_raw(runs / "corpus.txt")))
    real = ckpt.write_safetensors
    calls = []

    def disk_fills_up(tensors, path):
        calls.append(path)
        if len(calls) > 3:  # the checkpoint at step 2 fits; the next one does not
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(tensors, path)

    monkeypatch.setattr(ckpt, "write_safetensors", disk_fills_up)
    run = tmp_path / "run"
    fails(
        capsys,
        ["train", cfg, "--out", run],
        "No space left on device",
        RunDir(run).step_dir(2),
        f"seqlab train --resume {run}",
    )
    assert not list(RunDir(run).checkpoints.glob(".step-*"))  # no half-written checkpoint
    assert RunDir(run).steps() == [2]
    monkeypatch.setattr(ckpt, "write_safetensors", real)  # space freed
    assert main(["train", "--resume", str(run)]) == 0
    assert RunDir(run).steps()[-1] == 4


def test_a_read_only_run_directory_is_one_line(runs, tmp_path, capsys, monkeypatch):
    from seqlab.training import callbacks

    def read_only(path, text):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(callbacks, "atomic_write_text", read_only)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(lm_raw(runs / "corpus.txt")))
    run = tmp_path / "run"
    err = fails(capsys, ["train", cfg, "--out", run], "Read-only file system", "metrics.jsonl")
    assert "no checkpoint was saved" in err
    assert not list(RunDir(run).checkpoints.glob(".step-*"))


def test_a_checkpoint_folder_has_the_usual_mode_not_mkdtemps(tmp_path):
    """A run shared with or served by another account can be read: the checkpoint folder gets
    mkdir's mode (0o777 less the umask), as every run file gets open's."""
    umask = os.umask(0)
    os.umask(umask)
    folder = ckpt.begin_checkpoint(tmp_path, 7)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask
