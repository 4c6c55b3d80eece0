"""One experiment, its four sections checked against each other (:class:`ExperimentConfig`), and
its file read, validated and written (:func:`load_config`, :func:`config_from_dict`,
:func:`save_config`).

The sections: :mod:`seqlab.config.data_section`, :mod:`seqlab.config.sections`; the YAML,
overrides and error report: :mod:`seqlab.config.files`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, SerializeAsAny, ValidationError, field_validator, model_validator

from seqlab import catalog
from seqlab.atomic import atomic_write_text
from seqlab.config.archs import model_config
from seqlab.config.data_section import DataConfig
from seqlab.config.files import (
    apply_overrides,
    find_config,
    format_validation_error,
    missing_keys,
    read_yaml,
    short,
)
from seqlab.config.models import RNNLMConfig
from seqlab.config.sections import DecodeConfig, ModelConfigBase, TrainConfig
from seqlab.config.strict import Strict
from seqlab.errors import ConfigError


def _archs() -> str:
    """Every registered architecture, for an error message (imports them all)."""
    return catalog.choices(sorted(catalog.models()))


def _default_model() -> ModelConfigBase:
    return RNNLMConfig()


#: how errors name what a dataset holds and what a model reads
def _a(task: str) -> str:
    """``a translation``, ``an audio classification``: a task's name after its article."""
    words = task.replace("_", " ")
    return f"{'an' if words[:1] in 'aeiou' else 'a'} {words}"


_HOLDS = {"text": "a text", "image": "an image", "series": "a series", "audio": "an audio"}
_READS = {"text": "text", "image": "images", "series": "series", "audio": "recordings"}


class ExperimentConfig(Strict):
    """One experiment: the four sections of a YAML config file, checked against each other.

    The ``model`` section is validated by the config class registered for its ``arch``
    (:func:`seqlab.catalog.models`). Checks across sections: the dataset and the model are for
    the same task and the same inputs (:class:`~seqlab.catalog.DatasetSpec`,
    :class:`~seqlab.catalog.ModelSpec`), then the task's own rules (:data:`TASK_RULES` for
    seqlab's tasks, :attr:`seqlab.catalog.TaskSpec.rules` for one registered from outside).
    """

    name: str = "experiment"
    data: DataConfig = Field(default_factory=DataConfig)
    model: SerializeAsAny[ModelConfigBase] = Field(default_factory=_default_model)
    train: TrainConfig = Field(default_factory=TrainConfig)
    decode: DecodeConfig = Field(default_factory=DecodeConfig)

    @property
    def task(self) -> str:
        """``language_modeling``, ``translation``, …: what the model is for."""
        return self.model.task

    @field_validator("model", mode="before")
    @classmethod
    def _registered_arch(cls, value: object) -> object:
        if isinstance(value, ModelConfigBase):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"expected a mapping with an arch ({_archs()})")
        arch = value.get("arch")
        if arch is None:
            raise ValueError(f"arch is missing; choose {_archs()}")
        config = model_config(arch)  # seqlab's own: with no model imported
        if config is None:
            raise ValueError(
                f"arch {short(arch)} is not a registered architecture; choose {_archs()}"
            )
        return config.model_validate(value)

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        data, model = self.data, self.model
        dataset = catalog.datasets()[data.dataset]
        if dataset.task != model.task:
            raise ValueError(
                f"data.dataset={data.dataset} is {_a(dataset.task)} dataset, but "
                f"model.arch={model.arch} is {_a(model.task)} model"
            )
        # what the model reads: its config class says (an outside model's record may differ)
        spec = None if model.arch in catalog.BUILTIN_MODELS else catalog.model(model.arch)
        reads = spec.inputs if spec is not None else type(model).inputs
        if dataset.inputs != reads:
            raise ValueError(
                f"data.dataset={data.dataset} is {_HOLDS[dataset.inputs]} dataset, but "
                f"model.arch={model.arch} reads {_READS[reads]}"
            )
        rules = TASK_RULES.get(model.task)
        if rules is None and model.task not in catalog.BUILTIN_TASKS:  # a task from outside
            rules = getattr(catalog.task(model.task), "rules", None)
        if rules is not None:
            rules(self)
        return self


# ------------------------------------------------------------------------------- task rules
# Each task's rules across sections are config checks and live here, with the config, so that a
# config validates without importing a task or a model; a task defined outside seqlab brings its
# own in its record.
def check_translation(cfg: ExperimentConfig) -> None:
    """Translation's rules across sections: greedy or beam decoding; shared embeddings need one
    vocabulary for both languages; the model's positions (``model.max_len``) cover the longest
    sentence (``data.max_len``)."""
    data, model = cfg.data, cfg.model
    if cfg.decode.strategy == "sample":
        raise ValueError(
            "decode.strategy=sample is for language models; translation decodes with greedy or beam"
        )
    if getattr(model, "share_embeddings", False) and not (
        data.tokenizer == "subword" and data.subword.joint
    ):
        raise ValueError(
            "model.share_embeddings needs one vocabulary for both sides: data.tokenizer: subword "
            "with data.subword.joint: true (or set model.share_embeddings: false)"
        )
    model_len = getattr(model, "max_len", None)
    if model_len is not None and model_len < data.max_len:
        raise ValueError(
            f"model.max_len={model_len} is smaller than data.max_len={data.max_len}: "
            "the model could not read the longest sentences; raise model.max_len"
        )


def check_classification(cfg: ExperimentConfig) -> None:
    """Classification's rule across sections: a model with learned or sinusoidal positions
    (``model.max_len``) reads sentences of up to ``data.max_len`` tokens. (That a text dataset
    goes with a text model, an image dataset with an image model, is checked for every task.)"""
    model_len = getattr(cfg.model, "max_len", None)
    if model_len is not None and model_len < cfg.data.max_len:
        raise ValueError(
            f"model.max_len={model_len} is smaller than data.max_len={cfg.data.max_len}; "
            "raise model.max_len"
        )


def check_audio_classification(cfg: ExperimentConfig) -> None:
    """Audio classification's rule across sections: the front end's frequencies fit the rate
    the clips are read at (``f_max`` at most half of ``data.sample_rate``)."""
    features = cfg.model.features  # type: ignore[attr-defined]
    nyquist = cfg.data.sample_rate / 2
    if features.f_max is not None and features.f_max > nyquist:
        raise ValueError(
            f"model.features.f_max={features.f_max:g} Hz is above half of data.sample_rate="
            f"{cfg.data.sample_rate} ({nyquist:g} Hz): those frequencies are not in the clips"
        )


def check_language_modeling(cfg: ExperimentConfig) -> None:
    """Language modelling's rules across sections: characters or words as tokens (what
    :func:`seqlab.data.lm_corpus.build_lm_corpus` cuts), and training windows of
    ``data.num_steps`` tokens that fit the model's positions (``model.max_len``)."""
    data = cfg.data
    if data.tokenizer == "subword":
        raise ValueError("language models take data.tokenizer char or word, not subword")
    model_len = getattr(cfg.model, "max_len", None)
    if model_len is not None and model_len < data.num_steps:
        raise ValueError(
            f"model.max_len={model_len} is smaller than data.num_steps={data.num_steps}: "
            "training windows would not fit; raise model.max_len"
        )


#: seqlab's own tasks' rules across sections, by task name (forecasting has none beyond its
#: sections'); each task's record names its function (:attr:`seqlab.catalog.TaskSpec.rules`)
TASK_RULES: dict[str, Callable[[Any], None]] = {
    "translation": check_translation,
    "classification": check_classification,
    "audio_classification": check_audio_classification,
    "language_modeling": check_language_modeling,
}


# ---------------------------------------------------------------------------------------- loading
def config_from_dict(raw: dict[str, Any], source: str = "<dict>") -> ExperimentConfig:
    """Validate a raw mapping into an :class:`ExperimentConfig` or raise :class:`ConfigError`."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections at the top level, got {type(raw).__name__}"
        )
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, raw, ExperimentConfig)) from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML experiment file (or a shipped config by name), apply overrides, validate.

    The file (with its overrides) must name its dataset and model
    (:data:`~seqlab.config.files.REQUIRED_KEYS`); the other keys may be left to their
    defaults. The file's YAML, overrides and errors: :mod:`seqlab.config.files`.
    """
    path = find_config(path)
    raw = read_yaml(path)
    if raw is None:
        raise ConfigError(
            f"{path} is empty; an experiment needs at least its data and model sections "
            "(see configs/reference.yaml)"
        )
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}: expected a mapping of sections (data, model, train, decode) at the top "
            f"level, got {type(raw).__name__}"
        )
    source = str(path)
    if overrides:
        raw = apply_overrides(raw, overrides)
        source += " with overrides " + " ".join(overrides)
    missing = missing_keys(raw)
    try:
        cfg = config_from_dict(raw, source)
    except ConfigError as exc:
        if missing:
            raise ConfigError("\n".join([str(exc), *missing])) from None
        raise
    if missing:
        raise ConfigError("\n".join([f"invalid configuration in {short(source, 300)}:", *missing]))
    return cfg


def config_to_dict(cfg: ExperimentConfig) -> dict[str, Any]:
    """Plain JSON/YAML-safe mapping (tuples become lists) that :func:`config_from_dict` accepts."""
    return cfg.model_dump(mode="json")


def save_config(cfg: ExperimentConfig, path: str | Path) -> None:
    """Write the resolved config as YAML, atomically."""
    atomic_write_text(Path(path), yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
