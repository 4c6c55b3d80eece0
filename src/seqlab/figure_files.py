"""A figure written as a PNG file (:func:`save_figure`), as every figure of seqlab is written.

Uses matplotlib's non-interactive Agg backend; every file is written atomically (a temporary file
in the same folder, then ``os.replace``), so a reader never sees a half-written image. The
caller's text is drawn as written, matplotlib's own tick labels as math
(:func:`literal_user_text`); Chinese, Japanese and Korean text is drawn in an installed CJK font
(:func:`seqlab.fonts.use_cjk_fonts`).

The figures: line plots in :mod:`seqlab.plotting`, heatmaps in :mod:`seqlab.plotting_heatmaps`
(both importable from :mod:`seqlab.plotting`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
from matplotlib import category, ticker  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from seqlab.atomic import atomic_open  # noqa: E402
from seqlab.fonts import use_cjk_fonts  # noqa: E402

#: while drawing: no LaTeX runs whatever the user's matplotlibrc says, and the tick labels
#: matplotlib makes while drawing are mathtext (a log axis's ``$\mathdefault{10^{2}}$``)
DRAWING = {"text.usetex": False, "text.parse_math": True}
#: formatters whose tick labels are the caller's own strings (tokens, class names), not numbers
USER_TICK_LABELS = (
    ticker.FixedFormatter,
    ticker.FuncFormatter,
    ticker.StrMethodFormatter,
    ticker.FormatStrFormatter,
    category.StrCategoryFormatter,
)


def literal_user_text(fig: Figure) -> None:
    """Draw every text of ``fig`` as written except what matplotlib's number formatters make.

    Titles, axis labels, legend entries, annotations and tick labels given as strings (tokens
    holding ``$``: ``$x_{2}$``, ``$\\frac{$``) are not mathtext; the tick labels and offset text
    of a number formatter (log axes ``10^{2}``, colour bars, ``×10^6``) are, so they render
    instead of showing ``$\\mathdefault{…}$`` (matplotlib decides per text:
    ``Text.get_parse_math``). Tick labels shown later are made now, so that each gets its axis's
    setting (a new one would take :data:`DRAWING`'s).
    """
    for text in fig.findobj(matplotlib.text.Text):
        text.set_usetex(False)
        text.set_parse_math(False)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            made = not isinstance(axis.get_major_formatter(), USER_TICK_LABELS)
            axis.offsetText.set_parse_math(made)
            axis.get_major_ticks(len(axis.get_majorticklocs()))
            axis.get_minor_ticks(len(axis.get_minorticklocs()))
            for ticks, formatter in (
                (axis.majorTicks, axis.get_major_formatter()),
                (axis.minorTicks, axis.get_minor_formatter()),
            ):
                made = not isinstance(formatter, USER_TICK_LABELS)
                for tick in ticks:
                    tick.label1.set_parse_math(made)
                    tick.label2.set_parse_math(made)


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` as a PNG at ``path`` atomically and close it; user text is drawn as
    written, matplotlib's own tick labels as math (:func:`literal_user_text`), CJK characters in
    an installed CJK font (:func:`~seqlab.fonts.use_cjk_fonts`: else a MissingGlyphWarning)."""
    path = Path(path)
    try:
        literal_user_text(fig)
        use_cjk_fonts(fig)
        with matplotlib.rc_context(DRAWING), atomic_open(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path
