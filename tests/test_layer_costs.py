"""Layer cost measurements: structure, the memory method, fused attention's memory, plots."""

import json

import pytest
import torch

from cli_checks import fails, succeeds
from seqlab.analysis.layer_costs import (
    LAYERS,
    attention_memory_report,
    build_layer,
    fitted_slope,
    measure_layer_costs,
    peak_memory_bytes,
)
from seqlab.analysis.layer_costs_report import (
    format_layer_costs,
    parse_lengths,
    plot_layer_costs,
    save_layer_costs,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small_results():
    return measure_layer_costs([16, 32, 64], width=16, heads=2, repeats=1)


def test_results_have_one_entry_per_layer_and_length(small_results):
    r = small_results
    assert r["lengths"] == [16, 32, 64]
    assert r["fit_lengths"] == [32, 64]  # the longer half
    assert set(r["layers"]) == set(LAYERS)
    for rec in r["layers"].values():
        for key in ("forward_s", "backward_s", "time_s", "peak_bytes"):
            assert len(rec[key]) == 3
        assert all(t > 0 for t in rec["time_s"])
        assert all(b > 0 for b in rec["peak_bytes"])
        assert isinstance(rec["time_slope"], float)
        assert isinstance(rec["memory_slope"], float)
        assert isinstance(rec["time_slope_last"], float)
    json.dumps(r, allow_nan=False)  # plain JSON


def test_forward_only_and_no_memory():
    r = measure_layer_costs([8, 16], width=8, heads=2, repeats=1, backward=False, memory=False)
    for rec in r["layers"].values():
        assert rec["backward_s"] == [0.0, 0.0]
        assert rec["forward_s"] == rec["time_s"]
        assert rec["peak_bytes"] == []
        assert rec["memory_slope"] is None


@pytest.mark.parametrize("name", LAYERS)
def test_every_layer_maps_n_by_d_to_n_by_d(name):
    layer = build_layer(name, width=8, kernel_size=3, heads=2)
    assert layer(torch.randn(2, 5, 8)).shape == (2, 5, 8)


def test_explicit_and_fused_attention_agree():
    fused = build_layer("attention", 16, heads=2)
    explicit = build_layer("attention_explicit", 16, heads=2)
    explicit.load_state_dict(fused.state_dict())
    x = torch.randn(2, 7, 16)
    torch.testing.assert_close(fused(x), explicit(x))


def test_peak_memory_counts_live_allocations_only():
    def work():
        a = torch.empty(1000, 1000)  # 4 MB
        b = torch.empty(2000, 1000)  # 8 MB: 12 MB live
        del a
        c = torch.empty(500, 1000)  # 2 MB: 10 MB live
        return b, c

    assert peak_memory_bytes(work) == 12_000_000


def test_fused_attention_peak_is_below_one_materialised_matrix():
    report = attention_memory_report(length=1024, width=64, heads=2)
    assert report["matrix_bytes"] == 2 * 1024 * 1024 * 4
    assert report["fused_peak_bytes"] < report["matrix_bytes"]
    assert report["fused_below_matrix"]
    assert report["explicit_peak_bytes"] > report["matrix_bytes"]  # scores, weights, gradients


def test_fitted_slope_recovers_the_exponent():
    lengths = [64, 128, 256, 512]
    assert fitted_slope(lengths, [3 * n**2 for n in lengths]) == pytest.approx(2.0)
    assert fitted_slope(lengths, [5 * n for n in lengths]) == pytest.approx(1.0)
    assert fitted_slope([64], [1.0]) is None


def test_parse_lengths():
    assert parse_lengths("64,128,...,1024") == [64, 128, 256, 512, 1024]
    assert parse_lengths("10, 30, 50") == [10, 30, 50]
    with pytest.raises(ValueError, match="geometric"):
        parse_lengths("64,...,128")
    with pytest.raises(ValueError, match="integers"):
        parse_lengths("64,abc")


def test_table_plot_and_files(small_results, tmp_path):
    text = format_layer_costs(small_results)
    assert "O(n²d)" in text and "slopes" in text
    png = plot_layer_costs(small_results, tmp_path / "costs.png")
    assert png.read_bytes()[:8] == PNG_MAGIC
    json_path, png_path = save_layer_costs(small_results, tmp_path / "out", {"length": 1})
    assert json.loads(json_path.read_text())["attention_memory"] == {"length": 1}
    assert png_path.read_bytes()[:8] == PNG_MAGIC


def test_bad_arguments_name_the_choices():
    with pytest.raises(ValueError, match="conv, rnn"):
        measure_layer_costs([8], layers=["lstm"])
    with pytest.raises(ValueError, match="positive"):
        measure_layer_costs([0])


def test_peak_memory_ignores_frees_of_earlier_allocations():
    kept = []
    peak_memory_bytes(lambda: kept.append(torch.empty(1000, 1000)))  # allocated while profiling

    def work():
        kept.clear()  # frees 4 MB allocated before this call
        return torch.empty(500, 1000)  # 2 MB

    assert peak_memory_bytes(work) == 2_000_000


def test_bench_heads_must_divide_the_width(capsys):
    fails(capsys, ["bench", "layers", "--heads", "3"], "--heads 3", "--width 256", "1, 2, 4, 8")
    argv = ["bench", "layers", "--heads", "3", "--width", "12", "--lengths", "8,16"]
    out = succeeds(capsys, [*argv, "--repeats", "1", "--memory-length", "16", "--json"]).out
    assert json.loads(out)["heads"] == 3
