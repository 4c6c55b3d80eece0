"""The declared task interface: what a loaded run offers, declared once and consumed alike.

Every kind of run (:func:`seqlab.tasks.predictors`) declares its command-line options; the
commands that use trained runs build their parsers from those declarations, refuse an option the
run's task does not declare by one rule, pass the others on as keyword arguments of ``predict``
or ``evaluate``, and print the :class:`~seqlab.tasks.report.Report` that the Python API returns.
A kind of run added from outside (here, from this file) gets all of it without a line of the
command line changed. Language models share one interface and one generation loop.
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from torch import nn

import seqlab
from seqlab import load
from seqlab.cli import main
from seqlab.errors import SeqlabError
from seqlab.tasks import predictor_for, predictors
from seqlab.tasks.base import Predictor
from seqlab.tasks.classification import Classifier, ImageClassifier, TextClassifier
from seqlab.tasks.options import COMMON, Option
from seqlab.tasks.report import Report

PACKAGE = Path(seqlab.__file__).parent
#: roles whose values reach the method as keyword arguments (the others are the CLI's or files)
CALLED = ("option", "output", "figure", "figure_dir")


def fails(capsys, argv, *needles):
    """Run the CLI; it must exit 2 with one ``seqlab: error:`` naming every needle."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("seqlab: error:") and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in err, (needle, err)
    return err


# ---------------------------------------------------------------------- the declarations
@pytest.mark.parametrize("kind", predictors(), ids=lambda k: k.__name__)
def test_every_declared_option_reaches_the_method_of_its_command(kind):
    assert not inspect.isabstract(kind), kind.__abstractmethods__
    assert kind.kind and kind.task and "evaluate" in kind.commands
    for command in kind.commands:
        method = kind.evaluate if command == "evaluate" else kind.predict
        params = inspect.signature(method).parameters
        for option in kind.options_for(command):
            if option.role in CALLED:
                assert option.dest in params, (kind.__name__, command, option.flag)
            if option.role == "figure" or option.role == "figure_dir":
                assert option.figure, option.flag  # what is drawn, printed with its path
            if option.role == "file":
                assert command == "evaluate" and "files" in params


def test_one_flag_means_one_thing_across_the_kinds_that_declare_it():
    """Read alike and kept in one place (``args.png``); each task's method may name the keyword
    its own way (``evaluate --png``: a forecaster's ``plot=``, a classifier's ``confusion_png=``)."""
    seen: dict[tuple[str, str], Option] = {}
    for kind in predictors():
        for option in kind.options:
            for command in option.commands:
                first = seen.setdefault((command, option.flag), option)
                assert (first.type, first.role, first.choices, first.default, first.attr) == (
                    option.type,
                    option.role,
                    option.choices,
                    option.default,
                    option.attr,
                ), (command, option.flag)
    assert {o.flag for o in COMMON} == {"--split", "--json"}


@pytest.mark.parametrize("command", ["evaluate", "translate", "classify", "forecast", "generate"])
def test_the_help_lists_what_the_tasks_declare(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    declared = {o.flag for k in predictors() for o in k.options_for(command)}
    assert declared and all(flag in text for flag in declared), declared


def test_seqlab_help_imports_no_task():
    """The parsers of the trained-run commands add their options on first use: ``seqlab
    --help`` (and every other command) does not import the tasks, nor PyTorch with them."""
    script = (
        "import sys; from seqlab.cli import build_parser; build_parser().format_help(); "
        "print(sorted(m for m in sys.modules if m.startswith('seqlab.tasks') or m == 'torch'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------- one rule refuses
def test_an_option_the_runs_task_does_not_declare_is_refused_by_one_rule(
    tiny_runs, tmp_path, capsys
):
    f = tmp_path / "lines.txt"
    f.write_text("a great film\n")
    cls, fc, mt, lm = (tiny_runs[n] for n in ("cls", "fc", "mt", "lm"))
    capsys.readouterr()  # what training them printed
    fails(
        capsys,
        ["evaluate", "--run", cls, "--beam", "3"],
        f"--beam applies to translation runs; {cls} holds a text classification model "
        "(model.arch=transformer_classifier): a text classifier is scored on --split, or on "
        "--src FILE with --labels FILE",
    )
    fails(
        capsys,
        ["evaluate", "--run", fc, "--src", f, "--ref", f],
        "--src applies to translation and text classification runs, --ref to translation runs",
        "holds a forecasting model",
        "a forecaster is scored on a --split",
    )
    fails(
        capsys,
        ["evaluate", "--run", mt, "--src", f, "--labels", f],
        "--labels applies to text classification runs; ",
        "holds a translation model",
    )
    fails(capsys, ["evaluate", "--run", lm, "--horizon", "2"], "--horizon applies to fore")
    fails(
        capsys,
        ["classify", "--run", cls, "x.png"],
        "files (arguments) applies to image classification and audio classification runs",
        "give sentences with --input FILE or on stdin",
    )
    fails(
        capsys,
        ["generate", "--run", mt],
        "`seqlab generate` needs a language modeling run",
        "use `seqlab translate` or `seqlab evaluate`",
    )
    # the same option given its default is no option given
    assert main(["evaluate", "--run", str(lm), "--engine", "pytorch", "--json"]) == 0
    assert "perplexity" in json.loads(capsys.readouterr().out)


def test_an_image_run_refuses_the_text_options(tiny_runs, tmp_path, capsys):
    f = tmp_path / "lines.txt"
    f.write_text("a great film\n")
    vit = tiny_runs["vit"]
    capsys.readouterr()
    fails(
        capsys,
        ["evaluate", "--run", vit, "--src", f, "--labels", f],
        "--src applies to translation and text classification runs, --labels to text "
        "classification runs",
        "holds an image classification model (model.arch=vit)",
    )
    fails(capsys, ["classify", "--run", vit], "give image files to classify")


# ------------------------------------------------------------- load → call → print
@pytest.mark.parametrize("name", ["mt", "cls", "lm", "fc"])
def test_evaluate_prints_the_report_the_python_api_returns(tiny_runs, name, capsys):
    run = tiny_runs[name]
    report = load(run).evaluate()
    capsys.readouterr()
    assert isinstance(report, Report) and report.checkpoint is not None
    assert main(["evaluate", "--run", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == report.to_json()
    assert main(["evaluate", "--run", str(run)]) == 0
    assert capsys.readouterr().out == report.format() + "\n"
    # the older name of evaluate on a split reads as the dictionary it used to return
    split = report.source["split"]
    assert load(run).evaluate_split(split)[next(iter(report.scores))] is not None


def test_a_new_kind_of_run_gets_the_command_line_from_its_declarations(
    tiny_runs, monkeypatch, capsys
):
    """A kind of run declared here, outside seqlab: its option appears in ``seqlab evaluate``,
    reaches its ``evaluate`` as a keyword, its report is printed; on another task's run the
    option is refused by the same rule."""

    class Toy(Predictor):
        task = kind = "toy"
        options: ClassVar[tuple[Option, ...]] = (
            Option("--toy-level", "how playful", ("evaluate",), type="positive_int"),
        )

        @classmethod
        def load(cls, run: Any) -> Toy:
            raise AssertionError("loaded through seqlab.load below")

        def predict(self, inputs: Any, **options: Any) -> Any:
            raise NotImplementedError

        def evaluate(self, split=None, files=None, *, toy_level=None) -> Report:
            split, _ = self._source(split, files, "val")
            return Report("toy.pt", {"split": split}, {"level": toy_level})

    everyone = [*predictors(), Toy]
    monkeypatch.setattr("seqlab.tasks.predictors", lambda: everyone)
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "--toy-level" in capsys.readouterr().out
    mt = tiny_runs["mt"]
    toy = Toy(nn.Linear(1, 1), load(tiny_runs["fc"]).cfg)
    capsys.readouterr()
    fails(
        capsys,
        ["evaluate", "--run", mt, "--toy-level", "2"],
        f"--toy-level applies to toy runs; {mt} holds a translation model",
    )
    monkeypatch.setattr("seqlab.load", lambda *args: toy)
    assert main(["evaluate", "--run", "anywhere", "--toy-level", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "checkpoint": "toy.pt",
        "split": "val",
        "level": 3,
    }
    fails(capsys, ["evaluate", "--run", "anywhere", "--beam", "2"], "--beam applies to tra")


def test_predict_is_what_the_commands_print(tiny_runs, tmp_path, capsys):
    mt, cls, lm = load(tiny_runs["mt"]), load(tiny_runs["cls"]), load(tiny_runs["lm"])
    capsys.readouterr()
    src = tmp_path / "in.txt"
    src.write_text("may 9 1998\n1.3.1969\n")
    out = mt.predict(["may 9 1998", "1.3.1969"], beam=2, nbest=2)
    assert (
        main(
            ["translate", "--run", str(tiny_runs["mt"]), "--input", str(src)]
            + ["--beam", "2", "--nbest", "2"]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines() == out.lines()
    assert [line.split("\t")[:2] for line in out.lines()] == [
        ["1", "0"],
        ["1", "1"],
        ["2", "0"],
        ["2", "1"],
    ]
    labels = cls.predict(["a great film", "an awful story"])
    assert [row["label"] for row in labels.to_json()["classifications"]] == [
        label for label, _ in cls.classify(["a great film", "an awful story"])
    ]
    assert lm.predict("the", tokens=4).format() == lm.generate("the", 4)


# ------------------------------------------------------------------------- the kinds
def test_text_and_image_runs_are_two_kinds_of_one_task(tiny_runs):
    text, image = load(tiny_runs["cls"]), load(tiny_runs["vit"])
    assert type(text) is TextClassifier and type(image) is ImageClassifier
    assert isinstance(text, Classifier) and isinstance(image, Classifier)
    assert text.task == image.task == "classification" and image.images and not text.images
    assert predictor_for(text.cfg) is TextClassifier and predictor_for(image.cfg) is ImageClassifier
    probs = image.probabilities(torch.rand(2, 1, 28, 28))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))
    with pytest.raises(SeqlabError, match="text classifier: give it sentences"):
        text.probabilities(torch.rand(2, 1, 28, 28))
    with pytest.raises(AttributeError, match="image classification model .*has no 'translate'"):
        image.translate(["x"])


# ------------------------------------------------------------------------ language models
def test_there_is_one_generate():
    """Both language models generate through :func:`seqlab.models.language_model.generate`."""
    found = [
        path.name
        for path in sorted((PACKAGE / "models").glob("*.py"))
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name == "generate"
    ]
    assert found == ["language_model.py"]


def test_language_models_share_one_interface(tiny_runs):
    from seqlab.models.language_model import CausalLM, generate

    rnn, transformer = load(tiny_runs["lm"]).model, load(tiny_runs["lm-transformer"]).model
    x = torch.randint(4, 10, (2, 5))
    for model, carried in ((rnn, True), (transformer, False)):
        assert isinstance(model, CausalLM)
        loss, count, state = model.loss(x, x.roll(-1, 1))
        assert loss.dim() == 0 and count == 10 and (state is not None) == carried
    # past the Transformer's context (12 positions) the window slides: 10 + 8 tokens
    prefix = torch.randint(4, 10, (1, 10))
    out = generate(transformer, prefix, 8)
    tokens = prefix
    for _ in range(8):  # the uncached loop: re-read the last 12 tokens at every step
        logits, _ = transformer(tokens[:, -12:])
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, tokens[:, 10:])


def test_a_language_model_streams_the_tokens_of_the_one_generate(tiny_runs):
    """``stream`` (what the server sends token by token) chooses the tokens that the models'
    :func:`~seqlab.models.language_model.generate` chooses, and ``generate`` writes them."""
    from seqlab.models.language_model import generate

    for name in ("lm", "lm-transformer"):
        lm = load(tiny_runs[name])
        for options in ({}, {"temperature": 0.8, "seed": 3}, {"top_k": 3, "seed": 1}):
            ids = lm.prefix_ids("the time")
            streamed = list(lm.stream("the time", 20, **options))  # past the 12-token context
            sampling = lm.sampling(options.get("temperature"), options.get("top_k"))
            gen = torch.Generator().manual_seed(options.get("seed", 0))
            never = range(lm.vocab.num_reserved)
            assert streamed == generate(lm.model, ids, 20, *sampling, gen, never)
            assert lm.generate("the time", 20, **options) == lm.detokenize(ids + streamed)
        d = lm.cfg.decode  # no options: the run's decode section
        assert lm.sampling() == (d.strategy, d.temperature, d.top_k)
        assert lm.prefix_ids("") == [lm.vocab.num_reserved]  # no context: the most frequent
        for options, needle in [
            ({"temperature": 0, "top_k": 2}, "top_k applies"),
            ({"temperature": -1}, "temperature must be"),
            ({"tokens": -1}, "must be a whole number from 0 to 100,000"),
        ]:
            with pytest.raises(SeqlabError, match=needle):  # refused before the first token
                lm.stream("the", **{"tokens": 5, **options})
            with pytest.raises(SeqlabError, match=needle):
                lm.check("generate", {"tokens": 5, **options})


# ------------------------------------------------------------------------------ reports
def test_a_report_reads_like_the_dictionary_evaluation_returned():
    report = Report("ck.pt", {"split": "val"}, {"loss": 1.5, "tokens": 3})
    assert report.to_json() == {"checkpoint": "ck.pt", "split": "val", "loss": 1.5, "tokens": 3}
    assert report["loss"] == 1.5 and "tokens" in report and report.where == "val"
    report.figures["plot"] = Path("p.png")
    assert report.format().endswith("\n  plot: p.png") and "figures" not in report.to_json()
    with pytest.raises(SeqlabError, match=r"ck.pt gives non-finite scores \(x\[1\] = nan\)"):
        Report("ck.pt", {}, {"x": [1.0, float("nan")]}).check_finite()


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
