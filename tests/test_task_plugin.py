"""A whole task declared in this file alone: reversing a sequence of digits.

It is registered with one call (:func:`seqlab.catalog.register_task`, here for the length of a
``with`` block) and gets, with no line of ``seqlab/serve/`` or ``seqlab/cli/`` naming it:
``seqlab train``, ``seqlab evaluate``, ``seqlab predict``, :func:`seqlab.load`, a server route with
its request and response in the OpenAPI schema, ``/models``, and a panel on the page (a form built
from the request's schema, driven in Chromium). And ``seqlab/serve/`` names none of seqlab's own
tasks either: the routes of those come from the same records.
"""

from __future__ import annotations

import ast
import json
import random
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
import torch
import torch.nn.functional as F
import yaml
from pydantic import BaseModel, Field
from torch import Tensor, nn

import seqlab
from seqlab import catalog
from seqlab.catalog import DatasetSpec, ModelSpec, TaskSpec
from seqlab.cli import main
from seqlab.config import ExperimentConfig, ModelConfigBase, Positive
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.objective import LossOutput, Selection
from seqlab.serving.limits import Limits
from seqlab.serving.service import OptionsHandler, Request, Service
from seqlab.tasks.base import Experiment, Predictor, Run, WrongTask, load_weights
from seqlab.tasks.options import CommandOptions
from seqlab.tasks.report import Prediction, Report

LENGTH = 5  # digits per sequence


# ------------------------------------------------------------------------ the model
class ReverserConfig(ModelConfigBase):
    """Embeddings of the digits, then one linear map from all positions to all outputs."""

    arch: Literal["toy_reverser"] = "toy_reverser"
    task: ClassVar[str] = "reverse"
    embed_dim: Positive = 8


class Reverser(nn.Module):
    def __init__(self, cfg: ReverserConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, cfg.embed_dim)
        self.out = nn.Linear(LENGTH * cfg.embed_dim, LENGTH * 10)

    def forward(self, x: Tensor) -> Tensor:
        """x (B, L) digits → logits (B, L, 10)."""
        return self.out(self.embed(x).flatten(1)).view(len(x), LENGTH, 10)


# ------------------------------------------------------------------------ the data
def digits(data: Any, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    line = lambda: " ".join(str(rng.randrange(10)) for _ in range(LENGTH))  # noqa: E731
    return {split: [line() for _ in range(n)] for split, n in (("train", 512), ("val", 64))}


def encode(lines: Sequence[str]) -> Tensor:
    for line in lines:
        if len(line.split()) != LENGTH or not all(d in "0123456789" for d in line.split()):
            raise SeqlabError(f"{line!r}: give {LENGTH} digits separated by spaces")
    return torch.tensor([[int(d) for d in line.split()] for line in lines])


@dataclass
class Batches:
    x: Tensor
    batch_size: int = 32
    carries_state: bool = False
    epoch: int = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.x) // self.batch_size

    def __iter__(self) -> Iterator[Tensor]:
        order = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(self.epoch))
        for i in range(len(self)):
            yield self.x[order[i * self.batch_size : (i + 1) * self.batch_size]]


# ------------------------------------------------------------------------ the predictor
@dataclass
class Reversals(Prediction):
    inputs: list[str]
    outputs: list[str]

    def lines(self) -> list[str]:
        return self.outputs

    def to_json(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "outputs": self.outputs}


class ReverseOptions(CommandOptions):
    """``predict``'s options, declared once: the flag, the request field, the keyword."""

    digits_only: bool = Field(False, description="answer without spaces")


class ReversePredictor(Predictor):
    task = "reverse"
    kind = "sequence reversal"
    commands = ("predict", "evaluate")
    command_options = {"predict": ReverseOptions}
    capabilities = ("predict", "evaluate", "reverse")

    @classmethod
    def load(cls, run: Run) -> ReversePredictor:
        return cls(load_weights(build_model(run.cfg.model), run), run.cfg, run)

    @torch.no_grad()
    def reverse(self, lines: Sequence[str]) -> list[str]:
        out = self.model(encode(lines)).argmax(-1)  # (B, L)
        return [" ".join(str(int(d)) for d in row) for row in out]

    def predict(
        self, inputs: Any, options: ReverseOptions | None = None, **keywords: Any
    ) -> Reversals:
        o = self.options_of("predict", options, keywords)
        lines = [inputs] if isinstance(inputs, str) else list(inputs)
        outputs = self.reverse(lines)
        return Reversals(lines, [x.replace(" ", "") if o.digits_only else x for x in outputs])

    def evaluate(self, split: str | None = None, files: Any = None, **_: Any) -> Report:
        split = split or "val"
        lines = digits(self.cfg.data, self.cfg.train.seed)[split]
        right = [
            o == " ".join(reversed(x.split()))
            for x, o in zip(lines, self.reverse(lines), strict=True)
        ]
        return Report(self.checkpoint, {"split": split}, {"exact": sum(right) / len(right)})


def build_experiment(cfg: ExperimentConfig, run_dir: Path | None = None) -> Experiment:
    splits = digits(cfg.data, cfg.train.seed)
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model)

    def loss(m: nn.Module, x: Tensor, state: Any) -> LossOutput:
        logits = m(x)
        return LossOutput(F.cross_entropy(logits.flatten(0, 1), x.flip(1).flatten()), x.numel())

    predictor = ReversePredictor(model, cfg)

    def evaluate(m: nn.Module) -> dict[str, float]:
        return {"val_exact": predictor.evaluate("val")["exact"]}

    return Experiment(
        model=model,
        train_batches=Batches(encode(splits["train"])),
        loss_fn=loss,
        evaluate=evaluate,
        select=SELECT,
        save_artefacts=lambda directory: None,
        predictor=predictor,
    )


SELECT = Selection("val_exact", "max")


# ------------------------------------------------------------------------ how it is served
class ReverseRequest(Request, ReverseOptions):
    text: str | list[str] = Field(description="digits separated by spaces, or a list of them")


class ReverseResponse(BaseModel):
    model: str
    outputs: list[str]


class ReverseHandler(OptionsHandler):
    """The generic handler: requests with equal options reversed by one call."""

    command = "predict"

    def check(self, inputs: list[str], options: ReverseOptions) -> None:
        encode(inputs)  # a malformed sequence is a 422 before it queues

    def answer(self, inputs: list[list[str]], options: ReverseOptions) -> list[Any]:
        out = self.predictor.predict([t for texts in inputs for t in texts], options).outputs
        answers, start = [], 0
        for texts in inputs:
            answers.append(
                ReverseResponse(model=self.name, outputs=out[start : start + len(texts)])
            )
            start += len(texts)
        return answers


TASK = TaskSpec(
    "reverse",
    build_experiment,
    (ReversePredictor,),
    SELECT,
    service=Service(
        "/reverse", ReverseRequest, ReverseResponse, ReverseHandler, summary="Reverse digits"
    ),
)
MODEL = ModelSpec(ReverserConfig, lambda cfg, sizes: Reverser(cfg))
DATA = DatasetSpec("toy-digits", "reverse", digits, summary="five random digits (tests)")
RAW = {
    "data": {"dataset": "toy-digits"},
    "model": {"arch": "toy_reverser"},
    "train": {"epochs": 12, "lr": 0.05, "threads": 1, "log_every": 50, "precision": "fp32"},
}


@pytest.fixture(scope="module")
def reverse_run(tmp_path_factory) -> Iterator[Path]:
    """The task registered (the one line), and a run of it trained by ``seqlab train``."""
    tmp = tmp_path_factory.mktemp("reverse")
    with catalog.registered(MODEL, DATA, TASK):
        config, run = tmp / "reverse.yaml", tmp / "run"
        config.write_text(yaml.safe_dump(RAW))
        assert main(["train", str(config), "--out", str(run)]) == 0
        yield run


def test_a_task_from_this_file_trains_evaluates_predicts_and_loads(reverse_run, capsys):
    capsys.readouterr()
    assert main(["evaluate", "--run", str(reverse_run), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["split"] == "val" and scores["exact"] >= 0.95

    assert main(["predict", "--run", str(reverse_run), "1 2 3 4 5", "9 0 0 7 3"]) == 0
    assert capsys.readouterr().out.splitlines() == ["5 4 3 2 1", "3 7 0 0 9"]
    assert main(["predict", "--run", str(reverse_run), "--digits-only", "1 2 3 4 5"]) == 0
    assert capsys.readouterr().out.strip() == "54321"
    # an option of another task's command is refused by the same check as everywhere
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--run", str(reverse_run), "--beam", "2", "1 2 3 4 5"])
    assert exit_.value.code == 2 and "unrecognized arguments: --beam" in capsys.readouterr().err

    model = seqlab.load(reverse_run)
    assert isinstance(model, ReversePredictor) and isinstance(model.model, Reverser)
    assert model.reverse(["0 1 2 3 4"]) == ["4 3 2 1 0"]
    with pytest.raises(WrongTask, match="sequence reversal model.*translate"):
        model.translate(["x"])


def test_seqlab_predict_refuses_the_runs_of_tasks_with_their_own_command(
    reverse_run, tiny_runs, capsys
):
    assert main(["predict", "--run", str(tiny_runs["mt"]), "saturday 9 may 1998"]) == 2
    err = capsys.readouterr().err
    assert "needs a reverse run" in err  # the registered task that takes it
    assert "holds a translation model" in err and "use `seqlab translate`" in err


@pytest.fixture(scope="module")
def client(reverse_run):
    with warnings.catch_warnings():  # newer Starlette prefers httpx2 for its test client
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from fastapi.testclient import TestClient

    from seqlab.serve import create_app

    app = create_app({"rev": seqlab.load(reverse_run)}, limits=Limits(max_texts=4))
    with TestClient(app) as c:
        yield c


def test_the_server_derives_a_route_its_schema_and_the_models_entry(client):
    answer = client.post("/reverse", json={"text": ["1 2 3 4 5", "0 0 0 0 1"]})
    assert answer.status_code == 200
    assert answer.json() == {"model": "rev", "outputs": ["5 4 3 2 1", "1 0 0 0 0"]}
    assert client.post("/reverse", json={"text": "1 2 3 4 5", "digits_only": True}).json()[
        "outputs"
    ] == ["54321"]

    schema = client.get("/openapi.json").json()
    post = schema["paths"]["/reverse"]["post"]
    assert post["summary"] == "Reverse digits"
    body = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body.endswith("/ReverseRequest")
    fields = schema["components"]["schemas"]["ReverseRequest"]["properties"]
    assert set(fields) == {"model", "text", "digits_only"}
    ok = post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ok.endswith("/ReverseResponse")
    assert "/translate" in schema["paths"]  # every registered task's route

    (info,) = client.get("/models").json()["models"]
    assert (info["name"], info["task"], info["route"], info["panel"]) == (
        "rev",
        "reverse",
        "/reverse",
        None,
    )


def test_the_servers_common_rules_hold_for_the_new_route(client):
    """Strict bodies, named limits and the handler's own 422 come from the shared code."""
    unknown = client.post("/reverse", json={"text": "1 2 3 4 5", "beam": 2})
    assert unknown.status_code == 422 and "beam" in unknown.json()["error"]
    wrong_type = client.post("/reverse", json={"text": "1 2 3 4 5", "digits_only": "yes"})
    assert wrong_type.status_code == 422
    many = client.post("/reverse", json={"text": ["1 2 3 4 5"] * 5})
    assert many.status_code == 413 and many.json()["limit"] == "max_texts"
    bad = client.post("/reverse", json={"text": "1 2 3"})
    assert bad.status_code == 422 and "give 5 digits" in bad.json()["error"]
    none = client.post("/translate", json={"text": "x"})  # a route without its models
    assert none.status_code == 404 and "holds no translation model" in none.json()["error"]


def _code(path: Path) -> str:
    """A module's source without its docstrings (what it does, not what it says)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            body.pop(0)
    return ast.unparse(tree)


def test_no_line_of_serve_or_cli_names_this_task_and_serve_names_none():
    """serve/ takes every task from its record: its code (docstrings aside) names neither this
    file's task nor any of seqlab's own, nor their routes. cli/ never names this file's task
    either (its commands for seqlab's own tasks, ``translate`` and the others, are listed once
    in ``cli/infer.py``)."""
    package = Path(seqlab.__file__).parent
    serve = sorted((package / "serve").rglob("*.py"))
    builtin = [*catalog.tasks(), *(t.service.route for t in catalog.tasks().values())]
    for path in [*serve, *sorted((package / "cli").rglob("*.py"))]:
        code = _code(path)
        words = ["reverse", *(builtin if path in serve else [])]
        found = [w for w in words if w in code]
        assert found == [], f"{path.relative_to(package)} names {found}"


def test_the_check_above_sees_a_task_named_in_code(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Serves translation."""\nROUTES = {"translation": "/translate"}\n')
    assert "translation" in _code(module) and "Serves" not in _code(module)


def test_the_page_draws_a_form_for_the_new_task_and_shows_its_answer(reverse_run, tmp_path):
    """In Chromium: the page lists the model, builds the form from the route's request schema
    (the task ships no panel script), sends it and shows the answer the API gives."""
    from test_serve_browser import _browser

    uvicorn = pytest.importorskip("uvicorn")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from seqlab.serve import create_app

    app = create_app({"rev": seqlab.load(reverse_run)})
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if server.started:
                break
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        browser = _browser(tmp_path / "profile")
        try:
            browser.get(f"http://127.0.0.1:{port}/")
            wait = WebDriverWait(browser, 20)
            wait.until(lambda b: b.find_element(By.ID, "field-text").is_displayed())
            text = browser.find_element(By.ID, "field-text")
            text.clear()
            text.send_keys("3 1 4 1 5")
            browser.find_element(By.ID, "field-digits_only").click()
            browser.find_element(By.ID, "send").click()
            shown = wait.until(lambda b: b.find_element(By.ID, "answer").text.strip() or None)
            assert json.loads(shown) == {"model": "rev", "outputs": ["51413"]}
            browser.save_screenshot(str(tmp_path / "reverse.png"))
        finally:
            browser.quit()
    finally:
        server.should_exit = True
        thread.join(10)
