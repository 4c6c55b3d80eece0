"""A run directory is a complete model: copied to a machine without the data, it still
translates, scores the user's files and generates (issue: run directories that stand alone)."""

import shutil

import pytest

import seqlab
from conftest import run_offline
from seqlab.cli import main
from seqlab.config import config_from_dict
from seqlab.experiment import train

TEXT = "the time traveller for so it will be convenient to speak of him was expounding. " * 30


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trained")
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT)
    lm = {
        "data": {"dataset": "text", "path": str(corpus), "batch_size": 4, "num_steps": 10},
        "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
        "train": {"max_steps": 4, "eval_every": 4, "threads": 1},
    }
    mt = {
        "data": {"dataset": "dates", "tokenizer": "char", "num_examples": 200, "val_examples": 10},
        "model": {"arch": "bahdanau", "embed_dim": 8, "hidden_size": 16, "dropout": 0.0},
        "train": {"max_steps": 4, "eval_every": 4, "threads": 1},
        "decode": {"max_len_a": 0.0, "max_len_b": 12},
    }
    train(config_from_dict(lm), root / "lm")
    train(config_from_dict(mt), root / "mt")
    corpus.unlink()  # the language model's training text is gone
    moved = tmp_path_factory.mktemp("elsewhere")
    for name in ("lm", "mt"):
        shutil.copytree(root / name, moved / name)
    shutil.rmtree(root)
    return moved


def run_cli(args, cwd, empty):
    return run_offline(args, empty, cwd=cwd)


def test_copied_runs_work_without_their_data(runs, tmp_path):
    empty = tmp_path / "no-data"
    empty.mkdir()
    sources, refs = tmp_path / "src.txt", tmp_path / "ref.txt"
    sources.write_text("saturday 9 may 1998\n\nMay 9, 1998\n")
    refs.write_text("1998-05-09\n\n1998-05-09\n")

    out = run_cli(
        ["translate", "--run", str(runs / "mt"), "--input", str(sources)], tmp_path, empty
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")[:3]
    assert lines[1] == "" and lines[0] and lines[2]  # a blank input line stays blank

    out = run_cli(
        [
            "evaluate",
            "--run",
            str(runs / "mt"),
            "--src",
            str(sources),
            "--ref",
            str(refs),
            "--json",
        ],
        tmp_path,
        empty,
    )
    assert out.returncode == 0, out.stderr
    assert '"sentences": 3' in out.stdout and '"bleu"' in out.stdout

    out = run_cli(
        ["generate", "--run", str(runs / "lm"), "--prefix", "the time", "--tokens", "20"],
        tmp_path,
        empty,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("the time") and len(out.stdout.strip()) > len("the time")

    out = run_cli(["generate", "--run", str(runs / "mt")], tmp_path, empty)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "needs a language modeling run" in out.stderr and "seqlab translate" in out.stderr


def test_loading_never_touches_the_training_data(runs, monkeypatch, capsys, tmp_path):
    def forbidden(*args, **kwargs):
        raise AssertionError("inference read the training data")

    monkeypatch.setattr("seqlab.tasks.translation.load_pairs", forbidden)
    monkeypatch.setattr("seqlab.tasks.translation.artefacts.load_pairs", forbidden)
    monkeypatch.setattr("seqlab.tasks.language_modeling.load_corpus", forbidden)
    monkeypatch.setattr("seqlab.data.registry.resolve", forbidden)
    m = seqlab.load(runs / "mt")
    assert len(m.translate(["saturday 9 may 1998", "09/05/98"], beam=3)) == 2
    scores = m.score(["saturday 9 may 1998"], ["1998-05-09"])
    assert {"bleu", "chrf", "translations"} <= set(scores)
    lm = seqlab.load(runs / "lm")
    assert lm.generate("the", tokens=5).startswith("the")
    assert lm.perplexity(TEXT[:200])["perplexity"] > 1
    src = tmp_path / "s.txt"
    src.write_text("09/05/98\n")
    assert main(["evaluate", "--run", str(runs / "mt"), "--src", str(src), "--ref", str(src)]) == 0
    assert "BLEU" in capsys.readouterr().out


def test_the_wrong_method_names_the_task(runs):
    m = seqlab.load(runs / "mt")
    with pytest.raises(AttributeError, match=r"translation model .*has no 'generate'.*translate"):
        m.generate("x")


def test_mismatched_files_and_incomplete_runs_are_refused(runs, tmp_path, capsys):
    src, ref = tmp_path / "s.txt", tmp_path / "r.txt"
    src.write_text("a\nb\n")
    ref.write_text("a\n")
    assert main(["evaluate", "--run", str(runs / "mt"), "--src", str(src), "--ref", str(ref)]) == 2
    err = capsys.readouterr().err
    assert f"--src {src} has 2 lines but --ref {ref} has 1" in err

    broken = tmp_path / "broken"
    shutil.copytree(runs / "lm", broken)
    (broken / "vocab.json").unlink()
    assert main(["generate", "--run", str(broken)]) == 2
    err = capsys.readouterr().err
    assert f"{broken / 'vocab.json'} is missing" in err and "never rebuilt" in err
