"""Every figure reads as drawn: the caller's text (titles, labels, legend entries, tokens as tick
labels) is shown literally even when it holds ``$``, and the tick labels matplotlib makes (log
axes, colour bars) render as math instead of showing ``$\\mathdefault{10^{2}}$``."""

import math

import matplotlib.text
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from seqlab import figure_files, plotting, plotting_heatmaps
from seqlab.analysis.attention_scaling import measure, plot_scaling
from seqlab.analysis.layer_costs_report import plot_layer_costs
from seqlab.demos.vit_vs_cnn import plot_vit_vs_cnn

#: text a user may give: mathtext if it were parsed (an even number of ``$``)
USER = "$x_{2}$"
TOKENS = ["$x_{2}$", "a$b$", "\\$", "cat"]


@pytest.fixture
def drawn(monkeypatch):
    """The figures written through ``figure_files.save_figure`` by the line plots and the heatmaps
    during the test, after it drew them (``savefig`` draws the whole figure, so each text holds
    what the PNG shows)."""
    figures = []
    real = figure_files.save_figure

    def spy(fig, path, dpi=120):
        out = real(fig, path, dpi)
        figures.append(fig)
        return out

    for module in (plotting, plotting_heatmaps):  # where the figures look it up
        monkeypatch.setattr(module, "save_figure", spy)
    return figures


def rendered(fig):
    """(text, what is drawn, is it math, is it a tick label) for each visible text of ``fig``."""
    ticks = {
        id(label)
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        for label in axis.get_ticklabels(which="both")
    }
    out = []
    for text in fig.findobj(matplotlib.text.Text):
        if text.get_visible() and text.get_text():
            shown, is_math = text._preprocess_math(text.get_text())
            out.append((text.get_text(), shown, bool(is_math), id(text) in ticks))
    return out


def check_figure(fig, user_texts, log_axis=True):
    texts = rendered(fig)
    for raw, shown, is_math, _ in texts:
        if any(user in raw for user in user_texts):  # the caller's text: as written
            assert not is_math and shown == raw, raw
        elif not is_math:  # matplotlib's own: no mathtext markup left in plain text
            assert "$" not in shown and "\\mathdefault" not in shown, raw
    for user in user_texts:
        assert any(user in raw for raw, *_ in texts), f"{user!r} is not drawn"
    if log_axis:  # a log axis's labels were drawn, as math
        assert any(is_math and "\\mathdefault" in raw for raw, _, is_math, tick in texts if tick)


def records(steps=40):
    out = []
    for step in range(1, steps + 1):
        loss = 8.0 * math.exp(-step / 8) + 1.0  # perplexity from ~2000 down to ~3
        out.append({"kind": "train", "step": step, "loss": loss})
        if step % 10 == 0:
            out.append({"kind": "eval", "step": step, "val_loss": loss + 0.1})
    return out


def layer_costs():
    lengths = [64, 256, 1024, 4096]
    layers = {
        name: {
            "complexity": "O(n)",
            "memory_complexity": "O(n)",
            "time_s": [1e-5 * (n / 64) ** power for n in lengths],
            "peak_bytes": [4096 * (n / 64) ** power for n in lengths],
            "time_slope": float(power),
            "memory_slope": float(power),
            "time_slope_last": float(power),
            "memory_slope_last": float(power),
        }
        for name, power in (("conv", 1), ("attention", 2))
    }
    return {
        "lengths": lengths,
        "fit_lengths": lengths[1:],
        "width": 64,
        "batch": 1,
        "kernel_size": 3,
        "heads": 4,
        "threads": 1,
        "layers": layers,
    }


def test_log_axes_render_and_user_text_stays_literal(drawn, tmp_path):
    x = torch.tensor([2.0, 8.0, 32.0, 128.0, 1024.0])
    plotting.plot_lines(
        x, {USER: x, "b": x**2}, tmp_path / "a.png", title=USER, xlabel=USER, logx=True, logy=True
    )
    check_figure(drawn[-1], {USER})
    plotting.plot_loglog({USER: torch.tensor([500.0, 90.0, 30.0, 9.0, 2.0, 1.0])}, tmp_path / "b")
    check_figure(drawn[-1], {USER})
    plotting.plot_curves(records(), tmp_path / "curves.png")
    check_figure(drawn[-1], set())
    plot_layer_costs(layer_costs(), tmp_path / "layer_costs.png")
    check_figure(drawn[-1], set())
    plot_scaling(measure([2, 16, 128, 1024], samples=20), tmp_path)
    assert len(drawn) == 7
    for fig in drawn[-3:]:
        check_figure(fig, set(), log_axis=fig is drawn[-3])  # the variance: log y
    runs = {name: [{"test_accuracy": a} for a in (0.5, 0.8, 0.9)] for name in ("vit", "cnn")}
    plot_vit_vs_cnn([500, 5000, 55000], runs, tmp_path / "vit_vs_cnn.png")
    check_figure(drawn[-1], set(), log_axis=False)  # ticked at the sizes, as written
    assert [t.get_text() for t in drawn[-1].axes[0].get_xticklabels()] == [
        "500",
        "5,000",
        "55,000",
    ]
    assert {t.get_text() for t in drawn[-1].axes[0].get_legend().get_texts()} == {"ViT", "CNN"}


def test_heatmaps_keep_tokens_literal_and_label_their_colour_bars(drawn, tmp_path):
    weights = torch.softmax(torch.randn(4, 4) * 3, -1)
    plotting.plot_attention(weights, tmp_path / "a.png", x_tokens=TOKENS, y_tokens=TOKENS)
    plotting.plot_self_attention(torch.stack([weights, weights.T]), TOKENS, tmp_path / "s.png")
    plotting.plot_heatmap(weights * 1e6, tmp_path / "h.png", title=USER, colorbar_label=USER)
    plotting.plot_confusion([[3, 1], [0, 4]], TOKENS[:2], tmp_path / "c.png", title=USER)
    plotting.plot_series({USER: (torch.arange(5), torch.rand(5))}, tmp_path / "p.png")
    plotting.plot_metric_over_time({USER: ([0.0, 1.0], [2.0, 3.0])}, tmp_path / "m.png", USER)
    for fig, user in zip(
        drawn, [TOKENS, TOKENS, [USER], [USER, *TOKENS[:2]], [USER], [USER]], strict=True
    ):
        check_figure(fig, set(user), log_axis=False)
    for fig in drawn[:2]:
        bar = fig.axes[-1]
        assert bar.get_ylabel() == "attention weight"
        assert any(label.get_text() for label in bar.get_yticklabels())


def test_reference_lines_are_drawn_and_named_in_the_legend(drawn, tmp_path):
    x = torch.arange(10.0)
    plotting.plot_lines(x, {"a": x}, tmp_path / "l.png", hlines={"floor 0.2": 0.2}, ymin=0.0)
    plotting.plot_series(
        {"a": (x, x)}, tmp_path / "s.png", hlines={"unigram 2.82": 2.82}, vlines={"split": 6.5}
    )
    for fig, expected in zip(drawn, [{"floor 0.2": 0.2}, {"unigram 2.82": 2.82}], strict=True):
        ax = fig.axes[0]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        for name, y in expected.items():
            assert name in legend
            (line,) = [ln for ln in ax.lines if ln.get_label() == name]
            assert list(line.get_ydata()) == [y, y]
    assert drawn[0].axes[0].get_ylim()[0] == 0.0
    (split,) = [ln for ln in drawn[1].axes[0].lines if ln.get_label() == "split"]
    assert list(split.get_xdata()) == [6.5, 6.5]


def test_layer_costs_are_drawn_in_the_tables_units(drawn, tmp_path):
    results = layer_costs()
    plot_layer_costs(results, tmp_path / "layer_costs.png")
    ax_t, ax_m = drawn[0].axes
    assert ax_t.get_ylabel().endswith("(ms)") and ax_m.get_ylabel().endswith("(MiB)")
    conv = results["layers"]["conv"]
    assert list(ax_t.lines[0].get_ydata()) == pytest.approx([t * 1e3 for t in conv["time_s"]])
    assert list(ax_m.lines[0].get_ydata()) == pytest.approx([b / 2**20 for b in conv["peak_bytes"]])
    assert [t.get_text() for t in ax_t.get_xticklabels()] == ["64", "256", "1024", "4096"]
    # the right panel's y label stays clear of the left panel
    renderer = FigureCanvasAgg(drawn[0]).get_renderer()
    left = ax_t.get_tightbbox(renderer)
    assert ax_m.yaxis.label.get_window_extent(renderer).x0 > left.x1


def test_bits_are_drawn_as_two_colours_named_0_and_1(drawn, tmp_path):
    from seqlab.analysis.positional import binary_table

    plotting.plot_heatmap(binary_table(8, 3), tmp_path / "b.png", levels=["0", "1"])
    ax, bar = drawn[0].axes
    assert [t.get_text() for t in bar.get_yticklabels()] == ["0", "1"]
    assert len(set(map(tuple, ax.images[0].cmap.colors))) == 2  # one colour per bit value
    for locs in (ax.get_xticks(), ax.get_yticks()):  # whole rows and columns only
        assert all(float(v).is_integer() for v in locs)


def test_unigram_loss_and_noise_floor_are_computed():
    from seqlab.demos.forecasting import noise_rmse
    from seqlab.demos.lm_comparisons import unigram_loss

    # add-one counts over a vocabulary of 3: [2 + 1, 1 + 1, 0 + 1] / 6
    loss = unigram_loss(torch.tensor([0, 0, 1]), torch.tensor([0, 1]), 3)
    assert loss == pytest.approx(-(math.log(3 / 6) + math.log(2 / 6)) / 2)
    t = torch.arange(1, 101, dtype=torch.float32)
    noise = torch.tensor([0.3, -0.3] * 50)
    assert noise_rmse(torch.sin(0.01 * t) + noise, range(40, 100)) == pytest.approx(0.3, abs=1e-5)


@pytest.mark.parametrize(
    ("run", "which"),
    [
        ("mt", "decoder layer 1 (layers 0–1), mean of its 2 heads — cross-attention"),
        ("bahdanau", "the decoder's additive attention over the source"),
    ],
)
def test_translation_heatmaps_say_which_attention(tiny_runs, drawn, tmp_path, run, which):
    from seqlab import load

    model = load(tiny_runs[run])
    out = model.predict(["9 may 1998", "1.3.1969"], attention_png=tmp_path, numbers=[3, 12])
    assert [p.name for p in out.figures] == ["attention-0003.png", "attention-0012.png"]
    assert [plotting.attention_png_name(n) for n in (3, 12)] == [p.name for p in out.figures]
    ax, bar = drawn[-2].axes  # (training a tiny run on first use draws its curves first)
    assert ax.get_title() == f"9 may 1998\n{which}"
    assert bar.get_ylabel() == "attention weight"


def test_a_log_axis_under_two_decades_is_ticked_in_plain_numbers(drawn, tmp_path):
    """Less than two decades on a log y axis (the KV-cache timing of tutorial 10): ticks at
    1, 2 and 5 times the powers of ten, written as numbers, and no minor labels (matplotlib's
    own would label every minor tick ``6×10^2`` in mathtext)."""
    x = torch.tensor([16.0, 32.0, 64.0, 128.0, 256.0])
    plotting.plot_lines(x, {"a": x * 1.5, "b": x * 2.8}, tmp_path / "a.png", logx=True, logy=True)
    ax = drawn[-1].axes[0]
    lo, hi = ax.get_ylim()
    shown = {
        v: t.get_text()
        for v, t in zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
        if lo <= v <= hi
    }
    assert set(shown) == {50.0, 100.0, 200.0, 500.0}, shown
    assert all(float(text.replace(",", "")) == v for v, text in shown.items()), shown
    assert not [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()]
