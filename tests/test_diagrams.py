"""The tutorials' architecture diagrams (``seqlab.analysis.diagrams``) read at page width and
speak their page's notation.

- every diagram is a PNG of its declared size, no wider than the site's content column allows
  (7.2 in at 120 dpi), every label at least 9 pt, inside the figure and clear of the others;
- its notation (the symbols it shares with its page) is both on the page, as the page's LaTeX
  writes it, and among the diagram's labels: a symbol renamed on one side only fails here;
- every page shows its diagrams in "The idea", and its code draws them (``draw("name", …)``),
  as ``tests/test_tutorials.py`` requires of every figure a page shows; ``make figures`` redraws
  them (``docs/_hooks/figures.py``'s ``diagrams`` step).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from PIL import Image

from conftest import docs_hook
from seqlab.analysis.diagrams import DIAGRAMS, diagram, draw
from seqlab.analysis.diagrams.canvas import DPI
from seqlab.errors import SeqlabError

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
#: the widest a diagram may be: the site's content column is about 750-800 px
MAX_WIDTH_IN = 7.2


def mathtext(symbol: str) -> str:
    """A symbol of a page's LaTeX as mathtext writes it."""
    return symbol.replace("\\text{", "\\mathrm{")


def labels_as_latex(texts: list[str]) -> str:
    return "\n".join(texts).replace("\\dfrac", "\\frac").replace("\\leq", "\\le")


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Each diagram drawn once: (its canvas, the label boxes in pixels, the PNG written)."""
    folder = tmp_path_factory.mktemp("diagrams")
    out = {}
    for name, record in DIAGRAMS.items():
        canvas = record.build()
        canvas.fig.canvas.draw()
        renderer = canvas.fig.canvas.get_renderer()
        boxes = [
            (t.get_text(), t.get_fontsize(), t.get_window_extent(renderer)) for t in canvas.ax.texts
        ]
        out[name] = (canvas, boxes, canvas.save(folder / record.file))
    return out


@pytest.mark.parametrize("name", list(DIAGRAMS))
def test_diagram_reads_at_page_width(drawn, name):
    canvas, boxes, png = drawn[name]
    assert canvas.width <= MAX_WIDTH_IN
    with Image.open(png) as image:
        assert image.size == (round(canvas.width * DPI), round(canvas.height * DPI))
    width, height = canvas.width * DPI, canvas.height * DPI
    small = [(text, size) for text, size, _ in boxes if size < 9]
    assert not small, f"{name}: labels under 9 pt: {small}"
    for text, _, box in boxes:
        assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, (
            f"{name}: {text!r} is cut at the edge ({box})"
        )
    for (a, _, box_a), (b, _, box_b) in itertools.combinations(boxes, 2):
        overlap = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0) > 1 and (
            min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0) > 1
        )
        assert not overlap, f"{name}: {a!r} overlaps {b!r}"


@pytest.mark.parametrize("name", list(DIAGRAMS))
def test_diagram_speaks_its_pages_notation(drawn, name):
    record = DIAGRAMS[name]
    page = (TUTORIALS / record.page).read_text(encoding="utf-8")
    labels = labels_as_latex(drawn[name][0].texts())
    for symbol in record.notation:
        assert symbol in page, f"{record.page} no longer writes {symbol!r}: rename it in {name}"
        assert mathtext(symbol) in labels, f"diagram {name} does not label {symbol!r}"


def test_notation_check_catches_a_rename():
    """The check above is not vacuous: Bahdanau's weights written as β are caught."""
    labels = labels_as_latex(DIAGRAMS["bahdanau"].build().texts())
    assert "\\alpha_{ij}" in labels and "\\mathbf{c}_i" in labels
    assert "\\alpha_{ij}".replace("alpha", "beta") not in labels


@pytest.mark.parametrize("name", list(DIAGRAMS))
def test_each_page_shows_and_draws_its_diagram(name):
    record = DIAGRAMS[name]
    text = (TUTORIALS / record.page).read_text(encoding="utf-8")
    idea = text.split("\n## The idea\n", 1)[1].split("\n## ", 1)[0]
    assert f"](figures/{record.file})" in idea, f"{record.page}: shows {record.file} in The idea"
    cells = re.findall(r"```python\n(.*?)```", text, re.S)
    assert any(re.search(rf"""draw\(\s*["']{name}["']""", c) for c in cells), (
        f"{record.page}: a code cell draws {name}"
    )


def test_unknown_diagram_names_the_known_ones(tmp_path):
    with pytest.raises(SeqlabError, match=r"diagram 'gru2': expected one of rnn-bptt, gru, lstm"):
        draw("gru2", tmp_path / "x.png")
    assert diagram("gru").file == "diagram-gru.png"


def test_make_figures_redraws_the_diagrams():
    figures = docs_hook("figures")
    assert "diagrams" in figures.STEPS
