"""``seqlab demo length-extrapolation``: how it scores windows, what it prints, and (with the
datasets) a tiny end-to-end run that a second call reads again instead of retraining."""

import os

import pytest
import torch

from seqlab.config import TransformerLMConfig
from seqlab.demos import length_extrapolation as demo
from seqlab.errors import SeqlabError
from seqlab.models.transformer_lm import TransformerLanguageModel


def _model(positions="rope"):
    torch.manual_seed(0)
    cfg = TransformerLMConfig(
        d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=64, positions=positions
    )
    return TransformerLanguageModel(11, cfg).eval()


def test_sliding_windows_score_each_character_once_with_the_context_they_promise():
    model, ids = _model(), torch.randint(11, (101,))
    whole = demo.window_losses(model, ids, 20, 20)
    assert whole.shape == (100,)  # 5 non-overlapping windows of 20
    sliding = demo.window_losses(model, ids, 20, 5)
    assert sliding.shape == (20 + 16 * 5,)  # the first window whole, then 5 new per window
    # the first window is read alike both ways; later characters see more context sliding
    torch.testing.assert_close(sliding[:20], whole[:20])
    logits, _ = model(ids[5:25][None])
    last = torch.nn.functional.cross_entropy(logits[0, -5:], ids[21:26], reduction="none")
    torch.testing.assert_close(sliding[20:25], last)


def test_losses_by_position_average_overlapping_windows():
    model, ids = _model(), torch.randint(11, (201,))
    by_position = demo.position_losses(model, ids, 40)
    starts = range(0, 201 - 40, 10)  # every window with a next character for its last
    expected = torch.stack(
        [demo.window_losses(model, ids[s : s + 41], 40, 40) for s in starts]
    ).mean(0)
    torch.testing.assert_close(by_position, expected)


def test_summary_prints_each_variant_at_each_length():
    row = {
        mode: {str(f): {"mean": 1.5 + f / 100, "sd": 0.01} for f in demo.FACTORS}
        for mode in ("non_overlapping", "sliding")
    }
    result = {
        "trained_length": 64,
        "seeds": [1, 2, 3],
        "models": {"rope": {**row, "diverged_seeds": 0}, "alibi": {**row, "diverged_seeds": 1}},
    }
    lines = demo.summary(result)
    assert "mean ± s.d. over 3 seeds" in lines[0] and "1×, 2×, 4×, 8×, 16×" in lines[0]
    assert (
        lines[1].split()
        == (
            "rope non-overlapping 1.51 / 1.52 / 1.54 / 1.58 / 1.66; "
            "sliding 1.51 / 1.52 / 1.54 / 1.58 / 1.66"
        ).split()
    )
    assert lines[2].endswith("(1 seeds diverged)")


def test_an_unknown_variant_is_named_with_the_choices(tmp_path, capsys):
    from seqlab.cli import main

    code = main(["demo", "length-extrapolation", "--out", str(tmp_path / "d"), "--variants", "xx"])
    err = capsys.readouterr().err
    assert code != 0 and "--variants: unknown xx; choose from sinusoidal, learned, rope" in err
    assert not (tmp_path / "d").exists()


def test_too_few_evaluation_characters_are_refused_before_training(tmp_path, capsys):
    from seqlab.cli import main

    argv = ["demo", "length-extrapolation", "--out", str(tmp_path / "d"), "--eval-chars", "500"]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "--eval-chars 500: the longest evaluation window is 1024 characters" in err
    assert not (tmp_path / "d").exists()
    with pytest.raises(SeqlabError, match="variants: unknown rotary; choose from sinusoidal"):
        demo.length_extrapolation_demo(tmp_path / "e", variants=("rotary",))
    assert not (tmp_path / "e").exists()


@pytest.mark.slow  # trains four runs (50 s); the demo's parts are tested above
def test_tiny_run_end_to_end_and_reused(tmp_path, capsys):
    """Through the command line twice: the second call reads the runs again (not retrained) and
    its output folder keeps them (files it did not write again would be removed)."""
    if not os.environ.get("SEQLAB_DATA_DIR"):
        pytest.skip("SEQLAB_DATA_DIR is not set: no local copy of Tiny Shakespeare")
    import json

    from seqlab.cli import main

    out = tmp_path / "demo"
    argv = ["demo", "length-extrapolation", "--out", str(out), "--steps", "25", "--seeds", "1"]
    argv += ["--variants", "rope,linear", "--eval-chars", "1100", "--threads", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "  rope       non-overlapping" in printed and "  linear     sliding" not in printed
    result = json.loads((out / "length_extrapolation.json").read_text())
    for name in ("rope", "linear"):
        row = result["models"][name]
        assert row["diverged_seeds"] == 0
        assert all(row["sliding"][str(f)]["mean"] > 0 for f in demo.FACTORS)
        assert len(row["by_position"]) == 64 * 16
    assert result["models"]["linear"]["attention"] == "linear"
    assert all(os.path.isfile(f) for f in result["figures"])
    metrics = out / "rope-s1" / "metrics.jsonl"
    before = metrics.read_bytes()  # its times differ in a retrained run
    assert main(argv) == 0
    assert metrics.read_bytes() == before  # read again, not retrained
    assert (out / "rope-s1" / "config.yaml").is_file() and (out / "linear-s1").is_dir()
    again = json.loads((out / "length_extrapolation.json").read_text())
    assert again["models"]["rope"]["sliding"] == result["models"]["rope"]["sliding"]
