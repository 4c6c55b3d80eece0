"""Attention heatmaps and line plots written as PNG files."""

import matplotlib
import pytest
import torch

from cli_checks import succeeds
from seqlab.plotting import attention_figure, plot_attention, plot_lines

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_backend_is_non_interactive():
    assert matplotlib.get_backend().lower() == "agg"


def test_heatmap_has_labelled_axes_and_token_ticks():
    weights = torch.softmax(torch.randn(3, 4), -1)
    fig = attention_figure(weights, x_tokens=["a", "b", "c", "d"], y_tokens=["x", "y", "z"])
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Keys" and ax.get_ylabel() == "Queries"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]
    image = ax.images[0].get_array()
    assert image.shape == (3, 4)
    torch.testing.assert_close(torch.as_tensor(image.data), weights)


@pytest.mark.parametrize("shape", [(1, 1), (5, 9), (30, 2)])
def test_plot_attention_writes_a_png_atomically(tmp_path, shape):
    w = torch.rand(*shape, requires_grad=True)  # e.g. straight from a model
    path = plot_attention(w, tmp_path / "attn.png", title="layer 0, head 1")
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert [p.name for p in tmp_path.iterdir()] == ["attn.png"]


def test_plot_attention_rejects_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="Tq, Tk"):
        plot_attention(torch.rand(2, 3, 4), tmp_path / "a.png")
    with pytest.raises(ValueError, match="x_tokens"):
        plot_attention(torch.rand(2, 3), tmp_path / "a.png", x_tokens=["a", "b"])
    with pytest.raises(ValueError, match="y_tokens"):
        plot_attention(torch.rand(2, 3), tmp_path / "a.png", y_tokens=["a"])
    assert list(tmp_path.iterdir()) == []


def test_plot_lines_draws_each_series(tmp_path):
    x = torch.linspace(0, 1, 5)
    path = plot_lines(x, {"a": x, "b": x**2}, tmp_path / "sub" / "lines.png", points=(x, x))
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_dollar_signs_are_drawn_as_text(runs, tmp_path, capsys, monkeypatch):
    import matplotlib.mathtext

    def no_mathtext(*args, **kwargs):
        raise AssertionError("text was parsed as mathtext")

    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", no_mathtext)
    src = tmp_path / "in.txt"
    src.write_text("$\\frac{$\n$x_{2}$ May 9, 1998\n")
    out = tmp_path / "att"
    argv = ["translate", "--run", runs / "mt", "--input", src, "--attention-png", out]
    succeeds(capsys, argv)
    assert sorted(p.name for p in out.glob("*.png")) == ["attention-0001.png", "attention-0002.png"]
    maps = tmp_path / "maps"
    src.write_text("$x_{2}$ great $\\frac{$ film\n")
    succeeds(capsys, ["classify", "--run", runs / "cls", "--input", src, "--attention-png", maps])
    assert [p.name for p in maps.glob("*.png")] == ["attention-0001-layer0.png"]
