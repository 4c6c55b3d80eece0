"""One options model per command (seqlab.tasks.options.CommandOptions): an option declared once,
as one field, is a flag of the command line, a field of the request body with its description
and bounds in the OpenAPI schema, a line of the generated reference pages and a keyword argument
of the predictor; requests with equal options are decoded together."""

from __future__ import annotations

import warnings

import pytest
from pydantic import Field

from conftest import docs_hook
from seqlab.errors import SeqlabError
from seqlab.tasks.options import CommandOptions
from seqlab.tasks.translation import SERVICE, TranslateOptions, Translator
from seqlab.tasks.translation.options import EngineOptions, TranslateEngineOptions

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


class CoverageOptions(TranslateOptions):
    """``seqlab translate``'s options and one more: the only place the option is written."""

    coverage: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        title="coverage penalty",
        description="coverage penalty BETA of the test (Wu et al. 2016, eq. 14)",
    )


def test_an_option_added_in_one_place_reaches_every_surface(tiny_runs, monkeypatch, capsys):
    from seqlab import load
    from seqlab.cli import build_parser, main
    from seqlab.serve import create_app

    monkeypatch.setitem(Translator.command_options, "translate", CoverageOptions)
    seen: list[CommandOptions] = []
    real = Translator.decoding
    monkeypatch.setattr(Translator, "decoding", lambda self, o: seen.append(o) or real(self, o))

    # 1. the command-line flag, its help and its bounds
    parser = build_parser()
    help_text = parser._subparsers._group_actions[0].choices["translate"].format_help()
    assert "--coverage" in help_text and "coverage penalty BETA of the test" in help_text
    with pytest.raises(SystemExit):
        main(["translate", "--run", str(tiny_runs["mt"]), "--coverage", "2"])
    assert "argument --coverage: must be a number from 0 to 1, got '2'" in capsys.readouterr().err

    # 2. the request field, parsed strictly with its bounds
    assert "coverage" in SERVICE.body.model_fields
    assert SERVICE.body.__name__ == "TranslateRequest"

    # 3. the OpenAPI entry: the field with its description and bounds, from pydantic's schema
    reference = docs_hook("reference")
    schema = reference.openapi_schema()
    field = schema["components"]["schemas"]["TranslateRequest"]["properties"]["coverage"]
    assert field["description"].startswith("coverage penalty BETA")
    assert {"minimum": 0.0, "maximum": 1.0, "type": "number"} in field["anyOf"]

    # 4. the docs' reference pages (generated from the parser and the schema)
    assert "`--coverage COVERAGE`" in reference.cli_reference()
    assert "`coverage`" in reference.http_reference(schema)

    # 5. the predictor's keyword argument, validated by the same model, handed down as it is
    mt = load(tiny_runs["mt"])
    out = mt.predict(["may 9 1998"], coverage=0.5)
    assert len(out.lines()) == 1 and seen[-1] == CoverageOptions(coverage=0.5)
    with pytest.raises(SeqlabError, match=r"coverage penalty must be a number from 0 to 1, got 2"):
        mt.predict(["may 9 1998"], coverage=2)
    # a model handed down whole: translate and score take the best of its beam
    scored = mt.score(["may 9 1998"], ["1998-05-09"], TranslateOptions(beam=2, nbest=2))
    assert scored["translations"] == mt.translate(["may 9 1998"], beam=2)

    # and the server: the same field, the same bounds, the same model down to the predictor
    with TestClient(create_app({"mt": mt}, engine="seqlab")) as api:
        ok = api.post("/translate", json={"text": "may 9 1998", "coverage": 0.25})
        assert ok.status_code == 200 and seen[-1] == CoverageOptions(coverage=0.25)
        bad = api.post("/translate", json={"text": "may 9 1998", "coverage": 1.5})
        assert bad.status_code == 422 and "coverage" in bad.json()["error"]


def test_an_options_model_is_checked_once_and_names_what_it_takes():
    assert TranslateOptions.of(beam=3, nbest=None) == TranslateOptions(beam=3)
    assert hash(TranslateOptions(beam=3)) == hash(TranslateOptions.of({"beam": 3}))
    for bad, words in (
        ({"beam": 2.5}, "beam size must be a whole number >= 1, got 2.5"),
        ({"beam": True}, "beam size must be a whole number >= 1, got True"),
        ({"nbest": 0}, "nbest must be a whole number >= 1, got 0"),
        ({"length_penalty": float("nan")}, "length penalty must be a number from 0 to 10"),
        ({"beems": 3}, "unknown option 'beems'; the options are beam, length_penalty, nbest"),
    ):
        with pytest.raises(SeqlabError, match=words.replace("(", r"\(")):
            TranslateOptions.of(bad)
    flags = {o.flag: o for o in TranslateOptions.declarations("translate")}
    assert list(flags) == ["--beam", "--length-penalty", "--nbest"]
    assert flags["--length-penalty"].metavar == "ALPHA"
    assert flags["--beam"].convert is not None and flags["--beam"].convert("4") == 4


def _served_options():
    """(task, command, options model, service) for each command of every registered task whose
    options the task's route takes (every command but ``evaluate``, which the server runs not)."""
    from seqlab import catalog

    found = []
    for name, spec in catalog.tasks().items():
        for predictor in spec.predictors:
            for command, model in predictor.command_options.items():
                if command != "evaluate" and spec.service is not None:
                    found.append((name, command, model, spec.service))
    return found


SERVED = _served_options()


def test_every_served_task_declares_an_options_model():
    """The built-in tasks whose commands take options beyond the inputs declare them once
    (classification's and audio's commands take none the server shares)."""
    assert {(task, command) for task, command, _, _ in SERVED} >= {
        ("translation", "translate"),
        ("language_modeling", "generate"),
        ("forecasting", "forecast"),
    }


@pytest.mark.parametrize(
    "task,command,model,service", SERVED, ids=[f"{t}-{c}" for t, c, _, _ in SERVED]
)
def test_each_field_of_a_commands_options_is_a_flag_a_request_field_and_a_schema_entry(
    task, command, model, service
):
    """Every field of the options model of every served command is a flag of the command's
    parser (with the field's description as its help), a field of the route's request body
    (which inherits the model, so it is validated by it) and a property of the OpenAPI schema
    with the same description: the parametrised form of the translation check above."""
    from seqlab.cli import build_parser

    parser = build_parser()._subparsers._group_actions[0].choices[command]
    parser.format_help()  # the declared options are added when first used
    flags = {s: a for a in parser._actions for s in a.option_strings}
    assert issubclass(service.body, model), (task, service.body)
    schema = docs_hook("reference").openapi_schema()
    post = schema["paths"][service.route]["post"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    properties = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]
    for name, field in model.model_fields.items():
        flag = model.flags.get(name, "--" + name.replace("_", "-"))
        assert flag in flags, (command, flag)
        assert field.description[:40] in flags[flag].help, (command, flag)
        assert service.body.model_fields[name].description == field.description
        assert properties[name]["description"] == field.description, (task, name)


def test_a_flag_spelt_as_a_keyword_is_refused_naming_its_field(tiny_runs):
    """``--horizon`` is ``steps`` in Python: ``forecast(horizon=3)`` and ``predict(horizon=3)``
    are refused naming the field to use (they were Python's own TypeError, or named nothing)."""
    from seqlab import load
    from seqlab.tasks.forecasting.options import ForecastOptions

    message = r"unknown option 'horizon' \(the command line's --horizon is steps= here\)"
    with pytest.raises(SeqlabError, match=message):
        ForecastOptions.of(horizon=3)
    fc = load(tiny_runs["fc"])
    for call in (fc.forecast, fc.predict):
        with pytest.raises(SeqlabError, match=message):
            call([1.0] * 40, horizon=3)
    with pytest.raises(SeqlabError, match=r"unknown option 'steps_ahead'; the options are"):
        fc.forecast([1.0] * 40, steps_ahead=3)
    assert len(fc.forecast([1.0] * 40, steps=3)) == 3


class DeadlineOptions(TranslateEngineOptions):
    """``seqlab translate``'s run options and one more: the only place the option is written."""

    deadline_s: float | None = Field(
        None, gt=0.0, allow_inf_nan=False, description="give up after SECONDS (of the test)"
    )


def test_the_engine_and_the_heatmaps_are_fields_that_every_surface_reads(
    tiny_runs, monkeypatch, capsys, tmp_path
):
    """How a translation runs (engine, compute type, cores, ensemble, heatmaps) is one model
    (EngineOptions): the translate and evaluate flags, serve's engine choices, the Python
    keywords and their checks all come from its fields; no request body carries them."""
    import inspect
    import typing

    from seqlab import load
    from seqlab.builtin_records import ENGINE_NAMES, QUANTIZE_TYPES
    from seqlab.cli import build_parser, main
    from seqlab.serve import create_app

    engine = EngineOptions.model_fields["engine"]
    assert typing.get_args(engine.annotation) == ENGINE_NAMES
    commands = build_parser()._subparsers._group_actions[0].choices
    for command, model in (("translate", TranslateEngineOptions), ("evaluate", EngineOptions)):
        commands[command].format_help()  # the declared options are added when first used
        flags = {s: a for a in commands[command]._actions for s in a.option_strings}
        assert tuple(flags["--engine"].choices) == ENGINE_NAMES
        assert tuple(flags["--quantize"].choices) == QUANTIZE_TYPES
        for name, field in model.model_fields.items():
            assert field.description in flags["--" + name.replace("_", "-")].help, name
        assert ("--attention-png" in flags) == (command == "translate")
    serve = {s: a for a in commands["serve"]._actions for s in a.option_strings}
    assert tuple(serve["--engine"].choices) == ("auto", *ENGINE_NAMES)
    assert tuple(serve["--quantize"].choices) == QUANTIZE_TYPES

    run = str(tiny_runs["mt"])
    for argv, words in (
        (["--engine", "onnx"], "argument --engine: must be one of seqlab, ctranslate2, got 'onnx'"),
        (["--threads", "0"], "argument --threads: must be a whole number >= 1, got '0'"),
    ):
        with pytest.raises(SystemExit):
            main(["translate", "--run", run, *argv])
        assert words in capsys.readouterr().err

    mt = load(run)
    parameters = inspect.signature(mt.predict).parameters
    assert {"engine", "quantize", "attention_png"} <= set(parameters)
    assert not {"threads", "workers", "ensemble"} & set(parameters)  # the command line's own
    with pytest.raises(SeqlabError, match=r"engine must be one of seqlab, ctranslate2, got 'x'"):
        mt.translate("may 9 1998", engine="x")
    with pytest.raises(SeqlabError, match=r"threads= is an option of the command line"):
        mt.translate("may 9 1998", threads=2)
    with pytest.raises(SeqlabError, match=r"unknown option 'engin'; the options are beam, "):
        mt.translate("may 9 1998", engin="seqlab")
    # the heatmaps: the keyword and the flag write the same files by the same rule
    written = mt.predict(["may 9 1998", "9 may 1998"], attention_png=tmp_path / "py").figures
    inputs = tmp_path / "in.txt"
    inputs.write_text("may 9 1998\n9 may 1998\n", encoding="utf-8")
    cli = tmp_path / "cli"
    assert (
        main(["translate", "--run", run, "--input", str(inputs), "--attention-png", str(cli)]) == 0
    )
    assert [p.name for p in written] == ["attention-0001.png", "attention-0002.png"]
    assert sorted(p.name for p in cli.glob("*.png")) == [p.name for p in written]
    capsys.readouterr()

    # a field added to the model in one place: a flag, a keyword argument checked by its bounds
    monkeypatch.setitem(Translator.run_options, "translate", DeadlineOptions)
    parser = build_parser()._subparsers._group_actions[0].choices["translate"]
    assert "give up after SECONDS (of the test)" in parser.format_help()
    with pytest.raises(SeqlabError, match=r"deadline s must be a number > 0, got -1"):
        mt.predict(["may 9 1998"], deadline_s=-1)
    assert len(mt.predict(["may 9 1998"], deadline_s=5.0).lines()) == 1

    # and no request chooses the engine: the server sets it once (seqlab serve --engine)
    with TestClient(create_app({"mt": mt}, engine="seqlab")) as api:
        refused = api.post("/translate", json={"text": "may 9 1998", "engine": "ctranslate2"})
        assert refused.status_code == 422 and "engine" in refused.json()["error"]
