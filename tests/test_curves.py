"""``seqlab curves``: a validation metric of several runs against training wall time."""

import json

from seqlab.cli import main


def fake_run(path, evals):
    path.mkdir()
    lines = [{"kind": "train", "step": 1, "loss": 3.0, "elapsed_s": 1.0}]
    lines += [{"kind": "eval", "step": s, "val_bleu": b, "elapsed_s": t} for s, b, t in evals]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_curves_of_two_runs_are_drawn_and_summarised(tmp_path, capsys):
    a = fake_run(tmp_path / "a", [(10, 5.0, 60.0), (20, 12.5, 180.0), (30, 11.0, 300.0)])
    b = fake_run(tmp_path / "b", [(10, 8.0, 120.0)])
    out = tmp_path / "bleu.png"
    assert main(["curves", str(a), str(b), "--out", str(out)]) == 0
    assert out.stat().st_size > 5_000
    text = capsys.readouterr().out
    assert "a: val_bleu 11.00 after 5.0 min (highest 12.50 at 3.0 min, 3 validations)" in text
    assert "b: val_bleu 8.00 after 2.0 min (highest 8.00 at 2.0 min, 1 validations)" in text


def test_a_missing_metric_or_run_is_named(tmp_path, capsys):
    a = fake_run(tmp_path / "a", [(10, 5.0, 60.0)])
    out = tmp_path / "x.png"
    assert main(["curves", str(a), "--metric", "val_chrf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "has no validation with 'val_chrf'" in err and "val_bleu" in err
    assert main(["curves", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err
    assert not out.exists()  # nothing was written
