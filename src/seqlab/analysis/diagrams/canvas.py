"""The drawing vocabulary every architecture diagram shares: boxes, operator circles, arrows.

A :class:`Canvas` is a figure whose data units are inches (one axes filling the figure, equal
aspect), so that a diagram places its parts by measure and a font size in points relates to the
room it has: at the saved 120 dpi a 7-inch diagram is 840 pixels wide, about the width of the
docs site's content column, and its 10-point labels stay readable there. Colours say what a part
is (a state, a gate, attention, a normalisation) the same way in every diagram; solid dark arrows
are the forward pass, dashed red ones a gradient, thick green ones an additive (residual) path.

Math labels are matplotlib mathtext in the page's notation (``$\\mathbf{c}_i$``), drawn with the
Computer Modern fonts that ship with matplotlib, so a diagram reads like the page's equations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch  # noqa: E402

from seqlab.atomic import atomic_open  # noqa: E402

DPI = 120
#: the labels' size in points, and the smallest any text may be
FONT = 12
SMALL = 10
#: fill colours by what a part is
COLOURS = {
    "input": "#f0f0f0",
    "state": "#d7e7f7",
    "gate": "#fbd9b5",
    "candidate": "#fff0a8",
    "attention": "#e2d7f3",
    "norm": "#d3edcf",
    "ffn": "#cfe8ee",
    "linear": "#f9dbe6",
    "output": "#ffffff",
    "context": "#c9e4c5",
}
FORWARD = "#2b2b2b"
GRADIENT = "#c0392b"
ADDITIVE = "#1e8449"
#: while drawing: labels are mathtext, never LaTeX, whatever the user's matplotlibrc says
RC = {"text.usetex": False, "mathtext.fontset": "cm", "font.family": "DejaVu Sans"}


def sub(base: str, index: str) -> str:
    """``base`` with the subscript ``index`` as a page writes it: ``x_t``, ``h_{t-1}``."""
    return f"{base}_{index}" if len(index) == 1 else f"{base}_{{{index}}}"


@dataclass(frozen=True)
class Node:
    """A drawn part's place: its centre (x, y) and size (w, h), in inches; a circle has w = h."""

    x: float
    y: float
    w: float
    h: float

    @property
    def left(self) -> tuple[float, float]:
        return (self.x - self.w / 2, self.y)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y)

    @property
    def top(self) -> tuple[float, float]:
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x, self.y - self.h / 2)

    def at(self, side: str, shift: float = 0.0) -> tuple[float, float]:
        """A point on ``side`` (left, right, top, bottom) moved ``shift`` inches along it."""
        x, y = getattr(self, side)
        return (x + shift, y) if side in ("top", "bottom") else (x, y + shift)


class Canvas:
    """A diagram being drawn: ``width`` × ``height`` inches, origin at the bottom left."""

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height
        with matplotlib.rc_context(RC):
            self.fig: Figure = plt.figure(figsize=(width, height), dpi=DPI)
            self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_aspect("equal")
        self.ax.axis("off")

    # --------------------------------------------------------------------------- the parts
    def box(
        self,
        x: float,
        y: float,
        text: str,
        kind: str = "state",
        w: float = 0.8,
        h: float = 0.42,
        size: float = FONT,
        edge: str = FORWARD,
    ) -> Node:
        """A rounded box centred at (x, y), filled by ``kind``, with ``text`` in it."""
        self.ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0,rounding_size=0.06",
                facecolor=COLOURS[kind],
                edgecolor=edge,
                linewidth=1.0,
                zorder=2,
            )
        )
        if text:
            self.text(x, y, text, size=size, zorder=3)
        return Node(x, y, w, h)

    def stack(
        self,
        x: float,
        y: float,
        text: str,
        kind: str,
        w: float,
        h: float,
        size: float = FONT,
        depth: int = 3,
    ) -> Node:
        """A box with ``depth - 1`` copies behind it, up and to the right: one per head."""
        for k in range(depth - 1, 0, -1):
            self.box(x + 0.07 * k, y + 0.07 * k, "", kind, w, h)
        return self.box(x, y, text, kind, w, h, size=size)

    def op(self, x: float, y: float, symbol: str, r: float = 0.15, size: float = FONT) -> Node:
        """An elementwise operator (``$\\odot$``, ``$+$``, ``$1-$``) in a small circle."""
        self.ax.add_patch(
            Circle((x, y), r, facecolor="white", edgecolor=FORWARD, linewidth=1.0, zorder=2)
        )
        self.text(x, y, symbol, size=size, zorder=3)
        return Node(x, y, 2 * r, 2 * r)

    def frame(
        self, x0: float, y0: float, x1: float, y1: float, label: str = "", where: str = "top left"
    ) -> None:
        """A light, dashed rectangle around a group of parts (a cell, a block), labelled in a
        corner or the middle of an edge (``where``: ``"top left"``, ``"bottom center"``, ...)."""
        self.ax.add_patch(
            FancyBboxPatch(
                (x0, y0),
                x1 - x0,
                y1 - y0,
                boxstyle="round,pad=0,rounding_size=0.1",
                facecolor="#fafafa",
                edgecolor="#8a8a8a",
                linestyle=(0, (4, 3)),
                linewidth=1.0,
                zorder=0,
            )
        )
        if label:
            vertical, horizontal = where.split()
            tx = {"left": x0 + 0.1, "center": (x0 + x1) / 2, "right": x1 - 0.1}[horizontal]
            ty = y1 - 0.1 if vertical == "top" else y0 + 0.1
            self.text(tx, ty, label, size=SMALL, ha=horizontal, va=vertical, color="#555555")

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float = FONT,
        ha: str = "center",
        va: str = "center",
        color: str = FORWARD,
        zorder: int = 4,
        **options,
    ) -> None:
        """A label; ``$…$`` in it is mathtext."""
        with matplotlib.rc_context(RC):
            self.ax.text(
                x, y, text, fontsize=size, ha=ha, va=va, color=color, zorder=zorder, **options
            )

    def arrow(
        self,
        *points: tuple[float, float],
        color: str = FORWARD,
        dashed: bool = False,
        width: float = 1.2,
        head: bool = True,
        bridge: bool = False,
    ) -> None:
        """A polyline through ``points`` with an arrowhead at the last one (``head=False``: a
        plain line); ``dashed``: a gradient's path; ``bridge``: it passes over the lines it
        crosses (a white gap on each side)."""
        style = (0, (5, 3)) if dashed else "solid"
        line = {
            "color": color,
            "linewidth": width,
            "linestyle": style,
            "zorder": 1.2 if bridge else 1,
        }
        xs, ys = zip(*points, strict=True)
        if bridge:
            self.ax.add_line(Line2D(xs, ys, color="white", linewidth=width + 6, zorder=1.1))
        if not head or len(points) > 2:  # every segment but the last, which has the head
            end = len(points) if not head else -1
            self.ax.add_line(Line2D(xs[:end], ys[:end], solid_capstyle="butt", **line))
        if head:
            self.ax.add_patch(
                FancyArrowPatch(
                    points[-2],
                    points[-1],
                    arrowstyle="-|>",
                    mutation_scale=11,
                    shrinkA=0,
                    shrinkB=0,
                    **line,
                )  # fmt: skip
            )

    def dot(self, x: float, y: float, color: str = FORWARD) -> None:
        """A junction: where a line branches."""
        self.ax.add_patch(Circle((x, y), 0.035, color=color, zorder=3))

    def legend(self, x: float, y: float, entries: Sequence[tuple[str, str, bool]]) -> None:
        """A key of line styles from (x, y) down: each entry (label, colour, dashed)."""
        for k, (label, color, dashed) in enumerate(entries):
            yy = y - 0.28 * k
            self.arrow((x, yy), (x + 0.45, yy), color=color, dashed=dashed, width=1.6)
            self.text(x + 0.55, yy, label, size=SMALL, ha="left")

    # --------------------------------------------------------------------------- the file
    def texts(self) -> list[str]:
        """Every label drawn, as written (mathtext source included)."""
        return [t.get_text() for t in self.ax.texts]

    def save(self, path: str | Path) -> Path:
        """Write the diagram as a PNG of exactly ``width`` × ``height`` inches at :data:`DPI`,
        atomically, and close it."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with matplotlib.rc_context(RC), atomic_open(path, "wb") as fh:
                self.fig.savefig(fh, format="png", dpi=DPI, facecolor="white")
        finally:
            plt.close(self.fig)
        return path
