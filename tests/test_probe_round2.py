"""Issue 21, second probe: cases found beyond the listed ones, one test per principle.

Nothing lost (an output file is never an input of the same command, nor a file of a training
run), nothing silently wrong (series CSVs read as written, forecasts that diverge refused, a
vocabulary of reserved tokens only refused, unknown prefix tokens warned about, wrong types in
the Python API refused), no tracebacks (memory, seeds, thread counts, tiny temperatures, the
demos' and diagnostics' numeric options).
"""

from __future__ import annotations

import math
import shutil
import warnings

import pytest
import torch

from conftest import run_offline
from seqlab import load
from seqlab.config import config_from_dict
from seqlab.data.series import parse_series_csv
from seqlab.errors import DataError, SeqlabError
from seqlab.nn.sampling import next_token

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _series(n: int = 30) -> list[str]:
    return [f"{math.sin(i / 5):.6f}" for i in range(n)]


# ------------------------------------------------------------------ data loss: output files
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


# ------------------------------------------------------------ silently wrong: series CSVs
@pytest.mark.parametrize(
    "text, problem",
    [
        ("value\n" + "\n".join(v.replace(".", ",") for v in _series()), "2 field"),  # 0,5
        ("t,value\n0,1\n1,2,3\n2,3\n3,4\n4,5\n", "3 field"),  # a ragged row
        ("value\n1\n2\n\n3\n4\n5\n", "blank line between values"),  # a lost time step
        ("value\n1\n2\n1_000\n4\n5\n", "not a number"),  # Python's digit grouping
    ],
)
def test_series_csv_is_read_as_written_or_refused(text, problem):
    with pytest.raises(DataError, match=problem):
        parse_series_csv(text, "s.csv")


def test_series_csv_blank_line_between_values_follows_missing_and_trailing_ones_are_ignored():
    assert parse_series_csv("value\n1\n\n3\n", "s.csv", missing="interpolate") == [1, 2, 3]
    assert parse_series_csv("value\n1\n\n3\n", "s.csv", missing="drop") == [1, 3]
    assert parse_series_csv("value\n1\n2\n3\n\n\n", "s.csv") == [1, 2, 3]


def test_forecast_that_diverges_is_refused_and_steps_are_bounded(tiny_runs):
    fc = load(tiny_runs["fc"])
    history = [math.sin(i / 5) for i in range(30)]
    values = fc.forecast(history, 3)
    assert len(values) == 3 and all(math.isfinite(v) for v in values)
    with torch.no_grad():  # a model that doubles the last value: fed back, it diverges
        for p in fc.model.parameters():
            p.zero_()
        [p for p in fc.model.parameters() if p.dim() == 2][-1][:, -1] = 2.0
    with pytest.raises(SeqlabError, match="forecast diverges"):
        fc.forecast(history, 200)
    for steps in (0, 10_001, 2.5, True):
        with pytest.raises(SeqlabError, match="steps must be a whole number from 1 to"):
            fc.forecast(history, steps)


# ------------------------------------------------- silently wrong: vocabularies, prefixes
@pytest.mark.parametrize("override", [{"min_freq": 10**9}, {"max_vocab": 4}])
def test_training_refuses_a_vocabulary_of_reserved_tokens_only(tmp_path, override):
    from seqlab.experiment import train

    (tmp_path / "c.txt").write_text("the time machine " * 40)
    cfg = config_from_dict(
        {
            "data": {"dataset": "text", "path": str(tmp_path / "c.txt"), "batch_size": 2,
                     "num_steps": 5, **override},
            "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 4, "hidden_size": 4},
            "train": {"max_steps": 1, "threads": 1},
        }
    )  # fmt: skip
    with pytest.raises(DataError, match="only the reserved tokens"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_generate_warns_of_unknown_prefix_tokens_and_refuses_a_list(tiny_runs):
    lm = load(tiny_runs["lm"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lm.generate("the", tokens=2)
        assert not caught
        lm.generate("QQ\u20ac", tokens=2)
    assert any("not in the model's vocabulary" in str(w.message) for w in caught)
    with pytest.raises(SeqlabError, match="one text"):
        lm.generate(["the time"], tokens=2)


# ------------------------------------------------------------ the Python API: wrong types
def test_api_refuses_numbers_of_the_wrong_type_and_takes_a_step_as_int(tiny_runs):
    mt = load(tiny_runs["mt"])
    for beam in (2.5, float("nan"), True):
        with pytest.raises(SeqlabError, match="beam size must be a whole number"):
            mt.translate(["may 9 1998"], beam=beam)
    lm = load(tiny_runs["lm"])
    for bad in ({"tokens": 2.5}, {"seed": 2**70}, {"seed": -1}, {"seed": float("nan")}):
        with pytest.raises(SeqlabError):
            lm.generate("the", **{"tokens": 2, **bad})
    step = int(sorted(p.name for p in (tiny_runs["mt"] / "checkpoints").glob("step-*"))[0][5:])
    assert load(tiny_runs["mt"], which=step).checkpoint.endswith(f"step-{step:08d}")


# ----------------------------------------------------------------- tracebacks: sampling
@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-30])
def test_sampling_at_a_tiny_temperature_is_greedy_not_nan(temperature):
    logits = torch.tensor([[1.0, 3.0, 2.0, 3.0 - 1e-3, -math.inf]])
    picks = {
        int(next_token(logits, "sample", temperature, 0, torch.Generator().manual_seed(s)))
        for s in range(5)
    }
    assert picks == {1}


# ----------------------------------------- tracebacks: seeds, threads, memory, tool options
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


def test_too_many_threads_are_cut_to_the_cpus_with_a_warning():
    from seqlab.runtime.machine import cpu_count, set_threads

    before = torch.get_num_threads()
    try:
        with pytest.warns(UserWarning, match="more than the"):
            used = set_threads(100_000, "train.threads")
        assert used == cpu_count()
    finally:
        torch.set_num_threads(before)


def test_sizes_too_large_for_memory_are_one_line_errors(tmp_path):
    r = run_offline(
        ["diagnose", "gradients", "--seq-len", "3", "--hidden-size", "99999999999",
         "--cells", "rnn", "--out", str(tmp_path / "g")],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "not enough memory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


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


# ------------------------------------------------------------------ left over from round two
def test_generating_more_than_the_cap_is_refused_at_once(tmp_path):
    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS

    corpus = tmp_path / "c.txt"
    corpus.write_text("the time traveller was expounding a recondite matter to us " * 20)
    cfg = tmp_path / "lm.yaml"
    cfg.write_text(
        f"data: {{dataset: text, path: {corpus}}}\nmodel: {{arch: rnn_lm}}\n", encoding="utf-8"
    )
    from seqlab.cli import main

    too_many = str(MAX_GENERATE_TOKENS + 1)
    assert main(["ngram", str(cfg), "--generate", "the", "--tokens", too_many]) == 2


def test_layer_without_attention_png_and_unknown_sentences_are_reported(tiny_runs):
    model = load(tiny_runs["cls"])  # a text classifier
    with pytest.raises(SeqlabError, match="--layer picks the layer that --attention-png draws"):
        model.check("classify", {"layer": 0, "attention_png": None})
    model.check("classify", {"layer": -1, "attention_png": None})  # the default: fine
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.classify(["zzzqqq xxyyzz"])
    assert any("hold no token the model knows" in str(w.message) for w in caught)


def test_a_neural_language_model_refuses_more_than_the_cap(tiny_runs):
    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS

    with pytest.raises(SeqlabError, match=f"from 0 to {MAX_GENERATE_TOKENS:,}"):
        load(tiny_runs["lm"]).generate("the", tokens=MAX_GENERATE_TOKENS + 1)


def test_the_servers_token_limit_cannot_exceed_generates_cap():
    pytest.importorskip("fastapi")
    from pydantic import ValidationError

    from seqlab.serve.limits import Limits
    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS

    assert Limits(max_tokens=MAX_GENERATE_TOKENS).max_tokens == MAX_GENERATE_TOKENS
    with pytest.raises(ValidationError):
        Limits(max_tokens=MAX_GENERATE_TOKENS + 1)
