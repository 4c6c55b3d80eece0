"""The command line as the README shows it."""

import json
import os
from pathlib import Path

import pytest

from conftest import png_claiming
from seqlab.cli import main

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
