"""Typed, validated experiment configuration.

An experiment is one YAML file with four sections, ``data``, ``model``, ``train`` and ``decode``,
loaded into pydantic models. Every model forbids unknown keys, so a typo fails loudly, naming the
key, the offending value and what is allowed. Command-line overrides use dotted paths
(``train.lr=3e-4``) and go through exactly the same validation.

- :mod:`seqlab.config.data_section`, :mod:`seqlab.config.sections`: the sections
  (:class:`DataConfig`; :class:`ModelConfigBase`, :class:`TrainConfig`, :class:`DecodeConfig`)
  and the checks within them, on the base of :mod:`seqlab.config.strict` (:class:`Strict`);
- :mod:`seqlab.config.experiment`: the whole experiment checked across its sections
  (:class:`ExperimentConfig`), read and written (:func:`load_config`, :func:`config_from_dict`,
  :func:`save_config`);
- :mod:`seqlab.config.models`, :mod:`seqlab.config.audio`: the ``model`` section of each of
  seqlab's own architectures, found by ``model.arch`` (:mod:`seqlab.config.archs`) without
  importing a model;
- :mod:`seqlab.config.files`: the YAML a file is written in, the shipped configs found by name,
  the overrides and the report of what is wrong in one.

The lists a config chooses from are registered next to the code they describe
(:mod:`seqlab.catalog`): ``data.dataset`` (the readers in :mod:`seqlab.data`), ``model.arch``
(each architecture's builder in :mod:`seqlab.models`, registered with its config class),
``model.cell`` (:mod:`seqlab.nn.cells`), and each task (:mod:`seqlab.tasks`), whose rules across
sections are here (:data:`seqlab.config.experiment.TASK_RULES`). ``configs/reference.yaml`` lists every key with its default and its choices.
"""

from __future__ import annotations

from seqlab import catalog
from seqlab.config.archs import MODEL_CONFIGS
from seqlab.config.data_section import (
    DataConfig,
    DatasetName,
    Language,
    SubwordConfig,
    check_speakers,
)
from seqlab.config.experiment import (
    ExperimentConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    save_config,
)
from seqlab.config.sections import (
    MAX_LR,
    AttentionName,
    CellName,
    DecodeConfig,
    ModelConfigBase,
    PositionsName,
    TrainConfig,
    check_heads,
    check_positions,
)
from seqlab.config.strict import Decay, NonNegative, Positive, Probability, Strict

__all__ = [
    "MAX_LR",
    "AttentionName",
    "CellName",
    "DataConfig",
    "DatasetName",
    "Decay",
    "DecodeConfig",
    "ExperimentConfig",
    "Language",
    "ModelConfigBase",
    "NonNegative",
    "PositionsName",
    "Positive",
    "Probability",
    "Strict",
    "SubwordConfig",
    "TrainConfig",
    "check_heads",
    "check_positions",
    "check_speakers",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "save_config",
]


def __getattr__(name: str) -> type[ModelConfigBase]:
    """``seqlab.config.TransformerConfig`` and the other model configs: seqlab's own
    (:mod:`seqlab.config.models`, :mod:`seqlab.config.audio`), then those of architectures
    registered from outside seqlab, found by class name."""
    if name.endswith("Config") and not name.startswith("_"):
        for config in [*MODEL_CONFIGS.values(), *(s.config for s in catalog.models().values())]:
            if config.__name__ == name:
                return config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
