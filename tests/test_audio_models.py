"""The audio classifier (seqlab.models.audio): a log-mel front end feeding the existing
classifiers (LSTM/GRU, 1-D CNN, Transformer encoder, ViT over spectrogram patches), the frames
path those classifiers gained, and the ``model`` section with its ``body``."""

import math

import pytest
import torch

from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab.config import config_from_dict, load_config, save_config
from seqlab.config.audio import BODIES, AudioClassifierConfig, SpectrogramCNNConfig
from seqlab.errors import ConfigError
from seqlab.models import build_model
from seqlab.models.audio import AudioClassifier
from seqlab.models.cnn_spectrogram import SpectrogramCNN
from seqlab.models.cnn_text import CNNTextClassifier, CNNTextConfig
from seqlab.models.vit import VisionTransformer, ViTConfig, attention_rollout
from seqlab.nn.audio import FeatureNorm, LogMel, feature_stats

RATE = 8000
N_MELS = 16
SMALL = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0}
#: one small configuration of each body
BODY = {
    "cnn_text": {"arch": "cnn_text", "embed_dim": 12, "channels": 8, "dropout": 0.0},
    "cnn_spectrogram": {"arch": "cnn_spectrogram", "widths": [4, 8], "dropout": 0.0},
    "cnn_spectrogram_mean_max": {
        "arch": "cnn_spectrogram",
        "widths": [4, 8],
        "dropout": 0.0,
        "pooling": "mean_max",
    },
    "rnn_classifier": {"arch": "rnn_classifier", "embed_dim": 12, "hidden_size": 8, "dropout": 0.0},
    "gru_last": {
        "arch": "rnn_classifier",
        "cell": "gru",
        "pooling": "last",
        "embed_dim": 12,
        "hidden_size": 8,
        "dropout": 0.0,
    },
    "transformer_classifier": {"arch": "transformer_classifier", **SMALL},
    "transformer_cls": {"arch": "transformer_classifier", "pooling": "cls", **SMALL},
    "vit": {"arch": "vit", "patch_size": 8, **SMALL},
}


def model_cfg(body, **keys):
    return AudioClassifierConfig.model_validate(
        {"features": {"n_mels": N_MELS}, "max_frames": 32, "body": BODY[body], **keys}
    )


def audio_model(body, **keys):
    torch.manual_seed(0)
    return build_model(model_cfg(body, **keys), num_classes=3, sample_rate=RATE)


def clips():
    """Three clips of 2,400 (31 frames at the 80-sample hop), 1,000 (13) and 150 samples (2
    frames: shorter than the CNN's widest filter), padded into one batch."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([2400, 1000, 150])
    waves = torch.randn(3, 2400, generator=g) * 0.1
    waves[torch.arange(2400)[None, :] >= lengths[:, None]] = 0.0
    return waves, lengths


@pytest.mark.parametrize("body", list(BODY))
def test_every_body_trains_on_random_waves(body):
    """A few steps fit three clips (the normalisation measured on them, no SpecAugment)."""
    model = audio_model(body, augment=False).train()
    waves, lengths = clips()
    model.set_normalisation(*feature_stats(*model.log_mel(waves, lengths)))
    labels = torch.tensor([0, 1, 2])
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(15):
        loss = torch.nn.functional.cross_entropy(model(waves, lengths), labels)
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    model.eval()
    assert (model(waves, lengths).argmax(-1) == labels).all()


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("body", list(BODY))
def test_a_clip_gets_the_same_logits_alone_and_in_a_padded_batch(body, precision):
    model = audio_model(body).eval()
    waves, lengths = clips()
    with computing_in(precision):
        batch = model(waves, lengths)
        alone = [
            model(waves[i : i + 1, : int(n)], lengths[i : i + 1]) for i, n in enumerate(lengths)
        ]
    assert batch.shape == (3, 3)
    assert_close_in(precision, batch, torch.cat(alone))


def test_features_are_the_log_mel_standardised_and_kept_in_the_weights():
    model = audio_model("cnn_text").eval()
    waves, lengths = clips()
    mean, std = torch.linspace(-60, -20, N_MELS), torch.linspace(5, 20, N_MELS)
    model.set_normalisation(mean, std)
    feats, frames = model.features(waves, lengths)
    raw, raw_frames = LogMel(RATE, n_mels=N_MELS)(waves, lengths)
    assert torch.equal(frames, raw_frames) and frames.tolist() == [31, 13, 2]
    torch.testing.assert_close(feats, FeatureNorm(mean, std)(raw, raw_frames))
    assert feats[1, 13:].abs().max() == 0 and feats[1, :13].abs().max() > 0
    fresh = audio_model("cnn_text").eval()
    assert not torch.equal(fresh(waves, lengths), model(waves, lengths))
    fresh.load_state_dict(model.state_dict())  # the normalisation travels with the weights
    torch.testing.assert_close(fresh.features(waves, lengths)[0], feats)
    torch.testing.assert_close(fresh(waves, lengths), model(waves, lengths))
    with pytest.raises(ValueError, match=r"need \(16,\)"):
        model.set_normalisation(torch.zeros(8), torch.ones(8))


def _body_inputs(model, waves, lengths):
    """What the body receives in one forward pass."""
    seen = []
    hook = model.body.register_forward_hook(lambda m, args, out: seen.append(args[0].clone()))
    model(waves, lengths)
    hook.remove()
    return seen[0]


def test_spec_augment_masks_the_frames_in_training_only():
    waves, lengths = clips()
    model = audio_model("rnn_classifier")
    feats, _ = model.features(waves, lengths)
    model.eval()
    assert torch.equal(_body_inputs(model, waves, lengths), feats)
    model.train()
    torch.manual_seed(3)
    masked = _body_inputs(model, waves, lengths)
    zeroed = (masked == 0) & (feats != 0)
    assert zeroed.any()
    assert (masked[~zeroed] == feats[~zeroed]).all()  # masking only: nothing else changes
    plain = audio_model("rnn_classifier", augment=False).train()
    assert torch.equal(_body_inputs(plain, waves, lengths), feats)


def test_attention_over_frames_and_over_patches():
    waves, lengths = clips()
    frames = 31  # of the longest clip
    for body, size in (("transformer_classifier", frames), ("transformer_cls", frames + 1)):
        model = audio_model(body).eval()
        weights = model.attention(waves, lengths)
        assert model.has_attention and len(weights) == 2
        assert all(w.shape == (3, 2, size, size) for w in weights)
        last = 12 + size - frames  # the second clip's last frame (13 frames; [CLS] first)
        assert (weights[0][1, :, :, last] > 0).all()
        assert weights[0][1, :, :, last + 1 :].abs().max() == 0  # padded frames
    vit = audio_model("vit").eval()
    assert vit.patch_grid == (N_MELS // 8, 32 // 8)
    weights = vit.attention(waves, lengths)
    assert len(weights) == 2 and all(w.shape == (3, 2, 9, 9) for w in weights)
    # the clip of 2 frames fills the first patch column; the later columns are masked keys
    grid = weights[0][2, :, :, 1:].reshape(2, 9, 2, 4)  # (h, queries, rows, columns)
    assert grid[..., 1:].abs().max() == 0 and grid[..., 0].abs().max() > 0
    assert attention_rollout(weights).shape == (3, 8)
    for body in ("cnn_text", "cnn_spectrogram", "rnn_classifier"):
        model = audio_model(body).eval()
        assert not model.has_attention and model.attention(waves, lengths) == []


def test_vit_masks_the_patch_columns_past_an_images_end():
    torch.manual_seed(0)
    model = VisionTransformer(4, ViTConfig(patch_size=4, **SMALL), image_shape=(1, 8, 24)).eval()
    assert model.grid == (2, 6)
    images = torch.randn(2, 1, 8, 24)
    columns = torch.tensor([10, 24])
    junk = images.clone()
    junk[0, :, :, 12:] = 100.0  # wholly past the first image's 10 columns
    torch.testing.assert_close(model(junk, columns=columns), model(images, columns=columns))
    assert not torch.allclose(model(junk)[0], model(images)[0])  # unmasked, they count
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 1, 8, 24\)"):
        model(torch.randn(2, 1, 8, 8))


def test_the_cnn_reads_zeros_past_each_clips_frames():
    torch.manual_seed(0)
    cfg = CNNTextConfig(embed_dim=8, channels=4, widths=[2, 4], dropout=0.0)
    model = CNNTextClassifier(None, 3, cfg, input_dim=5).eval()
    frames = torch.randn(2, 6, 5)
    lengths = torch.tensor([6, 2])
    junk = frames.clone()
    junk[1, 2:] = 50.0
    torch.testing.assert_close(model(junk, lengths), model(frames, lengths))
    torch.testing.assert_close(model(frames[1:, :2], lengths[1:]), model(frames, lengths)[1:])


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_spectrogram_cnn_reads_zeros_past_each_clips_frames(precision):
    """Whatever lies past a clip's frames never reaches its logits, at odd lengths too (the
    pools round up), and a clip shorter than a pool window still gets logits."""
    torch.manual_seed(0)
    cfg = SpectrogramCNNConfig(widths=[4, 6, 8], dropout=0.0)
    model = SpectrogramCNN(10, 3, cfg).eval()
    frames = torch.randn(3, 13, 10)
    lengths = torch.tensor([13, 5, 1])
    junk = frames.clone()
    junk[1, 5:] = 50.0
    junk[2, 1:] = -50.0
    with computing_in(precision):
        batch = model(frames, lengths)
        assert torch.equal(model(junk, lengths), batch)  # the same kernels, the same zeros
        alone = [model(frames[i : i + 1, :n], lengths[i : i + 1]) for i, n in enumerate([13, 5, 1])]
        unmasked = model(junk)[1], model(frames)[1]
    assert_close_in(precision, batch, torch.cat(alone))
    assert not torch.allclose(*unmasked)  # without lengths, they count


def test_the_spectrogram_cnn_slides_along_the_mel_axis():
    """A pattern moved up the mel axis by one pool's worth of channels meets the same filters:
    the last block's map moves with it (what a 1-D CNN over frames, whose filters read every
    channel at its place, cannot do)."""
    torch.manual_seed(0)
    model = SpectrogramCNN(16, 3, SpectrogramCNNConfig(widths=[4], dropout=0.0)).eval()
    frames = torch.zeros(1, 8, 16)
    frames[0, 2:6, 3:6] = torch.randn(4, 3)
    moved = torch.roll(frames, 4, dims=2)  # 4 channels up: two 2x2 pool cells
    seen = []
    hook = model.pool.register_forward_hook(lambda m, args, out: seen.append(out))
    model(frames), model(moved)
    hook.remove()
    torch.testing.assert_close(seen[1][..., 2:, :], seen[0][..., :-2, :])


@pytest.mark.parametrize(
    "body", ["cnn_text", "cnn_spectrogram", "rnn_classifier", "transformer_cls", "vit"]
)
def test_the_config_round_trips_through_yaml(tmp_path, body):
    raw = {
        "data": {"dataset": "fsdd"},
        "model": {"arch": "audio_classifier", "augment": False, "body": BODY[body]},
    }
    cfg = config_from_dict(raw)
    save_config(cfg, tmp_path / "config.yaml")
    again = load_config(tmp_path / "config.yaml")
    assert again == cfg and type(again.model.body) is type(cfg.model.body)
    assert again.model.body.arch == BODY[body]["arch"] and again.model.augment is False


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"arch": "rnn_lm"}, "arch 'rnn_lm' is not a classifier the audio front end feeds"),
        ({"arch": "cnn_image"}, "arch 'cnn_image' is not a classifier"),
        ({"d_model": 8}, "model.body: arch is missing"),
        ({"arch": "vit", "preset": "tiny", "image_size": 28}, "leave image_size out"),
        ({"arch": "vit", "preset": "tiny", "patch_size": 6}, "patch_size=6 does not divide"),
        ({"arch": "transformer_classifier", "d_model": -1}, "model.body.d_model"),
        (
            {"arch": "cnn_spectrogram", "widths": []},
            "model.body.widths: List should have at least 1",
        ),
        ({"arch": "cnn_spectrogram", "channels": 4}, "model.body.channels: unknown key"),
    ],
)
def test_a_wrong_body_is_refused_naming_the_key(body, needle):
    raw = {"data": {"dataset": "fsdd"}, "model": {"arch": "audio_classifier", "body": body}}
    with pytest.raises(ConfigError) as err:
        config_from_dict(raw, "audio.yaml")
    (line,) = [x for x in str(err.value).splitlines() if needle in x]
    assert "audio.yaml" in str(err.value)
    if "not a classifier" in needle:
        assert all(repr(arch) in line for arch in BODIES)


def test_the_model_needs_the_sample_rate_of_its_clips():
    cfg = model_cfg("cnn_text")
    with pytest.raises(ValueError, match="needs sample_rate"):
        build_model(cfg, num_classes=3)
    model = build_model(cfg, num_classes=3, sample_rate=16000)
    assert isinstance(model, AudioClassifier) and model.log_mel.sample_rate == 16000


def test_clip_norm_makes_a_gain_a_no_op():
    """A louder copy moves every log-mel value by the same 20·log10(gain) dB; subtracting each
    clip's own mean per channel (``features.clip_norm``) takes that away exactly."""
    waves = 0.1 * torch.randn(2, 4000, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([4000, 2500])
    for clip_norm, moves in ((False, 20 * math.log10(4.0)), (True, 0.0)):
        cfg = AudioClassifierConfig(features={"n_mels": 16, "clip_norm": clip_norm})
        model = AudioClassifier(cfg, num_classes=3, sample_rate=8000).eval()
        quiet, n = model.raw_features(waves, lengths)
        loud, _ = model.raw_features(4.0 * waves, lengths)
        real = torch.arange(quiet.shape[1])[None, :] < n[:, None]
        diff = (loud - quiet)[real]
        torch.testing.assert_close(diff, torch.full_like(diff, moves), atol=1e-3, rtol=0)
