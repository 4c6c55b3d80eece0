"""What seqlab may replace or remove where it writes output (seqlab.storage.outputs): a file only if it
wrote it and nobody changed it since, or with --force; an output folder killed mid-output is
recognised as seqlab's and re-run; a re-used folder keeps exactly the new command's output."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from cli_checks import fails_last_line, snapshot, users_folder
from conftest import run_offline
from seqlab import load
from seqlab.atomic import atomic_write_text
from seqlab.cli import main
from seqlab.cli.common import FORCE_HELP
from seqlab.config import config_from_dict
from seqlab.errors import SeqlabError
from seqlab.experiment import train
from seqlab.storage.output_dirs import output_dir
from seqlab.storage.outputs import (
    FILE_RULE,
    FILES,
    MANIFEST,
    record_file,
    recorded_files,
    sha256_file,
)

#: the ``runs`` fixture's translation model: a Transformer, as these checks were written for
RUNS_MT = "transformer-dates-2"

GRADIENTS = ["diagnose", "gradients", "--cells", "rnn", "--seq-len", "5", "--hidden-size", "4"]


fails = fails_last_line  # the CLI exits 2 with one ``seqlab: error:`` line naming every needle


def listing(folder):
    """Every file under ``folder``, relative."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def manifest(folder):
    return json.loads((folder / MANIFEST).read_text())


# --------------------------------------------------------------------------- single files
def test_a_users_file_is_kept_unless_force(tiny_runs, tmp_path, capsys):
    """One rule for every option that writes a file: a file seqlab did not write is refused
    before any work (the checkpoint or runs named need not even exist), naming the file and
    --force; with --force it is replaced, and from then on it is seqlab's."""
    fc, mt = tiny_runs["fc"], tiny_runs["mt"]
    missing = tmp_path / "no-such-run"
    commands = [  # option, the command with a run, and without one (refused before loading)
        ("--png", ["forecast", "--run", fc, "--horizon", "2"], None),
        ("--png", ["curves", fc], ["curves", missing]),
        ("--output", ["evaluate", "--run", mt, "--split", "val"], None),
    ]
    for i, (flag, argv, unloaded) in enumerate(commands):
        unloaded = unloaded or [a if a not in (fc, mt) else missing for a in argv]
        folder = tmp_path / f"{i}{flag.strip('-')}"
        folder.mkdir()
        mine = folder / "user.png"
        mine.write_text("my precious plot")
        fails(capsys, [*unloaded, flag, mine], flag, mine, "seqlab did not write it", "--force")
        fails(capsys, [*argv, flag, mine], mine, "--force", "nothing was written")
        assert listing(folder) == ["user.png"] and mine.read_text() == "my precious plot"
        assert main([str(a) for a in [*argv, flag, mine, "--force"]]) == 0, flag
        assert mine.read_bytes() != b"my precious plot"
        assert recorded_files(folder) == {"user.png": sha256_file(mine)}
        assert main([str(a) for a in [*argv, flag, mine]]) == 0, flag  # now seqlab's own
        capsys.readouterr()


@pytest.mark.parametrize("command", [["curves"], ["data", "stats"], ["evaluate"], ["forecast"]])
def test_every_command_writing_a_file_states_the_rule_and_offers_force(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert " ".join(FILE_RULE.split()) in text and " ".join(FORCE_HELP.split()) in text


def test_seqlab_replaces_its_own_file_only_while_unchanged(tiny_runs, tmp_path, capsys):
    out = tmp_path / "figures" / "curves.png"
    argv = ["curves", str(tiny_runs["fc"]), "--png", str(out)]
    assert main(argv) == 0
    assert recorded_files(out.parent) == {"curves.png": sha256_file(out)}
    first = out.stat().st_ino
    assert main(argv) == 0 and out.stat().st_ino != first  # seqlab's, unchanged: replaced
    out.write_bytes(out.read_bytes() + b"edited")  # changed by the user since
    capsys.readouterr()
    fails(capsys, argv, out, "changed since seqlab wrote it", "--force")
    assert out.read_bytes().endswith(b"edited")
    other = out.with_name("other.png")  # a record that is not seqlab's is never replaced
    (out.parent / FILES).write_text("my notes")
    fails(capsys, ["curves", tiny_runs["fc"], "--png", other], FILES, "not seqlab's record")
    assert (out.parent / FILES).read_text() == "my notes" and not other.exists()


def test_writers_of_different_files_in_one_folder_keep_each_others_records(tmp_path):
    names = [f"f{i:02d}.txt" for i in range(24)]
    for name in names:
        (tmp_path / name).write_text(name)
    start = threading.Barrier(len(names))

    def write(name):
        start.wait()
        record_file(tmp_path / name)

    threads = [threading.Thread(target=write, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(recorded_files(tmp_path)) == names


# ------------------------------------------------------------------------ output folders
KILLED = """
import sys, time
from seqlab.atomic import atomic_write_text
from seqlab.storage.output_dirs import output_dir

with output_dir(sys.argv[1], "--out") as out:
    atomic_write_text(out / "gradients.png", "half drawn")
    (out / "run").mkdir()
    (out / "run" / "metrics.jsonl").write_text("{}\\n")
    print("written", flush=True)
    time.sleep(120)
"""


def test_an_interrupted_output_folder_is_seqlabs_and_a_users_file_is_not(tmp_path, capsys):
    """Killed mid-output (SIGKILL: no chance to list its files), a command leaves its open
    manifest; the next command into the folder takes the files written while it ran as seqlab's
    and replaces them, but not a file put there later, nor an older one."""
    out = tmp_path / "grads"
    env = {**os.environ, "SEQLAB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(out)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "written"
        fails(capsys, [*GRADIENTS, "--out", out], out, "being written", f"pid {proc.pid}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert "open" in manifest(out) and manifest(out)["files"] == {}
    later, older = out / "notes.txt", out / "run" / "old.csv"
    later.write_text("mine, put there after the kill")
    older.write_text("mine, moved there with its old date")
    beat = (out / MANIFEST).stat().st_mtime
    os.utime(later, (beat + 60, beat + 60))  # a minute after the command's last sign of life
    os.utime(older, (beat - 3600, beat - 3600))
    fails(capsys, [*GRADIENTS, "--out", out], later, older, "did not write")
    assert later.read_text().startswith("mine") and older.read_text().startswith("mine")
    later.unlink()
    older.unlink()
    assert main([*GRADIENTS, "--out", str(out)]) == 0
    assert listing(out) == [MANIFEST, "gradients.json", "gradients.png"]  # run/ was the kill's
    assert set(manifest(out)) == {"format", "files"}
    assert manifest(out)["files"] == {n: sha256_file(out / n) for n in listing(out)[1:]}
    # Ctrl-C (an exception in the command): its files are listed as it stops
    with pytest.raises(KeyboardInterrupt), output_dir(out, "--out"):
        atomic_write_text(out / "gradients.json", "{}")
        raise KeyboardInterrupt
    assert set(manifest(out)["files"]) == {"gradients.json", "gradients.png"}
    assert "open" not in manifest(out)
    assert main([*GRADIENTS, "--out", str(out)]) == 0


def test_a_reused_folder_holds_exactly_the_new_output(tiny_runs, tmp_path, capsys):
    """seqlab's earlier files that a successful command did not write again are removed; a
    file seqlab did not write, or a single file another command wrote there, never is."""
    src = tmp_path / "in.txt"
    src.write_text("may 9 1998\n1.3.1969\nthe 21st of december 2012\n")
    out = tmp_path / "maps"
    argv = ["translate", "--run", str(tiny_runs["mt"]), "--attention-png", str(out)]
    assert main([*argv, "--input", str(src)]) == 0
    assert listing(out) == [MANIFEST, *(f"attention-000{i}.png" for i in (1, 2, 3))]
    figure = out / "curves.png"  # written by another command: seqlab's, not the folder's
    assert main(["curves", str(tiny_runs["fc"]), "--png", str(figure)]) == 0
    src.write_text("may 9 1998\n")
    assert main([*argv, "--input", str(src)]) == 0
    assert listing(out) == [FILES, MANIFEST, "attention-0001.png", "curves.png"]
    assert manifest(out)["files"] == {"attention-0001.png": sha256_file(out / "attention-0001.png")}
    # a file that is not seqlab's, appearing with an old date while the command runs, is kept
    with output_dir(out, "--out"):
        atomic_write_text(out / "attention-0002.png", "new")
        (out / "mine.txt").write_text("mine")
        os.utime(out / "mine.txt", (time.time() - 3600, time.time() - 3600))
    assert listing(out) == [FILES, MANIFEST, "attention-0002.png", "curves.png", "mine.txt"]
    assert set(manifest(out)["files"]) == {"attention-0002.png"}
    capsys.readouterr()
    fails(capsys, [*argv, "--input", str(src)], "mine.txt", "did not write")


def _series(n: int = 30) -> list[str]:
    return [f"{math.sin(i / 5):.6f}" for i in range(n)]


def test_output_file_is_never_an_input_of_the_same_command(tiny_runs, tmp_path):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("may 9 1998\njune 1 2000\n")
    ref.write_text("1998-05-09\n2000-06-01\n")
    (tmp_path / "link.txt").symlink_to(src)
    before = src.read_bytes()
    for given in (src, tmp_path / "link.txt"):  # the same file, by its name or by a link
        args = ["evaluate", "--run", str(tiny_runs["mt"]), "--src", str(given)]
        r = run_offline([*args, "--ref", str(ref), "--output", str(src)], tmp_path)
        assert r.returncode == 2 and "is also the input --src" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert src.read_bytes() == before
    csv = tmp_path / "s.csv"
    csv.write_text("value\n" + "\n".join(_series()) + "\n")
    args = ["forecast", "--run", str(tiny_runs["fc"]), "--input", str(csv)]
    r = run_offline([*args, "--png", str(csv), "--horizon", "2"], tmp_path)
    assert r.returncode == 2 and "is also the input --input" in r.stderr, r.stderr
    assert csv.read_text().startswith("value\n")
    # the Python API holds to it too
    with pytest.raises(SeqlabError, match="also the input"):
        load(tiny_runs["mt"]).evaluate(files={"src": src, "ref": ref}, output=src)
    assert src.read_bytes() == before


def test_output_file_never_replaces_a_file_of_a_training_run(tiny_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_runs["cls"], run)
    kept = {name: (run / name).read_bytes() for name in ("config.yaml", "curves.png")}
    r = run_offline(["evaluate", "--run", str(run), "--png", str(run / "curves.png")], tmp_path)
    assert r.returncode == 2 and "file of the training run" in r.stderr, r.stderr
    src, labels = tmp_path / "s.txt", tmp_path / "l.txt"
    src.write_text("a great film\n")
    labels.write_text("pos\n")
    for target in (run / "config.yaml", run / "checkpoints" / "best.json"):
        args = ["evaluate", "--run", str(tiny_runs["mt"]), "--src", str(src)]
        r = run_offline([*args, "--ref", str(src), "--output", str(target)], tmp_path)
        assert r.returncode == 2 and "file of the training run" in r.stderr, r.stderr
    assert {name: (run / name).read_bytes() for name in kept} == kept
    assert (run / "checkpoints" / "best.json").read_text().strip().startswith("{")
    # a new file of another name in a run directory is fine
    args = ["evaluate", "--run", str(tiny_runs["mt"]), "--src", str(src)]
    r = run_offline([*args, "--ref", str(src), "--output", str(run / "hyps.txt")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (run / "hyps.txt").is_file()


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


# ------------------------------------------------------------------------- the Python API
def _refused(call, path, keyword):
    """``call()`` must refuse with one line naming ``path``, the keyword and ``force=True``."""
    with pytest.raises(SeqlabError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and keyword in message, message
    return message


def test_the_python_api_keeps_a_users_file_unless_force(runs, tmp_path):
    """The rule of --png / --output, and --force as ``force=True``: every method of the Python
    API that writes a file the user names (classification ``evaluate(confusion_png=)``,
    forecasting ``predict(png=)`` and ``evaluate(plot=)``, translation ``evaluate(output=)``)."""
    cls, fc, mt = load(runs / "cls"), load(runs / "fc"), load(runs / "mt")
    calls = {  # keyword: the call, given the file and force
        "confusion_png": lambda f, **k: cls.evaluate(confusion_png=f, **k),
        "png": lambda f, **k: fc.predict(steps=2, png=f, **k),
        "plot": lambda f, **k: fc.evaluate("val", horizons=2, plot=f, **k),
        "output": lambda f, **k: mt.evaluate("val", output=f, **k),
    }
    for keyword, call in calls.items():
        folder = tmp_path / keyword
        folder.mkdir()
        mine = folder / "mine.out"
        mine.write_text("my precious file")
        message = _refused(lambda: call(mine), mine, keyword)  # noqa: B023
        assert "seqlab did not write it" in message and "pass force=True" in message
        assert listing(folder) == ["mine.out"] and mine.read_text() == "my precious file"
        call(mine, force=True)
        assert mine.read_bytes() != b"my precious file", keyword
        assert recorded_files(folder) == {"mine.out": sha256_file(mine)}
        call(mine)  # seqlab's own now, unchanged: replaced without force
        mine.write_bytes(mine.read_bytes() + b"edited")
        assert "changed since" in _refused(lambda: call(mine), mine, keyword)  # noqa: B023
        assert mine.read_bytes().endswith(b"edited")
        # the checks the command line makes before any work: a link, a run's own file
        link = folder / "link.out"
        link.symlink_to(mine)
        _refused(lambda: call(link, force=True), link, keyword)  # noqa: B023
        run_file = runs / "fc" / "config.yaml"
        _refused(lambda: call(run_file, force=True), run_file, "training run")  # noqa: B023


def test_the_python_api_never_draws_over_a_users_files_in_a_folder(runs, tmp_path):
    """``predict(..., attention_png=DIR)`` follows --attention-png's rule: a folder holding the
    user's ``attention-0001.png`` is refused, nothing written or deleted; a folder seqlab wrote
    is written again."""
    calls = {
        "translation": lambda d: load(runs / "mt").predict(["may 9 1998"], attention_png=d),
        "classification": lambda d: load(runs / "cls").predict(["a good film"], attention_png=d),
    }
    for name, call in calls.items():
        out = tmp_path / name
        before = users_folder(out, **{"attention-0001.png": "my figure"})
        message = _refused(lambda: call(out), out, "attention_png")  # noqa: B023
        assert "attention-0001.png" in message and "did not write" in message
        assert snapshot(out) == before
        fresh = tmp_path / f"{name}-fresh"
        first = call(fresh).figures
        assert first and all(p.parent == fresh for p in first) and (fresh / MANIFEST).is_file()
        assert call(fresh).figures == first  # seqlab's own: drawn again


def test_the_command_line_checks_once_and_the_api_leaves_it_the_path(runs, tmp_path, capsys):
    """The command holds the path it checked (with --force) while the predictor's method runs:
    the method does not refuse it again, and the file is recorded once."""
    mine = tmp_path / "mine.png"
    mine.write_text("my plot")
    argv = ["forecast", "--run", runs / "fc", "--horizon", "2", "--png", mine, "--force"]
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    assert recorded_files(tmp_path) == {"mine.png": sha256_file(mine)}
