"""``seqlab demo`` wrappers: files written, paths printed, and what a learner reads: one rounded
sentence per result, the claim and whether it held, "diverged" for a diverged loss, the precision
and CPU of the numbers."""

import json
import math
import re

import pytest

from cli_checks import fails
from seqlab.analysis import summary as S
from seqlab.cli import main
from seqlab.demos.kernel_regression import kernel_regression_demo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FLOAT = re.compile(r"(?<![\w.])-?(\d+\.\d+)(?:e[-+]?\d+)?")


def long_floats(text):
    """The decimal numbers in ``text`` with more than 6 significant digits."""

    def significant(mantissa):
        return len(mantissa.replace(".", "").lstrip("0"))

    return [m.group(0) for m in FLOAT.finditer(text) if significant(m.group(1)) > 6]


def test_long_floats_finds_what_a_learner_should_not_read():
    assert long_floats("loss 1.7712345678901234, ppl 1.9e+21, 0.000123, 2.83") == [
        "1.7712345678901234"
    ]
    assert long_floats("perplexity 6.0451122394593e+49") == ["6.0451122394593e+49"]


def test_kernel_regression_demo_writes_and_names_its_plots(tmp_path, capsys):
    out = tmp_path / "new" / "dir"
    metrics = kernel_regression_demo(out)
    printed = capsys.readouterr().out
    for name in ("kernel_regression_fit.png", "kernel_regression_attention.png"):
        path = out / name
        assert path.read_bytes()[:8] == PNG_MAGIC
        assert str(path) in printed
    from seqlab.analysis.kernel_regression import make_data

    truth = make_data(seed=0)[3]
    baseline = ((truth - truth.mean()) ** 2).mean().item()  # predicting the mean everywhere
    assert 0 < metrics["mse_parametric"] < baseline and 0 < metrics["mse_nonparametric"] < baseline
    assert f"(Gaussian kernel, w = 1): test MSE {S.num(metrics['mse_nonparametric'])}" in printed
    assert (
        f"parametric pooling (learned inverse width w = {S.num(metrics['inverse_width'])}): "
        f"test MSE {S.num(metrics['mse_parametric'])}"
    ) in printed
    assert "fits the truth closer: holds" in printed and "numbers from: fp32, " in printed
    assert not long_floats(printed)


@pytest.mark.parametrize(
    "value,digits,shown",
    [
        (1.7712345678901234, 3, "1.77"),
        (0.47612345, 3, "0.476"),
        (1013.4123, 3, "1013"),
        (2.3456e-08, 2, "2.3e-8"),
        (6.045112239e49, 3, "6.05e49"),
        (math.inf, 3, "inf"),
        (None, 3, "n/a"),
        (0.0, 3, "0"),
    ],
)
def test_numbers_are_rounded_for_reading(value, digits, shown):
    assert S.num(value, digits) == shown


def test_diverged_is_one_rule_non_finite_or_above_twice_the_uniform_loss():
    v = 31  # uniform model: log 31 = 3.43 nats, so diverged above 6.87
    assert not S.diverged(3.5, v) and not S.diverged(6.8, v)  # worse than uniform: not yet
    for loss in (6.9, 88.0, 114.6, math.nan, math.inf, None):
        assert S.diverged(loss, v), loss
    assert S.loss_text(88.0, v) == "diverged" and S.loss_text(1.7712345, v) == "1.77"
    records = [
        {"kind": "train", "step": 10, "loss": 3.3},
        {"kind": "eval", "step": 10, "val_loss": 50.0},  # only training losses count
        {"kind": "train", "step": 20, "loss": 50.0},
    ]
    assert S.first_diverged_step(records, v) == 20
    assert S.files_line([], "r.json") == "numbers: r.json"  # never "figures: ;"


def lm_run(tmp_path, name, losses, val_loss):
    """A language-model run directory as the demos read it (its vocab.json, |V| = 31) and its
    metrics: training losses logged every 10 steps, then one validation."""
    from seqlab.data.vocab import Vocab

    run = tmp_path / name
    run.mkdir()
    Vocab("abcdefghijklmnopqrstuvwxyz ").save(run / "vocab.json")
    records = [{"kind": "train", "step": 10 * (i + 1), "loss": x} for i, x in enumerate(losses)]
    records.append({"kind": "eval", "step": 10 * len(losses), "val_loss": val_loss})
    return run, records


def test_training_choices_print_a_diverged_run_as_diverged(tmp_path):
    from seqlab.demos.lm_comparisons import _trained_row, choices_summary

    result = {"steps": 500, "models": {}}
    for name, losses, val in [
        ("sequential-clip", [3.0, 2.5], 2.0712345678901234),
        ("sequential-noclip", [3.0, 2.4], 2.0612345678901234),
        ("random-clip", [3.1, 2.6], 2.0598765432101234),
        ("random-noclip", [114.6, 88.0], 88.12345678901234),
    ]:
        result["models"][name] = _trained_row(*lm_run(tmp_path, name, losses, val), result)
    row = result["models"]["random-noclip"]
    assert row["diverged"] and row["diverged_at_step"] == 10 and row["val_ppl"] is None
    assert row["val_loss"] == 88.12345678901234  # the JSON keeps the full number
    json.dumps(result, allow_nan=False)  # valid JSON: no Infinity, no 50-digit perplexity
    text = "\n".join(choices_summary(result))
    assert "random sampling without clipping diverged within 10 steps (loss above 6.87" in text
    assert "88" not in text and "114" not in text
    assert (
        "sequential partitioning with clipping (θ = 1): validation loss 2.07 (perplexity 7.93)"
        in text
    )
    assert "clipping keeps SGD at learning rate 1 from diverging: holds" in text
    assert not long_floats(text)
    # a run the trainer stopped on a NaN loss has no validation: it reads as diverged too
    run, records = lm_run(tmp_path, "nan", [3.0], None)
    assert _trained_row(run, records, result)["diverged"]


def test_norm_placement_says_which_placement_ends_ahead(tmp_path):
    from seqlab.demos.lm_comparisons import _trained_row, norm_summary

    result = {"steps": 600, "models": {}}
    for name, val in (("post", 1.7712345678901234), ("pre", 1.8898765432101234)):
        result["models"][name] = _trained_row(*lm_run(tmp_path, name, [3.0, 2.0], val), result)
    assert norm_summary(result) == [
        "post-norm ends ahead after 600 steps: validation loss 1.77 vs 1.89 (pre-norm)"
    ]
    result["models"]["post"] = _trained_row(*lm_run(tmp_path, "p", [3.0, 40.0], 40.5), result)
    (line,) = norm_summary(result)
    assert line.startswith("pre-norm ends ahead after 600 steps: post-norm diverged (loss above")
    assert "pre-norm reached validation loss 1.89" in line and "40" not in line


def test_positions_summary_tests_extrapolation():
    from seqlab.demos.lm_comparisons import positions_summary

    def row(before, after):
        return {
            "seconds": 40.1,
            "64": {"loss": before, "loss_before_64": before, "loss_from_64": None},
            "256": {"loss": after, "loss_before_64": before, "loss_from_64": after},
        }

    models = {"sinusoidal": row(1.8912345678, 2.7912345678), "learned": row(1.95, 2.8)}
    result = {"trained_length": 64, "steps": 600, "vocab_size": 31, "models": models}
    result["unigram_loss"] = 2.8212345678  # README: both fall to about the unigram model's
    text = "\n".join(positions_summary(result))
    assert (
        "sinusoidal positions, trained on windows of 64: validation loss 1.89 at positions "
        "below 64, 2.79 at positions 64 to 255"
    ) in text
    assert "extrapolate past the trained length 64: does not hold (loss 2.79 past it, " in text
    assert "2.82 for the unigram model" in text and not long_floats(text)
    models["sinusoidal"] = row(1.89, 2.1)  # keeps most of its gain over the unigram model
    assert "extrapolate past the trained length 64: holds" in positions_summary(result)[-1]


def vit_run(size, accuracy, steps, budget):
    stopped = "time budget of 15 min reached" if steps < budget else "20 epochs done"
    return {
        "train_images": size,
        "steps": steps,
        "step_budget": budget,
        "test_accuracy": accuracy,
        "stopped": stopped,
        "stopped_early": steps < budget,
    }


def test_vit_vs_cnn_says_when_the_time_budget_stopped_a_run():
    from seqlab.demos.vit_vs_cnn import summary

    runs = {
        "vit": [vit_run(500, 0.6931234567, 49, 100), vit_run(55000, 0.98812345, 8600, 8600)],
        "cnn": [vit_run(500, 0.958, 600, 600), vit_run(55000, 0.99512345, 1720, 1720)],
    }
    lines = summary({"runs": runs})
    assert lines[0] == (
        "500 training images: CNN ahead, test accuracy 95.8% vs ViT 69.3%; "
        "the time budget stopped ViT after 49 of its 100 steps"
    )
    assert lines[1] == "55,000 training images: CNN ahead, test accuracy 99.5% vs ViT 98.8%"
    assert lines[2].startswith("with little data CNNs win: holds (at 500 images CNN 95.8%")
    assert lines[3].startswith("with much data ViT wins: does not hold (at 55,000 images")


def test_vit_vs_cnn_records_a_run_the_time_budget_stopped_early(tmp_path, monkeypatch):
    """The step budget is a budget: the time budget can end a run before it, and the run's
    record says so (no training here: the trainer is replaced)."""
    import seqlab.demos.vit_vs_cnn as demo

    steps_taken = {"vit": 49, "cnn": 40}  # of budgets 600 (ViT: 150 epochs of 4) and 600

    def fake_train(cfg, run_dir):
        taken = steps_taken[run_dir.name.split("-")[0]]
        return {"step": taken, "stopped": "time budget of 0.1 min reached", "precision": "fp32"}

    class Scored:
        def evaluate(self, split):
            return {"accuracy": 0.5}

    monkeypatch.setattr(demo, "train", fake_train)
    monkeypatch.setattr(demo, "load", lambda run_dir: Scored())
    monkeypatch.setattr(demo, "plot_vit_vs_cnn", lambda *args: None)
    results = demo.run_vit_vs_cnn(tmp_path, (500,), min_step_budget=600, max_minutes=0.1)
    vit, cnn = results["runs"]["vit"][0], results["runs"]["cnn"][0]
    assert vit["step_budget"] == 600 and vit["steps"] == 49 and vit["stopped_early"]
    assert cnn["stopped_early"] and json.loads((tmp_path / "vit_vs_cnn.json").read_text())
    assert (
        "the time budget stopped ViT after 49 of its 600 steps and CNN after 40"
        in (demo.summary(results)[0])
    )


def test_vit_vs_cnn_min_step_budget_is_named_for_what_it_is(tmp_path, monkeypatch, capsys):
    import seqlab.demos.vit_vs_cnn as demo
    from seqlab.deprecation import SeqlabDeprecationWarning

    budgets = []

    def fake(out, sizes, min_step_budget, max_minutes, threads):
        budgets.append(min_step_budget)
        runs = {"vit": [vit_run(500, 0.7, 49, 100)], "cnn": [vit_run(500, 0.9, 100, 100)]}
        return {"runs": runs, "precision": "fp32 training, fp32 evaluation", "machine": None}

    monkeypatch.setattr(demo, "run_vit_vs_cnn", fake)
    argv = ["demo", "vit-vs-cnn", "--sizes", "500", "--out"]
    assert main([*argv, str(tmp_path / "a"), "--min-step-budget", "50"]) == 0
    printed = capsys.readouterr().out
    assert "the time budget stopped ViT after 49 of its 100 steps" in printed
    assert "numbers from: fp32 training, fp32 evaluation, " in printed
    with pytest.warns(SeqlabDeprecationWarning, match="renamed --min-step-budget"):
        assert main([*argv, str(tmp_path / "b"), "--min-steps", "70"]) == 0
    assert budgets == [50, 70]
    with pytest.raises(SystemExit):
        main(["demo", "vit-vs-cnn", "--help"])
    help_text = capsys.readouterr().out
    assert "--min-step-budget" in help_text and "--min-steps " not in help_text


def test_a_demo_prints_rounded_sentences_the_machine_and_its_files(tmp_path, capsys):
    out = tmp_path / "pe"
    argv = ["demo", "positional-encoding", "--max-len", "31", "--d-model", "10"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    saved = json.loads((out / "positional_encoding.json").read_text())
    spread = S.num(saved["max_spread_over_t"], 2)
    assert f"depends on the offset k only: holds (over t it varies by at most {spread} " in printed
    assert "numbers from: fp32 table, float64 cosines, " in printed
    assert f"figures: {out / 'pe_matrix.png'}, " in printed
    assert printed.rstrip().endswith(f"; numbers: {out / 'positional_encoding.json'}")
    assert saved["machine"]["precision"] == "fp32 table, float64 cosines"  # the JSON says it too
    assert not long_floats(printed)

    assert main(["demo", "self-attention-example", "--out", str(tmp_path / "sa")]) == 0
    printed = capsys.readouterr().out
    assert "figures" not in printed  # it draws none: no "figures: ;"
    assert f"numbers: {tmp_path / 'sa' / 'self_attention_example.json'}" in printed
    assert "give the module's output: holds (largest difference " in printed
    assert not long_floats(printed)


def test_diagnose_bench_and_ngram_print_rounded_sentences(tmp_path, capsys):
    argv = ["diagnose", "gradients", "--cells", "rnn,lstm", "--seq-len", "5", "--hidden-size"]
    assert main([*argv, "4", "--out", str(tmp_path / "g")]) == 0
    printed = capsys.readouterr().out
    assert "rnn: over T = 5 steps the gradient reaching h_1 is " in printed
    assert "rnn stays under the bound (β_W β_h)^(T−1): holds" in printed
    assert "numbers from: float64, " in printed and not long_floats(printed)

    argv = ["bench", "layers", "--lengths", "4,8", "--width", "8", "--heads", "2", "--repeats"]
    assert main([*argv, "1", "--memory-length", "8"]) == 0
    printed = capsys.readouterr().out
    assert "attention's time grows as n^2 (O(n²d)): " in printed
    assert "numbers from: fp32, " in printed and not long_floats(printed)

    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 40)
    cfg = tmp_path / "lm.yaml"
    cfg.write_text(
        f"data: {{dataset: text, path: {text}, tokenizer: char}}\nmodel: {{arch: rnn_lm}}\n"
    )
    assert main(["ngram", str(cfg), "--orders", "1,3", "--json"]) == 0
    ppl = json.loads(capsys.readouterr().out)["orders"]["1"]["val_ppl"]
    assert main(["ngram", str(cfg), "--orders", "1,3"]) == 0
    printed = capsys.readouterr().out
    assert f"1-gram: validation perplexity {S.num(ppl)} (" in printed
    assert "perplexity falls with each order: holds" in printed and not long_floats(printed)


def test_demo_never_deletes_a_users_folder(tmp_path, capsys):
    mine = tmp_path / "out" / "bahdanau"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("precious")
    fails(capsys, ["demo", "dates", "--out", tmp_path / "out"], mine, "nothing was deleted")
    assert (mine / "thesis.tex").read_text() == "precious"


def test_the_dates_demo_runs_end_to_end_and_draws_its_heatmaps(tmp_path, capsys, monkeypatch):
    """``make demo`` (``seqlab demo dates``) at a tiny budget: both models trained, evaluated,
    their examples translated and drawn, as the full run does (a renamed API once broke it after
    training, where no other test looked)."""
    from seqlab.demos import dates

    real = dates.load_config
    tiny = ["data.num_examples=240", "data.val_examples=40", "train.epochs=1", "train.max_steps=3"]
    monkeypatch.setattr(dates, "load_config", lambda name, over: real(name, [*over, *tiny]))
    out = tmp_path / "demo"
    assert main(["demo", "dates", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for name in dates.CONFIGS:
        for number in range(1, len(dates.EXAMPLES) + 1):
            assert (out / name / f"attention-{number:04d}.png").read_bytes()[:8] == PNG_MAGIC
        assert f"    attention heatmaps: {out / name}/attention-*.png" in printed
        assert f"    loss curves:        {out / name / 'curves.png'}" in printed
        assert re.search(
            rf"^{name} translates [\d.]+% of \d+ held-out dates exactly", printed, re.M
        )
    assert "an attentive RNN and a Transformer both learn to write dates in ISO 8601: " in printed
    assert "numbers from: " in printed and not long_floats(printed)
