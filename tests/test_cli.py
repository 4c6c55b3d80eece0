"""The command line as the README shows it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_checks import fails, subprocess_env, write_config
from conftest import png_claiming, run_offline
from seqlab.cli import main
from seqlab.config import config_from_dict
from tiny_runs import lm_raw

HAVE_DATA = bool(os.environ.get("SEQLAB_DATA_DIR"))


def test_data_list_shows_every_dataset(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("timemachine", "tinyshakespeare", "fra-eng", "multi30k"):
        assert name in out
    assert "licence" in out


def test_fetch_missing_offline_is_a_clear_error(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("SEQLAB_DATA_DIR", raising=False)
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SEQLAB_OFFLINE", "1")
    assert main(["data", "fetch", "timemachine"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("seqlab: error: dataset file timemachine/timemachine.txt not found")
    assert "Traceback" not in err


@pytest.mark.skipif(not HAVE_DATA, reason="needs SEQLAB_DATA_DIR")
def test_fetch_and_stats_json(capsys):
    assert main(["data", "fetch", "tinyshakespeare"]) == 0
    assert "input.txt" in capsys.readouterr().out
    assert main(["data", "stats", "tinyshakespeare", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["characters"] == 1_115_394


@pytest.mark.skipif(not HAVE_DATA, reason="needs SEQLAB_DATA_DIR")
def test_stats_multi30k_reports_padding_ratio(capsys):
    assert (
        main(
            [
                "data",
                "stats",
                "multi30k",
                "--src",
                "en",
                "--tgt",
                "de",
                "--batch-tokens",
                "4096",
                "--json",
            ]
        )
        == 0
    )
    stats = json.loads(capsys.readouterr().out)
    text = json.dumps(stats)
    assert "bucketed" in text and "random" in text


def test_train_needs_config_and_out(capsys):
    assert main(["train"]) == 2
    assert "usage: seqlab train CONFIG" in capsys.readouterr().err


def test_overrides_may_follow_the_options(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "sine-mlp", "--out", str(run), "train.epochs=1", "data.window=3"]) == 0
    config = (run / "config.yaml").read_text(encoding="utf-8")
    assert "epochs: 1\n" in config and "window: 3\n" in config
    for extra in (["--bogus"], ["train.epochs=1", "-x"]):
        with pytest.raises(SystemExit):
            main(["train", "sine-mlp", "--out", str(tmp_path / "other"), *extra])
        assert f"unrecognized arguments: {' '.join(extra)}" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a command without overrides takes none
        main(["translate", "--run", str(run), "a=b"])
    assert "unrecognized arguments: a=b" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_unknown_override_key_is_reported(capsys, tmp_path):
    ref = str(Path(__file__).parents[1] / "configs" / "reference.yaml")
    assert main(["train", ref, "train.lrr=1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "train.lrr: unknown key" in err and "with overrides train.lrr=1" in err


def test_an_image_claiming_too_many_pixels_is_a_one_line_error(tiny_runs, tmp_path, capsys):
    from PIL import Image

    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_claiming(20000, 20000))  # a decompression bomb's header, 100 bytes
    run = tiny_runs["vit"]  # trained here if no test before did: its lines are not this test's
    capsys.readouterr()
    assert main(["classify", "--run", str(run), str(bomb)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    limit = Image.MAX_IMAGE_PIXELS  # PIL's own, unless the caller sets one
    assert captured.err == (
        f"seqlab: error: {bomb}: the image is 400,000,000 pixels, over the limit of {limit:,} "
        "pixels; nothing was decoded (the model reads 28×28: shrink the image first)\n"
    )


def test_import_seqlab_sets_nothing_and_the_command_asks_for_huge_pages(monkeypatch, capsys):
    """``import seqlab`` leaves the environment alone; the ``seqlab`` command sets
    THP_MEM_ALLOC_ENABLE before any command allocates a tensor, keeping a user's own value
    (:mod:`seqlab.runtime.allocator`)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    code = "import os, seqlab, seqlab.cli; print(os.environ.get('THP_MEM_ALLOC_ENABLE'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "None", out.stderr
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    assert main(["demo", "--list"]) == 0
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")
    assert main(["demo", "--list"]) == 0
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "0"


def test_seeds_are_bounded_everywhere(tmp_path):
    huge, out = str(2**70), ["--out", str(tmp_path / "o")]
    for args in (
        ["diagnose", "gradients", "--seq-len", "3", "--hidden-size", "2", "--seed", huge, *out],
        ["demo", "kernel-regression", "--seed", huge, *out],
        ["ngram", "cfg.yaml", "--seed", huge],
    ):
        r = run_offline(args, tmp_path)
        assert r.returncode == 2 and "a seed is at most" in r.stderr, (args, r.stderr)
    with pytest.raises(Exception, match="less than or equal to 4294967295"):
        config_from_dict({"data": {"dataset": "dates"}, "model": {"arch": "bahdanau"},
                          "train": {"seed": 2**70}})  # fmt: skip


@pytest.mark.parametrize(
    "args, message",
    [
        (["diagnose", "gradients", "--recurrent-scale", "nan"], "must be a finite number"),
        (["diagnose", "gradients", "--gate-bias", "inf"], "must be a finite number"),
        (["diagnose", "gradients", "--recurrent-scale", "50", "--seq-len", "400"], "overflow"),
        (["demo", "positional-encoding", "--d-model", "3"], "even number from 10"),
        (["demo", "positional-encoding", "--max-len", "5"], "from 31 to 2000"),
    ],
)
def test_tool_options_out_of_range_are_one_line_errors(tmp_path, args, message):
    extra = ["--cells", "rnn_relu", "--hidden-size", "4"] if args[0] == "diagnose" else []
    r = run_offline([*args, *extra, "--out", str(tmp_path / "o")], tmp_path)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_unwritable_outputs_fail_before_the_work(runs, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    cfg = write_config(tmp_path / "c.yaml", lm_raw(runs / "corpus.txt"))
    fails(capsys, ["train", cfg, "--out", blocker / "run"], "cannot write into", blocker)
    fails(
        capsys,
        ["evaluate", "--run", runs / "mt", "--split", "val", "--output", blocker / "o.txt"],
        "--output",
        blocker,
    )
    fails(capsys, ["evaluate", "--run", runs / "mt", "--output", tmp_path], "is a directory")
    fails(capsys, ["diagnose", "gradients", "--out", blocker / "g"], "--out", blocker)


BAD = ["-1", "0", "abc", "nan", "1e999", ""]


OPTIONS = {
    ("translate", "--run", "RUN"): ["--beam", "--nbest", "--length-penalty"],
    ("evaluate", "--run", "RUN"): ["--beam", "--length-penalty"],
    ("generate", "--run", "LM"): ["--tokens", "--temperature", "--top-k"],
    ("data", "stats", "multi30k"): ["--batch-tokens"],
    ("diagnose", "gradients"): ["--seq-len", "--hidden-size", "--cells"],
    ("bench", "layers"): ["--width", "--heads", "--batch", "--repeats", "--lengths"],
    ("demo", "dates"): ["--threads"],
}


ZERO_OK = {"--tokens", "--temperature", "--top-k", "--threads", "--length-penalty"}


@pytest.mark.parametrize("command", list(OPTIONS), ids=lambda c: " ".join(c[:2]))
def test_no_traceback_reaches_the_user(command, runs, tmp_path, capsys):
    for option in OPTIONS[command]:
        for value in BAD:
            if option in ZERO_OK and value == "0":
                continue
            argv = [runs / "mt" if a == "RUN" else runs / "lm" if a == "LM" else a for a in command]
            argv = [str(a) for a in argv] + [option, value]
            if command[0] in ("diagnose", "bench", "demo"):
                argv += ["--out", str(tmp_path / "never")]
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's own errors
                code = exc.code
            err = capsys.readouterr().err
            assert code == 2, (argv, err)
            assert "Traceback" not in err and "error:" in err, (argv, err)
            assert option.lstrip("-") in err or "--cells" in err or "seqlab: error" in err
    assert not (tmp_path / "never").exists()


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
