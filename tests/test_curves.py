"""``seqlab curves``: a validation metric of several runs against training wall time."""

import json
import shutil
from pathlib import Path

import pytest

from seqlab.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "seqlab" / "configs"


def fake_run(path, evals, config="dates-transformer", metric="val_bleu"):
    """A run directory of ``config`` (a shipped one) whose validations recorded ``metric`` and
    ``val_loss`` at ``(step, value, seconds)``."""
    path.mkdir()
    shutil.copyfile(CONFIGS / f"{config}.yaml", path / "config.yaml")
    lines = [{"kind": "train", "step": 1, "loss": 3.0, "elapsed_s": 1.0}]
    lines += [
        {"kind": "eval", "step": s, "epoch": 0, "val_loss": 1.0, metric: b, "elapsed_s": t}
        for s, b, t in evals
    ]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_curves_of_two_runs_are_drawn_and_summarised(tmp_path, capsys):
    a = fake_run(tmp_path / "a", [(10, 5.0, 60.0), (20, 12.5, 180.0), (30, 11.0, 300.0)])
    b = fake_run(tmp_path / "b", [(10, 8.0, 120.0)])
    out = tmp_path / "bleu.png"
    assert main(["curves", str(a), str(b), "--png", str(out)]) == 0
    assert out.stat().st_size > 5_000
    text = capsys.readouterr().out
    assert (
        "a: val_bleu 11.00 after 5.0 min, the last of 3 validations; "
        "best (highest) 12.50 at 3.0 min"
    ) in text
    assert "b: val_bleu 8.00 after 2.0 min, the last of 1 validation; best (highest) 8.00" in text


def test_a_lower_is_better_metric_is_summarised_by_its_lowest_as_best(tmp_path, capsys):
    """val_loss: the best is the lowest, never the highest (the worst) called best; a metric
    seqlab cannot rank gets its lowest and highest, neither called the best."""
    a = fake_run(tmp_path / "a", [(10, 5.0, 60.0), (20, 2.5, 180.0), (30, 3.0, 300.0)])
    metrics = (a / "metrics.jsonl").read_text().replace("val_bleu", "val_loss")
    (a / "metrics.jsonl").write_text(metrics)
    assert main(["curves", str(a), "--metric", "val_loss", "--png", str(tmp_path / "l.png")]) == 0
    text = capsys.readouterr().out
    assert "a: val_loss 3.00 after 5.0 min, the last of 3 validations; " in text
    assert "best (lowest) 2.50 at 3.0 min" in text and "highest" not in text
    (a / "metrics.jsonl").write_text(metrics.replace("val_loss", "val_wer2"))
    assert main(["curves", str(a), "--metric", "val_wer2", "--png", str(tmp_path / "w.png")]) == 0
    text = capsys.readouterr().out
    assert "lowest 2.50 at 3.0 min, highest 5.00 at 1.0 min" in text and "best (" not in text


def test_a_missing_metric_or_run_is_named(tmp_path, capsys):
    a = fake_run(tmp_path / "a", [(10, 5.0, 60.0)])
    out = tmp_path / "x.png"
    assert main(["curves", str(a), "--metric", "val_chrf", "--png", str(out)]) == 2
    err = capsys.readouterr().err
    assert "has no validation with 'val_chrf'" in err and "val_bleu" in err
    assert main(["curves", str(tmp_path / "nope"), "--png", str(out)]) == 2
    assert "run directory not found" in capsys.readouterr().err
    assert main(["curves", str(tmp_path / "nope"), "--metric", "val_bleu", "--png", str(out)]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err
    assert not out.exists()  # nothing was written


@pytest.mark.parametrize(
    ("config", "metric"),
    [
        ("dates-transformer", "val_bleu"),
        ("timemachine-char-lstm", "val_loss"),
        ("sst2-cnn", "val_acc"),
        ("mnist-cnn", "val_acc"),
        ("sunspots-gru", "val_rmse"),
    ],
)
def test_the_default_metric_is_the_one_that_chose_the_runs_checkpoints(
    tmp_path, capsys, config, metric
):
    run = fake_run(tmp_path / "r", [(10, 0.5, 60.0), (20, 0.25, 120.0)], config, metric)
    out = tmp_path / "c.png"
    assert main(["curves", str(run), "--png", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"r: {metric} 0.25 after 2.0 min")
    assert out.is_file()


def test_runs_choosing_by_different_metrics_or_lacking_one_are_named(tmp_path, capsys):
    mt = fake_run(tmp_path / "mt", [(10, 5.0, 60.0)])
    lm = fake_run(tmp_path / "lm", [(10, 5.0, 60.0)], "timemachine-char-lstm", "val_ppl")
    out = tmp_path / "c.png"
    assert main(["curves", str(mt), str(lm), "--png", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"different metrics ({mt}: val_bleu, {lm}: val_loss); give --metric" in err
    assert main(["curves", str(lm), "--metric", "val_bleu", "--png", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.endswith("its validations record: val_loss, val_ppl (choose one with --metric)\n")
    assert not out.exists()  # nothing was written
    assert main(["curves", str(mt), str(lm), "--metric", "val_loss", "--png", str(out)]) == 0
