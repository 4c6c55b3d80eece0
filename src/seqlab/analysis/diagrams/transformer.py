"""Attention blocks drawn: multi-head attention, the Transformer's encoder and decoder blocks,
and the Vision Transformer's input.

Labelled in the notation of page 8 (``docs/tutorials/08-self-attention.md``, Vaswani et al. 2017
§3.2, d2l.ai §11.5), page 10 (``10-transformer.md``, Vaswani et al. §3.1, Xiong et al. 2020,
d2l.ai §11.7) and page 12 (``12-vision-transformer.md``, Dosovitskiy et al. 2021 eq. 1, d2l.ai
§11.8).
"""

from __future__ import annotations

from seqlab.analysis.diagrams.canvas import ADDITIVE, SMALL, Canvas, Node


def multi_head() -> Canvas:
    """Scaled dot-product attention (left) and h of them side by side on learned projections,
    concatenated and mixed by W^O (right): Vaswani et al. 2017, Figure 2."""
    c = Canvas(7.2, 4.9)
    # left: one head, softmax(Q K^T / sqrt(d_k)) V
    c.frame(0.15, 0.1, 2.95, 4.8, "scaled dot-product attention", where="top left")
    for x, given in ((0.7, "Q"), (1.5, "K"), (2.5, "V")):
        c.text(x, 0.35, f"${given}$")
    scores = c.box(1.1, 1.15, "MatMul $Q K^\\top$", "attention", w=1.5)
    c.arrow((0.7, 0.52), scores.at("bottom", -0.4))
    c.arrow((1.5, 0.52), scores.at("bottom", 0.4))
    scale = c.box(1.1, 1.9, "$\\div \\sqrt{d_k}$", "attention", w=1.1)
    soft = c.box(1.1, 2.65, "softmax", "attention", w=1.1)
    mix = c.box(1.75, 3.45, "MatMul", "attention", w=1.5)
    c.arrow(scores.top, scale.bottom)
    c.arrow(scale.top, soft.bottom)
    c.arrow(soft.top, (1.1, mix.bottom[1]))
    c.arrow((2.5, 0.52), (2.5, mix.bottom[1]))
    c.arrow(mix.top, (1.75, 4.05))
    c.text(1.75, 4.2, "$\\mathrm{head}_i$")
    # right: h heads on projections, concatenated, then W^O
    c.frame(3.25, 0.1, 7.05, 4.8, "multi-head attention", where="top left")
    xs = (3.9, 5.0, 6.1)
    names = ("$W_i^Q$", "$W_i^K$", "$W_i^V$")
    heads = c.stack(5.0, 2.1, "$h$ heads of scaled\ndot-product attention", "attention", w=2.9,
                    h=0.6)  # fmt: skip
    for x, name, given in zip(xs, names, "QKV", strict=True):
        c.text(x, 0.35, f"${given}$")
        proj = c.stack(x, 1.1, f"Linear {name}", "linear", w=1.0, h=0.42, size=SMALL)
        c.arrow((x, 0.52), proj.bottom)
        c.arrow(proj.top, (x, heads.bottom[1]))
    concat = c.box(5.0, 3.0, "Concat", "linear", w=1.6, h=0.4)
    out = c.box(5.0, 3.7, "Linear $W^O$", "linear", w=1.6, h=0.4)
    c.arrow(heads.top, concat.bottom)
    c.arrow(concat.top, out.bottom)
    c.arrow(out.top, (5.0, 4.1))
    c.text(5.0, 4.27, "$\\mathrm{MultiHead}(Q, K, V)$", size=SMALL + 1)
    c.text(6.95, 3.0, "$d_k = d/h$", ha="right")
    return c


def _sublayer(c: Canvas, x: float, y: float, name: str, side: float) -> Node:
    """One pre-norm sub-layer from its input at (x, y): x + F(LayerNorm(x)), its residual line
    on ``side`` (-1 left, +1 right); returns the ⊕ (its top is the output)."""
    c.dot(x, y)
    norm = c.box(x, y + 0.3, "LayerNorm", "norm", w=1.3, h=0.28, size=SMALL)
    kind = "ffn" if name.startswith("feed") else "attention"
    block = c.box(x, y + 0.8, name, kind, w=1.8, h=0.46, size=SMALL)
    add = c.op(x, y + 1.25, "$+$", r=0.12)
    c.arrow((x, y), norm.bottom)
    c.arrow(norm.top, block.bottom)
    c.arrow(block.top, add.bottom)
    edge = x + side * 1.15
    c.arrow((x, y), (edge, y), (edge, add.y), add.left if side < 0 else add.right,
            color=ADDITIVE, width=2.0)  # fmt: skip
    return add


def _stack(c: Canvas, x: float, names: list[str], side: float) -> float:
    """Sub-layers one above the other from y = 1.1; returns the top of the last ⊕."""
    y = 1.1
    for name in names:
        add = _sublayer(c, x, y, name, side)
        c.arrow(add.top, (x, add.top[1] + 0.08), head=False)
        y = add.top[1] + 0.08
    return y


def transformer_blocks() -> Canvas:
    """A pre-norm Transformer encoder block (left) and decoder block (right), as page 10 trains
    them: x_{l+1} = x_l + F(LayerNorm(x_l)) around every sub-layer, masked self-attention and
    cross-attention in the decoder, a final LayerNorm on each stack (Vaswani et al. 2017,
    Figure 1; Xiong et al. 2020)."""
    c = Canvas(7.2, 6.9)
    xe, xd = 1.95, 5.15
    for x, text in ((xe, "source tokens"), (xd, "target tokens, shifted right")):
        given = c.box(x, 0.5, "embedding + positions", "input", w=2.1, h=0.38, size=SMALL)
        c.text(x, 0.13, text, size=SMALL)
        c.arrow(given.top, (x, 1.1), head=False)
    # the encoder block and the decoder block, each repeated N times
    top = _stack(c, xe, ["multi-head\nself-attention", "feed-forward"], -1)
    c.frame(0.55, 0.95, 3.35, top + 0.03)
    c.text(0.3, (0.95 + top) / 2, "encoder block $\\times N$", size=SMALL, rotation=90)
    norm = c.box(xe, top + 0.3, "LayerNorm", "norm", w=1.3, h=0.28, size=SMALL)
    c.arrow((xe, top), norm.bottom)
    names = ["masked multi-head\nself-attention", "cross-attention", "feed-forward"]
    end = _stack(c, xd, names, 1)
    c.frame(4.0, 0.95, 6.55, end + 0.03)
    c.text(6.85, (0.95 + end) / 2, "decoder block $\\times N$", size=SMALL, rotation=90)
    # the encoder's output: keys and values of every decoder block's cross-attention
    cross_y = 1.1 + 1.45 + 0.8
    c.arrow(norm.top, (xe, norm.top[1] + 0.25), (3.65, norm.top[1] + 0.25), (3.65, cross_y),
            (xd - 0.9, cross_y))  # fmt: skip
    c.text(3.72, cross_y + 0.18, "$K, V$", ha="left")
    final = c.box(xd, end + 0.32, "LayerNorm", "norm", w=1.3, h=0.28, size=SMALL)
    head = c.box(xd, end + 0.82, "Linear, softmax", "linear", w=1.8, h=0.36, size=SMALL)
    c.arrow((xd, end), final.bottom)
    c.arrow(final.top, head.bottom)
    c.arrow(head.top, (xd, end + 1.25))
    c.text(xd + 0.1, end + 1.2, "$p(y_t \\mid y_{<t}, x)$", size=SMALL, ha="left")
    # the rule, in the page's notation
    c.text(0.2, 6.55, "pre-norm (drawn): $x_{l+1} = x_l + F(\\mathrm{LayerNorm}(x_l))$",
           ha="left", color=ADDITIVE)  # fmt: skip
    c.text(0.2, 6.15, "post-norm: $x_{l+1} = \\mathrm{LayerNorm}(x_l + F(x_l))$", ha="left")
    c.text(0.2, 5.8, "masked: position $t$ sees\nonly positions $\\leq t$", size=SMALL,
           ha="left", va="top")  # fmt: skip
    return c


def vit() -> Canvas:
    """The Vision Transformer's input (Dosovitskiy et al. 2021, eq. 1 and Figure 1): N patches
    of P × P pixels flattened and mapped by E, a class token in front, position embeddings
    added, L encoder blocks, and a head on the class token's output."""
    c = Canvas(7.2, 5.0)
    # the image, cut into a 4 × 4 grid of patches (the strokes of a "7")
    cell, x0, y0 = 0.34, 0.25, 0.75
    ink = {(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (2, 2), (3, 1)}
    for row in range(4):
        for col in range(4):
            kind = "linear" if (row, col) in ink else "output"
            c.box(x0 + cell * (col + 0.5), y0 + cell * (3.5 - row), "", kind, w=cell - 0.03,
                  h=cell - 0.03)  # fmt: skip
    c.text(x0 + 2 * cell, y0 - 0.12, "$N$ patches of\n$P \\times P$ pixels", size=SMALL, va="top")
    c.text(x0 + 2 * cell, y0 + 4 * cell + 0.3, "$N = \\dfrac{HW}{P^2}$")
    xs, labels = (3.3, 4.5, 6.35), ("1", "2", "N")
    y_flat, y_lin, y_tok, y_enc, y_head = 1.0, 1.8, 2.65, 3.5, 4.3
    c.arrow((x0 + 4 * cell + 0.1, y_flat), (2.75, y_flat))
    c.text(2.15, y_flat - 0.2, "flatten", size=SMALL, va="top")
    lin = c.box(4.85, y_lin, "linear projection $\\mathbf{E}$", "linear", w=3.5, h=0.38)
    for x, t in zip(xs, labels, strict=True):
        flat = c.box(x + 0.1, y_flat, f"$\\mathbf{{x}}^{t}_p$", "input", w=0.62, h=0.38)
        c.arrow(flat.top, (flat.x, lin.bottom[1]))
        c.arrow((flat.x, lin.top[1]), (flat.x, y_tok - 0.19))
    for y in (y_flat, y_tok):
        c.text(5.45, y, "$\\cdots$", size=14)
    # the tokens: the class token first, position embeddings added
    tokens = [(2.1, "0", "$\\mathbf{x}_\\mathrm{class}$")]
    tokens += [
        (x, t, f"$\\mathbf{{x}}^{t}_p \\mathbf{{E}}$") for x, t in zip(xs, labels, strict=True)
    ]
    encoder = c.box(4.3, y_enc, "Transformer encoder: $L$ pre-norm blocks (page 10)", "attention",
                    w=4.9, h=0.5, size=SMALL + 1)  # fmt: skip
    for x, position, text in tokens:
        token = c.box(x + 0.1, y_tok, text, "state", w=0.72, h=0.38, size=SMALL + 1)
        c.box(x - 0.42, y_tok, position, "norm", w=0.24, h=0.38, size=SMALL)
        c.arrow(token.top, (token.x, encoder.bottom[1]))
    c.text(0.2, y_tok + 0.02, "$\\mathbf{z}_0 =$", ha="left")
    c.text(0.2, y_tok + 0.6, "+ positions\n$\\mathbf{E}_\\mathrm{pos}$ (green)", size=SMALL,
           ha="left")  # fmt: skip
    head = c.box(2.2, y_head, "LN, linear $\\mathbf{W}$, softmax", "linear", w=2.3, h=0.38,
                 size=SMALL + 0.5)  # fmt: skip
    c.arrow((2.2, encoder.top[1]), head.bottom)
    c.text(2.3, (encoder.top[1] + head.bottom[1]) / 2, "$\\mathbf{z}^0_L$", ha="left")
    c.arrow(head.top, (2.2, 4.75))
    c.text(2.35, 4.72, "$\\hat{\\mathbf{y}}$: the class", ha="left")
    return c
