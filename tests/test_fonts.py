"""Chinese tokens in figures are drawn in a CJK font (seqlab.fonts), never as boxes; a machine
without one gets one MissingGlyphWarning saying what to install; Latin text keeps its font."""

import warnings

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.text
import numpy as np
import pytest
import torch
from matplotlib import font_manager

import seqlab.fonts
import seqlab.plotting_heatmaps
from seqlab.fonts import MissingGlyphWarning, cjk_characters, installed_cjk_families
from seqlab.plotting import attention_figure, plot_attention

SOURCE = ["▁我", "爱", "机", "器", "学", "习", "。"]
TARGET = ["▁I", "▁love", "▁machine", "▁learning", "."]
HAN = ["我", "爱", "机", "器", "学", "习", "。"]
WEIGHTS = torch.softmax(torch.arange(35.0).reshape(5, 7).sin(), -1)


def drawn(fig) -> list[warnings.WarningMessage]:
    """The warnings of drawing ``fig`` on its Agg canvas (where a missing glyph is noticed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.canvas.draw()
    return caught


def glyph_warnings(caught) -> list[str]:
    return [
        str(w.message)
        for w in caught
        if "missing from font" in str(w.message) or issubclass(w.category, MissingGlyphWarning)
    ]


def test_cjk_characters_are_found_in_order_once():
    assert cjk_characters("▁我爱 AI，我。") == ["我", "爱", "，", "。"]
    assert cjk_characters("▁I love <eos> café") == []


def test_chinese_tokens_render_with_their_glyphs():
    if not installed_cjk_families():
        pytest.skip(
            "no CJK font installed: apt-get install fonts-wqy-microhei (Debian/Ubuntu), "
            "then delete ~/.cache/matplotlib"
        )
    fig = attention_figure(WEIGHTS, SOURCE, TARGET, title="我爱机器学习。")
    try:
        assert glyph_warnings(drawn(fig)) == []
        labels = [*fig.axes[0].get_xticklabels(), fig.axes[0].title]
        for text in labels:  # the font files matplotlib draws them from hold every glyph
            files = font_manager.fontManager._find_fonts_by_props(text.get_fontproperties())
            glyphs = set().union(*(font_manager.get_font(f).get_charmap() for f in files))
            assert {ord(c) for c in text.get_text()} <= glyphs, text.get_text()
    finally:
        plt.close(fig)


def test_without_a_cjk_font_one_warning_names_the_characters_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(seqlab.fonts, "installed_cjk_families", lambda: ())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_attention(WEIGHTS, tmp_path / "a.png", SOURCE, TARGET, title="我爱机器学习。")
    ours = [w for w in caught if issubclass(w.category, MissingGlyphWarning)]
    assert len(ours) == 1  # once, though the figure is checked when made and when saved
    message = str(ours[0].message)
    assert all(f"'{c}'" in message for c in HAN)
    assert "apt-get install fonts-wqy-microhei" in message and "~/.cache/matplotlib" in message
    assert issubclass(MissingGlyphWarning, UserWarning)


def test_latin_figures_keep_their_font(monkeypatch):
    tokens = ["▁I", "▁love", "▁it", "."]
    fig = attention_figure(WEIGHTS[:4, :4], tokens, tokens, title="Attention weights")
    monkeypatch.setattr(seqlab.plotting_heatmaps, "use_cjk_fonts", lambda fig: [])
    plain = attention_figure(WEIGHTS[:4, :4], tokens, tokens, title="Attention weights")
    try:
        for text in fig.findobj(matplotlib.text.Text):
            assert text.get_fontfamily() == list(matplotlib.rcParams["font.family"])
        label = fig.axes[0].get_yticklabels()[0]
        font = font_manager.get_font(font_manager.findfont(label.get_fontproperties()))
        assert font.family_name == "DejaVu Sans"
        assert glyph_warnings(drawn(fig)) == []  # "▁" is in DejaVu Sans
        drawn(plain)
        np.testing.assert_array_equal(fig.canvas.buffer_rgba(), plain.canvas.buffer_rgba())
    finally:
        plt.close(fig)
        plt.close(plain)


def test_cjk_texts_keep_dejavu_sans_first():
    fig = attention_figure(WEIGHTS, SOURCE, TARGET)
    try:
        label = fig.axes[0].get_xticklabels()[0]  # "▁我"
        families = label.get_fontfamily()
        assert families[0] == matplotlib.rcParams["font.family"][0]
        assert families[1:] == list(installed_cjk_families())
        first = label.get_fontproperties().copy()
        first.set_family(families[0])
        assert font_manager.get_font(font_manager.findfont(first)).family_name == "DejaVu Sans"
        assert 0x2581 in font_manager.get_font(font_manager.findfont(first)).get_charmap()  # ▁
    finally:
        plt.close(fig)
