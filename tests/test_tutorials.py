"""The tutorials (``docs/tutorials/``): one page per topic of the course, each a notebook that runs.

- every topic has its page, in the site's navigation, in the course's order;
- every page has the parts a learner needs (the idea with an equation and a public source, the
  seqlab objects linked into the API reference, code and a shell command, its figures, what to
  look for, the test that checks the claim, 2–4 exercises with folded worked answers);
- every page opens as a notebook (jupytext) and runs top to bottom at the smoke budget, worked
  answers included, and draws every figure it shows (``docs/_hooks/notebooks.py``);
- the runner's directives do what its docstring says.

``make figures`` runs the same pages at the full budget (slow; not part of the tests).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from conftest import docs_hook
from seqlab.demos import notebook
from seqlab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
RUNNER = ROOT / "docs" / "_hooks" / "notebooks.py"
#: the course's topics in order: file stem → what the page teaches
TOPICS = [
    "01-sequence-models",
    "02-ngrams-zipf",
    "03-text-pipeline",
    "04-rnn-bptt",
    "05-gated-cells",
    "05b-deep-bidirectional-rnns",
    "06-encoder-decoder",
    "07-attention",
    "08-self-attention",
    "09-positional-encoding",
    "10-transformer",
    "10b-translation-real-sentences",
    "10c-chinese-english",
    "11-classification",
    "12-vision-transformer",
    "13-serving",
    "14-spoken-digits",
    "14b-emotion",
    "15-relative-positions",
]
SECTIONS = [
    "## The idea",
    "## In seqlab",
    "## Run it",
    "## What to look for",
    "## The test that checks it",
    "## Exercises",
]
FIGURE = re.compile(r"!\[[^\]]*\]\(figures/([^)\s]+\.png)\)")
PAGES = [TUTORIALS / f"{stem}.md" for stem in TOPICS]
HAVE_DATA = bool(os.environ.get("SEQLAB_DATA_DIR"))


def runner() -> ModuleType:
    return docs_hook("notebooks")


def front_matter(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{page.name}: no front matter"
    return yaml.safe_load(text.split("---\n", 2)[1])


def datasets(page: Path) -> list[str]:
    return front_matter(page)["jupyter"].get("seqlab", {}).get("datasets", [])


def test_every_topic_has_its_page_in_the_navigation_in_order():
    missing = [p.name for p in PAGES if not p.is_file()]
    assert not missing, f"tutorials missing: {missing}"
    extra = sorted({p.name for p in TUTORIALS.glob("[0-9]*.md")} - {p.name for p in PAGES})
    assert not extra, f"pages not in TOPICS: {extra}"
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = re.findall(r"tutorials/(\d\d[a-z]?-[\w-]+)\.md", nav)
    assert listed == TOPICS
    index = (TUTORIALS / "index.md").read_text(encoding="utf-8")
    assert re.findall(r"\]\((\d\d[a-z]?-[\w-]+)\.md\)", index) == TOPICS


@pytest.mark.parametrize("page", PAGES, ids=TOPICS)
def test_page_has_what_a_learner_needs(page):
    text = page.read_text(encoding="utf-8")
    meta = front_matter(page)["jupyter"]
    assert meta["jupytext"]["text_representation"]["format_name"] == "markdown"
    assert meta["kernelspec"]["language"] == "python"
    number = page.name.split("-")[0].lstrip("0")  # 05b-… (a page added between 5 and 6): 5b
    assert re.search(rf"^# {number}\. \S", text, re.M), f"{page.name}: title '# {number}. …'"
    assert re.search(r"^\*\*Source:\*\* .*\]\(https://", text, re.M), "a public source, linked"
    places = [text.find(f"\n{s}\n") for s in SECTIONS]
    assert -1 not in places, f"{page.name}: missing {SECTIONS[places.index(-1)]}"
    assert places == sorted(places), f"{page.name}: sections out of order"
    parts = dict(zip(SECTIONS, re.split(r"\n## [^\n]+\n", text)[1:], strict=False))
    assert "$$" in parts["## The idea"], "the idea's equation"
    assert re.search(r"\]\(\.\./reference/python[\w-]*\.md#seqlab\.", parts["## In seqlab"])
    run = parts["## Run it"]
    assert "```python" in run and "```sh" in run, "code, and the command line"
    assert FIGURE.search(run), "a figure"
    for name in FIGURE.findall(text):
        assert (TUTORIALS / "figures" / name).is_file(), f"{page.name}: figures/{name} missing"
    look = parts["## What to look for"]
    assert len(look.split()) >= 40, f"{page.name}: say what to look for in the figure"
    assert re.search(r"tests/test_\w+\.py::test_\w+", parts["## The test that checks it"])
    exercises = parts["## Exercises"]
    numbered = re.findall(r"^\d+\. ", exercises, re.M)
    answers = re.findall(r"<details markdown>\s*<summary>Answer</summary>", exercises)
    assert 2 <= len(numbered) <= 4, f"{page.name}: 2 to 4 exercises, found {len(numbered)}"
    assert len(answers) == len(numbered), f"{page.name}: a folded answer for each exercise"
    assert len(runner().answers(text)) == len(numbered), "each answer's code, as ```py"


@pytest.mark.parametrize("page", PAGES, ids=TOPICS)
def test_page_opens_as_a_notebook(page):
    jupytext = pytest.importorskip("jupytext")
    nb = jupytext.read(page)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert any(not c.startswith("%%sh") for c in code) and any(c.startswith("%%sh") for c in code)
    assert not [c for c in nb.cells if c.cell_type == "raw"], "front matter keys outside jupyter:"
    again = jupytext.reads(jupytext.writes(nb, fmt="ipynb"), fmt="ipynb")
    assert [c.source for c in again.cells] == [c.source for c in nb.cells]


#: the page that runs in the default tier (``make test``; the others in the full tier, each 8-60 s
#: at the smoke budget): the runner, its directives and a page's figures checked end to end
FAST_PAGE = "03-text-pipeline"


@pytest.mark.parametrize(
    "page",
    [p if p.stem == FAST_PAGE else pytest.param(p, marks=pytest.mark.slow) for p in PAGES],
    ids=TOPICS,
)
def test_page_runs_at_the_smoke_budget_and_draws_its_figures(page, tmp_path):
    pytest.importorskip("jupytext")
    if datasets(page) and not HAVE_DATA:
        pytest.skip(f"needs SEQLAB_DATA_DIR ({', '.join(datasets(page))})")
    figures = tmp_path / "figures"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--budget", "smoke", "--answers", str(page)]
        + ["--figures", str(figures), "--runs", str(tmp_path / "runs")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{page.name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    shown = set(FIGURE.findall(page.read_text(encoding="utf-8")))
    drawn = {p.name for p in figures.glob("*.png")}
    assert shown <= drawn, f"{page.name}: shows {sorted(shown - drawn)} but did not draw them"
    for name in shown:
        assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------- the runner itself
def test_smoke_args_are_appended_to_each_seqlab_command_only():
    r = runner()
    assert r.smoke_args("text\n<!-- smoke: --steps 3 -->\n") == "--steps 3"
    assert r.smoke_args("no directive") is None
    script = "seqlab demo x --out a  # a comment\necho seqlab\nseqlab train c.yaml \\\n  --out b"
    assert r.with_args(script, "--steps 3").split("\n") == [
        "seqlab demo x --out a --steps 3  # a comment",
        "echo seqlab",
        "seqlab train c.yaml \\",
        "  --out b --steps 3",
    ]


def test_answers_are_the_py_blocks_folded_in_details():
    text = (
        "1. Do it.\n\n    <details markdown>\n    <summary>Answer</summary>\n\n"
        "    Because.\n\n    ```py\n    x = 1\n    if x:\n        y = 2\n    ```\n\n"
        "    </details>\n\n```py\nnot_an_answer()\n```\n"
    )
    assert runner().answers(text) == ["x = 1\nif x:\n    y = 2\n"]


def test_a_failing_cell_is_named(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# T\n\n```python\nx = 1\n```\n\n```python\n1 / 0\n```\n", encoding="utf-8")
    with pytest.raises(ZeroDivisionError) as info:
        runner().run_page(page, log=lambda _: None)
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].filename == f"{page}: cell 3"  # cells counted as Jupyter shows them


def test_budget_reads_one_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(notebook.BUDGET, raising=False)
    assert notebook.budget(full=600, smoke=5) == 600 and not notebook.smoke()
    monkeypatch.setenv(notebook.BUDGET, "smoke")
    assert notebook.budget(full=600, smoke=5) == 5 and notebook.smoke()
    monkeypatch.setenv(notebook.BUDGET, "tiny")
    with pytest.raises(ConfigError, match=r"\$SEQLAB_BUDGET='tiny': expected one of full, smoke"):
        notebook.budget(full=1, smoke=0)
    monkeypatch.setenv(notebook.FIGURES, str(tmp_path / "f"))
    assert notebook.figure_path("a.png") == tmp_path / "f" / "a.png"
    assert (tmp_path / "f").is_dir()


def test_a_page_run_takes_its_seed_from_one_variable(monkeypatch, tmp_path):
    """``--seed`` (``$SEQLAB_SEED``) seeds the models a page trains; unset, seed 0."""
    monkeypatch.delenv(notebook.SEED, raising=False)
    assert notebook.seed() == 0
    monkeypatch.setenv(notebook.SEED, "2")
    assert notebook.seed() == 2
    monkeypatch.setenv(notebook.SEED, "-1")
    with pytest.raises(ConfigError, match=r"\$SEQLAB_SEED='-1': expected a whole number"):
        notebook.seed()
    monkeypatch.delenv(notebook.SEED)
    page = tmp_path / "p.md"
    page.write_text(
        "# T\n\n```python\nfrom seqlab.demos.notebook import seed\nprint('seed', seed())\n```\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--budget", "smoke", "--seed", "7", str(page)]
        + ["--figures", str(tmp_path / "f"), "--runs", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "seed 7" in done.stdout
    for page in (TUTORIALS / "07-attention.md", TUTORIALS / "10-transformer.md"):
        assert 'f"train.seed={seed()}"' in page.read_text(encoding="utf-8"), page.name


def test_trained_reuses_a_finished_run_and_refuses_what_is_not_one(monkeypatch, tmp_path, capsys):
    """``trained`` (page 10c's long recipes): a finished run of the same config is reused, even
    trained on other threads; one of another config is refused, never deleted; an unfinished one
    is trained anew; a folder that is not a seqlab run is refused, nothing deleted."""
    import seqlab.experiment
    from seqlab.storage.rundir import RunDir

    monkeypatch.setenv(notebook.RUNS, str(tmp_path))
    tiny = ["data.num_examples=120", "data.val_examples=8", "train.max_steps=2"]
    tiny += ["train.eval_every=2", "model.d_model=16", "model.d_ff=32", "train.average_last=2"]
    calls = []
    real_train = seqlab.experiment.train
    monkeypatch.setattr(
        seqlab.experiment, "train", lambda cfg, path: calls.append(path) or real_train(cfg, path)
    )
    run = notebook.trained("dates-transformer", [*tiny, "train.threads=1"], "dates")
    assert run == tmp_path / "dates" and notebook.finished_run(run) and len(calls) == 1
    assert notebook.trained("dates-transformer", [*tiny, "train.threads=2"], "dates") == run
    assert (
        len(calls) == 1 and "a finished run of dates-transformer, reused" in capsys.readouterr().out
    )
    with pytest.raises(ConfigError, match=r"another config \(train.lr=0.004 \(asked 0.002\)\)"):
        notebook.trained("dates-transformer", [*tiny, "train.lr=0.002"], "dates")
    assert notebook.finished_run(run) and len(calls) == 1  # a finished run is never deleted
    metrics = RunDir(run).metrics_path  # as if stopped before its end: trained again
    kept = [line for line in metrics.read_text().splitlines() if '"kind": "end"' not in line]
    metrics.write_text("".join(f"{line}\n" for line in kept))
    assert not notebook.finished_run(run)
    notebook.trained("dates-transformer", [*tiny, "train.lr=0.002"], "dates")
    assert len(calls) == 2 and "did not finish" in capsys.readouterr().out
    assert notebook.finished_run(run)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match=r"mine exists and is not a seqlab run"):
        notebook.trained("dates-transformer", tiny, "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me" and len(calls) == 2


def test_formulas_become_mathml_outside_code_only():
    mathml = docs_hook("mathml")
    text, found = mathml.to_mathml(
        "$\\tau$ steps, `$x$` and\n\n$$x_t = 1$$\n\n```sh\necho $a$\n```\n"
    )
    assert text.startswith("seqlabmath0000x steps, `$x$` and") and "echo $a$" in text
    assert (
        found["seqlabmath0000x"].startswith("<math")
        and 'display="block"' in found["seqlabmath0001x"]
    )
    with pytest.raises(Exception, match=r"p\.md: cannot convert the formula '\\\\frac\{'"):
        mathml.to_mathml("$$\\frac{$$", "p.md")
