"""Recurrent networks drawn: the unrolled RNN with its gradient path, the GRU and LSTM cells, and
stacked bidirectional layers.

Each function returns a :class:`~seqlab.analysis.diagrams.canvas.Canvas` labelled in the notation
of its tutorial page: page 4 (``docs/tutorials/04-rnn-bptt.md``, d2l.ai §9.4 and §9.7) for the
unrolled RNN, page 5 (``05-gated-cells.md``, d2l.ai §10.1 and §10.2) for the cells, page 5b
(``05b-deep-bidirectional-rnns.md``, d2l.ai §10.3 and §10.4) for the deep bidirectional RNN.
"""

from __future__ import annotations

from typing import Any

from seqlab.analysis.diagrams.canvas import ADDITIVE, FORWARD, GRADIENT, SMALL, Canvas, sub


def rnn_unrolled() -> Canvas:
    """The RNN of page 4 unrolled over T steps, with the backward path of ∂L_T/∂h_k.

    Forward: h_t = tanh(W_hh h_{t-1} + W_hx x_t + b_h), o_t = W_qh h_t + b_q; backward: the loss
    on the last step reaches h_k through one Jacobian ∂h_j/∂h_{j-1} per step (d2l.ai §9.7).
    """
    c = Canvas(7.2, 4.3)
    y_x, y_h, y_o, y_l = 0.45, 1.55, 2.6, 3.65
    columns = [(1.2, "1"), (2.95, "t-1"), (4.15, "t"), (5.9, "T")]
    c.text(0.3, y_h, "$h_0$")
    states = {}
    for x, t in columns:
        xt = c.box(x, y_x, f"${sub('x', t)}$", "input", w=0.62, h=0.4)
        states[t] = h = c.box(x, y_h, f"${sub('h', t)}$", "state", w=0.62, h=0.42)
        o = c.box(x, y_o, f"${sub('o', t)}$", "linear", w=0.62, h=0.4)
        c.arrow(xt.top, h.bottom)
        c.arrow(h.top, o.bottom)
    # forward along the chain (upper) and the gradient back along it (lower, dashed)
    up, down = 0.08, -0.1
    chain = [(0.5, None), (1.2, "1"), (2.08, None), (2.95, "t-1"), (4.15, "t"), (5.03, None)]
    chain.append((5.9, "T"))
    for x, _ in chain[2::3]:  # the steps not drawn
        c.text(x, y_h, "$\\cdots$", size=14)
    for k, ((xa, a), (xb, b)) in enumerate(zip(chain, chain[1:], strict=False)):
        start = states[a].right[0] if a else xa + 0.22
        stop = states[b].left[0] if b else xb - 0.22
        c.arrow((start, y_h + up), (stop, y_h + up))
        if k:
            c.arrow((stop, y_h + down), (start, y_h + down), color=GRADIENT, dashed=True)
    c.text(3.55, y_h + 0.3, "$W_{hh}$")
    c.text(3.55, y_h - 0.5, "$\\dfrac{\\partial h_t}{\\partial h_{t-1}}$", color=GRADIENT)
    c.text(4.27, (y_x + y_h) / 2, "$W_{xh}$", ha="left")
    c.text(4.27, (y_h + y_o) / 2, "$W_{hq}$", ha="left")
    # the loss on the last step, and its gradient down to h_T
    loss = c.box(5.9, y_l, "$L_T$", "output", w=0.62, h=0.4)
    top = states["T"].x
    c.arrow((top, y_o + 0.2), loss.bottom)
    side = top + 0.45
    c.arrow(
        (side, y_l), (side, y_h + 0.35), (top + 0.16, y_h + 0.35), (top + 0.16, y_h + 0.21),
        color=GRADIENT, dashed=True,
    )  # fmt: skip
    c.arrow(loss.right, (side, y_l), color=GRADIENT, dashed=True, head=False)
    c.text(side + 0.08, (y_o + y_h) / 2 + 0.1, "$\\dfrac{\\partial L_T}{\\partial h_T}$",
           color=GRADIENT, ha="left")  # fmt: skip
    c.legend(0.3, 4.0, [("forward", FORWARD, False), ("backward (BPTT)", GRADIENT, True)])
    c.text(
        2.55, 3.8,
        "$\\dfrac{\\partial L_T}{\\partial h_k} = \\dfrac{\\partial L_T}{\\partial h_T}\\,"
        "\\prod_{j=k+1}^{T} \\dfrac{\\partial h_j}{\\partial h_{j-1}}$",
        color=GRADIENT, ha="left",
    )  # fmt: skip
    return c


def _additive_path(
    c: Canvas, y: float, names: tuple[str, str, str], xs: tuple[float, float, float], label_x: float
) -> tuple[Any, Any]:
    """The state line of a gated cell, drawn in the additive path's colour: ``old`` in, through
    ``gate ⊙ old`` and ``+``, ``new`` out; ``names`` = (old, new, gate) in TeX, ``xs`` = the ⊙,
    the + and the line's end. Returns the two operator circles."""
    old, new, gate = names
    c.text(0.4, y, f"${old}$")
    keep, add = c.op(xs[0], y, "$\\odot$"), c.op(xs[1], y, "$+$")
    c.arrow((0.75, y), keep.left, color=ADDITIVE, width=2.4, head=False)
    c.arrow(keep.right, add.left, color=ADDITIVE, width=2.4)
    c.arrow(add.right, (xs[2], y), color=ADDITIVE, width=2.4)
    c.text(xs[2] + 0.26, y, f"${new}$")
    c.text(label_x, y + 0.32, f"additive path: ${gate} \\odot {old}$", color=ADDITIVE)
    return keep, add


def gru() -> Canvas:
    """The GRU cell of page 5 in the reset-before form (Cho et al. 2014; d2l.ai §10.2):
    r_t and z_t from x_t and h_{t-1}, the candidate from x_t and r_t ⊙ h_{t-1}, and
    h_t = z_t ⊙ h_{t-1} + (1 - z_t) ⊙ h̃_t, whose first term is the additive path."""
    c = Canvas(7.0, 4.3)
    y_top, y_op, y_gate, y_h, y_x = 3.5, 2.72, 1.85, 1.2, 0.85
    c.frame(0.85, 0.6, 6.0, 4.15, "GRU cell", where="bottom right")
    # the state line: h_{t-1} to h_t, through z_t ⊙ and +, the additive path
    keep, add = _additive_path(c, y_top, ("h_{t-1}", "h_t", "z_t"), (3.0, 5.3, 6.4), 4.15)
    # the gates and the candidate, fed from below
    r = c.box(1.9, y_gate, "reset\n$\\sigma$", "gate", w=0.9, h=0.6, size=SMALL + 0.5)
    z = c.box(3.0, y_gate, "update\n$\\sigma$", "gate", w=0.9, h=0.6, size=SMALL + 0.5)
    cand = c.box(4.2, y_gate, "candidate\ntanh", "candidate", w=0.9, h=0.6, size=SMALL + 0.5)
    c.dot(1.2, y_top)
    c.arrow((1.2, y_top), (1.2, y_h), (z.x + 0.15, y_h), head=False)
    for gate in (r, z):
        c.dot(gate.x + 0.15, y_h) if gate is r else None
        c.arrow((gate.x + 0.15, y_h), gate.at("bottom", 0.15))
    c.text(1.45, 0.3, "$x_t$")
    c.arrow((1.45, 0.5), (1.45, y_x), (cand.x - 0.15, y_x), head=False)
    for box in (r, z, cand):
        if box is not cand:
            c.dot(box.x - 0.15, y_x)
        c.arrow((box.x - 0.15, y_x), box.at("bottom", -0.15), bridge=True)
    # r_t ⊙ h_{t-1} into the candidate
    reset = c.op(1.9, y_op, "$\\odot$")
    c.dot(1.9, y_top)
    c.arrow((1.9, y_top), reset.top)
    c.arrow(r.top, reset.bottom)
    c.text(1.78, (y_gate + y_op) / 2 + 0.05, "$r_t$", ha="right")
    c.arrow(reset.right, (cand.x - 0.2, y_op), cand.at("top", -0.2), bridge=True)
    # z_t: keeps h_{t-1}, and 1 - z_t weighs the candidate
    c.arrow(z.top, keep.bottom)
    c.text(2.88, 2.35, "$z_t$", ha="right")
    c.dot(3.0, 3.1)
    one_minus = c.op(4.75, y_op, "$1-$", size=SMALL)
    c.arrow((3.0, 3.1), (4.75, 3.1), one_minus.top)
    mix = c.op(5.3, y_op, "$\\odot$")
    c.arrow(one_minus.right, mix.left)
    c.arrow(cand.right, (5.3, y_gate), mix.bottom)
    c.text(5.0, y_gate + 0.17, "$\\tilde h_t$")
    c.arrow(mix.top, add.bottom)
    return c


def lstm() -> Canvas:
    """The LSTM cell of page 5 (Hochreiter & Schmidhuber 1997 with the forget gate of Gers et al.
    2000; d2l.ai §10.1): c_t = f_t ⊙ c_{t-1} + i_t ⊙ tanh(…), h_t = o_t ⊙ tanh(c_t); the memory
    cell's line is the additive path."""
    c = Canvas(7.0, 4.3)
    y_top, y_op, y_gate, y_h, y_x = 3.5, 2.72, 1.85, 1.2, 0.85
    c.frame(0.85, 0.6, 6.15, 4.15, "LSTM cell", where="bottom right")
    forget, add = _additive_path(c, y_top, ("c_{t-1}", "c_t", "f_t"), (1.6, 3.6, 6.45), 2.6)
    names = [("forget\n$\\sigma$", "gate"), ("input\n$\\sigma$", "gate")]
    names += [("candidate\ntanh", "candidate"), ("output\n$\\sigma$", "gate")]
    boxes = [
        c.box(1.6 + 1.0 * k, y_gate, text, kind, w=0.9, h=0.6, size=SMALL + 0.5)
        for k, (text, kind) in enumerate(names)
    ]
    f, i, cand, o = boxes
    # h_{t-1} from the left and x_t from below feed every gate
    c.text(0.4, y_h, "$h_{t-1}$")
    c.arrow((0.75, y_h), (o.x + 0.15, y_h), head=False)
    c.text(1.25, 0.3, "$x_t$")
    c.arrow((1.25, 0.5), (1.25, y_x), (o.x - 0.15, y_x), head=False)
    for box in boxes:
        if box is not o:
            c.dot(box.x + 0.15, y_h)
            c.dot(box.x - 0.15, y_x)
        c.arrow((box.x + 0.15, y_h), box.at("bottom", 0.15))
        c.arrow((box.x - 0.15, y_x), box.at("bottom", -0.15), bridge=True)
    # f_t keeps c_{t-1}; i_t writes the candidate
    c.arrow(f.top, forget.bottom)
    c.text(1.48, 2.4, "$f_t$", ha="right")
    write = c.op(3.6, y_op, "$\\odot$")
    c.arrow(i.top, (i.x, y_op), write.left)
    c.text(2.48, 2.4, "$i_t$", ha="right")
    c.arrow(cand.top, write.bottom)
    c.arrow(write.top, add.bottom)
    # h_t = o_t ⊙ tanh(c_t)
    c.dot(5.55, y_top)
    squash = c.box(5.55, y_op, "tanh", "candidate", w=0.6, h=0.34, size=SMALL + 0.5)
    c.arrow((5.55, y_top), squash.top)
    read = c.op(5.55, y_gate, "$\\odot$")
    c.arrow(squash.bottom, read.top)
    c.arrow(o.right, read.left)
    c.text(5.2, y_gate + 0.2, "$o_t$")
    c.arrow(read.bottom, (5.55, 1.0), (6.45, 1.0))
    c.text(6.7, 1.0, "$h_t$")
    return c


def deep_bidirectional() -> Canvas:
    """Two stacked bidirectional layers of page 5b unrolled over three steps (d2l.ai §10.3 and
    §10.4; Schuster & Paliwal 1997, Graves et al. 2013).

    In each layer a forward chain (left to right) and a backward chain (right to left) read the
    same input at every step; their states side by side, H_t^{(l)} = [→H_t^{(l)}; ←H_t^{(l)}], are
    the layer's output and feed both directions of the layer above at the same step, from
    H_t^{(0)} = X_t below to the outputs O_t on top.
    """
    c = Canvas(7.2, 6.0)
    h, w, shift, side = 0.4, 0.9, 0.3, 0.35  # state boxes; directions offset; input's way up
    y_x, y_o = 0.35, 5.17
    columns = [(1.5, "t-1"), (3.4, "t"), (5.3, "t+1")]
    xs, ts = [x for x, _ in columns], [t for _, t in columns]
    below = {t: c.box(x, y_x, f"${sub('X', t)}$", "input", w=0.62, h=0.36) for x, t in columns}
    for layer, y0 in ((1, 0.68), (2, 2.84)):
        y_f, y_b, y_c = y0 + 0.5, y0 + 1.1, y0 + 1.7
        c.frame(0.15, y0, 7.05, y0 + 1.98, f"layer {layer}", where="top left")
        fwd, bwd, out = {}, {}, {}
        for x, t in columns:
            arrow, back, index = "\\overrightarrow{H}", "\\overleftarrow{H}", f"^{{({layer})}}"
            fwd[t] = f = c.box(x - shift, y_f, f"${sub(arrow, t)}{index}$", w=w, h=h)
            bwd[t] = b = c.box(x + shift, y_b, f"${sub(back, t)}{index}$", w=w, h=h)
            out[t] = o = c.box(x, y_c, f"${sub('H', t)}{index}$", "input", w=0.8, h=0.36)
            # the step's input feeds both directions ...
            fork = f.bottom[1] - 0.2
            c.arrow(below[t].top, (x, fork), head=False)
            c.dot(x, fork)
            c.arrow((x, fork), (f.x, fork), f.bottom)
            c.arrow((x, fork), (x + side, fork), (x + side, b.bottom[1]), bridge=True)
            # ... and their two states, side by side, are the layer's output at that step
            c.arrow(f.top, (f.x, o.bottom[1]), bridge=True)
            c.arrow(b.top, (b.x, o.bottom[1]))
        # the forward chain runs left to right, the backward one right to left
        c.text(0.45, y_f, "$\\cdots$", size=14)
        c.arrow((0.62, y_f), fwd[ts[0]].left)
        c.text(0.65, y_b, "$\\cdots$", size=14)
        c.arrow(bwd[ts[0]].left, (0.85, y_b))
        for a, b in zip(ts, ts[1:], strict=False):
            c.arrow(fwd[a].right, fwd[b].left)
            c.arrow(bwd[b].left, bwd[a].right)
        c.arrow(fwd[ts[-1]].right, (xs[-1] + 0.55, y_f))
        c.text(xs[-1] + 0.72, y_f, "$\\cdots$", size=14)
        c.arrow((xs[-1] + 1.28, y_b), bwd[ts[-1]].right)
        c.text(xs[-1] + 1.45, y_b, "$\\cdots$", size=14)
        below = out
    for x, t in columns:
        o = c.box(x, y_o, f"${sub('O', t)}$", "linear", w=0.62, h=0.36)
        c.arrow(below[t].top, o.bottom)
    c.text(
        3.6, 5.7,
        "$H_t = [\\overrightarrow{H}_t ;\\ \\overleftarrow{H}_t]$ at every step; layer $l$ reads "
        "$H_t^{(l-1)}$, and $H_t^{(0)} = X_t$",
    )  # fmt: skip
    return c
