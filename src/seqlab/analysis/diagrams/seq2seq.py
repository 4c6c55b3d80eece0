"""Encoder–decoders drawn: the RNN encoder–decoder and one step of Bahdanau attention.

Labelled in the notation of page 6 (``docs/tutorials/06-encoder-decoder.md``, d2l.ai §10.6–10.7)
and page 7 (``07-attention.md``, d2l.ai §11.4, Bahdanau et al. 2014).
"""

from __future__ import annotations

from seqlab.analysis.diagrams.canvas import ADDITIVE, SMALL, Canvas, sub


def encoder_decoder() -> Canvas:
    """The encoder reads x_1 … x_T and its final state becomes the context c; the decoder's
    state s_t starts from it and reads [y_{t-1}; c] at every step (Sutskever et al. 2014,
    Cho et al. 2014)."""
    c = Canvas(7.2, 4.2)
    y_in, y_h, y_out = 0.75, 1.95, 3.15
    bus = y_h - 0.62  # the context fed to every decoder step
    c.frame(0.15, 0.1, 3.2, 2.45, "encoder", where="bottom center")
    c.frame(3.95, 0.1, 7.05, 2.45, "decoder", where="bottom center")
    encoder = []
    for x, t in ((0.6, "1"), (1.4, "2"), (2.75, "T")):
        box = c.box(x, y_h, "RNN", "state", w=0.6)
        c.arrow(c.box(x, y_in, f"${sub('x', t)}$", "input", w=0.6, h=0.38).top, box.bottom)
        encoder.append(box)
    c.text(2.08, y_h, "$\\cdots$", size=14)
    c.arrow(encoder[0].right, encoder[1].left)
    c.arrow(encoder[1].right, (1.88, y_h))
    c.arrow((2.28, y_h), encoder[2].left)
    context = c.box(3.58, y_h, "$\\mathbf{c}$", "context", w=0.46)
    c.arrow(encoder[2].right, context.left)
    steps = [(4.55, "1", "<bos>", "$y_1$"), (5.45, "2", "$y_1$", "$y_2$")]
    steps.append((6.6, "T'", "$y_{T'}$", "<eos>"))
    decoder = []
    for x, t, given, wanted in steps:
        s = c.box(x, y_h, f"${sub('s', t)}$", "state", w=0.6)
        token = c.box(x - 0.12, y_in, given, "input", w=0.66, h=0.38, size=SMALL + 1)
        c.arrow(token.top, s.at("bottom", -0.12), bridge=True)
        c.arrow((x + 0.12, bus), s.at("bottom", 0.12))
        out = c.box(x, y_out, wanted, "output", w=0.66, h=0.38, size=SMALL + 1)
        c.arrow(s.top, out.bottom)
        decoder.append(s)
    c.text(6.03, y_h, "$\\cdots$", size=14)
    c.arrow(context.right, decoder[0].left)  # the decoder starts from the encoder's state
    c.arrow(decoder[0].right, decoder[1].left)
    c.arrow(decoder[1].right, (5.83, y_h))
    c.arrow((6.23, y_h), decoder[2].left)
    c.dot(context.x, bus)
    c.arrow(context.bottom, (context.x, bus), (steps[-1][0] + 0.12, bus), head=False)
    for x, *_ in steps[:-1]:
        c.dot(x + 0.12, bus)
    c.text(context.x, bus - 0.12, "$\\mathbf{c}$ at\neach step", size=SMALL, va="top",
           color=ADDITIVE)  # fmt: skip
    c.text(0.25, y_out + 0.55, "$s_t = g(s_{t-1}, [y_{t-1}; \\mathbf{c}])$", ha="left")
    c.text(0.25, y_out + 0.05, "$P(y_t \\mid \\ldots) = \\mathrm{softmax}(W s_t)$", ha="left")
    c.text(4.1, y_out + 0.6, "teacher forcing: input = true $y_{t-1}$",
           size=SMALL, ha="left")  # fmt: skip
    return c


def bahdanau() -> Canvas:
    """Decoder step i of Bahdanau attention: the query s_{i-1} scores every encoder state h_j,
    a softmax over j gives α_ij, the context c_i = Σ_j α_ij h_j goes with E y_{i-1} into the
    decoder's GRU, which gives s_i (Bahdanau et al. 2014, §3.1; d2l.ai §11.4)."""
    c = Canvas(7.2, 4.6)
    y_h, y_bus, y_score, y_soft, y_sum = 0.75, 1.3, 1.85, 2.7, 3.6
    xs, labels = [0.95, 2.2, 3.75], ["1", "2", "S"]
    c.frame(0.3, 0.08, 4.6, 4.3, "attention", where="top left")
    keys = [
        c.box(x, y_h, "$" + sub("\\mathbf{h}", t) + "$", "state", w=0.62)
        for x, t in zip(xs, labels, strict=True)
    ]
    c.text(2.35, 0.27, "encoder states $\\mathbf{h}_j$: keys and values", size=SMALL)
    scores = []
    for x, key, t in zip(xs, keys, labels, strict=True):
        text = f"$a(\\mathbf{{s}}_{{i-1}}, \\mathbf{{h}}_{t})$"
        score = c.box(x, y_score, text, "attention", w=1.1, h=0.42, size=SMALL + 1)
        c.arrow(key.at("top", -0.12), score.at("bottom", -0.12), bridge=True)
        c.arrow((x + 0.12, y_bus), score.at("bottom", 0.12))
        scores.append(score)
    for y in (y_h, y_score):
        c.text(2.97, y, "$\\cdots$", size=14)
    softmax = c.box(2.3, y_soft, "$\\mathrm{softmax}_j$", "attention", w=3.6, h=0.42)
    total = c.box(2.3, y_sum, "$\\mathbf{c}_i = \\sum_j \\alpha_{ij} \\mathbf{h}_j$", "attention",
                  w=3.6, h=0.5)  # fmt: skip
    for score, t in zip(scores, labels, strict=True):
        c.arrow(score.top, (score.x, softmax.bottom[1]))
        c.arrow((score.x, softmax.top[1]), (score.x, total.bottom[1]))
        weight = "$" + sub("\\alpha", "i" + t) + "$"
        c.text(score.x + 0.08, (softmax.top[1] + total.bottom[1]) / 2, weight, ha="left")
    # the values: the same encoder states, up the right side into the weighted sum
    c.arrow(keys[-1].right, (4.42, y_h), (4.42, y_sum - 0.12), total.at("right", -0.12))
    # the decoder step: the query s_{i-1} and the GRU
    c.frame(4.85, 0.08, 7.05, 4.5, "decoder step $i$", where="bottom right")
    query = c.box(5.8, y_h, "$\\mathbf{s}_{i-1}$", "state", w=0.7)
    gru = c.box(5.8, y_soft, "GRU", "state", w=0.9, h=0.55)
    c.arrow(query.top, gru.bottom)
    c.dot(5.8, y_bus)
    c.arrow((5.8, y_bus), (xs[0] + 0.12, y_bus), head=False)
    for x in xs[1:]:
        c.dot(x + 0.12, y_bus)
    c.text(5.72, y_bus + 0.17, "query", size=SMALL, ha="right")
    c.arrow(total.at("right", 0.12), (5.6, y_sum + 0.12), gru.at("top", -0.2), bridge=True)
    c.text(5.0, y_sum + 0.32, "$\\mathbf{c}_i$", ha="left")
    c.text(6.7, 1.6, "$E y_{i-1}$")
    c.arrow((6.7, 1.8), (6.7, y_soft), gru.right)
    state = c.box(6.05, 4.05, "$\\mathbf{s}_i$", "state", w=0.6)
    c.arrow(gru.at("top", 0.25), state.bottom)
    return c
