"""Nothing lost: seqlab writes only into a folder it created or marked as its own, never deletes
or replaces what it did not write, writes atomically, keeps one writer per run directory, checks
the weights it loads against their checksum, and ends on a broken pipe, a closed stdin, a full
device or a full disk with one line, never a traceback or half-written checkpoint."""

import errno
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import tiny_dates_transformer
from seqlab import load
from seqlab.cli import main
from seqlab.config import config_from_dict
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.experiment import train
from seqlab.storage import checkpoints as ckpt
from seqlab.storage.atomic import atomic_write_text
from seqlab.storage.outputs import MANIFEST
from seqlab.storage.rundir import LOCK_NAME, RunDir, RunLock

TEXT = "the time traveller for so it will be convenient to speak of him was expounding. " * 30


def lm_raw(corpus, **train_keys):
    return {
        "data": {"dataset": "text", "path": str(corpus), "batch_size": 4, "num_steps": 10},
        "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
        "train": {"max_steps": 4, "eval_every": 2, "log_every": 1, "threads": 1, **train_keys},
    }


def mt_raw():
    return tiny_dates_transformer(
        data={"num_examples": 150, "val_examples": 8}, train={"max_steps": 2}
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT)
    train(config_from_dict(lm_raw(corpus)), root / "lm")
    train(config_from_dict(mt_raw()), root / "mt")
    return root


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (the lock file aside) with its bytes."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def fails(capsys, argv, *needles):
    """Run the CLI; it must exit 2, its last line one ``seqlab: error:`` naming every needle
    (training's progress lines may come before it)."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("seqlab: error:") and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in last, (needle, err)
    return last


def users_folder(path: Path, **files: str) -> dict[str, bytes]:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return snapshot(path)


def subprocess_env():
    return {**os.environ, "SEQLAB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


# ------------------------------------------------------------------------------- export
EXPORT = ["export", "--format", "ctranslate2", "--run"]
needs_ct2 = pytest.mark.skipif(
    importlib.util.find_spec("ctranslate2") is None, reason="ctranslate2 is not installed"
)


@needs_ct2
def test_export_refuses_a_folder_holding_the_users_files(runs, tmp_path, capsys):
    out = tmp_path / "mine"
    before = users_folder(out, **{"notes.txt": "precious", "model.bin": "my own model"})
    fails(capsys, [*EXPORT, runs / "mt", "--out", out], out, "notes.txt", "not an earlier")
    assert snapshot(out) == before


@needs_ct2
def test_export_refuses_the_current_directory_and_its_parents(runs, tmp_path, capsys, monkeypatch):
    here = tmp_path / "my-folder" / "deeper"
    before = users_folder(here, **{"thesis.tex": "precious"})
    monkeypatch.chdir(here)
    fails(capsys, [*EXPORT, runs / "mt", "--out", "."], "current directory")
    fails(capsys, [*EXPORT, runs / "mt", "--out", ".."], "current directory or holds it")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)  # even an empty current directory: it would be replaced
    fails(capsys, [*EXPORT, runs / "mt", "--out", "."], "current directory")
    assert snapshot(tmp_path / "my-folder" / "deeper") == before and empty.is_dir()


@needs_ct2
def test_export_refuses_the_run_being_exported_and_other_runs(runs, tmp_path, capsys):
    run = tmp_path / "mt"
    shutil.copytree(runs / "mt", run)
    before = snapshot(run)
    fails(capsys, [*EXPORT, run, "--out", run], "the run being exported")
    fails(capsys, [*EXPORT, run, "--out", tmp_path], "holding the run being exported")
    other = tmp_path / "lm"
    shutil.copytree(runs / "lm", other)
    other_before = snapshot(other)
    fails(capsys, [*EXPORT, run, "--out", other], other, "training run")
    assert snapshot(run) == before and snapshot(other) == other_before
    assert main(["translate", "--run", str(run), "--input", os.devnull]) == 0


@needs_ct2
def test_export_replaces_only_its_own_earlier_export(runs, tmp_path, capsys):
    out = tmp_path / "ct2"
    assert main([*EXPORT, str(runs / "mt"), "--out", str(out)]) == 0
    info = json.loads((out / "seqlab.json").read_text())
    assert set(info["files"]) == {p.name for p in out.iterdir()} - {"seqlab.json"}
    assert main([*EXPORT, str(runs / "mt"), "--out", str(out), "--quantize", "int8"]) == 0
    assert json.loads((out / "seqlab.json").read_text())["quantization"] == "int8"
    assert not list(tmp_path.glob(".ct2.*"))  # no temporary or set-aside folder left
    capsys.readouterr()
    (out / "README.md").write_text("my notes on this export")
    fails(capsys, [*EXPORT, runs / "mt", "--out", out], "README.md", "did not write")
    assert (out / "README.md").read_text() == "my notes on this export"
    (out / "README.md").unlink()
    (out / "config.json").write_text("{}")  # edited by the user since
    fails(capsys, [*EXPORT, runs / "mt", "--out", out], "config.json", "changed since")
    assert (out / "config.json").read_text() == "{}"


@needs_ct2
def test_export_refuses_a_symlink_and_the_library_keeps_the_same_rule(runs, tmp_path, capsys):
    from seqlab.export.ctranslate2 import export_ctranslate2

    target = tmp_path / "real"
    before = users_folder(target, **{"a.txt": "mine"})
    link = tmp_path / "link"
    link.symlink_to(target)
    fails(capsys, [*EXPORT, runs / "mt", "--out", link], "symbolic link")
    m = load(runs / "mt")
    with pytest.raises(SeqlabError, match="not an earlier CTranslate2 export"):
        export_ctranslate2(m.model, len(m.vocabs.src_vocab), len(m.vocabs.tgt_vocab), target)
    assert link.is_symlink() and snapshot(target) == before


# ------------------------------------------------------------- folders of figures/numbers
def test_attention_png_never_overwrites_the_users_files(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("may 9 1998\n1.3.1969\n")
    out = tmp_path / "maps"
    before = users_folder(out, **{"attention-0001.png": "my figure"})
    argv = ["translate", "--run", runs / "mt", "--input", src, "--attention-png", out]
    fails(capsys, argv, out / "attention-0001.png", "did not write", "nothing was written")
    assert snapshot(out) == before
    fresh = tmp_path / "fresh"
    argv[-1] = fresh
    assert main([str(a) for a in argv]) == 0
    written = sorted(p.name for p in fresh.iterdir())
    assert written == [MANIFEST, "attention-0001.png", "attention-0002.png"]
    assert main([str(a) for a in argv]) == 0  # seqlab's own files: replaced
    (fresh / "attention-0002.png").write_bytes(b"edited by me")
    capsys.readouterr()
    fails(capsys, argv, "attention-0002.png", "changed since")
    assert (fresh / "attention-0002.png").read_bytes() == b"edited by me"


def test_classify_attention_png_follows_the_same_rule(tmp_path, capsys):
    data = tmp_path / "reviews.tsv"
    data.write_text("a good film\tpos\na bad film\tneg\n" * 8)
    raw = {
        "data": {"dataset": "text-classification", "path": str(data), "tokenizer": "word"},
        "model": {"arch": "transformer_classifier", "d_model": 8, "num_heads": 2, "d_ff": 16},
        "train": {"max_steps": 1, "eval_every": 1, "threads": 1},
    }
    train(config_from_dict(raw), tmp_path / "cls")
    src = tmp_path / "in.txt"
    src.write_text("a good film\n")
    out = tmp_path / "maps"
    before = users_folder(out, **{"attention-0001-layer0.png": "mine"})
    argv = ["classify", "--run", tmp_path / "cls", "--input", src, "--attention-png", out]
    fails(capsys, argv, "attention-0001-layer0.png", "did not write")
    assert snapshot(out) == before


def test_diagnose_gradients_never_overwrites_the_users_files(tmp_path, capsys):
    out = tmp_path / "grads"
    before = users_folder(out, **{"gradients.png": "mine", "gradients.json": "{}"})
    argv = ["diagnose", "gradients", "--cells", "rnn", "--seq-len", "5", "--hidden-size", "4"]
    fails(capsys, [*argv, "--out", out], out / "gradients.json", "choose another --out")
    assert snapshot(out) == before
    mine = tmp_path / "grads2"
    assert main([*argv, "--out", str(mine)]) == 0
    assert main([*argv, "--out", str(mine), "--seq-len", "6"]) == 0  # its own files: replaced
    assert json.loads((mine / "gradients.json").read_text())
    capsys.readouterr()
    (mine / "extra.csv").write_text("mine")  # a user's file in seqlab's folder
    fails(capsys, [*argv, "--out", mine], "extra.csv")
    assert (mine / "extra.csv").read_text() == "mine"


def test_demo_never_overwrites_the_users_files(tmp_path, capsys):
    out = tmp_path / "demo"
    before = users_folder(out, **{"self_attention_example.json": "my numbers"})
    fails(capsys, ["demo", "self-attention-example", "--out", out], "self_attention_example.json")
    assert snapshot(out) == before
    assert main(["demo", "self-attention-example", "--out", str(tmp_path / "new")]) == 0
    assert main(["demo", "self-attention-example", "--out", str(tmp_path / "new")]) == 0


def test_bench_layers_out_follows_the_same_rule(tmp_path, capsys):
    out = tmp_path / "bench"
    before = users_folder(out, **{"layer_costs.json": "mine"})
    argv = ["bench", "layers", "--lengths", "4,8", "--width", "8", "--heads", "2", "--repeats", "1"]
    fails(capsys, [*argv, "--memory-length", "8", "--out", out], "layer_costs.json")
    assert snapshot(out) == before


def test_help_states_the_rule(capsys):
    for argv in (
        ["translate", "--help"],
        ["diagnose", "gradients", "--help"],
        ["demo", "dates", "--help"],
        ["export", "--help"],
    ):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert "new or empty" in text and ("own files" in text or "refused" in text), argv


# ----------------------------------------------------------- symlinks and special files
def test_evaluate_output_refuses_a_symlink_and_special_files(runs, tmp_path, capsys):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("may 9 1998\n")
    ref.write_text("1998-05-09\n")
    target = tmp_path / "keep.txt"
    target.write_text("my file")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    argv = ["evaluate", "--run", runs / "mt", "--src", src, "--ref", ref, "--output"]
    fails(capsys, [*argv, link], link, "symbolic link", "nothing was written")
    assert link.is_symlink() and target.read_text() == "my file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fails(capsys, [*argv, fifo], "named pipe")
    assert fifo.exists() and not fifo.is_file()
    regular = tmp_path / "hyps.txt"
    regular.write_text("old")  # a regular file the user named: replaced only with --force
    fails(capsys, [*argv, regular], regular, "--force", "nothing was written")
    assert main([str(a) for a in [*argv, regular, "--force"]]) == 0
    assert regular.read_text().count("\n") == 1


def test_atomic_writes_never_replace_a_symlink(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("mine")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(SeqlabError, match="symbolic link"):
        atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# -------------------------------------------------------------------- one writer per run
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


# ------------------------------------------------------------------------- checksums
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


# ---------------------------------------------------------------- full or read-only disk
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


# ----------------------------------------------------------------------- data.path
def test_a_relative_data_path_is_stored_absolute(runs, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "corpus.txt").write_text(TEXT)
    raw = lm_raw("corpus.txt")
    (work / "c.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(work)
    assert main(["train", "c.yaml", "--out", "run"]) == 0
    saved = yaml.safe_load((work / "run" / "config.yaml").read_text())["data"]["path"]
    assert saved == str(work / "corpus.txt")
    monkeypatch.chdir(tmp_path)  # elsewhere: evaluate and resume still find the data
    assert main(["evaluate", "--run", "work/run", "--split", "val", "--json"]) == 0
    assert main(["train", "--resume", "work/run", "train.max_steps=6"]) == 0


# ------------------------------------------------------------------------ the streams
def seqlab(args, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "seqlab", *map(str, args)],
        capture_output=kwargs.pop("capture_output", True),
        text=True,
        env=subprocess_env(),
        timeout=120,
        **kwargs,
    )


def closed_pipe_run(args, stdin=None):
    """``seqlab ARGS | head -0``: the reader has gone before seqlab writes a line."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "seqlab", *map(str, args)],
            stdout=write,
            stderr=subprocess.PIPE,
            input=stdin,
            text=True,
            env=subprocess_env(),
            timeout=120,
        )
    finally:
        os.close(write)


def test_a_broken_pipe_ends_quietly(runs):
    listing = closed_pipe_run(["data", "list"])
    assert listing.returncode == 141 and listing.stderr == "", listing.stderr
    lines = "may 9 1998\n" * 50
    translated = closed_pipe_run(["translate", "--run", runs / "mt"], stdin=lines)
    assert translated.returncode == 141 and "Traceback" not in translated.stderr
    assert "Error" not in translated.stderr, translated.stderr


def test_head_minus_one_gets_its_line_and_no_traceback(runs):
    pipeline = subprocess.run(
        f"{sys.executable} -m seqlab data list | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert len(pipeline.stdout.splitlines()) == 1 and "Traceback" not in pipeline.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_device_is_one_line():
    with open("/dev/full", "w") as full:
        result = seqlab(["data", "list"], stdout=full, capture_output=False, stderr=subprocess.PIPE)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "seqlab: error: cannot write to standard output: No space left on device"
    ]


def test_closed_stdin_is_a_clear_error(runs):
    cmd = [sys.executable, "-m", "seqlab", "translate", "--run", str(runs / "mt")]
    result = subprocess.run(
        ["bash", "-c", 'exec "$@" <&-', "bash", *cmd],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "seqlab: error: standard input is closed; give the input with --input FILE, or pipe it in"
    )


def test_closed_stdout_is_a_clear_error():
    cmd = [sys.executable, "-m", "seqlab", "data", "list"]
    result = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "bash", *cmd],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "seqlab: error: cannot write to standard output: it is closed"
    ]
