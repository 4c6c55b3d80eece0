"""Architecture diagrams of the tutorials, drawn by code: the picture a learner looks at first.

Each diagram is one record (:class:`Diagram`): its name, the tutorial page it illustrates, the
function that draws it, and the notation it shares with that page (the LaTeX of the page's
equations, which the diagram's labels write in mathtext), so that ``tests/test_diagrams.py``
fails when a page renames a symbol and its diagram does not follow. The pages draw their
diagrams with :func:`draw`; ``make figures`` redraws them all with :func:`draw_all` (seconds).

The shapes follow d2l.ai's figures and the papers' (Vaswani et al. 2017, Figures 1 and 2;
Dosovitskiy et al. 2021, Figure 1); the shared vocabulary of boxes, operators and arrows is
:mod:`seqlab.analysis.diagrams.canvas`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from seqlab.analysis.diagrams import recurrent, seq2seq, transformer
from seqlab.analysis.diagrams.canvas import Canvas
from seqlab.errors import SeqlabError


@dataclass(frozen=True)
class Diagram:
    """One diagram: ``name`` (its file is ``diagram-<name>.png``), the ``page`` it illustrates
    (a file of ``docs/tutorials/``), the function that draws it, and its ``notation``: symbols
    as the page's LaTeX writes them, each also a label of the diagram (``\\text`` there is
    ``\\mathrm`` in mathtext, ``\\frac`` may be drawn as ``\\dfrac`` and ``\\le`` is
    ``\\leq``)."""

    name: str
    page: str
    build: Callable[[], Canvas]
    notation: tuple[str, ...]

    @property
    def file(self) -> str:
        return f"diagram-{self.name}.png"


DIAGRAMS: dict[str, Diagram] = {
    d.name: d
    for d in (
        Diagram(
            "rnn-bptt",
            "04-rnn-bptt.md",
            recurrent.rnn_unrolled,
            (
                "h_t",
                "h_{t-1}",
                "x_t",
                "o_t",
                "W_{hh}",
                "W_{xh}",
                "W_{hq}",
                "L_T",
                "\\frac{\\partial L_T}{\\partial h_k}",
                "\\frac{\\partial h_j}{\\partial h_{j-1}}",
                "\\prod_{j=k+1}^{T}",
            ),
        ),  # fmt: skip
        Diagram(
            "gru",
            "05-gated-cells.md",
            recurrent.gru,
            ("r_t", "z_t", "\\tilde h_t", "h_{t-1}", "h_t", "x_t", "z_t \\odot h_{t-1}", "\\sigma"),
        ),
        Diagram(
            "lstm",
            "05-gated-cells.md",
            recurrent.lstm,
            ("f_t", "i_t", "o_t", "c_{t-1}", "c_t", "h_{t-1}", "h_t", "f_t \\odot c_{t-1}"),
        ),
        Diagram(
            "deep-bidirectional",
            "05b-deep-bidirectional-rnns.md",
            recurrent.deep_bidirectional,
            (
                "X_t",
                "O_t",
                "\\overrightarrow{H}_t",
                "\\overleftarrow{H}_t",
                "\\overrightarrow{H}_t ;\\ \\overleftarrow{H}_t",
                "H_t^{(l-1)}",
                "H_t^{(0)} = X_t",
            ),
        ),  # fmt: skip
        Diagram(
            "encoder-decoder",
            "06-encoder-decoder.md",
            seq2seq.encoder_decoder,
            (
                "x_1",
                "x_T",
                "y_1",
                "y_{T'}",
                "\\mathbf{c}",
                "s_t = g(s_{t-1}, [y_{t-1}; \\mathbf{c}])",
                "\\mathrm{softmax}(W s_t)",
            ),
        ),  # fmt: skip
        Diagram(
            "bahdanau",
            "07-attention.md",
            seq2seq.bahdanau,
            (
                "\\mathbf{s}_{i-1}",
                "\\mathbf{h}_j",
                "\\alpha_{ij}",
                "\\mathbf{c}_i",
                "E y_{i-1}",
                "\\mathrm{softmax}_j",
                "\\mathbf{s}_{i-1}, \\mathbf{h}_",
            ),
        ),  # fmt: skip
        Diagram(
            "multi-head",
            "08-self-attention.md",
            transformer.multi_head,
            (
                "Q K^\\top",
                "\\sqrt{d_k}",
                "W_i^Q",
                "W_i^K",
                "W_i^V",
                "W^O",
                "\\mathrm{head}_i",
                "\\mathrm{MultiHead}(Q, K, V)",
                "d_k = d/h",
            ),
        ),  # fmt: skip
        Diagram(
            "transformer-blocks",
            "10-transformer.md",
            transformer.transformer_blocks,
            ("x_{l+1} = x_l + F", "\\mathrm{LayerNorm}(x_l", "y_{<t}, x", "\\le t"),
        ),
        Diagram(
            "vit",
            "12-vision-transformer.md",
            transformer.vit,
            (
                "\\mathbf{x}_\\text{class}",
                "\\mathbf{E}_\\text{pos}",
                "\\mathbf{z}_0",
                "\\mathbf{x}^1_p \\mathbf{E}",
                "\\mathbf{x}^N_p \\mathbf{E}",
                "\\mathbf{z}^0_L",
                "\\mathbf{W}",
                "P \\times P",
                "N = \\frac{HW}{P^2}",
            ),
        ),  # fmt: skip
    )
}


def diagram(name: str) -> Diagram:
    """The record of diagram ``name``; an unknown name is an error that lists the known ones."""
    if name not in DIAGRAMS:
        raise SeqlabError(f"diagram {name!r}: expected one of {', '.join(DIAGRAMS)}")
    return DIAGRAMS[name]


def draw(name: str, path: str | Path) -> Path:
    """Draw diagram ``name`` as a PNG at ``path`` (a tutorial page passes
    ``seqlab.demos.notebook.figure_path(f"diagram-{name}.png")``)."""
    return diagram(name).build().save(path)


def draw_all(folder: str | Path) -> list[Path]:
    """Draw every diagram into ``folder`` as ``diagram-<name>.png``."""
    return [draw(name, Path(folder) / d.file) for name, d in DIAGRAMS.items()]
