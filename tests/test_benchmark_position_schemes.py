"""benchmarks/position_schemes.py: where linear attention overtakes softmax, and the rule that
skips a point before it would need too much memory."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
_spec = importlib.util.spec_from_file_location("position_schemes", BENCH / "position_schemes.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _rows(softmax, linear):
    """Rows of training times by length; None: softmax skipped there."""
    rows = []
    for i, (s, lin) in enumerate(zip(softmax, linear, strict=True)):
        soft = {"skipped": "too big"} if s is None else {"median_step_s": s}
        rows.append(
            {"length": 64 * 2**i, "train": {"softmax": soft, "linear": {"median_step_s": lin}}}
        )
    return rows


def test_crossing_is_the_first_length_where_linear_is_faster():
    c = bench.crossing(_rows([1.0, 2.0, 5.0, 20.0], [3.0, 2.5, 4.0, 8.0]), "train", "median_step_s")
    assert c == {
        "first_length_linear_faster": 256,
        "linear_faster_from_then_on": True,
        "softmax_skipped_lengths": [],
    }
    # faster once, then slower again: the first length, flagged as not lasting
    c = bench.crossing(_rows([1.0, 3.0, 5.0], [2.0, 2.0, 6.0]), "train", "median_step_s")
    assert c["first_length_linear_faster"] == 128 and not c["linear_faster_from_then_on"]


def test_a_skipped_softmax_point_is_no_crossing():
    c = bench.crossing(_rows([1.0, 2.0, None], [3.0, 2.5, 4.0]), "train", "median_step_s")
    assert c["first_length_linear_faster"] is None
    assert c["softmax_skipped_lengths"] == [256]


def test_extrapolation_for_the_skip_rule():
    assert bench._predicted([], [], 64) == 0.0
    assert bench._predicted([64], [10.0], 128) == pytest.approx(40.0)  # one point: quadratic
    assert bench._predicted([64, 128], [10.0, 30.0], 256) == pytest.approx(90.0)  # its slope
    assert bench._predicted([64, 128], [10.0, 10.0], 256) == pytest.approx(20.0)  # at least n


def test_points_over_the_memory_limit_are_skipped_and_said_so():
    sizes = {"d_model": 8, "num_heads": 2, "d_ff": 8, "num_layers": 1}
    rows = bench.measure_linear(
        [4, 8], sizes, 1, "fp32", 1, 1, 1.0, max_gib=0.0, max_step_seconds=1e9
    )
    assert "median_step_s" in rows[0]["train"]["softmax"]  # nothing to extrapolate from yet
    for kind in ("softmax", "linear"):
        assert "--max-gib 0" in rows[1]["train"][kind]["skipped"]
        assert rows[1]["generate"][kind]["median_token_s"] > 0  # generation is still measured
