"""Temperature scaling and the expected calibration error (tasks/classification/calibration)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from seqlab.errors import CheckpointError
from seqlab.tasks.classifier.calibration import (
    Calibration,
    expected_calibration_error,
    fit_temperature,
    reliability,
)


def _calibrated(n: int = 20000, classes: int = 10, seed: int = 0):
    """Logits and labels drawn from softmax(logits): calibrated by construction."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, classes, generator=g, dtype=torch.float64) * 3
    labels = torch.multinomial(logits.softmax(-1), 1, generator=g).flatten()
    return logits, labels


@pytest.mark.parametrize("t", [0.5, 1.0, 2.5])
def test_the_temperature_that_made_logits_overconfident_is_found(t):
    logits, labels = _calibrated()
    found = fit_temperature(logits * t, labels)  # logits sharpened (t > 1) or softened
    assert abs(found - t) / t < 0.05


def test_calibrated_predictions_have_a_small_ece_and_sharpened_ones_a_large_one():
    logits, labels = _calibrated()
    assert expected_calibration_error(logits.softmax(-1), labels) < 0.01
    assert expected_calibration_error((logits * 3).softmax(-1), labels) > 0.1


def test_ece_by_hand():
    # two bins used: confidence 0.9 (2 right of 2) and 0.6 (1 right of 2)
    probs = torch.tensor([[0.9, 0.1], [0.1, 0.9], [0.6, 0.4], [0.4, 0.6]])
    labels = torch.tensor([0, 1, 0, 0])
    r = reliability(probs, labels, bins=4)  # [0.5, 0.75) and [0.75, 1]
    assert r["count"] == [0, 0, 2, 2]
    want = 0.5 * abs(1.0 - 0.9) + 0.5 * abs(0.5 - 0.6)
    assert math.isclose(expected_calibration_error(probs, labels, bins=4), want, rel_tol=1e-6)


def test_scaling_never_moves_the_argmax_and_lowers_the_nll():
    logits, labels = _calibrated(2000)
    cal = Calibration.fit(logits * 4, labels)
    assert cal.nll_after < cal.nll_before and cal.ece_after < cal.ece_before
    scaled = (logits * 4) / cal.temperature
    assert torch.equal(scaled.argmax(1), logits.argmax(1))


def test_a_calibration_file_round_trips_and_a_bad_one_is_named(tmp_path):
    logits, labels = _calibrated(500)
    cal = Calibration.fit(logits, labels, "val", "step-00000010")
    path = tmp_path / "calibration.json"
    cal.save(path)
    assert Calibration.load(path) == cal
    data = json.loads(path.read_text())
    data["temperature"] = -1
    path.write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="calibration.json: 'temperature' must be a positive"):
        Calibration.load(path)


def test_an_audio_run_keeps_its_temperature_and_load_applies_it(tiny_runs):
    """Training writes calibration.json (chosen on validation); loading divides the logits by
    its temperature, so the probabilities move and the labels do not."""
    from seqlab import load

    run = tiny_runs["audio"]
    cal = Calibration.load(run / "calibration.json")
    assert cal.split == "val" and cal.temperature > 0 and cal.nll_after <= cal.nll_before + 1e-9
    model = load(run)
    assert float(model.model.temperature) == pytest.approx(cal.temperature, rel=1e-6)
    waves, _ = model.split_examples("test")
    calibrated = model.probabilities_of(waves)
    model.model.temperature.fill_(1.0)
    raw = model.probabilities_of(waves)
    assert torch.equal(calibrated.argmax(1), raw.argmax(1))
    want = (raw.double().log() / cal.temperature).softmax(1)  # log p = z - logsumexp(z)
    torch.testing.assert_close(calibrated.double(), want, atol=1e-5, rtol=0)
