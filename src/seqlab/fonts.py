"""Fonts for the text a user gives a figure: Chinese, Japanese and Korean glyphs by fallback.

Matplotlib draws text in one font family, DejaVu Sans unless a matplotlibrc says otherwise, and
DejaVu Sans has no CJK glyphs: Chinese tokens in an attention heatmap came out as empty boxes.
Since matplotlib 3.6 a text may name a list of families, each glyph then coming from the first
family that has it. :func:`use_cjk_fonts` is the one place seqlab does that: every text of a
figure that holds CJK characters keeps its own family first (so its Latin letters, digits and
SentencePiece's "▁" look as before) and gets the installed CJK families of :data:`CJK_FAMILIES`
after it; texts without CJK characters are left as they are. Where no installed font has some of
those characters it warns once per figure (:class:`MissingGlyphWarning`), naming them and what
to install (:data:`INSTALL_HINT`). :func:`seqlab.plotting.save_figure` applies it to every figure
seqlab writes, and :func:`seqlab.plotting.attention_figure` to the figure it returns.
"""

from __future__ import annotations

import functools
import re
import warnings
import weakref
from collections.abc import Iterable, Sequence

import matplotlib.text
from matplotlib import font_manager
from matplotlib.figure import Figure

__all__ = [
    "CJK_FAMILIES",
    "INSTALL_HINT",
    "MissingGlyphWarning",
    "cjk_characters",
    "glyph_coverage",
    "installed_cjk_families",
    "use_cjk_fonts",
]

#: font families with CJK glyphs, most wanted first: Linux (WenQuanYi: Debian's
#: fonts-wqy-microhei; Noto/Source Han: fonts-noto-cjk), Windows, macOS
CJK_FAMILIES = (
    "WenQuanYi Micro Hei",
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans CJK TC",
    "Noto Sans CJK KR",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "AR PL UMing CN",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
    "Heiti SC",
    "Hiragino Sans GB",
    "Arial Unicode MS",
)
#: what to do when no font has the glyphs (matplotlib reads its list of fonts from a cache)
INSTALL_HINT = (
    "apt-get install fonts-wqy-microhei (Debian/Ubuntu) or fonts-noto-cjk, then delete "
    "matplotlib's font cache (~/.cache/matplotlib)"
)
#: characters of the CJK scripts: radicals, CJK symbols and punctuation, kana, bopomofo, hangul,
#: enclosed and compatibility forms, the unified ideographs (and extension A, B–H), full-width
#: forms
CJK = re.compile(
    "[\u2e80-\u2fdf\u2ff0-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f"
    "\u3190-\u31ff\u3200-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003134f]"
)
#: per figure, the characters already warned about (one warning, however often it is checked)
_WARNED: weakref.WeakKeyDictionary[Figure, set[str]] = weakref.WeakKeyDictionary()


class MissingGlyphWarning(UserWarning):
    """No installed font has the glyphs of some CJK characters of a figure: they are drawn as
    boxes. The message names them and :data:`INSTALL_HINT`."""


def cjk_characters(text: str) -> list[str]:
    """The distinct CJK characters of ``text`` (:data:`CJK`), in order of first appearance."""
    return list(dict.fromkeys(CJK.findall(text)))


@functools.cache
def installed_cjk_families() -> tuple[str, ...]:
    """The families of :data:`CJK_FAMILIES` that matplotlib's font list holds, in that order.

    Cached: the font list is read once per process (a font installed later needs a new process,
    and matplotlib's font cache deleted; ``installed_cjk_families.cache_clear()`` re-reads it).
    """
    names = {entry.name for entry in font_manager.fontManager.ttflist}
    return tuple(family for family in CJK_FAMILIES if family in names)


@functools.cache
def _charmap(path: str) -> frozenset[int]:
    """The code points one font has glyphs for; ``path`` as ``findfont`` returns it (from
    matplotlib 3.11 a ``FontPath``, which also names the face of a collection, .ttc)."""
    return frozenset(font_manager.get_font(path).get_charmap())


def glyph_coverage(prop: font_manager.FontProperties) -> frozenset[int]:
    """The code points that some family of ``prop`` (each as matplotlib resolves it, generic
    names such as ``sans-serif`` too) has a glyph for; families not installed add nothing."""
    covered: set[int] = set()
    for family in prop.get_family():
        one = prop.copy()
        one.set_family(family)
        try:
            path = font_manager.fontManager.findfont(one, fallback_to_default=False)
        except ValueError:
            continue
        covered |= _charmap(path)
    return frozenset(covered)


def _with_fallbacks(families: Sequence[str], fallbacks: Iterable[str]) -> list[str]:
    return [*families, *(f for f in fallbacks if f not in families)]


def use_cjk_fonts(fig: Figure) -> list[str]:
    """Give every text of ``fig`` holding CJK characters the installed CJK families after its
    own (:func:`installed_cjk_families`), so that matplotlib draws each glyph in the first
    family that has it; warn (:class:`MissingGlyphWarning`, once per figure) about the CJK
    characters that no font has, and return them.

    Tick labels are made first (a formatter's labels are otherwise written only while drawing),
    so call it when the figure is complete, before it is drawn.
    """
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            axis.get_majorticklabels()
            axis.get_minorticklabels()
    fallbacks = installed_cjk_families()
    missing: dict[str, None] = {}
    for text in fig.findobj(matplotlib.text.Text):
        characters = cjk_characters(text.get_text())
        if not characters:
            continue
        text.set_fontfamily(_with_fallbacks(text.get_fontfamily(), fallbacks))
        covered = glyph_coverage(text.get_fontproperties())
        missing.update((c, None) for c in characters if ord(c) not in covered)
    warned = _WARNED.setdefault(fig, set())
    new = [c for c in missing if c not in warned]
    if new:
        warned.update(new)
        shown = ", ".join(f"'{c}'" for c in new[:12]) + (", …" if len(new) > 12 else "")
        warnings.warn(
            MissingGlyphWarning(
                f"no installed font has the glyphs for {shown} ({len(new)} CJK character"
                f"{'s' if len(new) > 1 else ''}, drawn as boxes); install one: {INSTALL_HINT}"
            ),
            stacklevel=2,
        )
    return list(missing)
