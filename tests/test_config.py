import math
import types
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from cli_checks import fails, write_config, write_yaml
from seqlab import catalog
from seqlab.cli import main
from seqlab.config import (
    DataConfig,
    DecodeConfig,
    ExperimentConfig,
    RNNLMConfig,
    SubwordConfig,
    TrainConfig,
    TransformerLMConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    save_config,
)
from seqlab.config.files import apply_overrides
from seqlab.errors import ConfigError
from tiny_runs import LM_TEXT as TEXT
from tiny_runs import lm_raw, mt_raw


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


def test_empty_and_duplicate_key_configs(tmp_path, capsys):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    fails(capsys, ["train", empty, "--out", tmp_path / "r"], empty, "is empty")
    dup = tmp_path / "dup.yaml"
    dup.write_text("train:\n  lr: 0.1\n  epochs: 3\n  lr: 0.2\n")
    fails(
        capsys, ["train", dup, "--out", tmp_path / "r"], f"{dup}:4", "'lr' appears twice", "line 2"
    )
    assert not (tmp_path / "r").exists()


def test_booleans_are_not_numbers(tmp_path, capsys):
    cfg = write_config(tmp_path / "c.yaml", {"model": {"arch": "rnn_lm"}})
    fails(
        capsys,
        ["train", cfg, "model.hidden_size=true", "--out", tmp_path / "r"],
        "model.hidden_size",
        "True",
    )


def test_sampling_is_refused_for_translation():
    raw = mt_raw()
    raw["decode"]["strategy"] = "sample"
    with pytest.raises(ConfigError, match="decode.strategy=sample is for language models"):
        config_from_dict(raw)


@pytest.mark.parametrize(
    "override,needles",
    [
        ("data.max_vocab=2", ["data.max_vocab", "greater than or equal to 4"]),
        ("data.max_len=1", ["data.max_len", "greater than or equal to 2"]),
        ("model.max_len=50", ["model.max_len=50 is smaller than data.max_len=100"]),
        ("train.warmup_fraction=0.1", ["train.warmup_steps", "not both"]),
    ],
)
def test_cross_field_rules_fail_at_load_time(tmp_path, capsys, override, needles):
    raw = {
        "data": {"dataset": "dates", "tokenizer": "char"},
        "model": {"arch": "transformer"},
        "train": {"warmup_steps": 10},
    }
    cfg = write_config(tmp_path / "c.yaml", raw)
    fails(capsys, ["train", cfg, override, "--out", tmp_path / "r"], *needles)


def test_shipped_configs_are_package_data():
    """``seqlab demo dates`` finds its configs inside the installed package."""
    import seqlab
    from seqlab.demos.dates import CONFIGS

    package = Path(seqlab.__file__).parent
    for name in CONFIGS.values():
        assert (package / "configs" / f"{name}.yaml").is_file()
        load_config(name)  # by name, from any working directory
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert '"configs/*.yaml"' in pyproject


def test_a_config_file_names_its_data_and_model(tmp_path, capsys):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    full = lm_raw(corpus)
    no_data = write_yaml(
        tmp_path / "no-data.yaml", {"model": full["model"], "train": full["train"]}
    )
    no_model = write_yaml(tmp_path / "no-model.yaml", {"data": full["data"]})
    neither = write_yaml(tmp_path / "neither.yaml", {"train": {"max_steps": 2}})
    out = tmp_path / "run"
    fails(capsys, ["train", no_data, "--out", out], no_data, "data.dataset: missing")
    err = fails(capsys, ["train", no_model, "--out", out], "model.arch: missing").err
    assert "data.dataset" not in err
    err = fails(capsys, ["train", neither, "--out", out], "data.dataset", "model.arch").err
    assert "never trains a built-in default" in err
    fails(capsys, ["ngram", no_data], "data.dataset: missing")
    assert not out.exists()
    # a bad value and a missing section are reported together
    err = fails(capsys, ["train", no_model, "train.lr=-1", "--out", out], "train.lr", "model.arch")
    # naming them by override works; so does the full file
    cfg = load_config(no_model, ["model.arch=rnn_lm", "model.hidden_size=16"])
    assert cfg.model.arch == "rnn_lm" and cfg.data.path == str(corpus)
    assert load_config(write_yaml(tmp_path / "full.yaml", full)).model.hidden_size == 16


def _plain(kind):
    """``kind`` without ``Annotated`` and ``| None``."""
    while True:
        if typing.get_origin(kind) is typing.Annotated:
            kind = typing.get_args(kind)[0]
        elif typing.get_origin(kind) in (typing.Union, types.UnionType):
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        else:
            return kind


def _float_fields(model: type[BaseModel]):
    for name, field in model.model_fields.items():
        kind = _plain(field.annotation)
        if kind is float:
            yield name, "number"
        elif typing.get_origin(kind) is tuple and _plain(typing.get_args(kind)[0]) is float:
            yield name, "pair"


SECTIONS = [DataConfig, SubwordConfig, TrainConfig, DecodeConfig] + [
    spec.config for spec in catalog.models().values()
]


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_every_float_setting_is_finite_and_bounded(section):
    found = list(_float_fields(section))
    for name, kind in found:
        for bad in (math.inf, -math.inf, math.nan, 1e300, -1e300):
            value = (bad, 0.5) if kind == "pair" else bad
            with pytest.raises(ValidationError):
                section.model_validate({name: value})
    if section is TrainConfig:
        assert {n for n, _ in found} >= {"lr", "weight_decay", "betas", "grad_clip", "max_minutes"}
        assert TrainConfig(lr=20.0, weight_decay=0.01, grad_clip=5.0).lr == 20.0  # sane: kept


@pytest.mark.parametrize(
    "override,needle",
    [
        ("train.lr=.inf", "finite"),
        ("train.lr=1e309", "finite"),  # YAML reads it as infinity
        ("train.lr=1e300", "less than or equal to 100"),
        ("train.lr=.nan", "finite"),
        ("train.betas=[2, 0.5]", "train.betas.0"),
        ("decode.temperature=1e300", "decode.temperature"),
        ("decode.max_len_b=1000000000000", "decode.max_len_b"),
        ("train.max_minutes=.inf", "train.max_minutes"),
    ],
)
def test_absurd_numbers_are_refused_before_training(tmp_path, capsys, override, needle):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    cfg = write_yaml(tmp_path / "c.yaml", lm_raw(corpus))
    fails(capsys, ["train", cfg, override, "--out", tmp_path / "r"], override.split("=")[0], needle)
    assert not (tmp_path / "r").exists()


def test_a_relative_data_path_is_stored_absolute(runs, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "corpus.txt").write_text(TEXT)
    raw = lm_raw("corpus.txt")
    (work / "c.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.chdir(work)
    assert main(["train", "c.yaml", "--out", "run"]) == 0
    saved = yaml.safe_load((work / "run" / "config.yaml").read_text())["data"]["path"]
    assert saved == str(work / "corpus.txt")
    monkeypatch.chdir(tmp_path)  # elsewhere: evaluate and resume still find the data
    assert main(["evaluate", "--run", "work/run", "--split", "val", "--json"]) == 0
    assert main(["train", "--resume", "work/run", "train.max_steps=6"]) == 0


def test_a_relative_config_path_not_found_says_what_it_was_read_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as exc:
        load_config("configs/dates-transformer.yaml")
    assert str(exc.value) == (
        f"config file not found: configs/dates-transformer.yaml (a relative path is read from "
        f"the working directory, {tmp_path}; seqlab ships a config of that name: give it as "
        "dates-transformer, from any folder)"
    )
    with pytest.raises(ConfigError, match=r"not found: mine/x.yaml \(a relative path is read"):
        load_config("mine/x.yaml")
