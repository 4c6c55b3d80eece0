"""benchmarks/fsdd_voices.py: the espeak-ng fixture maker writes FSDD-like clips (8 kHz mono
16-bit, trimmed), and the warp rules choose without a label."""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
import soundfile as sf
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
_spec = importlib.util.spec_from_file_location("fsdd_voices", BENCH / "fsdd_voices.py")
bench = importlib.util.module_from_spec(_spec)
sys.modules["fsdd_voices"] = bench  # its dataclasses look their module up
_spec.loader.exec_module(bench)

needs_tools = pytest.mark.skipif(
    not (shutil.which("espeak-ng") and shutil.which("sox")), reason="needs espeak-ng and sox"
)


@needs_tools
def test_an_espeak_digit_is_an_fsdd_like_clip(tmp_path):
    voice = bench.Voice("espeak-ng", "en-us+f2", "female")
    out = bench.make_clip(voice, "seven", bench.Take(175, 50), tmp_path / "7.wav")
    info = sf.info(out)
    assert (info.samplerate, info.channels, info.subtype) == (8000, 1, "PCM_16")
    assert 0.14 <= info.duration <= 2.3  # FSDD's range of clip lengths
    samples, _ = sf.read(out)
    assert 0.2 < abs(samples).max() < 0.4  # the peak set to -10 dBFS (0.316)


@needs_tools
def test_listed_espeak_variants_declare_their_sex():
    data = bench.espeak_data_dir()
    assert bench.variant_sex("f2", data) == "female"
    assert bench.variant_sex("m3", data) == "male"


def test_the_rules_choose_without_labels():
    # two factors' probabilities (W=9 factors; the rest flat) for 2 clips of one voice
    w, c = len(bench.WARPS), 10
    grid = torch.full((w, 2, c), 1.0 / c)
    grid[0, 0] = torch.tensor([0.9] + [0.1 / 9] * 9)  # clip 0: factor 0.80 is the surest
    grid[8, 1] = torch.tensor([0.0, 0.6, 0.4] + [0.0] * 7)  # clip 1: factor 1.20
    assert bench.choose(grid, ["v", "v"], "clip_max_prob").tolist() == [0, 8]
    assert bench.choose(grid, ["v", "v"], "clip_min_entropy").tolist() == [0, 8]
    # one factor per voice: the highest mean top probability over its clips (0.80 here)
    assert bench.choose(grid, ["v", "v"], "voice_max_prob").tolist() == [0, 0]
    # all flat: ties go to the factor 1
    flat = torch.full((w, 1, c), 1.0 / c)
    assert bench.choose(flat, ["v"], "clip_max_prob").tolist() == [bench.WARPS.index(1.0)]
