"""Language modelling runs (seqlab.tasks.language_modeling): corpora and validation splits too
small to train on, generation (its cap, unknown prefix tokens, reserved tokens never sampled,
greedy at temperature 0 and at tiny temperatures, bad sampling settings refused), and evaluation
that never reports NaN."""

import json
import math
import warnings

import pytest
import torch

from cli_checks import fails, succeeds, write_config
from conftest import run_offline
from seqlab import load
from seqlab.cli import main
from seqlab.errors import SeqlabError
from seqlab.nn.sampling import next_token
from seqlab.tokens import SPECIAL_TOKENS
from tiny_runs import LM_TEXT as TEXT
from tiny_runs import lm_raw


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


@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-30])
def test_sampling_at_a_tiny_temperature_is_greedy_not_nan(temperature):
    logits = torch.tensor([[1.0, 3.0, 2.0, 3.0 - 1e-3, -math.inf]])
    picks = {
        int(next_token(logits, "sample", temperature, 0, torch.Generator().manual_seed(s)))
        for s in range(5)
    }
    assert picks == {1}


def test_a_neural_language_model_refuses_more_than_the_cap(tiny_runs):
    from seqlab.tasks.language_modeling import MAX_GENERATE_TOKENS

    with pytest.raises(SeqlabError, match=f"from 0 to {MAX_GENERATE_TOKENS:,}"):
        load(tiny_runs["lm"]).generate("the", tokens=MAX_GENERATE_TOKENS + 1)


def test_a_validation_split_too_small_to_measure(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    raw = lm_raw(corpus)
    raw["data"]["val_fraction"] = 0.0001
    cfg = write_config(tmp_path / "c.yaml", raw)
    fails(capsys, ["train", cfg, "--out", tmp_path / "r"], "data.val_fraction=0.0001", "0 token(s)")
    assert not (tmp_path / "r").exists()


def test_temperature_zero_is_greedy(runs, capsys):
    argv = ["generate", "--run", runs / "lm", "--prefix", "the", "--tokens", "30"]
    assert main([str(a) for a in argv]) == 0
    greedy = capsys.readouterr().out
    assert main([str(a) for a in argv + ["--temperature", "0"]]) == 0
    assert capsys.readouterr().out == greedy
    assert main([str(a) for a in argv + ["--temperature", "1.5", "--seed", "3"]]) == 0
    assert capsys.readouterr().out != greedy  # sampling at 1.5 does differ here
    fails(capsys, argv + ["--temperature", "0", "--top-k", "5"], "temperature 0 means greedy")


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
    import seqlab.tasks.forecasting.task as forecasting
    import seqlab.tasks.language_modeling.task as language_modeling

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


#: a prefix that data.normalize=letters changes three ways, with the message it gets
NORMALISED = "THE time é 🙂"
NORMALISED_MESSAGE = "normalised (data.normalize=letters): 'é', '🙂' dropped; 'THE' -> 'the'"


@pytest.fixture(scope="module")
def letters_lm(tmp_path_factory):
    """A tiny character LM trained with data.normalize=letters (as the Time Machine configs)."""
    from seqlab.config import config_from_dict
    from seqlab.experiment import train

    root = tmp_path_factory.mktemp("letters")
    (root / "corpus.txt").write_text(TEXT)
    raw = lm_raw(root / "corpus.txt", max_steps=1, eval_every=1)
    raw["data"]["normalize"] = "letters"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train(config_from_dict(raw), root / "run")
    return root / "run"


def test_text_a_normalisation_changes_is_warned_about_on_every_surface(
    letters_lm, tiny_runs, tmp_path
):
    """As out-of-vocabulary text is: the Python API warns, the command line prints the warning,
    the server answers it in ``warnings``; one function writes the message
    (seqlab.data.tokenizers.normalisation_messages). Text it leaves as it is, or a model without
    a normalisation, gets none."""
    with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from fastapi.testclient import TestClient

    from seqlab.data.tokenizers import NormalisedTextWarning
    from seqlab.serve import create_app

    lm = load(letters_lm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lm.generate("the time", tokens=2)
        assert not caught  # nothing changed
        lm.generate(NORMALISED, tokens=2)
        lm.perplexity(NORMALISED)
    said = [str(w.message) for w in caught if w.category is NormalisedTextWarning]
    assert said == [f"the prefix: {NORMALISED_MESSAGE}", f"the text: {NORMALISED_MESSAGE}"]
    argv = ["generate", "--run", str(letters_lm), "--prefix", NORMALISED, "--tokens", "2"]
    done = run_offline(argv, tmp_path)  # as a user runs it: the warning on standard error
    assert done.returncode == 0, done.stderr
    assert f"seqlab: warning: the prefix: {NORMALISED_MESSAGE}\n" in done.stderr, done.stderr
    with TestClient(create_app({"lm": lm, "plain": load(tiny_runs["lm"])})) as client:
        body = {"model": "lm", "prefix": NORMALISED, "tokens": 2}
        answer = client.post("/generate", json=body).json()
        assert answer["warnings"][0] == f"prefix: {NORMALISED_MESSAGE}", answer
        answer = client.post("/generate", json={**body, "model": "plain"}).json()
        assert not [w for w in answer["warnings"] if "normalised" in w], answer
        assert answer["warnings"]  # its own warning: these characters are not in its vocabulary
