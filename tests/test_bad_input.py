"""Nothing lost, nothing silently wrong: every bad input gets a ``seqlab: error:`` naming what and
where, exit status 2, before any heavy work, and no user file changes."""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from seqlab.cli import main
from seqlab.config import config_from_dict, load_config
from seqlab.errors import ConfigError
from seqlab.experiment import train
from seqlab.storage.rundir import RunDir
from seqlab.training.callbacks import read_metrics

TEXT = "the time traveller for so it will be convenient to speak of him was expounding. " * 30


def lm_raw(corpus, **train_keys):
    return {
        "data": {"dataset": "text", "path": str(corpus), "batch_size": 4, "num_steps": 10},
        "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
        "train": {"max_steps": 4, "eval_every": 2, "log_every": 1, "threads": 1, **train_keys},
    }


def mt_raw(arch="bahdanau"):
    model = {"arch": arch, "embed_dim": 8, "hidden_size": 16, "dropout": 0.0}
    return {
        "data": {"dataset": "dates", "tokenizer": "char", "num_examples": 150, "val_examples": 8},
        "model": model,
        "train": {"max_steps": 2, "eval_every": 2, "threads": 1},
        "decode": {"max_len_a": 0.0, "max_len_b": 12},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT)
    train(config_from_dict(lm_raw(corpus)), root / "lm")
    train(config_from_dict(mt_raw()), root / "mt")
    train(config_from_dict(mt_raw("seq2seq")), root / "s2s")
    return root


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def fails(capsys, argv, *needles):
    """Run the CLI; it must exit 2 with one ``seqlab: error:`` naming every needle."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("seqlab: error:") and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in err, (needle, err)
    return err


def write_config(path, raw):
    path.write_text(yaml.safe_dump(raw))
    return path


# ---------------------------------------------------------------------------- data loss
def test_demo_never_deletes_a_users_folder(tmp_path, capsys):
    mine = tmp_path / "out" / "bahdanau"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("precious")
    fails(capsys, ["demo", "dates", "--out", tmp_path / "out"], mine, "nothing was deleted")
    assert (mine / "thesis.tex").read_text() == "precious"


def test_train_never_writes_into_a_users_folder(tmp_path, capsys, runs):
    out = tmp_path / "mine"
    out.mkdir()
    for name in ("config.yaml", "vocab.json", "metrics.jsonl", "curves.png"):
        (out / name).write_text(f"my own {name}")  # names seqlab would write
    before = snapshot(out)
    cfg = write_config(tmp_path / "c.yaml", lm_raw(runs / "corpus.txt"))
    fails(capsys, ["train", cfg, "--out", out], out, "not a seqlab run", "nothing was written")
    assert snapshot(out) == before


def test_resume_refuses_what_it_cannot_honour_and_changes_nothing(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    before = snapshot(run)
    fails(
        capsys, ["train", "--resume", run, "model.hidden_size=64"], "model.hidden_size", "train.lr"
    )
    assert snapshot(run) == before
    assert main(["generate", "--run", str(run), "--tokens", "3"]) == 0


def test_resume_applies_a_new_learning_rate(runs, tmp_path):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    train(None, run, resume=True, overrides=["train.max_steps=6", "train.lr=0.0001"])
    records = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[3]["lr"] == pytest.approx(1e-3) and records[5]["lr"] == pytest.approx(1e-4)
    assert load_config(run / "config.yaml").train.lr == pytest.approx(1e-4)


# ------------------------------------------------------------------------ silently wrong
def test_a_run_without_its_vocabulary_is_refused(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    (run / "vocab.json").unlink()
    fails(capsys, ["generate", "--run", run], run / "vocab.json", "never rebuilt")
    fails(capsys, ["evaluate", "--run", run], run / "vocab.json")
    fails(capsys, ["train", "--resume", run, "train.max_steps=8"], run / "vocab.json")
    assert not (run / "vocab.json").exists()


def test_empty_and_duplicate_key_configs(tmp_path, capsys):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    fails(capsys, ["train", empty, "--out", tmp_path / "r"], empty, "is empty")
    dup = tmp_path / "dup.yaml"
    dup.write_text("train:\n  lr: 0.1\n  epochs: 3\n  lr: 0.2\n")
    fails(
        capsys, ["train", dup, "--out", tmp_path / "r"], f"{dup}:4", "'lr' appears twice", "line 2"
    )
    assert not (tmp_path / "r").exists()


def test_booleans_are_not_numbers(tmp_path, capsys):
    cfg = write_config(tmp_path / "c.yaml", {"model": {"arch": "rnn_lm"}})
    fails(
        capsys,
        ["train", cfg, "model.hidden_size=true", "--out", tmp_path / "r"],
        "model.hidden_size",
        "True",
    )


def test_a_validation_split_too_small_to_measure(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    raw = lm_raw(corpus)
    raw["data"]["val_fraction"] = 0.0001
    cfg = write_config(tmp_path / "c.yaml", raw)
    fails(capsys, ["train", cfg, "--out", tmp_path / "r"], "data.val_fraction=0.0001", "0 token(s)")
    assert not (tmp_path / "r").exists()


POISON = textwrap.dedent(
    """
    import sys, torch, yaml
    from seqlab.config import config_from_dict
    from seqlab.experiment import train
    from seqlab.training.trainer import Callback

    class Poison(Callback):  # the weights blow up after step 3
        def on_step(self, trainer, loss):
            if trainer.pos.step == 3:
                with torch.no_grad():
                    next(trainer.model.parameters()).fill_(float("inf"))

    cfg = config_from_dict(yaml.safe_load(open(sys.argv[1])))
    train(cfg, sys.argv[2], callbacks=[Poison()])
    """
)


def test_divergence_keeps_the_last_good_checkpoint_and_its_advice_works(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    cfg = write_config(tmp_path / "c.yaml", lm_raw(corpus, max_steps=8))
    (tmp_path / "poison.py").write_text(POISON)
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "poison.py"), str(cfg), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "TrainingDiverged" in proc.stderr
    assert "at step 4" in proc.stderr and "step-00000002" in proc.stderr
    advice = "seqlab train --resume " + str(tmp_path / "run") + " train.lr=<lower>"
    assert advice in proc.stderr
    assert RunDir(tmp_path / "run").steps() == [2]
    for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in metrics.jsonl"))
    assert main(["train", "--resume", str(tmp_path / "run"), "train.lr=0.0005"]) == 0
    assert RunDir(tmp_path / "run").pointer("latest") == 8


def test_resuming_a_finished_run_changes_nothing(runs, tmp_path, capsys):
    run = tmp_path / "lm"
    shutil.copytree(runs / "lm", run)
    before = snapshot(run)
    advice = f"seqlab train --resume {run} train.max_steps=8"  # the limit that ended it
    fails(capsys, ["train", "--resume", run], "has finished", "train.max_steps=4 reached", advice)
    assert snapshot(run) == before


def test_temperature_zero_is_greedy(runs, capsys):
    argv = ["generate", "--run", runs / "lm", "--prefix", "the", "--tokens", "30"]
    assert main([str(a) for a in argv]) == 0
    greedy = capsys.readouterr().out
    assert main([str(a) for a in argv + ["--temperature", "0"]]) == 0
    assert capsys.readouterr().out == greedy
    assert main([str(a) for a in argv + ["--temperature", "1.5", "--seed", "3"]]) == 0
    assert capsys.readouterr().out != greedy  # sampling at 1.5 does differ here
    fails(capsys, argv + ["--temperature", "0", "--top-k", "5"], "temperature 0 means greedy")


def test_sampling_is_refused_for_translation():
    raw = mt_raw()
    raw["decode"]["strategy"] = "sample"
    with pytest.raises(ConfigError, match="decode.strategy=sample is for language models"):
        config_from_dict(raw)


def test_attention_png_needs_attention(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n")
    out = tmp_path / "att"
    fails(
        capsys,
        ["translate", "--run", runs / "s2s", "--input", src, "--attention-png", out],
        "model.arch=seq2seq has no attention",
    )
    assert not out.exists()


def test_beam_and_nbest_rules(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n1.3.1969\n")
    base = ["translate", "--run", runs / "mt", "--input", src]
    assert main([str(a) for a in base]) == 0
    greedy = capsys.readouterr().out
    assert main([str(a) for a in base + ["--nbest", "1"]]) == 0  # stays greedy
    assert capsys.readouterr().out == greedy
    assert main([str(a) for a in base + ["--beam", "1"]]) == 0  # beam 1 is greedy
    assert capsys.readouterr().out == greedy
    fails(capsys, base + ["--beam", "1", "--nbest", "3"], "nbest 3 needs a beam of at least 3")
    fails(capsys, base + ["--nbest", "3"], "decoding is greedy search", "--beam 5 --nbest 3")
    assert main([str(a) for a in base + ["--beam", "3", "--nbest", "3"]]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 6
    fails(capsys, base + ["--length-penalty", "0.6"], "decoding is greedy search", "--beam 5")
    fails(capsys, base + ["--beam", "3", "--length-penalty", "11"], "from 0 to 10", "got 11.0")
    assert main([str(a) for a in base + ["--beam", "3", "--length-penalty", "0"]]) == 0


def test_a_huge_line_draws_a_bounded_heatmap(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("9 " * 5000 + "\n")
    out = tmp_path / "att"
    with pytest.warns(UserWarning, match="truncated 1 of 1 input sentences"):
        code = main(
            [
                "translate",
                "--run",
                str(runs / "mt"),
                "--input",
                str(src),
                "--attention-png",
                str(out),
            ]
        )
    assert code == 0
    png = (out / "attention-0001.png").read_bytes()
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width < 4000 and height < 4000


# ----------------------------------------------------------------------------- tracebacks
def test_bad_input_files(runs, tmp_path, capsys):
    base = ["translate", "--run", runs / "mt", "--input"]
    fails(capsys, base + [tmp_path / "nope.txt"], "input file not found", tmp_path / "nope.txt")
    fails(capsys, base + [tmp_path], "is a directory")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    fails(capsys, base + [bad], f"{bad}:2", "not valid UTF-8")


@pytest.mark.parametrize(
    "text,what",
    [("", "holds 0 token(s)"), ("x", "holds 1 token(s)"), ("abcdefghij" * 3, "data.batch_size")],
)
def test_corpora_too_small(tmp_path, capsys, text, what):
    corpus = tmp_path / "c.txt"
    corpus.write_text(text)
    cfg = write_config(tmp_path / "c.yaml", lm_raw(corpus))
    fails(capsys, ["train", cfg, "--out", tmp_path / "r"], what)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "override,needles",
    [
        ("data.max_vocab=2", ["data.max_vocab", "greater than or equal to 4"]),
        ("data.max_len=1", ["data.max_len", "greater than or equal to 2"]),
        ("model.max_len=50", ["model.max_len=50 is smaller than data.max_len=100"]),
        ("train.warmup_fraction=0.1", ["train.warmup_steps", "not both"]),
    ],
)
def test_cross_field_rules_fail_at_load_time(tmp_path, capsys, override, needles):
    raw = {
        "data": {"dataset": "dates", "tokenizer": "char"},
        "model": {"arch": "transformer"},
        "train": {"warmup_steps": 10},
    }
    cfg = write_config(tmp_path / "c.yaml", raw)
    fails(capsys, ["train", cfg, override, "--out", tmp_path / "r"], *needles)


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


def test_a_failing_plot_costs_no_training(tmp_path, monkeypatch, runs):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("seqlab.plotting.plot_curves", broken)
    with pytest.warns(UserWarning, match="could not draw .*curves.png: disk full"):
        summary = train(config_from_dict(lm_raw(runs / "corpus.txt")), tmp_path / "r")
    assert summary["step"] == 4 and RunDir(tmp_path / "r").steps()[-1] == 4


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


def test_resume_after_ctrl_c_is_exact(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    raw = lm_raw(corpus, max_steps=8, eval_every=4)
    full = tmp_path / "full"
    train(config_from_dict(raw), full)
    script = textwrap.dedent(
        """
        import os, signal, sys, yaml
        from seqlab.cli import main
        from seqlab.training.trainer import Callback
        import seqlab.experiment as experiment

        class CtrlC(Callback):
            def on_step(self, trainer, loss):
                if trainer.pos.step == 6:
                    os.kill(os.getpid(), signal.SIGINT)

        real = experiment.train
        experiment.train = lambda *a, **k: real(*a, callbacks=[CtrlC()], **k)
        sys.exit(main(["train", sys.argv[1], "--out", sys.argv[2]]))
        """
    )
    (tmp_path / "ctrlc.py").write_text(script)
    cfg = write_config(tmp_path / "c.yaml", raw)
    cut = tmp_path / "cut"
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "ctrlc.py"), str(cfg), str(cut)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, proc.stderr
    assert "saved a checkpoint at step 6" in proc.stderr
    assert f"seqlab train --resume {cut}" in proc.stderr and "Traceback" not in proc.stderr
    train(None, cut, resume=True)

    def losses(run):
        return {
            r["step"]: r["loss"]
            for r in read_metrics(run / "metrics.jsonl")
            if r["kind"] == "train"
        }

    assert losses(cut) == losses(full)


def test_shipped_configs_are_package_data():
    """``seqlab demo dates`` finds its configs inside the installed package."""
    import seqlab
    from seqlab.demos.dates import CONFIGS

    package = Path(seqlab.__file__).parent
    for name in CONFIGS.values():
        assert (package / "configs" / f"{name}.yaml").is_file()
        load_config(name)  # by name, from any working directory
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert '"configs/*.yaml"' in pyproject


# ------------------------------------------------------------------ every subcommand, bad values
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
