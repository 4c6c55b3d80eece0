import json

from seqlab.gradient_diagnostics import measure_gradient_norms, run_gradient_diagnosis


def test_plain_rnn_gradients_vanish_much_faster_than_gated_cells():
    norms = {
        c: measure_gradient_norms(c, seq_len=40, hidden_size=32) for c in ("rnn", "gru", "lstm")
    }
    assert all(len(v) == 40 for v in norms.values())
    ratio = {c: v[0] / v[-1] for c, v in norms.items()}  # ‖∂L/∂h_1‖ / ‖∂L/∂h_T‖
    assert ratio["rnn"] < 1e-3
    assert ratio["lstm"] > 100 * ratio["rnn"] and ratio["gru"] > 100 * ratio["rnn"]


def test_same_data_is_deterministic():
    assert measure_gradient_norms("gru", seq_len=10, hidden_size=8) == measure_gradient_norms(
        "gru", seq_len=10, hidden_size=8
    )


def test_run_writes_json_and_png(tmp_path):
    result = run_gradient_diagnosis(["rnn", "lstm"], seq_len=12, hidden_size=8, out_dir=tmp_path)
    data = json.loads((tmp_path / "gradients.json").read_text())
    assert set(data["norms"]) == set(result) == {"rnn", "lstm"}
    assert data["norms"]["rnn"] == result["rnn"]
    assert (tmp_path / "gradients.png").stat().st_size > 1000
