import pytest
import yaml

from seqlab.config import (
    ExperimentConfig,
    RNNLMConfig,
    TransformerLMConfig,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    load_config,
    save_config,
)
from seqlab.errors import ConfigError


def write(tmp_path, obj, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj) if not isinstance(obj, str) else obj)
    return path


def test_defaults_validate_and_round_trip(tmp_path):
    cfg = ExperimentConfig()
    save_config(cfg, tmp_path / "resolved.yaml")
    assert load_config(tmp_path / "resolved.yaml") == cfg
    assert config_from_dict(config_to_dict(cfg)) == cfg


def test_unknown_key_names_key_value_and_allowed(tmp_path):
    path = write(tmp_path, {"train": {"lrr": 0.1}})
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    msg = str(exc.value)
    assert str(path) in msg
    assert "train.lrr: unknown key" in msg and "0.1" in msg
    assert "lr" in msg.split("allowed keys here:")[1]


def test_unknown_key_inside_model_union_lists_that_models_keys(tmp_path):
    path = write(tmp_path, {"model": {"arch": "transformer_lm", "layers": 3}})
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    msg = str(exc.value)
    assert "model.layers: unknown key" in msg
    assert "num_layers" in msg and "d_model" in msg


def test_bad_value_names_key_value_and_choices(tmp_path):
    path = write(tmp_path, {"model": {"arch": "rnn_lm", "cell": "lstn"}})
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    msg = str(exc.value)
    assert "model.cell" in msg and "'lstn'" in msg and "'peephole_lstm'" in msg


def test_bad_arch_lists_the_archs(tmp_path):
    with pytest.raises(ConfigError, match="rnn_lm.*transformer_lm"):
        load_config(write(tmp_path, {"model": {"arch": "gpt"}}))


def test_cross_field_check(tmp_path):
    with pytest.raises(ConfigError, match="not divisible by num_heads"):
        load_config(
            write(tmp_path, {"model": {"arch": "transformer_lm", "d_model": 10, "num_heads": 4}})
        )
    with pytest.raises(ConfigError, match="pick two languages"):
        load_config(write(tmp_path, {"data": {"src_lang": "de", "tgt_lang": "de"}}))


@pytest.mark.parametrize(
    ("average", "keep", "kept"), [(4, 2, 4), (3, 2, 3), (2, 5, 5), (0, 2, 2), (1, 1, 1)]
)
def test_pruning_keeps_the_checkpoints_average_last_needs_beyond_keep_last(average, keep, kept):
    """train.average_last above train.keep_last is accepted (a run written with it stays
    readable) and raises the checkpoints kept to what the average needs."""
    cfg = config_from_dict({"train": {"average_last": average, "keep_last": keep}})
    assert cfg.train.checkpoints_kept == kept


def test_overrides_are_typed_and_validated(tmp_path):
    path = write(tmp_path, {"data": {"dataset": "timemachine"}, "model": {"arch": "rnn_lm"}})
    cfg = load_config(path, ["train.lr=3e-4", "model.num_layers=3", "train.max_steps=10"])
    assert cfg.train.lr == pytest.approx(3e-4)
    assert isinstance(cfg.model, RNNLMConfig) and cfg.model.num_layers == 3
    with pytest.raises(ConfigError, match=r"train\.lr.*'fast'"):
        load_config(path, ["train.lr=fast"])
    with pytest.raises(ConfigError, match=r"train\.learning_rate: unknown key"):
        load_config(path, ["train.learning_rate=1"])
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(path, ["train.lr"])
    with pytest.raises(ConfigError, match="is a value, not a section"):
        apply_overrides({"train": {"lr": 1}}, ["train.lr.x=2"])


def test_override_can_switch_model_arch(tmp_path):
    overrides = ["data.dataset=timemachine", "model.arch=transformer_lm", "model.d_model=64"]
    cfg = load_config(write(tmp_path, {}), overrides)
    assert isinstance(cfg.model, TransformerLMConfig) and cfg.model.d_model == 64


def test_not_yaml_or_not_mapping(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "train: [1, 2"))
    with pytest.raises(ConfigError, match="mapping"):
        load_config(write(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_every_shipped_config_validates():
    from pathlib import Path

    configs = sorted((Path(__file__).parents[1] / "configs").glob("*.yaml"))
    assert configs, "configs/ has no YAML files"
    for path in configs:
        load_config(path)


def test_reference_config_lists_every_key():
    from pathlib import Path

    from seqlab.config import DataConfig, DecodeConfig, SubwordConfig, TrainConfig

    ref = yaml.safe_load((Path(__file__).parents[1] / "configs" / "reference.yaml").read_text())
    assert set(ref["data"]) == set(DataConfig.model_fields)
    assert set(ref["data"]["subword"]) == set(SubwordConfig.model_fields)
    assert set(ref["train"]) == set(TrainConfig.model_fields)
    assert set(ref["decode"]) == set(DecodeConfig.model_fields)
    assert set(ref["model"]) == set(RNNLMConfig.model_fields)
    assert config_from_dict(ref) == ExperimentConfig(), "reference.yaml must show the defaults"
