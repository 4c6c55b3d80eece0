"""Issue 21, silently wrong: every case becomes a clear error (``seqlab: error: …``, exit 2) or a
correct result with a warning; and the dead ends beside them (bench heads, n-gram corner cases,
CTranslate2 compute types, empty evaluation files, horizons, NaN temperatures, ``$`` in plots).
Each test also checks that correct input still works."""

import gzip
import hashlib
import io
import json
import math
import os
import shutil
import signal
import types
import typing
import warnings

import pytest
import torch
import yaml
from pydantic import BaseModel, ValidationError
from torch import nn

from seqlab import catalog, load
from seqlab.cli import main
from seqlab.config import (
    DataConfig,
    DecodeConfig,
    SubwordConfig,
    TrainConfig,
    config_from_dict,
    load_config,
)
from seqlab.data import registry
from seqlab.data.series import MAX_ABS_VALUE, read_series_csv
from seqlab.errors import DataError, SeqlabError
from seqlab.experiment import train
from seqlab.models.ngram import NGramLM
from seqlab.nn.losses import perplexity
from seqlab.storage.rundir import RunDir
from seqlab.tokens import SPECIAL_TOKENS
from seqlab.training.callbacks import MetricsLog, ProgressBar, read_metrics
from seqlab.training.trainer import Callback, LossOutput, Trainer, TrainingDiverged

TEXT = "the time traveller for so it will be convenient to speak of him was expounding. " * 30
POS = ["a great film", "truly wonderful acting", "great fun", "a wonderful story", "loved it"]
NEG = ["a dull film", "truly awful acting", "boring mess", "an awful story", "hated it"]


def lm_raw(corpus, **train_keys):
    return {
        "data": {"dataset": "text", "path": str(corpus), "batch_size": 4, "num_steps": 10},
        "model": {"arch": "rnn_lm", "cell": "gru", "embed_dim": 8, "hidden_size": 16},
        "train": {"max_steps": 4, "eval_every": 2, "log_every": 1, "threads": 1, **train_keys},
    }


def dates_raw(arch, **model):
    base = {"bahdanau": {"embed_dim": 8, "hidden_size": 16}}.get(arch, {})
    return {
        "data": {"dataset": "dates", "tokenizer": "char", "num_examples": 150, "val_examples": 8},
        "model": {"arch": arch, "dropout": 0.0, **base, **model},
        "train": {"max_steps": 2, "eval_every": 2, "threads": 1},
        "decode": {"max_len_a": 0.0, "max_len_b": 12},
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT)
    reviews = root / "reviews.tsv"
    reviews.write_text("\n".join(([f"{s}\tpos" for s in POS] + [f"{s}\tneg" for s in NEG]) * 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(config_from_dict(lm_raw(corpus)), root / "lm")
        train(config_from_dict(dates_raw("bahdanau")), root / "mt")
        tf = dates_raw(
            "transformer",
            d_model=16,
            num_heads=2,
            encoder_layers=1,
            decoder_layers=1,
            d_ff=32,
            max_len=32,
        )
        tf["data"]["max_len"] = 20
        train(config_from_dict(tf), root / "tf")
        cls = {
            "data": {
                "dataset": "text-classification",
                "path": str(reviews),
                "tokenizer": "word",
                "batch_size": 8,
                "max_len": 8,
            },
            "model": {
                "arch": "transformer_classifier",
                "d_model": 16,
                "num_heads": 2,
                "d_ff": 32,
                "num_layers": 1,
                "dropout": 0.0,
                "max_len": 16,
            },
            "train": {"max_steps": 10, "eval_every": 10, "lr": 0.01, "threads": 1},
        }
        train(config_from_dict(cls), root / "cls")
        fc = {
            "data": {
                "dataset": "sine",
                "length": 200,
                "window": 4,
                "batch_size": 16,
                "val_fraction": 0.2,
                "test_fraction": 0.2,
            },
            "model": {"arch": "ar", "hidden": 0},
            "train": {"lr": 0.05, "epochs": 2, "log_every": 1000, "threads": 1},
        }
        train(config_from_dict(fc), root / "fc")
    return root


def fails(capsys, argv, *needles):
    """Run the CLI; it must exit 2 with one ``seqlab: error:`` naming every needle."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.startswith("seqlab: error:") and "Traceback" not in captured.err
    for needle in needles:
        assert str(needle) in captured.err, (needle, captured.err)
    return captured


def succeeds(capsys, argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured


def write_yaml(path, raw):
    path.write_text(yaml.safe_dump(raw))
    return path


# ------------------------------------------------------------------------------ configs
def test_a_config_file_names_its_data_and_model(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    full = lm_raw(corpus)
    no_data = write_yaml(
        tmp_path / "no-data.yaml", {"model": full["model"], "train": full["train"]}
    )
    no_model = write_yaml(tmp_path / "no-model.yaml", {"data": full["data"]})
    neither = write_yaml(tmp_path / "neither.yaml", {"train": {"max_steps": 2}})
    out = tmp_path / "run"
    fails(capsys, ["train", no_data, "--out", out], no_data, "data.dataset: missing")
    err = fails(capsys, ["train", no_model, "--out", out], "model.arch: missing").err
    assert "data.dataset" not in err
    err = fails(capsys, ["train", neither, "--out", out], "data.dataset", "model.arch").err
    assert "never trains a built-in default" in err
    fails(capsys, ["ngram", no_data], "data.dataset: missing")
    assert not out.exists()
    # a bad value and a missing section are reported together
    err = fails(capsys, ["train", no_model, "train.lr=-1", "--out", out], "train.lr", "model.arch")
    # naming them by override works; so does the full file
    cfg = load_config(no_model, ["model.arch=rnn_lm", "model.hidden_size=16"])
    assert cfg.model.arch == "rnn_lm" and cfg.data.path == str(corpus)
    assert load_config(write_yaml(tmp_path / "full.yaml", full)).model.hidden_size == 16


def _plain(kind):
    """``kind`` without ``Annotated`` and ``| None``."""
    while True:
        if typing.get_origin(kind) is typing.Annotated:
            kind = typing.get_args(kind)[0]
        elif typing.get_origin(kind) in (typing.Union, types.UnionType):
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        else:
            return kind


def _float_fields(model: type[BaseModel]):
    for name, field in model.model_fields.items():
        kind = _plain(field.annotation)
        if kind is float:
            yield name, "number"
        elif typing.get_origin(kind) is tuple and _plain(typing.get_args(kind)[0]) is float:
            yield name, "pair"


SECTIONS = [DataConfig, SubwordConfig, TrainConfig, DecodeConfig] + [
    spec.config for spec in catalog.models().values()
]


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_every_float_setting_is_finite_and_bounded(section):
    found = list(_float_fields(section))
    for name, kind in found:
        for bad in (math.inf, -math.inf, math.nan, 1e300, -1e300):
            value = (bad, 0.5) if kind == "pair" else bad
            with pytest.raises(ValidationError):
                section.model_validate({name: value})
    if section is TrainConfig:
        assert {n for n, _ in found} >= {"lr", "weight_decay", "betas", "grad_clip", "max_minutes"}
        assert TrainConfig(lr=20.0, weight_decay=0.01, grad_clip=5.0).lr == 20.0  # sane: kept


@pytest.mark.parametrize(
    "override,needle",
    [
        ("train.lr=.inf", "finite"),
        ("train.lr=1e309", "finite"),  # YAML reads it as infinity
        ("train.lr=1e300", "less than or equal to 100"),
        ("train.lr=.nan", "finite"),
        ("train.betas=[2, 0.5]", "train.betas.0"),
        ("decode.temperature=1e300", "decode.temperature"),
        ("decode.max_len_b=1000000000000", "decode.max_len_b"),
        ("train.max_minutes=.inf", "train.max_minutes"),
    ],
)
def test_absurd_numbers_are_refused_before_training(tmp_path, capsys, override, needle):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    cfg = write_yaml(tmp_path / "c.yaml", lm_raw(corpus))
    fails(capsys, ["train", cfg, override, "--out", tmp_path / "r"], override.split("=")[0], needle)
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------- non-finite loss
class Blowup(Callback):
    """At ``step``, weights become huge but finite: the next validation gives NaN."""

    def __init__(self, step):
        self.step = step

    def on_step(self, trainer, loss):
        if trainer.pos.step == self.step:
            with torch.no_grad():
                trainer.model.output.weight.fill_(3e38)


def test_a_nan_validation_is_never_the_best_nor_a_resumable_checkpoint(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    with pytest.raises(TrainingDiverged) as exc:
        train(config_from_dict(lm_raw(corpus, max_steps=6)), run, callbacks=[Blowup(4)])
    msg = str(exc.value)
    assert "validation val_loss = nan at step 4" in msg and "was not saved" in msg
    good = RunDir(run).step_dir(2)
    assert f"last good checkpoint: {good}" in msg
    assert RunDir(run).steps() == [2] and RunDir(run).pointer("best") == 2
    evals = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [2, 4] and evals[1]["val_loss"] is None
    # the advice works: resuming from the named checkpoint with a lower rate trains on
    assert main(["train", "--resume", str(run), "train.lr=0.0005"]) == 0
    assert RunDir(run).pointer("latest") == 6
    capsys.readouterr()


def test_a_nan_first_validation_leaves_no_checkpoint_and_says_so(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match="no checkpoint was written yet") as exc:
        train(config_from_dict(lm_raw(corpus)), run, callbacks=[Blowup(2)])
    assert "last good checkpoint" not in str(exc.value)
    assert RunDir(run).steps() == [] and RunDir(run).pointer("best") is None


class Poison(Callback):
    """At ``step``, the weights become infinite: the next training step's loss is not finite."""

    def __init__(self, step):
        self.step = step

    def on_step(self, trainer, loss):
        if trainer.pos.step == self.step:
            with torch.no_grad():
                next(trainer.model.parameters()).fill_(math.inf)


def test_divergence_never_advises_resuming_from_a_bad_checkpoint(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    train(config_from_dict(lm_raw(corpus)), run)
    # a run from before this rule: its latest checkpoint was saved with a NaN validation
    meta_path = RunDir(run).step_dir(4) / "meta.json"
    meta = json.loads(meta_path.read_text())
    for record in meta["history"]:
        if record["step"] == 4:
            record["val_loss"] = math.nan
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(TrainingDiverged) as exc:
        train(None, run, resume=True, overrides=["train.max_steps=8"], callbacks=[Poison(5)])
    msg = str(exc.value)
    assert "loss became" in msg and "at step 6" in msg
    assert "no good checkpoint to resume from" in msg and "last good checkpoint" not in msg
    assert "--resume" not in msg


class _Batches:
    carries_state = False

    def set_epoch(self, epoch):
        pass

    def __len__(self):
        return 2

    def __iter__(self):
        yield from [torch.zeros(1)] * 2


@pytest.mark.parametrize(
    "loss,shown", [(2.0, "ppl 7.39"), (100.0, "ppl >1e6"), (800.0, "ppl >1e6")]
)
def test_training_lines_show_the_real_perplexity(tmp_path, loss, shown):
    model = nn.Linear(1, 1)

    def loss_fn(m, batch, state):
        return LossOutput(m.bias.sum() * 0 + loss, 10, None)

    stream = io.StringIO()
    cfg = TrainConfig(max_steps=1, log_every=1, threads=1, precision="fp32")
    metrics = tmp_path / "metrics.jsonl"
    trainer = Trainer(
        model,
        loss_fn,
        _Batches(),
        cfg,
        tmp_path / "run",
        callbacks=[ProgressBar(stream=stream), MetricsLog(metrics)],
        extra_meta={"arch": "toy"},
    )
    trainer.fit()
    line = next(x for x in stream.getvalue().splitlines() if x.startswith("step"))
    assert f"loss {loss:.4f}" in line and shown in line, line
    record = next(r for r in read_metrics(metrics) if r["kind"] == "train")
    if loss < 700:
        assert record["ppl"] == pytest.approx(math.exp(loss), rel=1e-9)  # never capped
    else:
        assert record["ppl"] is None  # exp(800) is beyond a double: stored as null, not 5e21
    assert perplexity(800.0) == math.inf and perplexity(100.0) > 1e43


def _nan_weights(monkeypatch, module):
    real = module.load_weights

    def poisoned(model, run):
        model = real(model, run)
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(math.nan)
        return model

    monkeypatch.setattr(module, "load_weights", poisoned)


def test_evaluate_never_reports_nan(runs, monkeypatch, capsys):
    import seqlab.tasks.forecasting as forecasting
    import seqlab.tasks.language_modeling as language_modeling

    before = succeeds(capsys, ["evaluate", "--run", runs / "lm", "--json"])
    assert math.isfinite(json.loads(before.out)["perplexity"])
    _nan_weights(monkeypatch, language_modeling)
    _nan_weights(monkeypatch, forecasting)
    for argv in (
        ["evaluate", "--run", runs / "lm", "--json"],
        ["evaluate", "--run", runs / "lm"],
        ["evaluate", "--run", runs / "fc", "--json", "--horizon", "2"],
    ):
        out = fails(capsys, argv, "non-finite scores", "nan", "--which")
        assert out.out == ""  # no NaN on stdout


# ------------------------------------------------------------------------------ series
def write_csv(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("cell", ["1e300", "-1e16", "inf", "-Infinity", "1e309"])
def test_series_values_must_be_finite_and_in_range(runs, tmp_path, capsys, cell):
    csv_path = write_csv(tmp_path / "s.csv", f"t,v\n0,1\n1,{cell}\n2,3\n3,4\n4,5\n")
    argv = ["forecast", "--run", runs / "fc", "--input", csv_path, "--horizon", "2"]
    fails(capsys, argv, f"{csv_path}:3", repr(cell))
    raw = {
        "data": {"dataset": "series", "path": str(csv_path), "window": 2},
        "model": {"arch": "ar"},
        "train": {"max_steps": 1},
    }
    cfg = write_yaml(tmp_path / "c.yaml", raw)
    fails(capsys, ["train", cfg, "--out", tmp_path / "r"], f"{csv_path}:3")
    assert not (tmp_path / "r").exists()
    ok = write_csv(tmp_path / "ok.csv", f"t,v\n0,1\n1,{MAX_ABS_VALUE}\n2,3\n3,4\n4,5\n")
    assert len(read_series_csv(ok)) == 5


def test_forecast_refuses_non_finite_history(runs):
    model = load(runs / "fc")
    for history in ([math.nan] * 30, [1.0, 2.0, math.inf, 4.0, 5.0], [1e300] * 8):
        with pytest.raises(SeqlabError, match="history: value"):
            model.forecast(history, 3)
    with pytest.raises(SeqlabError, match="list"):
        model.forecast("1,2,3,4,5", 3)
    values = model.forecast([0.1 * i for i in range(10)], 3)
    assert len(values) == 3 and all(math.isfinite(v) for v in values)
    assert values == model.forecast(torch.tensor([0.1 * i for i in range(10)]), 3)


def test_a_series_without_a_header_keeps_its_first_value(runs, tmp_path, capsys):
    values = [0.5, 0.7, 0.2, 0.9, 0.4, 0.8]
    bare = write_csv(tmp_path / "bare.csv", "".join(f"{v}\n" for v in values))
    headed = write_csv(tmp_path / "headed.csv", "value\n" + "".join(f"{v}\n" for v in values))
    two_cols = write_csv(tmp_path / "two.csv", "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    assert read_series_csv(bare) == values == read_series_csv(headed) == read_series_csv(two_cols)
    base = ["forecast", "--run", runs / "fc", "--horizon", "2", "--json"]
    a = json.loads(succeeds(capsys, [*base, "--input", bare]).out)
    b = json.loads(succeeds(capsys, [*base, "--input", headed]).out)
    assert a["history"] == b["history"] == 6 and a["forecast"] == b["forecast"]
    fails(capsys, [*base, "--input", bare, "--column", "value"], f"{bare}:1", "no header")
    with pytest.raises(DataError, match="no column 'x'"):
        read_series_csv(headed, "x")


# ----------------------------------------------------------------------------- n-grams
def ngram_config(tmp_path, text, name="lm.yaml"):
    corpus = tmp_path / f"{name}.txt"
    corpus.write_text(text)
    raw = {"data": {"dataset": "text", "path": str(corpus)}, "model": {"arch": "rnn_lm"}}
    return write_yaml(tmp_path / name, raw)


@pytest.mark.parametrize("k", ["nan", "inf", "0", "-1", "abc"])
def test_ngram_k_must_be_a_finite_positive_number(tmp_path, capsys, k):
    cfg = ngram_config(tmp_path, TEXT)
    with pytest.raises(SystemExit) as exc:  # argparse refuses it
        main(["ngram", str(cfg), "--smoothing", "add_k", "--k", k])
    assert exc.value.code == 2
    assert "--k" in capsys.readouterr().err
    with pytest.raises(ValueError, match="finite k > 0"):
        NGramLM(2, 10, "add_k", k=float(k) if k != "abc" else math.nan)


def test_ngram_k_applies_to_add_k_and_works_there(tmp_path, capsys):
    cfg = ngram_config(tmp_path, TEXT)
    fails(capsys, ["ngram", cfg, "--k", "0.5"], "--k", "--smoothing add_k")
    out = succeeds(capsys, ["ngram", cfg, "--smoothing", "add_k", "--k", "0.5", "--json"]).out
    ppl = [r["val_ppl"] for r in json.loads(out)["orders"].values()]
    assert all(math.isfinite(p) and p > 1 for p in ppl)


@pytest.mark.parametrize(
    "text,needle",
    [("", "the text holds no tokens"), ("a", "validation split holds 0"), ("\n", "0 of its")],
)
def test_ngram_on_a_corpus_too_small_to_measure(tmp_path, capsys, text, needle):
    cfg = ngram_config(tmp_path, text)
    out = fails(capsys, ["ngram", cfg, "--orders", "1,2", "--generate", "a"], needle)
    assert "-1 tokens" not in out.out and "ppl" not in out.out


def test_ngram_generation_never_emits_reserved_tokens(tmp_path, capsys):
    cfg = ngram_config(tmp_path, "a" * 60)  # one character: the reserved ids get real mass
    out = succeeds(capsys, ["ngram", cfg, "--orders", "1,2", "--generate", "a", "--tokens", "80"])
    sample = out.out.splitlines()[-1]
    assert sample == "a" * 81
    lm = NGramLM(1, 5).fit([4] * 10)
    drawn = lm.sample([4], 200, torch.Generator().manual_seed(0), never=range(4))
    assert set(drawn) == {4}
    assert set(lm.sample([4], 200, torch.Generator().manual_seed(0))) != {4}  # mass is there


# ------------------------------------------------------------------ one reading rule
LATIN1 = "good film\ncaf\xe9 film\n".encode("latin-1")


def stdin_of(monkeypatch, data: bytes):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize("command,run", [("translate", "mt"), ("classify", "cls")])
def test_stdin_is_read_like_a_file(runs, tmp_path, monkeypatch, capsys, command, run):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(LATIN1)
    base = [command, "--run", runs / run]
    fails(capsys, [*base, "--input", bad], f"{bad}:2", "not valid UTF-8")
    stdin_of(monkeypatch, LATIN1)
    fails(capsys, base, "<stdin>:2", "not valid UTF-8")
    # surrogate escapes from a text stream are the same undecodable bytes
    monkeypatch.setattr("sys.stdin", io.StringIO(LATIN1.decode("utf-8", "surrogateescape")))
    fails(capsys, base, "<stdin>:2", "not valid UTF-8")
    good = "\ufeffa great film\r\nMay 9, 1998\n".encode()
    ok = tmp_path / "ok.txt"
    ok.write_bytes(good)
    from_file = succeeds(capsys, [*base, "--input", ok]).out
    stdin_of(monkeypatch, good)
    assert succeeds(capsys, base).out == from_file and len(from_file.splitlines()) == 2


# -------------------------------------------------------------------------- Python API
def test_one_string_is_one_sentence(runs):
    mt, cls = load(runs / "mt"), load(runs / "cls")
    one = mt.translate("may 9 1998")
    assert isinstance(one, str) and [one] == mt.translate(["may 9 1998"])
    assert mt.hypotheses("may 9 1998")[0].tokens == mt.hypotheses(["may 9 1998"])[0][0].tokens
    label = cls.classify("a good film")
    assert isinstance(label, tuple) and [label] == cls.classify(["a good film"])
    assert cls.probabilities("a good film").shape == (2,)
    for bad in (5, [b"bytes"], ["ok", 3]):
        with pytest.raises(SeqlabError):
            mt.translate(bad)
    with pytest.raises(SeqlabError, match="lists of sentences"):
        mt.score("a", "b")
    with pytest.raises(SeqlabError, match="not a string"):
        cls.score("a good film", "pos")


# ---------------------------------------------------------------------------- classify
def test_classify_skips_blank_lines_with_a_warning(runs, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("a great film\n\n   \nan awful film\n")
    with pytest.warns(UserWarning, match=r"skipped 2 blank line\(s\) of .*in.txt \(lines 2, 3\)"):
        out = succeeds(capsys, ["classify", "--run", runs / "cls", "--input", src]).out
    rows = [line.split("\t") for line in out.splitlines()]
    assert [r[2] for r in rows] == ["a great film", "an awful film"]
    cls = load(runs / "cls")
    with pytest.raises(SeqlabError, match="sentence 1 .* is blank"):
        cls.classify(["a great film", " "])
    labels = tmp_path / "labels.txt"
    labels.write_text("pos\nneg\nneg\nneg\n")
    fails(
        capsys,
        ["evaluate", "--run", runs / "cls", "--src", src, "--labels", labels],
        "blank",
    )


def test_classify_warns_when_it_cuts_a_long_line(runs, tmp_path, capsys):
    long = "a great film " * 10  # 30 tokens, data.max_len is 8
    src = tmp_path / "in.txt"
    src.write_text(f"{long}\na great film\n")
    with pytest.warns(UserWarning, match="truncated 1 of 2 input sentences to data.max_len=8"):
        succeeds(capsys, ["classify", "--run", runs / "cls", "--input", src])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # short lines: no warning
        load(runs / "cls").classify(["a great film"])


# ---------------------------------------------------------------------------- generate
def test_generate_never_samples_reserved_tokens(runs):
    lm = load(runs / "lm")
    with torch.no_grad():  # the model now prefers the reserved tokens above all
        lm.model.output.bias[: len(SPECIAL_TOKENS)] = 50.0
    for kwargs in ({}, {"temperature": 1.0}, {"temperature": 3.0, "top_k": 6}):
        text = lm.generate("the", tokens=60, **kwargs)
        assert text.startswith("the") and len(text) == 63
        assert not any(token in text for token in SPECIAL_TOKENS), text


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"temperature": math.nan}, "temperature"),
        ({"temperature": math.inf}, "temperature"),
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": 1e300}, "temperature"),
        ({"top_k": 1.5}, "top_k"),
    ],
)
def test_generate_refuses_bad_sampling_settings(runs, kwargs, needle):
    lm = load(runs / "lm")
    with pytest.raises(SeqlabError, match=needle):
        lm.generate("the", tokens=5, **kwargs)
    assert lm.generate("the", tokens=5, temperature=0) == lm.generate("the", tokens=5)


# ----------------------------------------------------------------- ctranslate2 engine
def test_ctranslate2_equals_seqlab_when_the_length_limit_binds(runs, tmp_path):
    pytest.importorskip("ctranslate2")
    run = tmp_path / "tf"
    shutil.copytree(runs / "tf", run)
    m = load(run)  # hardly trained: every output runs to its limit
    sentences = ["May 9, 1998", "1.3.1969", "saturday 9 may 1998", "x"]
    for limits in ({"max_len_a": 0.0, "max_len_b": 3}, {"max_len_a": 0.5, "max_len_b": 1}):
        m.cfg.decode.max_len_a, m.cfg.decode.max_len_b = limits["max_len_a"], limits["max_len_b"]
        for beam, nbest in ((1, 1), (3, 3)):
            ours = m.hypotheses(sentences, beam=beam, nbest=nbest)
            theirs = m.hypotheses(sentences, beam=beam, nbest=nbest, engine="ctranslate2")
            bound = 0
            for a, b, s in zip(ours, theirs, sentences, strict=True):
                limit = math.floor(limits["max_len_a"] * len(m.source_ids(s)) + limits["max_len_b"])
                bound += sum(len(h.tokens) == limit for h in a)
                assert [h.tokens for h in a] == [h.tokens for h in b]
                for h, k in zip(a, b, strict=True):
                    assert k.score == pytest.approx(h.score, abs=1e-4)
            assert bound >= len(sentences)  # the limit binds


def test_a_compute_type_the_cpu_cannot_run_is_refused(runs, tmp_path, capsys, monkeypatch):
    ctranslate2 = pytest.importorskip("ctranslate2")
    monkeypatch.setattr(ctranslate2, "get_supported_compute_types", lambda d: {"float32", "int8"})
    run = tmp_path / "tf"
    shutil.copytree(runs / "tf", run)
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n")
    base = ["translate", "--run", run, "--input", src, "--engine", "ctranslate2"]
    for kind in ("bfloat16", "int16"):
        fails(capsys, [*base, "--quantize", kind], f"--quantize {kind}", "supports: float32, int8")
        with pytest.raises(SeqlabError, match="supports"):
            load(run).translate(["May 9, 1998"], engine="ctranslate2", quantize=kind)
    assert not (run / "exports").exists()  # refused before any export
    succeeds(capsys, [*base, "--quantize", "int8"])


# ------------------------------------------------------------------ which checkpoint
def test_best_without_best_json_is_an_error_not_latest(runs, tmp_path, capsys):
    run = tmp_path / "mt"
    shutil.copytree(runs / "mt", run)
    src = tmp_path / "in.txt"
    src.write_text("May 9, 1998\n")
    expected = succeeds(capsys, ["translate", "--run", run, "--input", src]).out
    (run / "checkpoints" / "best.json").unlink()
    base = ["translate", "--run", run, "--input", src]
    fails(capsys, base, run / "checkpoints" / "best.json", "--which latest")
    with pytest.raises(SeqlabError, match="best.json is missing"):
        load(run)
    assert succeeds(capsys, [*base, "--which", "latest"]).out == expected


class CtrlC(Callback):
    def on_step(self, trainer, loss):
        if trainer.pos.step == 1:
            os.kill(os.getpid(), signal.SIGINT)


def test_a_run_not_yet_validated_uses_latest_with_a_warning(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    run = tmp_path / "run"
    with pytest.raises(SeqlabError, match="saved a checkpoint at step 1"):
        train(config_from_dict(lm_raw(corpus, eval_every=3)), run, callbacks=[CtrlC()])
    assert RunDir(run).pointer("best") is None
    with pytest.warns(UserWarning, match="no validated checkpoint yet .* step 1"):
        lm = load(run)
    assert lm.generate("the", tokens=3).startswith("the")


# ---------------------------------------------------------------------- dataset files
@pytest.fixture
def gz_dataset(monkeypatch, tmp_path):
    """A dataset stored re-compressed (like SST-2): its registry digests are those of the
    published, uncompressed content; no local digest is known."""
    content = b"published content\n"
    entry = registry.DataFile(
        "a.txt.gz",
        "http://127.0.0.1:9/a.txt",
        (),
        source_sha256=hashlib.sha256(content).hexdigest(),
        gzip=True,
    )
    plain = registry.DataFile(
        "b.txt",
        "http://127.0.0.1:9/b.zip",
        (hashlib.sha256(content).hexdigest(),),
        archive_member="b.txt",
    )
    fake = catalog.DatasetSpec("fake", "fake", print, files=(entry, plain), licence="none")
    monkeypatch.setenv("SEQLAB_DATA_DIR", str(tmp_path / "mirror"))
    monkeypatch.setenv("SEQLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SEQLAB_OFFLINE", "1")
    folder = tmp_path / "mirror" / "fake"
    folder.mkdir(parents=True)
    with catalog.registered(fake):
        yield content, folder


def test_a_sidecar_never_vouches_for_a_tampered_file(gz_dataset, capsys):
    content, folder = gz_dataset
    tampered = gzip.compress(b"tampered content\n")
    (folder / "a.txt.gz").write_bytes(tampered)
    (folder / "a.txt.gz.sha256").write_text(hashlib.sha256(tampered).hexdigest() + "\n")
    (folder / "b.txt").write_bytes(b"tampered\n")
    (folder / "b.txt.sha256").write_text(hashlib.sha256(b"tampered\n").hexdigest() + "\n")
    fails(capsys, ["data", "fetch", "fake"], "checksum mismatch", folder / "a.txt.gz")
    with pytest.raises(DataError, match="checksum mismatch"):
        registry.resolve("fake", "b.txt")
    # the published content, compressed by any compressor, is accepted on the registry's word
    (folder / "a.txt.gz").write_bytes(gzip.compress(content, compresslevel=1, mtime=123))
    (folder / "b.txt").write_bytes(content)
    out = succeeds(capsys, ["data", "fetch", "fake"]).out
    assert str(folder / "a.txt.gz") in out and str(folder / "b.txt") in out


# ---------------------------------------------------------------- $ in attention plots
def test_dollar_signs_are_drawn_as_text(runs, tmp_path, capsys, monkeypatch):
    import matplotlib.mathtext

    def no_mathtext(*args, **kwargs):
        raise AssertionError("text was parsed as mathtext")

    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", no_mathtext)
    src = tmp_path / "in.txt"
    src.write_text("$\\frac{$\n$x_{2}$ May 9, 1998\n")
    out = tmp_path / "att"
    argv = ["translate", "--run", runs / "mt", "--input", src, "--attention-png", out]
    succeeds(capsys, argv)
    assert sorted(p.name for p in out.glob("*.png")) == ["attention-0001.png", "attention-0002.png"]
    maps = tmp_path / "maps"
    src.write_text("$x_{2}$ great $\\frac{$ film\n")
    succeeds(capsys, ["classify", "--run", runs / "cls", "--input", src, "--attention-png", maps])
    assert [p.name for p in maps.glob("*.png")] == ["attention-0001-layer0.png"]


# -------------------------------------------------------------------------- dead ends
def test_bench_heads_must_divide_the_width(capsys):
    fails(capsys, ["bench", "layers", "--heads", "3"], "--heads 3", "--width 256", "1, 2, 4, 8")
    argv = ["bench", "layers", "--heads", "3", "--width", "12", "--lengths", "8,16"]
    out = succeeds(capsys, [*argv, "--repeats", "1", "--memory-length", "16", "--json"]).out
    assert json.loads(out)["heads"] == 3


def test_evaluate_on_empty_files_and_score_of_nothing(runs, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    fails(capsys, ["evaluate", "--run", runs / "mt", "--src", empty, "--ref", empty], "empty")
    argv = ["evaluate", "--run", runs / "cls", "--src", empty, "--labels", empty]
    fails(capsys, argv, "empty")
    with pytest.raises(SeqlabError, match="nothing to score"):
        load(runs / "mt").score([], [])
    with pytest.raises(SeqlabError, match="nothing to score"):
        load(runs / "cls").score([], [])
    assert load(runs / "mt").score(["May 9, 1998"], ["1998-05-09"])["sentences"] == 1


def test_evaluate_horizon_is_bounded_by_the_split(runs, capsys):
    base = ["evaluate", "--run", runs / "fc", "--json"]
    fails(capsys, [*base, "--horizon", "100000"], "--horizon", "from 1 to 40", "40 target steps")
    result = json.loads(succeeds(capsys, [*base, "--horizon", "40"]).out)
    assert result["horizons"][-1] == 40
    fc = load(runs / "fc")
    assert fc.evaluate_split("val", horizons=None)["horizons"] == list(range(1, 13))
    with pytest.raises(SeqlabError, match="horizons"):
        fc.evaluate_split("test", horizons=0)
