"""The real code on the page (``docs/_hooks/source.py``) and the site's TeX check (``mathml.py``).

- every ``<!-- source: NAME -->`` directive in docs/ names an object of ``src/`` today, and every
  tutorial page includes at least one;
- an unknown name fails, naming the page and the directive: renaming a function whose lines a
  page embeds fails the docs build (the mutation check, on a copy of a source file);
- the included block is the object's lines, numbered from its first line, titled with its file;
- in the notebook the directive is Markdown, never code;
- a TeX command left in a rendered page outside code fails the build.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import jupytext
import pytest
import yaml

from conftest import docs_hook

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("[0-9][0-9]-*.md"))


def source():
    return docs_hook("source")


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)


def test_every_directive_in_the_docs_resolves_today():
    hook = source()
    found = {p: hook.names(p.read_text(encoding="utf-8")) for p in pages()}
    assert sum(map(len, found.values())) >= 15
    for page, names in found.items():
        for name in names:
            snippet = hook.resolve(name)  # raises SourceError naming the object
            lines = (ROOT / snippet.path).read_text(encoding="utf-8").splitlines()
            where = f"{page.relative_to(ROOT)}: {name}"
            assert snippet.text.splitlines() == lines[snippet.start - 1 : snippet.end], where
            assert snippet.name.rsplit(".", 1)[-1] in "\n".join(lines[snippet.start - 1 :][:5])


def test_every_tutorial_shows_the_code_of_its_idea():
    hook = source()
    missing = [p.name for p in TUTORIALS if not hook.names(p.read_text(encoding="utf-8"))]
    assert not missing, f"tutorials without a <!-- source: ... --> include: {missing}"


def test_an_unknown_name_fails_naming_the_page_and_the_directive():
    hook = source()
    text = "# P\n\nThe step:\n\n<!-- source: seqlab.nn.cells.GRUCell.no_such_step -->\n"
    with pytest.raises(hook.SourceError) as info:
        hook.expand(text, "tutorials/05-gated-cells.md")
    message = str(info.value)
    assert message.startswith("tutorials/05-gated-cells.md: <!-- source: seqlab.nn.cells.GRUCell")
    assert "no such object in src/" in message
    with pytest.raises(hook.SourceError, match="expected a dotted name under seqlab"):
        hook.expand("<!-- source: torch.nn.GRU -->\n", "p.md")


def test_renaming_an_included_function_fails_the_build(tmp_path, monkeypatch):
    """The mutation check, on a copy of src/: the page resolves, the function is renamed, the
    same page fails."""
    hook = source()
    package = tmp_path / "src" / "seqlab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""seqlab."""\n', encoding="utf-8")
    code = (ROOT / "src" / "seqlab" / "nn" / "pooling.py").read_text(encoding="utf-8")
    (package / "pooling.py").write_text(code, encoding="utf-8")
    monkeypatch.setattr(hook, "SRC", tmp_path / "src")
    monkeypatch.setattr(hook, "ROOT", tmp_path)
    page = "Pooling:\n\n<!-- source: seqlab.pooling.masked_mean -->\n"
    hook.package.cache_clear()
    try:
        assert "def masked_mean(" in hook.expand(page, "tutorials/11.md")
        (package / "pooling.py").write_text(
            code.replace("def masked_mean(", "def masked_average("), encoding="utf-8"
        )
        hook.package.cache_clear()
        with pytest.raises(hook.SourceError, match=r"tutorials/11\.md: .*masked_mean.*no such"):
            hook.expand(page, "tutorials/11.md")
    finally:
        hook.package.cache_clear()


def test_the_included_block_is_numbered_titled_and_linked():
    hook = source()
    snippet = hook.resolve("seqlab.nn.cells.GRUCell.step")
    assert snippet.path == "src/seqlab/nn/cells.py" and snippet.anchor == "seqlab.nn.cells.GRUCell"
    text = hook.expand(
        "  <!-- source: seqlab.nn.cells.GRUCell.step -->\n", "tutorials/05-gated-cells.md"
    )
    first = text.splitlines()[0]
    assert first == (
        f'  ```python linenums="{snippet.start}" '
        f'title="src/seqlab/nn/cells.py, lines {snippet.start}–{snippet.end}"'
    )
    assert "    def step(self" in text  # indented like the directive
    assert "(../source/seqlab/nn/cells.md)" in text
    assert "(../reference/python-nn.md#seqlab.nn.cells.GRUCell)" in text
    # inherited and re-exported names: the lines of the defining class, the reference's name
    inherited = hook.resolve("seqlab.nn.cells.GRUCell.forward")
    assert inherited.name == "seqlab.nn.cells._Cell.forward"
    exported = hook.resolve("seqlab.tasks.translation.Translator.attention")
    assert exported.anchor == "seqlab.tasks.translation.Translator.attention"
    assert exported.path == "src/seqlab/tasks/translation/translator.py"


def test_a_directive_inside_code_is_left_alone():
    hook = source()
    text = "```md\n<!-- source: seqlab.nn.cells.nope -->\n```\n"
    assert hook.expand(text, "p.md") == text
    assert hook.names(text) == []


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_in_the_notebook_the_directive_is_markdown(page):
    notebook = jupytext.read(page)
    for cell in notebook.cells:
        if "<!-- source:" in cell.source:
            assert cell.cell_type == "markdown", f"{page.name}: a directive in a {cell.cell_type}"


def test_tex_left_unconverted_fails_the_build():
    mathml = docs_hook("mathml")
    # latex2mathml copies the delimiter after \Big through as text; the hook converts it
    _, found = mathml.to_mathml(r"$$\Big\lVert g \Big\rVert \le \big\lvert a \big\rvert$$")
    (formula,) = found.values()
    assert "\\" not in formula and formula.count("&#x02016;") == 2
    assert mathml.unconverted("<p>a \\alpha</p><pre><code>\\n \\beta</code></pre>") == ["\\alpha"]

    class Page:
        class file:
            src_uri = "tutorials/p.md"

    with pytest.raises(Exception, match=r"tutorials/p\.md: TeX left unconverted .*\\lVert"):
        mathml.on_page_content("<p>the norm \\lVert g \\rVert</p>", Page)


def test_no_page_writes_tex_outside_formulas():
    """The same check on the Markdown, without a build: TeX commands outside $…$ and code."""
    mathml = docs_hook("mathml")
    for page in pages():
        text, found = mathml.to_mathml(page.read_text(encoding="utf-8"), str(page))
        for formula in found.values():
            assert not re.search(r"\\[A-Za-z]+", formula), (page.name, formula)
        prose = mathml.CODE.sub("", text)
        prose = re.sub(r"<!--.*?-->", "", prose, flags=re.S)
        left = re.findall(r"\\[A-Za-z]{2,}", prose)
        assert not left, f"{page.relative_to(ROOT)}: {sorted(set(left))}"


def test_whole_file_page_is_the_file():
    hook = source()
    page = hook.whole_file("src/seqlab/nn/pooling.py")
    code = (ROOT / "src/seqlab/nn/pooling.py").read_text(encoding="utf-8").rstrip("\n")
    assert code in page and 'linenums="1"' in page
    assert textwrap.dedent(page).startswith("---\nsearch:\n  exclude: true\n---")


# ------------------------------------------------------------------ the notebook behaves like the page
def test_shell_cells_run_the_seqlab_of_the_kernels_python(tmp_path, monkeypatch):
    """A kernel started without its environment activated: ``seqlab`` in a shell cell is still
    ``python -m seqlab`` of the kernel's own Python."""
    import os
    import shutil
    import subprocess
    import sys

    from seqlab.demos import notebook

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    folder = notebook.kernel_seqlab()
    found = shutil.which("seqlab")
    assert found is not None and Path(found).parent == folder
    assert os.environ["PATH"].split(os.pathsep)[:2] == [str(folder), "/usr/bin"]
    assert str(Path(sys.executable).absolute()) in Path(found).read_text(encoding="utf-8")
    assert notebook.kernel_seqlab() == folder  # again: the same folder, PATH not repeated
    assert os.environ["PATH"].count(str(folder)) == 1
    done = subprocess.run(
        ["sh", "-c", "seqlab --help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "usage: seqlab" in done.stdout


def test_a_page_run_in_jupyter_draws_into_a_scratch_folder(tmp_path, monkeypatch):
    from seqlab.demos import notebook

    monkeypatch.delenv(notebook.FIGURES, raising=False)
    monkeypatch.chdir(tmp_path)  # Jupyter runs a page in its folder, docs/tutorials/
    path = notebook.figure_path("a.png")
    assert path == Path("runs") / "tutorials" / "figures" / "a.png"
    assert not (tmp_path / "figures").exists()


def test_a_page_saved_from_jupyter_comes_back_as_committed():
    """docs/tutorials/jupytext.toml: a page saved from Jupyter, with the metadata Jupyter adds to
    the notebook and its cells, is written back with the committed front matter and body."""
    from jupytext.config import load_jupytext_configuration_file

    config = load_jupytext_configuration_file(str(DOCS / "tutorials" / "jupytext.toml"))
    assert config.formats == ["md"] or config.formats == "md"
    for page in TUTORIALS:
        notebook = jupytext.read(page)
        notebook.metadata["widgets"] = {"state": {}}
        notebook.metadata["language_info"] = {"name": "python"}
        for cell in notebook.cells:
            cell.metadata["tags"] = ["x"]
            cell.metadata["ExecuteTime"] = {"end_time": "now"}
        notebook.metadata["jupytext"]["notebook_metadata_filter"] = config.notebook_metadata_filter
        notebook.metadata["jupytext"]["cell_metadata_filter"] = config.cell_metadata_filter
        saved, committed = jupytext.writes(notebook, "md"), page.read_text(encoding="utf-8")
        # the same front matter (jupytext writes YAML lists in block style) and the same body
        assert yaml.safe_load(saved.split("---\n")[1]) == yaml.safe_load(
            committed.split("---\n")[1]
        ), page.name
        assert saved.split("---\n", 2)[2] == committed.split("---\n", 2)[2], page.name


def test_jupyterlab_opens_the_pages_as_notebooks():
    import json

    settings = DOCS / "tutorials" / ".jupyter" / "labconfig" / "default_setting_overrides.json"
    viewers = json.loads(settings.read_text(encoding="utf-8"))[
        "@jupyterlab/docmanager-extension:plugin"
    ]["defaultViewers"]
    assert viewers["markdown"] == "Jupytext Notebook"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "docs/tutorials/.jupyter/labconfig/default_setting_overrides.json" in makefile
    assert "make lab" in (DOCS / "tutorials" / "index.md").read_text(encoding="utf-8")


def test_a_formula_after_a_code_span_over_a_line_break_is_converted_and_one_left_typed_fails():
    """A code span may run over a line break (Markdown's do): the formula after it is converted
    (page 5b showed "Layer $l > 0$" as typed); a ``$…$`` that is still in the rendered page, a
    formula split over a line break for one, fails the build naming it."""
    mathml = docs_hook("mathml")
    text, found = mathml.to_mathml("`RNN(cell,\n  num_layers=L)`. Layer $l > 0$ reads `x`.")
    assert "$" not in text and len(found) == 1 and "<mi>l</mi>" in next(iter(found.values()))
    planted = "a formula split $x\n+ 1$ over a line break"
    text, found = mathml.to_mathml(planted)
    assert found == {} and "$x" in text  # not converted: the build must not pass it

    class Page:
        class file:
            src_uri = "tutorials/p.md"

    with pytest.raises(Exception, match=r"tutorials/p\.md: TeX left unconverted .*\$x\n\+ 1\$"):
        mathml.on_page_content(f"<p>{text}</p>", Page)
    assert mathml.unconverted("<p>costs $5 and $6</p>") == []  # two prices, no formula
    assert mathml.unconverted("<pre><code>echo $HOME $PATH</code></pre>") == []
