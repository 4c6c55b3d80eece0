"""Each bound of an option is written in one place, the options model's field or the server's
limit that bounds it more tightly (``Handler.limited``), and every surface reads it there: the
server refuses past it (422 naming the limit), its OpenAPI schema says it (``maximum``), the
page's panels take their inputs' bounds from that schema (``static/schema.js``; no number in a
panel's form), and the command line keeps the model's own bound (it has no server limit)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

import seqlab
from seqlab.cli import main
from seqlab.tasks.translation.options import MAX_LENGTH_PENALTY

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from seqlab.serve import Limits, create_app  # noqa: E402

TASKS = Path(seqlab.__file__).parent / "tasks"


def _number(schema: dict, component: str, field: str) -> dict:
    """The number (or integer) schema of ``component.field``, inside its ``anyOf`` if nullable."""
    prop = schema["components"]["schemas"][component]["properties"][field]
    return next(p for p in [prop, *prop.get("anyOf", [])] if p.get("type") in ("integer", "number"))


@pytest.fixture(scope="module")
def served(tiny_runs):
    return {name: seqlab.load(tiny_runs[name]) for name in ("mt", "lm", "fc")}


def test_the_schema_carries_this_servers_limits_and_the_server_refuses_past_them(served):
    limits = Limits(max_beam=3, max_nbest=2, max_tokens=50, max_steps=7)
    with TestClient(create_app(served, limits=limits, engine="seqlab")) as api:
        schema = api.get("/openapi.json").json()
        assert _number(schema, "TranslateRequest", "beam")["maximum"] == 3
        assert _number(schema, "TranslateRequest", "nbest")["maximum"] == 2
        assert (
            _number(schema, "TranslateRequest", "length_penalty")["maximum"] == MAX_LENGTH_PENALTY
        )
        assert _number(schema, "GenerateRequest", "tokens")["maximum"] == 50
        assert _number(schema, "ForecastRequest", "steps")["maximum"] == 7
        ok = api.post("/translate", json={"model": "mt", "text": "may 9 1998", "beam": 3})
        assert ok.status_code == 200
        over = api.post("/translate", json={"model": "mt", "text": "may 9 1998", "beam": 4})
        assert over.status_code == 422 and over.json()["limit"] == "max_beam"
        assert "beam is 4, over the server's limit max_beam=3" in over.json()["error"]
        over = api.post("/forecast", json={"model": "fc", "history": [1.0] * 40, "steps": 8})
        assert over.status_code == 422 and over.json()["limit"] == "max_steps"
    with TestClient(create_app(served, engine="seqlab")) as api:  # the default limits
        schema = api.get("/openapi.json").json()
        assert _number(schema, "TranslateRequest", "beam")["maximum"] == Limits().max_beam


def test_a_bound_of_the_options_model_is_the_cli_s_the_schema_s_and_the_server_s(
    served, tiny_runs, capsys
):
    """The length penalty's bound, written once (``MAX_LENGTH_PENALTY``): the command line, the
    schema and the server all stop there."""
    over = MAX_LENGTH_PENALTY + 1
    with pytest.raises(SystemExit):
        main(
            [
                "translate",
                "--run",
                str(tiny_runs["mt"]),
                "--beam",
                "2",
                "--length-penalty",
                f"{over:g}",
            ]
        )
    assert f"from 0 to {MAX_LENGTH_PENALTY:g}" in capsys.readouterr().err
    with TestClient(create_app(served, engine="seqlab")) as api:
        schema = api.get("/openapi.json").json()
        assert (
            _number(schema, "TranslateRequest", "length_penalty")["maximum"] == MAX_LENGTH_PENALTY
        )
        body = {"model": "mt", "text": "may 9 1998", "beam": 2, "length_penalty": over}
        answer = api.post("/translate", json=body)
        assert answer.status_code == 422 and "length_penalty" in answer.json()["error"]


@pytest.mark.parametrize("task", ["translation", "language_modeling", "forecasting"])
def test_a_panel_writes_no_bound_and_takes_each_number_input_s_from_the_schema(task):
    """Every number input of a panel's form is bounded from the schema (``boundInputs``), and
    the form itself holds no ``min``, ``max`` or ``step``: a bound changed on the server is the
    page's at once."""
    script = (TASKS / task / "panel.js").read_text(encoding="utf-8")
    form = script[script.index("const FORM") : script.index("`;", script.index("const FORM"))]
    numbers = re.findall(r'<input id="([\w-]+)" type="number"([^>]*)>', form)
    assert numbers, task
    assert not [i for i, attrs in numbers if re.search(r"\b(min|max|step)=", attrs)], task
    call = re.search(r"boundInputs\(page, model\.route, section, \{([^}]*)\}\)", script)
    assert call is not None, f"{task}: its panel does not call boundInputs"
    bounded = set(re.findall(r'"?([\w-]+)"?\s*:', call.group(1)))
    assert {i for i, _ in numbers} == bounded, task
    assert 'import { boundInputs } from "/static/schema.js";' in script


def test_the_page_serves_the_schema_module_the_panels_import(served):
    with TestClient(create_app(served, engine="seqlab")) as api:
        module = api.get("/static/schema.js")
        assert module.status_code == 200 and "javascript" in module.headers["content-type"]
        assert "export async function boundInputs" in module.text
