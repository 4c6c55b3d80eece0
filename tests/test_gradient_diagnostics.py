"""Gradient diagnostics: the plain RNN's gradient vanishes geometrically, gated cells' much less."""

import json
import math

import pytest
import torch

from conftest import run_offline
from seqlab.analysis.gradients import (
    measure_gradient_norms,
    plot_gradient_norms,
    run_gradient_diagnosis,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def default_norms():
    """The demo's defaults: T = 50, H = 64, forget/update-gate bias 1."""
    return {cell: measure_gradient_norms(cell) for cell in ("rnn", "gru", "lstm", "peephole_lstm")}


def ratio(norms):
    """‖∂L_T/∂h_1‖ / ‖∂L_T/∂h_T‖."""
    return norms[0] / norms[-1]


def test_defaults_show_rnn_vanishing_against_gated_cells(default_norms):
    assert all(len(v) == 50 for v in default_norms.values())
    assert all(math.isfinite(x) and x > 0 for v in default_norms.values() for x in v)
    assert ratio(default_norms["rnn"]) < 1e-10
    for gated in ("gru", "lstm", "peephole_lstm"):
        assert ratio(default_norms[gated]) > 1e4 * ratio(default_norms["rnn"]), gated


def test_rnn_gradient_decays_geometrically_away_from_the_last_step(default_norms):
    log_norms = torch.tensor(default_norms["rnn"]).log()
    steps = torch.arange(1, 51, dtype=log_norms.dtype)
    assert torch.all(log_norms[1:] > log_norms[:-1])  # smaller the further from T
    # log-linear: a straight-line fit explains almost everything, with a per-step factor < 1
    slope, intercept = torch.linalg.lstsq(
        torch.stack([steps, torch.ones_like(steps)], 1), log_norms[:, None]
    ).solution[:, 0]
    residual = log_norms - (slope * steps + intercept)
    r_squared = 1 - residual.pow(2).sum() / (log_norms - log_norms.mean()).pow(2).sum()
    assert slope > 0 and r_squared > 0.98  # the norm shrinks by exp(-slope) per step back


def test_forget_gate_bias_keeps_lstm_gradients_alive():
    with_bias = ratio(measure_gradient_norms("lstm", seq_len=30, hidden_size=16, gate_bias=1.0))
    plain = ratio(measure_gradient_norms("lstm", seq_len=30, hidden_size=16, gate_bias=0.0))
    assert with_bias > 100 * plain


def test_a_gate_without_an_additive_path_vanishes_faster_than_the_plain_rnn(default_norms):
    """h_t = tanh(…) ⊙ σ(…): the output gate multiplies each step's Jacobian by less than 1 more,
    while the GRU's and LSTM's additive paths keep far more (docs/tutorials/05-gated-cells.md)."""
    gated_only = ratio(measure_gradient_norms("output_gated_rnn"))
    assert gated_only < 1e-3 * ratio(default_norms["rnn"])
    assert gated_only < 1e-10 * min(ratio(default_norms[c]) for c in ("gru", "lstm"))


def test_measurement_is_deterministic_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    first = measure_gradient_norms("gru", seq_len=10, hidden_size=8, seed=3)
    assert torch.equal(torch.rand(1), expected_next)
    assert measure_gradient_norms("gru", seq_len=10, hidden_size=8, seed=3) == first
    assert measure_gradient_norms("gru", seq_len=10, hidden_size=8, seed=4) != first


def test_run_writes_json_and_png(tmp_path):
    result = run_gradient_diagnosis(["rnn", "lstm"], seq_len=12, hidden_size=8, out_dir=tmp_path)
    data = json.loads((tmp_path / "gradients.json").read_text())
    assert set(data["norms"]) == set(result) == {"rnn", "lstm"}
    assert data["norms"] == result
    assert data["seq_len"] == 12 and data["hidden_size"] == 8
    assert result["lstm"] == measure_gradient_norms("lstm", seq_len=12, hidden_size=8)
    png = (tmp_path / "gradients.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 5000


def test_plot_accepts_any_mapping_of_curves(tmp_path):
    path = tmp_path / "sub" / "curves.png"
    plot_gradient_norms({"a": [1.0, 0.1, 0.01], "b": [1.0, 0.5, 0.25]}, path, title="t")
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_large_recurrent_weights_make_plain_rnn_gradients_explode():
    # ‖∂h_t/∂h_{t-1}‖ ≤ ‖diag(φ')‖ ‖W_h‖: scaling W_h up turns vanishing into exploding
    relu = measure_gradient_norms("rnn_relu", seq_len=30, hidden_size=32, recurrent_scale=4.0)
    lstm = measure_gradient_norms("lstm", seq_len=30, hidden_size=32, recurrent_scale=4.0)
    assert relu[0] / relu[-1] > 1e3
    assert lstm[0] / lstm[-1] < relu[0] / relu[-1] / 1e3


@pytest.mark.parametrize("cell", ["rnn", "rnn_relu"])
@pytest.mark.parametrize("scale", [0.5, 1.0, 4.0])
def test_measured_gradients_stay_under_the_analytic_bound(cell, scale):
    from seqlab.analysis.gradients import gradient_bound

    norms = measure_gradient_norms(cell, seq_len=20, hidden_size=16, recurrent_scale=scale)
    bound = gradient_bound(cell, norms, hidden_size=16, recurrent_scale=scale)
    assert bound is not None and bound["beta_h"] == 1.0
    for measured, limit in zip(norms, bound["bound"], strict=True):
        assert measured <= limit * (1 + 1e-9)
    if scale == 0.5:  # β_W β_h well below 1: the bound itself vanishes geometrically
        assert bound["beta_w"] < 0.7 and bound["bound"][0] < 1e-3 * bound["bound"][-1]


def test_gated_cells_have_no_plain_bound():
    from seqlab.analysis.gradients import gradient_bound

    assert gradient_bound("gru", [1.0, 1.0]) is None


def test_sizes_too_large_for_memory_are_one_line_errors(tmp_path):
    r = run_offline(
        ["diagnose", "gradients", "--seq-len", "3", "--hidden-size", "99999999999",
         "--cells", "rnn", "--out", str(tmp_path / "g")],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 2 and "not enough memory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
