"""Audio: reading WAV files of every common kind (seqlab.data.audio), log-mel features against an
independent float64 reference, batching, normalisation and SpecAugment (seqlab.nn.audio)."""

import io
import re
import struct

import numpy as np
import pytest
import soundfile as sf
import torch

from precision_helpers import PRECISIONS, computing_in
from seqlab.config.audio import AudioFeatures
from seqlab.data.audio import AudioError, load_clip, read_audio
from seqlab.models.audio import log_mel, spec_augment
from seqlab.nn.audio import FeatureNorm, LogMel, SpecAugment, feature_stats

TONES = ((300.0, 0.3, 0.0), (1100.0, 0.2, 1.0), (2300.0, 0.1, 2.0))  # Hz, amplitude, phase


def tones(rate, seconds=0.5):
    """Three tones below 4 kHz (the Nyquist frequency of 8 kHz), peak 0.6."""
    t = np.arange(int(rate * seconds)) / rate
    return sum(a * np.sin(2 * np.pi * f * t + p) for f, a, p in TONES)


def wav_bytes(samples, rate, subtype):
    buf = io.BytesIO()
    sf.write(buf, samples, rate, subtype=subtype, format="WAV")
    return buf.getvalue()


# ------------------------------------------------------------------------------- reading
def test_every_wav_kind_of_one_signal_reads_the_same_at_8khz(tmp_path):
    """44.1 kHz stereo 24-bit, 16 kHz float and 8 kHz 16-bit files of the same tones give the
    same 8 kHz samples. Inside the first and last 10 ms (where the resampling filter reads its
    zero padding) the error is the Kaiser (beta 5) filter's passband ripple, 6e-4 measured for
    these tones: 1e-3 is 60 dB under full scale; 16-bit quantisation alone is 3e-5."""
    truth = tones(8000)
    t = np.arange(int(44100 * 0.5)) / 44100
    side = 0.2 * np.sin(2 * np.pi * 700 * t)  # cancels in the mean of the two channels
    stereo = np.stack([tones(44100) + side, tones(44100) - side], axis=1)
    path = tmp_path / "stereo.wav"
    path.write_bytes(wav_bytes(stereo, 44100, "PCM_24"))
    sources = {
        "44.1k stereo 24-bit (path)": path,
        "16k float": wav_bytes(tones(16000), 16000, "FLOAT"),
        "8k 16-bit": wav_bytes(truth, 8000, "PCM_16"),
    }
    for what, source in sources.items():
        x, rate = read_audio(source, rate=8000)
        assert rate == 8000 and x.dtype == np.float32 and x.shape == truth.shape, what
        inside = slice(80, -80)
        assert np.abs(x[inside] - truth[inside]).max() < 1e-3, what
    x, _ = read_audio(sources["8k 16-bit"], rate=8000)
    assert np.abs(x - truth).max() < 2**-15  # no resampling: quantisation only


@pytest.mark.parametrize(
    "subtype, tol",
    [("PCM_U8", 2**-7), ("PCM_16", 2**-15), ("PCM_24", 2**-23), ("PCM_32", 1e-7), ("DOUBLE", 1e-7)],
)
def test_each_sample_format_scales_to_the_same_values(subtype, tol):
    truth = tones(8000, 0.1)
    clip = load_clip(wav_bytes(truth, 8000, subtype), name="x.wav")
    assert clip.rate == 8000 and clip.source == "x.wav" and clip.samples.dtype == torch.float32
    assert np.abs(clip.samples.numpy() - truth).max() <= tol


def test_a_raw_array_is_a_source_too():
    truth = tones(16000, 0.1)
    raw = wav_bytes(truth, 16000, "PCM_16")
    pcm = sf.read(io.BytesIO(raw), dtype="int16")[0]
    a, rate = read_audio((np.stack([pcm, pcm], axis=1), 16000), rate=8000)
    b, _ = read_audio(raw, rate=8000)
    assert rate == 8000 and np.abs(a - b).max() < 1e-6  # int16 scaled as the WAV's PCM is
    with pytest.raises(AudioError, match=r"^<array>: sample rate 0 Hz; expected 1,000 to"):
        read_audio((truth, 0))


def _cut(raw, keep):
    return raw[:keep]


def _with_rate(raw, rate):
    out = bytearray(raw)
    out[24:28] = struct.pack("<I", rate)  # the fmt chunk's sample rate (canonical header)
    return bytes(out)


def _float_with(value):
    x = tones(8000, 0.1).astype(np.float32)
    x[100] = value
    return wav_bytes(x, 8000, "FLOAT")


BAD = {
    "text": (lambda: b"hello, not a wav\n" * 20, "not a WAV file libsndfile can read"),
    "flac": (
        lambda: _flac(),
        "a FLAC file, not a WAV; expected a .wav",
    ),
    "truncated": (
        lambda: _cut(wav_bytes(tones(8000, 0.5), 8000, "PCM_16"), 5000),
        "truncated WAV: its header promises 8,000 bytes of samples, the file holds 4,956",
    ),
    "empty": (lambda: wav_bytes(np.zeros(0), 8000, "PCM_16"), r"empty clip \(0 samples\)"),
    "too long": (
        lambda: wav_bytes(tones(8000, 3.0), 8000, "PCM_16"),
        r"3.00 s long \(24,000 samples at 8,000 Hz\), over the limit of 2 s; nothing was decoded",
    ),
    "nan": (
        lambda: _float_with(np.nan),
        r"1 NaN and 0 infinite sample\(s\), the first at sample 100",
    ),
    "inf": (
        lambda: _float_with(-np.inf),
        r"0 NaN and 1 infinite sample\(s\), the first at sample 100",
    ),
    "rate 0": (
        lambda: _with_rate(wav_bytes(tones(8000, 0.1), 8000, "PCM_16"), 0),
        "sample rate 0 Hz; expected 1,000 to 768,000 Hz",
    ),
    "rate 5 MHz": (
        lambda: _with_rate(wav_bytes(tones(8000, 0.1), 8000, "PCM_16"), 5_000_000),
        "sample rate 5,000,000 Hz",
    ),
}


def _flac():
    buf = io.BytesIO()
    sf.write(buf, tones(8000, 0.1), 8000, format="FLAC")
    return buf.getvalue()


@pytest.mark.parametrize("kind", list(BAD))
def test_a_bad_file_is_one_line_naming_it(kind, tmp_path):
    make, message = BAD[kind]
    path = tmp_path / f"{kind.replace(' ', '_')}.wav"
    path.write_bytes(make())
    with pytest.raises(AudioError) as err:
        read_audio(path, rate=8000, max_seconds=2.0)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: "), text
    assert re.search(message, text), text


def test_a_cut_that_soundfile_reads_without_complaint_is_still_refused():
    raw = wav_bytes(tones(8000, 0.5), 8000, "PCM_16")
    assert len(sf.read(io.BytesIO(raw[:-1001]))[0]) == 3499  # libsndfile: a shorter clip
    with pytest.raises(AudioError, match="truncated WAV"):
        read_audio(raw[:-1001], name="cut.wav")
    with pytest.raises(AudioError, match="truncated WAV"):  # half a sample missing
        read_audio(raw[:-1], name="cut.wav")
    missing = "/nonexistent/clip.wav"
    with pytest.raises(AudioError, match=f"^{missing}: no such file$"):
        read_audio(missing)


# ------------------------------------------------------------------------------ features
def _slaney_mel(f):
    """Slaney's mel scale (Auditory Toolbox): 3 mels per 200 Hz to 1 kHz, then 27 mels per
    factor 6.4."""
    f = np.asarray(f, dtype=np.float64)
    return np.where(
        f < 1000, 3 * f / 200, 15 + np.log(np.maximum(f, 1e-9) / 1000) * 27 / np.log(6.4)
    )


def _slaney_hz(m):
    m = np.asarray(m, dtype=np.float64)
    return np.where(m < 15, 200 * m / 3, 1000 * np.exp((m - 15) * np.log(6.4) / 27))


def reference_log_mel(x, rate, n_fft, win, hop, n_mels):
    """Log-mel features written independently of seqlab, in float64, one frame at a time:
    reflect-padded centred frames, a periodic Hann window centred in n_fft, |rfft|², Slaney's
    unit-area triangles (Slaney 1998; librosa's default), 10·log10(max(E, 1e-10))."""
    padded = np.pad(np.asarray(x, dtype=np.float64), n_fft // 2, mode="reflect")
    window = np.zeros(n_fft)
    n = np.arange(win)
    window[(n_fft - win) // 2 : (n_fft - win) // 2 + win] = 0.5 - 0.5 * np.cos(2 * np.pi * n / win)
    freqs = np.arange(n_fft // 2 + 1) * rate / n_fft
    points = _slaney_hz(np.linspace(0.0, _slaney_mel(rate / 2), n_mels + 2))
    filters = np.zeros((n_mels, len(freqs)))
    for i in range(n_mels):
        a, c, b = points[i : i + 3]
        for k, f in enumerate(freqs):
            if a < f < b:
                rise = (f - a) / (c - a) if f <= c else (b - f) / (b - c)
                filters[i, k] = rise * 2 / (b - a)
    frames = []
    for t in range(1 + len(x) // hop):
        power = np.abs(np.fft.rfft(padded[t * hop : t * hop + n_fft] * window)) ** 2
        frames.append(10 * np.log10(np.maximum(filters @ power, 1e-10)))
    return np.array(frames)


def _clips(lengths, seed=0):
    g = np.random.default_rng(seed)
    return [
        0.5 * np.sin(np.arange(n) * 0.37) * g.uniform(0.2, 1) + 0.05 * g.standard_normal(n)
        for n in lengths
    ]


@pytest.mark.parametrize(
    "rate, n_fft, win, hop, n_mels", [(8000, 256, 200, 80, 40), (16000, 512, 400, 160, 64)]
)
def test_log_mel_matches_an_independent_reference(rate, n_fft, win, hop, n_mels):
    """float64: within 1e-5 dB (1e-13 seen). float32: within 1e-2 dB (3e-5 seen): the FFT's
    float32 rounding is about 1e-7 of a frame's loudest amplitude, so a mel band 80 dB (1e-4 in
    amplitude) under it is off by about 1e-3 in amplitude, 1e-2 dB."""
    module = LogMel(rate, n_fft, win, hop, n_mels)
    for n in (3000, 1234, 100):  # 100 < n_fft / 2: the reflection repeats
        x = _clips([n])[0]
        ref = reference_log_mel(x, rate, n_fft, win, hop, n_mels)
        got, frames = module(torch.from_numpy(x)[None])
        assert int(frames[0]) == len(ref) == 1 + n // hop and got.dtype == torch.float64
        assert np.abs(got[0].numpy() - ref).max() < 1e-5
        got32, _ = module(torch.from_numpy(x).float()[None])
        assert got32.dtype == torch.float32 and np.abs(got32[0].numpy() - ref).max() < 1e-2


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_clip_has_the_same_features_alone_and_in_a_padded_batch(precision):
    """Each clip is padded by reflection about its own end, so padding never leaks into its
    frames; the features are computed in float32 even under bf16 autocast."""
    lengths = [1700, 333, 2400, 81]
    clips = [torch.from_numpy(c).float() for c in _clips(lengths, seed=1)]
    batch = torch.zeros(len(clips), max(lengths))
    for i, c in enumerate(clips):
        batch[i, : len(c)] = c
    batch[1, 333:] = 5.0  # garbage in the padding must not matter
    module = LogMel()
    with computing_in(precision):
        together, frames = module(batch, torch.tensor(lengths))
        alone = [module(c[None])[0][0] for c in clips]
    assert together.dtype == torch.float32
    for i, one in enumerate(alone):
        n = int(frames[i])
        assert n == len(one) == 1 + lengths[i] // 80
        assert torch.allclose(together[i, :n], one, atol=1e-4, rtol=0)
        assert not together[i, n:].any()  # frames past the clip are zeros


def test_normalisation_uses_real_frames_only():
    module = LogMel()
    waves = torch.from_numpy(
        np.stack([np.pad(c, (0, 2000 - len(c))) for c in _clips([2000, 900], seed=2)])
    ).float()
    feats, frames = module(waves, torch.tensor([2000, 900]))
    mean, std = feature_stats(feats, frames)
    out = FeatureNorm(mean, std)(feats, frames)
    real = torch.cat([out[0, :26], out[1, :12]])  # 1 + 2000 // 80, 1 + 900 // 80 frames
    assert torch.allclose(real.mean(0), torch.zeros(40), atol=1e-4)
    assert torch.allclose(real.std(0, unbiased=False), torch.ones(40), atol=1e-3)
    assert not out[1, 12:].any()


def test_spec_augment_is_seeded_and_only_in_training():
    aug = SpecAugment(freq_masks=2, freq_width=8, time_masks=2, time_width=10, time_ratio=0.5)
    feats = torch.randn(4, 60, 40) + 10  # no true zeros: masked cells are the zeros
    lengths = torch.tensor([60, 30, 12, 45])

    def masked(seed):
        return aug(feats, lengths, torch.Generator().manual_seed(seed))

    a, b, c = masked(7), masked(7), masked(8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    zero = a == 0
    assert zero.any()
    for i, n in enumerate(lengths.tolist()):
        bands = zero[i].all(0).sum()  # channels zero in every frame
        runs = zero[i].all(1)[:n].sum()  # frames zero in every channel
        assert bands <= 16 and runs <= 2 * min(10, n // 2)
        assert (zero[i] == (zero[i].all(0)[None, :] | zero[i].all(1)[:, None])).all()
    aug.eval()
    assert aug(feats, lengths, torch.Generator().manual_seed(7)) is feats


def test_audio_features_config_builds_the_modules():
    cfg = AudioFeatures(n_mels=32, hop_length=100)
    module = log_mel(cfg, 8000)
    assert module(torch.zeros(1, 1000) + 0.1)[0].shape == (1, 11, 32)
    assert isinstance(spec_augment(cfg), SpecAugment)
    with pytest.raises(ValueError, match="win_length=300 is longer than n_fft=256"):
        AudioFeatures(win_length=300)
    with pytest.raises(ValueError, match="f_max <= rate/2 = 4000"):
        log_mel(AudioFeatures(f_max=6000.0), 8000)
    with pytest.raises(ValueError, match="cover no FFT bin"):
        LogMel(8000, n_fft=64, win_length=64, n_mels=64)
