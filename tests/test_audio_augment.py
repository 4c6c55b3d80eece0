"""The training-time audio augmentations (seqlab.nn.audio_augment) and their config keys."""

from __future__ import annotations

import math

import pytest
import torch

from seqlab.models.audio import AudioClassifier, AudioClassifierConfig
from seqlab.nn import audio_augment as aug
from seqlab.nn.audio import LogMel

RATE = 8000


def _sine(hz: float, n: int, amp: float = 0.5) -> torch.Tensor:
    return amp * torch.sin(2 * math.pi * hz * torch.arange(n) / RATE)


def _peak_hz(x: torch.Tensor) -> float:
    spec = torch.fft.rfft(x * torch.hann_window(len(x))).abs()
    return float(spec.argmax()) * RATE / len(x)


def test_vtlp_with_warp_1_is_the_identity():
    torch.manual_seed(0)
    waves, lengths = torch.randn(3, 4000), torch.tensor([4000, 2500, 900])
    mel = LogMel(RATE)
    plain, frames = mel(waves, lengths)
    warped, frames_w = mel(waves, lengths, warp=torch.ones(3))
    assert torch.equal(frames, frames_w)
    torch.testing.assert_close(warped, plain, rtol=0, atol=1e-5)


def test_vtlp_warp_scales_below_the_knee_and_keeps_the_ends():
    hz = torch.linspace(0, 4000, 129, dtype=torch.float64)
    for alpha in (0.8, 0.9, 1.1, 1.2):
        w = aug.vtlp_warp(hz, torch.tensor([alpha]), 4000.0)[0]
        assert w[0] == 0 and abs(float(w[-1]) - 4000) < 1e-9
        assert bool((w[1:] > w[:-1]).all())  # monotone
        low = hz <= 0.6 * 4000 * min(alpha, 1) / alpha
        torch.testing.assert_close(w[low], hz[low] * alpha)


def test_a_warp_moves_a_tones_energy_to_higher_mels():
    mel = LogMel(RATE)
    wave = _sine(1000, 4000)[None]
    plain, _ = mel(wave)
    up, _ = mel(wave, warp=torch.tensor([1.2]))
    assert int(up[0].mean(0).argmax()) > int(plain[0].mean(0).argmax())


def test_speed_perturbation_changes_the_length_by_the_factor():
    waves = torch.stack([_sine(440, 8000), torch.cat([_sine(440, 5000), torch.zeros(3000)])])
    lengths = torch.tensor([8000, 5000])
    out, sizes = aug.speed_perturb(waves, lengths, torch.tensor([0.9, 1.25]))
    assert sizes.tolist() == [round(8000 / 0.9), 5000 / 1.25]
    assert out.shape == (2, round(8000 / 0.9))
    assert float(out[1, 4000:].abs().max()) == 0.0  # past the clip: padding
    assert abs(_peak_hz(out[0, : sizes[0]]) - 440 * 0.9) < 2.0  # slower: lower


def test_speed_perturbation_of_a_clip_alone_and_in_a_padded_batch():
    torch.manual_seed(1)
    a = torch.randn(3000)
    batch = torch.stack([torch.cat([a, torch.zeros(2000)]), torch.randn(5000)])
    alone, _ = aug.speed_perturb(a[None], torch.tensor([3000]), torch.tensor([1.1]))
    both, sizes = aug.speed_perturb(batch, torch.tensor([3000, 5000]), torch.tensor([1.1, 0.9]))
    torch.testing.assert_close(both[0, : sizes[0]], alone[0])


@pytest.mark.parametrize("semitones", [12.0, -5.0, 2.5])
def test_pitch_shift_keeps_the_length_and_moves_the_pitch(semitones):
    n = 6000
    waves = torch.stack([_sine(440, n), torch.cat([_sine(440, 4000), torch.zeros(n - 4000)])])
    lengths = torch.tensor([n, 4000])
    out = aug.pitch_shift(waves, lengths, torch.tensor([semitones, semitones]))
    assert out.shape == waves.shape
    assert float(out[1, 4000:].abs().max()) == 0.0
    want = 440 * 2 ** (semitones / 12)
    for row, length in zip(out, lengths.tolist(), strict=True):
        assert abs(_peak_hz(row[:length]) - want) < 4.0
    unchanged = aug.pitch_shift(waves, lengths, torch.zeros(2))
    torch.testing.assert_close(unchanged[0, 500:-500], waves[0, 500:-500], atol=0.02, rtol=0)


def test_noise_is_added_at_the_signal_to_noise_ratio_asked():
    torch.manual_seed(2)
    waves = torch.stack([_sine(300, 8000), torch.cat([_sine(500, 4000), torch.zeros(4000)])])
    lengths = torch.tensor([8000, 4000])
    for beta in (0.0, 1.0, 2.0):
        out = aug.add_noise(waves, lengths, torch.tensor([10.0, 20.0]), torch.full((2,), beta))
        for k, (n, snr) in enumerate(((8000, 10.0), (4000, 20.0))):
            noise = out[k, :n] - waves[k, :n]
            got = 10 * math.log10(float(waves[k, :n].square().mean() / noise.square().mean()))
            assert abs(got - snr) < 1e-3
        assert float(out[1, 4000:].abs().max()) == 0.0


def test_pink_and_brown_noise_put_more_power_at_low_frequencies():
    torch.manual_seed(3)
    lengths = torch.tensor([16000, 16000, 16000])
    noise = aug.coloured_noise(lengths, torch.tensor([0.0, 1.0, 2.0]), 16000).double()
    torch.testing.assert_close(noise.square().mean(1), torch.ones(3, dtype=torch.float64))
    power = torch.fft.rfft(noise).abs().square()
    low_share = power[:, 1:400].sum(1) / power[:, 1:].sum(1)  # below 200 Hz
    assert low_share[0] < low_share[1] < low_share[2]


def test_a_room_keeps_the_level_and_adds_a_decaying_tail():
    torch.manual_seed(4)
    n = 8000
    burst = torch.zeros(2, n)
    burst[:, 100:140] = 1.0
    lengths = torch.tensor([n, 3000])
    wet = aug.reverberate(burst, lengths, torch.tensor([0.5, 0.2]), RATE)
    for k, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(
            wet[k, :length].square().mean(), burst[k, :length].square().mean()
        )
    assert float(wet[1, 3000:].abs().max()) == 0.0
    tail = wet[0, 400:].square()
    assert tail[:800].sum() > tail[800:1600].sum() > tail[1600:2400].sum() > 0
    h = aug.room_response(torch.tensor([0.3]), RATE)
    assert h.shape == (1, round(0.3 * RATE)) and float(h[0, 0]) == 1.0


def _config(**features):
    body = {"arch": "cnn_text", "embed_dim": 8, "channels": 4, "widths": [3], "dropout": 0.0}
    return AudioClassifierConfig(features={"n_mels": 16, **features}, body=body)


def test_every_augmentation_runs_in_training_and_none_in_evaluation():
    cfg = _config(
        vtlp=0.15,
        pitch=2.0,
        noise=1.0,
        room=1.0,
        speed=0.1,
        clip_norm="mean_var",
        gain=10.0,
        eq=6.0,
        lowpass=0.5,
    )
    torch.manual_seed(5)
    model = AudioClassifier(cfg, 3, RATE)
    waves = torch.randn(4, 4000) * 0.1
    lengths = torch.tensor([4000, 3000, 2000, 1000])
    model.train()
    a, b = model(waves, lengths), model(waves, lengths)
    assert torch.isfinite(a).all() and not torch.allclose(a, b)  # random draws
    model.eval()
    torch.testing.assert_close(model(waves, lengths), model(waves, lengths), rtol=0, atol=0)


def test_the_augmentation_keys_are_checked():
    assert _config(clip_norm=True).features.clip_norm == "mean"
    assert _config(clip_norm=False).features.clip_norm == "none"
    with pytest.raises(ValueError, match="low <= high"):
        _config(noise_snr=[20, 10])
    with pytest.raises(ValueError, match="room_rt60"):
        _config(room_rt60=[0.0, 0.5])
    with pytest.raises(ValueError, match="vtlp"):
        _config(vtlp=0.6)


def test_mean_var_clip_norm_gives_each_channel_zero_mean_and_unit_deviation():
    model = AudioClassifier(_config(clip_norm="mean_var"), 3, RATE).eval()
    waves = torch.randn(2, 4000) * torch.tensor([[0.1], [0.5]])
    feats, frames = model.raw_features(waves, torch.tensor([4000, 2400]))
    for row, t in zip(feats, frames.tolist(), strict=True):
        real = row[:t].double()
        torch.testing.assert_close(
            real.mean(0), torch.zeros(16, dtype=torch.float64), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(
            real.std(0, unbiased=False), torch.ones(16, dtype=torch.float64), atol=1e-4, rtol=0
        )
        assert float(row[t:].abs().sum()) == 0.0


def test_a_neutral_microphone_changes_nothing_and_a_low_pass_cuts_above_its_cutoff():
    hz = LogMel(RATE).bin_hz()
    flat = aug.channel_gains(hz, torch.zeros(2), torch.zeros(2))
    torch.testing.assert_close(flat, torch.ones(2, len(hz), dtype=torch.float64))
    cut = aug.channel_gains(hz, torch.tensor([-10.0]), torch.zeros(1), torch.tensor([2000.0]))[0]
    at = int((hz - 2000).abs().argmin())
    assert abs(float(cut[at]) - 0.1 * 0.5) < 1e-6  # -10 dB, then half the power at the cutoff
    assert float(cut[-1]) < 0.1 * 0.01  # an octave above: -24 dB more
    coloured = aug.channel_gains(hz, torch.zeros(4), torch.full((4,), 6.0))
    db = 10 * torch.log10(coloured)
    torch.testing.assert_close(db.abs().amax(1), torch.full((4,), 6.0, dtype=torch.float64))


def test_the_microphone_moves_the_log_mel_by_its_gain():
    mel = LogMel(RATE)
    wave = _sine(700, 4000)[None] + 0.01 * torch.randn(1, 4000)
    plain, _ = mel(wave)
    gains = aug.channel_gains(mel.bin_hz(), torch.tensor([-12.0]), torch.zeros(1))
    quiet, _ = mel(wave, gains=gains)
    torch.testing.assert_close(quiet, plain - 12.0, atol=1e-3, rtol=0)


def test_a_tempo_change_moves_the_length_and_keeps_the_pitch():
    n = 8000
    waves = torch.stack([_sine(500, n), torch.cat([_sine(500, 6000), torch.zeros(2000)])])
    lengths = torch.tensor([n, 6000])
    out, sizes = aug.stretch(waves, lengths, torch.tensor([1.25, 0.8]))
    assert sizes.tolist() == [round(n / 1.25), round(6000 / 0.8)]
    for row, size in zip(out, sizes.tolist(), strict=True):
        assert abs(_peak_hz(row[:size]) - 500) < 4.0
        assert float(row[size:].abs().sum()) == 0.0
