"""``model.positions`` in the Vision Transformer (1-D over the class token and the patches in
raster order; bidirectional, so not ``none``) and in the Transformer forecaster (causal, every
scheme): the positions reach the model, padding and batching change nothing, the forecaster stays
causal, the default's checkpoints keep their keys, and a run of each trains and loads.

The three language Transformers are tested in test_position_schemes.py.
"""

import contextlib
import io
import warnings

import pytest
import torch

import seqlab
from precision_helpers import PRECISIONS, assert_close_in, computing_in
from seqlab import catalog
from seqlab.config import config_from_dict
from seqlab.errors import ConfigError
from seqlab.experiment import train
from seqlab.models import build_model
from seqlab.models.forecasters import TransformerForecaster, TransformerForecasterConfig
from seqlab.models.vit import VisionTransformer, ViTConfig, attention_rollout
from seqlab.nn.positional_encoding import sinusoidal_table
from test_position_schemes import _nonzero_t5_tables

SCHEMES = list(catalog.positions())
#: the ViT's encoder is bidirectional: every scheme but ``none``
VIT_SCHEMES = [p for p, spec in catalog.positions().items() if not spec.causal_only]
SMALL = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0}


def _without_positions(model):
    """The same model with its absolute table and its relative scheme taken away."""
    for name in ("pos_embed", "pos"):
        if hasattr(model, name):
            setattr(model, name, None)
    model.relative = None
    return model


# ---------------------------------------------------------------------------- vision transformer
def _vit(positions):
    """A 2-layer ViT over 8×24 images cut into a 2×6 grid of 4×4 patches."""
    torch.manual_seed(0)
    cfg = ViTConfig(patch_size=4, positions=positions, **SMALL)
    model = VisionTransformer(4, cfg, image_shape=(1, 8, 24)).eval()
    _nonzero_t5_tables(model)
    return model


def _swap_patches(images):
    """Patch (row 0, column 0) and patch (row 1, column 5) swapped: tokens 1 and 12."""
    out = images.clone()
    out[..., 0:4, 0:4], out[..., 4:8, 20:24] = images[..., 4:8, 20:24], images[..., 0:4, 0:4]
    return out


def test_the_cases_cover_the_schemes():
    assert set(VIT_SCHEMES) == set(SCHEMES) - {"none"}
    assert {"learned", "sinusoidal", "rope", "alibi", "t5_bias", "none"} == set(SCHEMES)


@pytest.mark.parametrize("positions", VIT_SCHEMES)
def test_vit_positions_reach_the_logits_and_the_attention_weights(positions):
    """Swapping two patches changes the logits and does not merely permute the attention
    weights; without positions (the control) it would (attention is permutation-equivariant)."""
    model = _vit(positions)
    images = torch.randn(2, 1, 8, 24, generator=torch.Generator().manual_seed(2))
    swapped = _swap_patches(images)
    order = list(range(13))
    order[1], order[12] = 12, 1  # the swapped image's tokens, as the original's

    def permuted_weights_agree():
        w, w_swapped = model.attention(images)[-1], model.attention(swapped)[-1]
        return torch.allclose(w_swapped[..., order, :][..., order], w, atol=1e-5)

    with torch.no_grad():
        assert not torch.allclose(model(images), model(swapped), atol=1e-4)
        assert not permuted_weights_agree()
        _without_positions(model)
        torch.testing.assert_close(model(images), model(swapped), atol=1e-5, rtol=0)
        assert permuted_weights_agree()


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions", VIT_SCHEMES)
def test_vit_each_image_alone_equals_the_batch_and_padding_changes_nothing(positions, precision):
    """Three images with 24, 10 and 3 real columns (junk past them): the logits of each alone,
    and of the images without the junk; every layer's weights on the masked patches are 0."""
    model = _vit(positions)
    images = torch.randn(3, 1, 8, 24, generator=torch.Generator().manual_seed(3))
    columns = torch.tensor([24, 10, 3])
    junk = images.clone()
    junk[1, ..., 12:], junk[2, ..., 4:] = 50.0, -50.0  # the patch columns past each image's end
    with computing_in(precision):
        batch = model(junk, columns=columns)
        clean = model(images, columns=columns)
        alone = torch.cat([model(junk[i : i + 1], columns=columns[i : i + 1]) for i in range(3)])
        weights = model.attention(junk, columns=columns)
    assert_close_in(precision, batch, alone)
    assert_close_in(precision, batch, clean)
    grid = torch.stack(weights)[:, 1, :, :, 1:].reshape(2, 2, 13, 2, 6)  # (L, h, T, rows, cols)
    assert grid[..., 3:].abs().max() == 0 and grid[..., :3].min() > 0  # 10 columns: 3 patches
    assert attention_rollout(weights).shape == (3, 12)
    sums = weights[0].float().sum(-1)  # (B, h, T): each query's weights sum to 1
    torch.testing.assert_close(
        sums, torch.ones(3, 2, 13), atol=1e-2 if precision == "bf16" else 1e-5, rtol=0
    )


def test_vit_default_keeps_the_checkpoint_keys_and_the_learned_table():
    """A config without ``positions`` is the learned table of every earlier checkpoint: the same
    keys and shapes, ``pos_embed`` a trained parameter; the other schemes save no table."""
    model = VisionTransformer(3, ViTConfig(patch_size=7, **{**SMALL, "num_layers": 1}))
    block = [
        f"blocks.0.{name}"
        for name in (
            "self_attn.in_proj.weight",
            "self_attn.in_proj.bias",
            "self_attn.out_proj.weight",
            "self_attn.out_proj.bias",
            "addnorm1.ln.weight",
            "addnorm1.ln.bias",
            "ffn.linear1.weight",
            "ffn.linear1.bias",
            "ffn.linear2.weight",
            "ffn.linear2.bias",
            "addnorm2.ln.weight",
            "addnorm2.ln.bias",
        )
    ]
    state = model.state_dict()
    assert list(state) == [
        "cls_token",
        "pos_embed",
        "patch_embed.proj.weight",
        "patch_embed.proj.bias",
        *block,
        "norm.weight",
        "norm.bias",
        "head.weight",
        "head.bias",
    ]
    assert state["pos_embed"].shape == (1, 17, 16) and model.pos_embed.requires_grad
    assert model.relative is None
    cfg = ViTConfig(patch_size=7, positions="learned", **{**SMALL, "num_layers": 1})
    VisionTransformer(3, cfg).load_state_dict(state)  # strict: the same keys
    for positions in ("sinusoidal", "rope", "t5_bias"):
        cfg = ViTConfig(patch_size=7, positions=positions, **{**SMALL, "num_layers": 1})
        other = VisionTransformer(3, cfg)
        extra = {"relative.bias_table.weight"} if positions == "t5_bias" else set()
        assert set(other.state_dict()) == set(state) - {"pos_embed"} | extra
    sinusoidal = VisionTransformer(3, ViTConfig(patch_size=7, positions="sinusoidal", **SMALL))
    torch.testing.assert_close(sinusoidal.pos_embed, sinusoidal_table(17, 16)[None])


def test_vit_refuses_no_positions_naming_the_key():
    for model, dataset, key in (
        ({"arch": "vit", "preset": "tiny", "positions": "none"}, "mnist", "model:"),
        (
            {"arch": "audio_classifier", "body": {"arch": "vit", "positions": "none", **SMALL}},
            "fsdd",
            "model.body:",
        ),
    ):
        with pytest.raises(ConfigError) as exc:
            config_from_dict({"data": {"dataset": dataset}, "model": model}, "vit.yaml")
        (line,) = str(exc.value).splitlines()[1:]
        assert "vit.yaml" in str(exc.value) and key in line
        assert "positions: none leaves a bidirectional encoder blind" in line


@pytest.mark.parametrize("positions", ["sinusoidal", "alibi"])
def test_the_audio_classifiers_vit_body_takes_the_scheme(positions):
    """``model.body.positions`` reaches the ViT; a clip alone equals it in a padded batch."""
    cfg = config_from_dict(
        {
            "data": {"dataset": "fsdd"},
            "model": {
                "arch": "audio_classifier",
                "features": {"n_mels": 16},
                "max_frames": 32,
                "body": {"arch": "vit", "patch_size": 8, "positions": positions, **SMALL},
            },
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg.model, num_classes=3, sample_rate=8000).eval()
    assert model.body.relative is None if positions == "sinusoidal" else model.body.relative.kind
    assert (model.body.pos_embed is None) == (positions == "alibi")
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([2400, 1000])
    waves = torch.randn(2, 2400, generator=g) * 0.1
    waves[1, 1000:] = 0.0
    with torch.no_grad():
        batch = model(waves, lengths)
        alone = model(waves[1:, :1000], lengths[1:])
    torch.testing.assert_close(batch[1:], alone, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------- forecaster
def _forecaster(positions, window=8):
    torch.manual_seed(0)
    cfg = TransformerForecasterConfig(
        d_model=16, num_heads=2, num_layers=2, d_ff=32, positions=positions
    )
    model = TransformerForecaster(window, cfg).eval()
    _nonzero_t5_tables(model)
    return model


def _hidden_states(model, x):
    """Every position's output of the last block ``(B, τ, d)`` (the forecast reads the last)."""
    seen = []
    handle = model.blocks[-1].register_forward_hook(lambda _m, _i, out: seen.append(out[0]))
    with torch.no_grad():
        model(x)
    handle.remove()
    return seen[0]


@pytest.mark.parametrize("positions", SCHEMES)
def test_forecaster_is_causal(positions):
    """Changing step 5 of the window changes no output before it, and every output from it on."""
    model = _forecaster(positions)
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(4))
    changed = x.clone()
    changed[:, 5] += 3.0
    h, h_changed = _hidden_states(model, x), _hidden_states(model, changed)
    torch.testing.assert_close(h_changed[:, :5], h[:, :5], atol=1e-6, rtol=0)
    assert (h_changed[:, 5:] - h[:, 5:]).abs().amax(-1).min() > 1e-4


@pytest.mark.parametrize("positions", [p for p in SCHEMES if p != "none"])
def test_forecaster_positions_reach_the_output(positions):
    model = _forecaster(positions)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        with_positions = model(x)
        without = _without_positions(model)(x)
    assert not torch.allclose(with_positions, without, atol=1e-4)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("positions", SCHEMES)
def test_forecaster_each_window_alone_equals_the_batch(positions, precision):
    model = _forecaster(positions)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(6))
    with computing_in(precision):
        batch = model(x)
        alone = torch.cat([model(x[i : i + 1]) for i in range(4)])
    assert batch.shape == (4,)
    assert_close_in(precision, batch, alone)


def test_forecaster_default_keeps_the_checkpoint_keys():
    cfg = TransformerForecasterConfig(d_model=16, num_heads=2, num_layers=1, d_ff=32)
    state = TransformerForecaster(4, cfg).state_dict()
    assert list(state)[:3] == ["pos", "inp.weight", "inp.bias"] and state["pos"].shape == (4, 16)
    assert list(state)[-4:] == ["norm.weight", "norm.bias", "out.weight", "out.bias"]
    for positions in ("sinusoidal", "alibi", "none"):
        other = TransformerForecaster(4, cfg.model_copy(update={"positions": positions}))
        assert set(other.state_dict()) == set(state) - {"pos"}


# ------------------------------------------------------------------------------- trained runs
def _quietly_train(raw, run_dir):
    quiet = io.StringIO()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stderr(quiet),
        contextlib.redirect_stdout(quiet),
    ):
        warnings.simplefilter("ignore")
        train(config_from_dict(raw), run_dir)


def test_a_vit_with_t5_bias_trains_and_loads(tmp_path, monkeypatch):
    """A few steps on synthetic images: the T5 table (zero at the start) is trained, saved and
    loaded back with the run."""
    from tiny_runs import _synthetic_images

    monkeypatch.setattr("seqlab.tasks.classifier.splits.image_splits", _synthetic_images)
    raw = {
        "data": {"dataset": "mnist", "batch_size": 16, "num_examples": 64, "val_examples": 16},
        "model": {"arch": "vit", "patch_size": 7, "positions": "t5_bias", **SMALL},
        "train": {"max_steps": 3, "eval_every": 3, "threads": 1, "lr": 0.01, "log_every": 1000},
    }
    torch.manual_seed(0)
    _quietly_train(raw, tmp_path / "vit")
    classifier = seqlab.load(tmp_path / "vit")
    assert classifier.cfg.model.positions == "t5_bias"
    table = classifier.model.relative.bias_table.weight
    assert table.abs().max() > 0  # trained away from its zero start
    assert classifier.model.pos_embed is None
    probs = classifier.probabilities(torch.rand(2, 1, 28, 28))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))
    names, weights = classifier.attention(torch.rand(1, 28, 28))
    assert len(names) == 17 and classifier.rollout(weights).shape == (16,)


def test_a_transformer_forecaster_with_alibi_trains_and_forecasts(tmp_path):
    raw = {
        "data": {"dataset": "sine", "length": 120, "window": 6, "test_fraction": 0.2},
        "model": {
            "arch": "transformer_forecaster",
            "d_model": 16,
            "num_heads": 2,
            "num_layers": 1,
            "d_ff": 32,
            "positions": "alibi",
        },
        "train": {"max_steps": 3, "eval_every": 3, "threads": 1, "log_every": 1000},
    }
    torch.manual_seed(0)
    _quietly_train(raw, tmp_path / "fc")
    forecaster = seqlab.load(tmp_path / "fc")
    assert forecaster.cfg.model.positions == "alibi"
    assert forecaster.model.relative.kind == "alibi" and forecaster.model.pos is None
    history = [0.1 * i for i in range(10)]
    values = forecaster.forecast(history, 3)
    assert len(values) == 3 and all(abs(v) < 1e3 for v in values)
    first = forecaster.predict_next(torch.tensor([history[-6:]]))
    assert values[0] == pytest.approx(float(first[0]), abs=1e-5)
