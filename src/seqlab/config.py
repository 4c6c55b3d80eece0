"""Typed, validated experiment configuration.

An experiment is one YAML file with four sections, ``data``, ``model``, ``train`` and ``decode``,
loaded into the pydantic models below. Every model forbids unknown keys, so a typo fails loudly,
naming the key, the offending value and what is allowed. Command-line overrides use dotted paths
(``train.lr=3e-4``) and go through exactly the same validation.

The lists a config chooses from are registered next to the code they describe
(:mod:`seqlab.catalog`): ``data.dataset`` (the readers in :mod:`seqlab.data`), ``model.arch``
(each architecture's config class sits beside its model in :mod:`seqlab.models`),
``model.cell`` (:mod:`seqlab.nn.rnn`), and each task's rules across sections (its module in
:mod:`seqlab.tasks`). ``configs/reference.yaml`` lists every key with its default and its choices.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from seqlab import catalog
from seqlab.errors import ConfigError

Positive = Annotated[int, Field(gt=0)]
NonNegative = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(ge=0.0, lt=1.0)]
#: an exponential-moving-average coefficient (Adam's β₁, β₂)
Decay = Annotated[float, Field(ge=0.0, lt=1.0)]
#: the largest learning rate accepted (SGD on recurrent LMs uses up to ~20; beyond 100 is a typo)
MAX_LR = 100.0


class Strict(BaseModel):
    """Base for every config section: unknown keys are errors, values are never coerced
    (``true`` is not the number 1, ``"3"`` is not 3), assignments are validated, and every
    number is finite (``.inf``, ``.nan`` and ``1e309``, which YAML reads as infinity, are
    refused); each float field also states the range that makes sense for it."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, strict=True, allow_inf_nan=False
    )


# ----------------------------------------------------------------------------------------- data
def _known_dataset(name: str) -> str:
    known = catalog.datasets()
    if name not in known:
        raise ValueError(f"Input should be {catalog.choices(sorted(known))}")
    return name


#: ``data.dataset``: a registered dataset (:class:`~seqlab.catalog.DatasetSpec`), which says
#: its task, its inputs and whether it reads the user's ``data.path``
DatasetName = Annotated[str, AfterValidator(_known_dataset)]
Language = Literal["en", "de", "fr"]


class SubwordConfig(Strict):
    """SentencePiece settings, used when ``data.tokenizer`` is ``subword``."""

    model_type: Literal["bpe", "unigram"] = "bpe"
    vocab_size: Positive = 8000
    character_coverage: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    joint: bool = Field(True, description="one model for source and target (translation)")


class DataConfig(Strict):
    """Where the text comes from and how it becomes batches."""

    dataset: DatasetName = "timemachine"
    path: str | None = Field(
        None,
        description="a UTF-8 text file (dataset 'text'), or labelled examples (dataset "
        "'text-classification': TSV text<TAB>label, or CSV with a header naming text_column and "
        "label_column)",
    )
    text_column: str = Field("text", description="text-classification CSV: the text's column")
    label_column: str = Field("label", description="text-classification CSV: the label's column")
    # forecasting
    column: str | None = Field(None, description="series CSV: the values' column (default last)")
    missing: Literal["error", "interpolate", "drop"] = "error"
    window: Positive = Field(4, description="τ: past values an autoregressive model reads")
    length: Positive = Field(1000, description="sine: number of steps generated")
    test_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        0.15, description="forecasting: last share of the series kept for testing"
    )
    season: Positive | None = Field(
        None, description="forecasting: period of the seasonal-persistence baseline (steps)"
    )
    tokenizer: Literal["char", "word", "subword"] = "char"
    normalize: Literal["none", "nmt", "letters"] = Field(
        "none", description="letters: d2l Time Machine cleaning; nmt: d2l fra-eng preprocessing"
    )
    subword: SubwordConfig = Field(default_factory=SubwordConfig)
    min_freq: NonNegative = 0
    max_vocab: Annotated[int, Field(ge=4)] | None = Field(
        None, description="at most this many tokens, the 4 reserved ones included"
    )
    # language modelling
    num_steps: Positive = 35
    batch_size: Positive = 32
    sampling: Literal["random", "sequential"] = "sequential"
    val_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.1
    # translation
    src_lang: Language = "en"
    tgt_lang: Language = "de"
    max_len: Annotated[int, Field(ge=2)] = Field(
        100, description="longest sentence in positions, <bos>/<eos> included"
    )
    batch_tokens: Positive = 4096
    num_examples: Positive | None = Field(None, description="use only the first N pairs")
    val_examples: Positive = Field(1000, description="held-out pairs when the dataset has no split")

    @model_validator(mode="after")
    def _languages_differ(self) -> DataConfig:
        datasets = catalog.datasets()
        if datasets[self.dataset].needs_path != (self.path is not None):
            with_path = catalog.choices([n for n, d in datasets.items() if d.needs_path])
            raise ValueError(
                f"data.path is required with dataset {with_path} and only allowed with them "
                f"(data.dataset={self.dataset})"
            )
        if self.src_lang == self.tgt_lang:
            raise ValueError(
                f"src_lang and tgt_lang are both {self.src_lang!r}; pick two languages"
            )
        return self


# ---------------------------------------------------------------------------------------- model
def check_heads(d_model: int | None, num_heads: int | None) -> None:
    """Multi-head attention splits the width into equal heads."""
    if d_model is not None and num_heads and d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")


def _known_cell(name: str) -> str:
    known = catalog.cells()
    if name not in known:
        raise ValueError(f"Input should be {catalog.choices(known)}")
    return name


#: ``model.cell``: a recurrent cell registered in :mod:`seqlab.nn.rnn` (:class:`~seqlab.catalog.CellSpec`)
CellName = Annotated[str, AfterValidator(_known_cell)]


class ModelConfigBase(Strict):
    """Base of every ``model`` section. ``arch`` names the architecture; each architecture's
    config subclasses this next to its model (:class:`seqlab.models.rnn_lm.RNNLMConfig`, …),
    narrows ``arch`` to its own name, sets ``task`` and is registered with its builder
    (:class:`~seqlab.catalog.ModelSpec`). :class:`ExperimentConfig` validates the ``model``
    section with the class registered for its ``arch``."""

    arch: str
    #: ``language_modeling``, ``translation``, ``classification`` or ``forecasting``
    task: ClassVar[str] = ""


# ---------------------------------------------------------------------------------------- train
class TrainConfig(Strict):
    """Optimisation, schedule, checkpointing; nothing here depends on the architecture."""

    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = Field(
        0, description="random seed, 0 to 2**32 - 1 (it is mixed with epoch numbers)"
    )
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    lr: Annotated[float, Field(gt=0.0, le=MAX_LR)] = 1e-3
    weight_decay: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    betas: Annotated[tuple[Decay, Decay], Field(strict=False)] = (0.9, 0.999)
    momentum: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.0
    schedule: Literal["constant", "cosine", "inverse_sqrt", "plateau"] = "constant"
    warmup_steps: NonNegative = 0
    warmup_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(
        None,
        description="warm-up as a share of the training budget (steps, or time when max_minutes runs out first); instead of warmup_steps",
    )
    min_lr_ratio: Annotated[float, Field(ge=0.0, le=1.0)] = 0.1
    epochs: Positive = 10
    max_steps: Positive | None = Field(None, description="stop after this many optimizer steps")
    max_minutes: Annotated[float, Field(gt=0.0, le=525_600.0)] | None = Field(  # a year
        None,
        description="wall-time budget of the run (a resumed run counts time already spent); a cosine schedule decays over it",
    )
    grad_clip: Annotated[float, Field(gt=0.0, le=1e6)] | None = 1.0
    label_smoothing: Probability = 0.0
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto",
        description="auto: bf16 where the hardware runs it natively (feature flags, no timing), "
        "else fp32; the resolved precision is recorded in the run and kept on --resume",
    )
    accumulate: Positive = Field(
        1, description="minibatches per optimizer step (gradient accumulation), per process"
    )
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    threads: NonNegative = Field(0, description="torch threads; 0 leaves PyTorch's default")
    log_every: Positive = 50
    eval_every: Positive | None = Field(
        None, description="steps between validations; None = each epoch"
    )
    save_every: Positive | None = Field(
        None,
        description="steps between checkpoints written without validation (finer checkpoints "
        "for train.average_last); None = at validations only",
    )
    keep_last: Positive = Field(
        2,
        description="the last N trained checkpoints are kept, and the best (an end-of-training "
        "average takes none of their places); train.average_last more when it asks for more",
    )
    early_stopping_patience: NonNegative = Field(
        0, description="evaluations without improvement; 0 = off"
    )
    average_last: NonNegative = Field(
        0,
        description="average the last N checkpoints at the end; kept if it beats the best on "
        "validation (for translation with a beam decode section, by that beam search); the last "
        "N trained checkpoints are kept for it, also beyond train.keep_last",
    )

    @model_validator(mode="after")
    def _warmup(self) -> TrainConfig:
        if self.warmup_fraction is not None and self.warmup_steps:
            raise ValueError(
                f"set train.warmup_steps ({self.warmup_steps}) or train.warmup_fraction "
                f"({self.warmup_fraction}), not both"
            )
        if self.warmup_fraction is not None and self.schedule == "inverse_sqrt":
            raise ValueError(
                "schedule inverse_sqrt is defined by train.warmup_steps; warmup_fraction does not apply"
            )
        return self

    @property
    def checkpoints_kept(self) -> int:
        """How many trained checkpoints pruning keeps besides the best: ``keep_last``, or
        ``average_last`` when that is more. The average asked for needs them at the end, which
        may come at any validation (a time budget, early stopping), so they are kept throughout.
        Raised rather than refused: ``keep_last`` (2 unless set) bounds the disk a run uses,
        ``average_last`` is the result asked for; and a refusal in validation would also make
        runs written before unreadable (their ``config.yaml`` is validated when read)."""
        return max(self.keep_last, self.average_last)


class DecodeConfig(Strict):
    """Decoding for generation and translation.

    Translation decodes with ``greedy`` or ``beam`` search (``nbest`` ≤ ``beam_size``; greedy gives
    one hypothesis); language models generate with ``greedy`` or ``sample`` (``temperature``,
    ``top_k``).
    """

    strategy: Literal["greedy", "beam", "sample"] = "greedy"
    beam_size: Positive = 5
    nbest: Positive = 1
    length_penalty: Annotated[float, Field(ge=0.0, le=10.0)] = 1.0
    max_len_a: Annotated[float, Field(ge=0.0, le=100.0)] = 1.5
    max_len_b: Annotated[int, Field(ge=0, le=100_000)] = 10
    temperature: Annotated[float, Field(gt=0.0, le=100.0)] = 1.0
    top_k: NonNegative = 0
    precision: Literal["fp32", "bf16"] = Field(
        "fp32",
        description="evaluation and decoding (validation during training too): fp32, or bf16 "
        "as a faster option whose outputs agree with fp32 up to near-tied tokens; auto, from "
        "older runs, means fp32",
    )

    @field_validator("precision", mode="before")
    @classmethod
    def _auto_is_fp32(cls, value: object) -> object:
        # inference never switches precision by machine: a sentence's output must not depend
        # on the CPU it is decoded on (older configs say auto, which meant that)
        return "fp32" if value == "auto" else value

    @model_validator(mode="after")
    def _nbest(self) -> DecodeConfig:
        width = self.beam_size if self.strategy == "beam" else 1
        if self.nbest > width:
            raise ValueError(
                f"decode.nbest={self.nbest} needs a beam at least that wide, but the search is "
                + (f"beam with beam_size={self.beam_size}" if width > 1 else f"{self.strategy}")
            )
        return self


def _default_model() -> ModelConfigBase:
    return catalog.models()["rnn_lm"].config()


#: how errors name what a dataset holds and what a model reads
_HOLDS = {"text": "a text", "image": "an image", "series": "a series"}
_READS = {"text": "text", "image": "images", "series": "series"}


class ExperimentConfig(Strict):
    """One experiment: the four sections of a YAML config file, checked against each other.

    The ``model`` section is validated by the config class registered for its ``arch``
    (:func:`seqlab.catalog.models`). Checks across sections: the dataset and the model are for
    the same task and the same inputs (:class:`~seqlab.catalog.DatasetSpec`,
    :class:`~seqlab.catalog.ModelSpec`), then the task's own rules
    (:func:`seqlab.catalog.task_rules`, written in each task's module).
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
        known = catalog.models()
        archs = catalog.choices(sorted(known))
        if not isinstance(value, dict):
            raise ValueError(f"expected a mapping with an arch ({archs})")
        arch = value.get("arch")
        if arch is None:
            raise ValueError(f"arch is missing; choose {archs}")
        if not isinstance(arch, str) or arch not in known:
            raise ValueError(f"arch {short(arch)} is not a registered architecture; choose {archs}")
        return known[arch].config.model_validate(value)

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        data, model = self.data, self.model
        dataset = catalog.datasets()[data.dataset]
        if dataset.task != model.task:
            raise ValueError(
                f"data.dataset={data.dataset} is a {dataset.task.replace('_', ' ')} dataset, but "
                f"model.arch={model.arch} is a {model.task.replace('_', ' ')} model"
            )
        spec = catalog.models().get(model.arch)
        reads = spec.inputs if spec is not None else dataset.inputs
        if dataset.inputs != reads:
            raise ValueError(
                f"data.dataset={data.dataset} is {_HOLDS[dataset.inputs]} dataset, but "
                f"model.arch={model.arch} reads {_READS[reads]}"
            )
        rules = catalog.task_rules().get(model.task)
        if rules is not None:
            rules(self)
        return self


# ------------------------------------------------------------------------------ loading, errors
def _allowed_keys(loc: tuple[Any, ...], raw: Any) -> list[str] | None:
    """Field names of the (nested) section that holds the key at ``loc[-1]``, if it can be
    found; the ``model`` section's are those of the class registered for its ``arch`` (read
    from ``raw``, the mapping that was validated)."""
    current: Any = ExperimentConfig
    node = raw
    for part in loc[:-1]:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        if part not in current.model_fields:
            return None
        current = _strip_optional(current.model_fields[part].annotation)
        node = node.get(part) if isinstance(node, dict) else None
        if current is ModelConfigBase:
            arch = node.get("arch") if isinstance(node, dict) else None
            spec = catalog.models().get(arch) if isinstance(arch, str) else None
            current = spec.config if spec is not None else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _strip_optional(tp: Any) -> Any:
    tp = _strip_annotated(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return _strip_annotated(members[0])
    return tp


def format_validation_error(err: ValidationError, source: str, raw: Any = None) -> str:
    """Turn pydantic's report into lines of ``source: key: problem (got value; allowed ...)``;
    ``raw``, the mapping validated, lets an unknown key of the ``model`` section list its
    architecture's keys."""
    lines = [f"invalid configuration in {short(source, 300)}:"]
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        key = ".".join(str(p) for p in loc) or "<top level>"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc, raw)
            hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            lines.append(f"  {key}: unknown key (value {short(e['input'])}){hint}")
        elif isinstance(e["input"], dict):
            lines.append(f"  {key}: {msg}")  # a cross-field rule: its message names the keys
        else:
            lines.append(f"  {key}: {msg} (got {short(e['input'])})")
    return "\n".join(lines)


def short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: error messages stay readable."""
    text = value if isinstance(value, str) and limit > 80 else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parse_override(item: str) -> tuple[list[str], Any]:
    if "=" not in item:
        raise ConfigError(
            f"override {short(item)} is not of the form section.key=value (e.g. train.lr=3e-4)"
        )
    key, raw = item.split("=", 1)
    path = key.strip().split(".")
    if not all(path):
        raise ConfigError(f"override {short(item)}: empty key segment in {key!r}")
    try:
        value = parse_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"override {short(item)}: value {short(raw)} is not valid YAML: {exc}"
        ) from exc
    return path, value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Set dotted ``key=value`` overrides into a raw config dict (validation happens after)."""
    out = copy.deepcopy(raw)
    for item in overrides:
        path, value = _parse_override(item)
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"override {short(item)}: {part!r} is a value, not a section")
            node = child
        node[path[-1]] = value
    return out


def config_from_dict(raw: dict[str, Any], source: str = "<dict>") -> ExperimentConfig:
    """Validate a raw mapping into an :class:`ExperimentConfig` or raise :class:`ConfigError`."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections at the top level, got {type(raw).__name__}"
        )
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, raw)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise ConfigError(
                    f"{self.name}:{line}: key {key!r} appears twice in one section "
                    f"(first on line {seen[key]}); keep one"
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 floats: PyYAML (YAML 1.1) reads "3e-4" and "1e5" as strings, the way people write rates
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def parse_yaml(text: str, name: str = "<string>") -> Any:
    """YAML with unique keys and YAML 1.2 floats (see :class:`_UniqueKeyLoader`)."""
    loader = _UniqueKeyLoader(text)
    loader.name = name
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, naming the file and line of any problem (duplicate keys included)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config path is a directory, not a YAML file: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return parse_yaml(text, str(path))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


PACKAGED_CONFIGS = Path(__file__).resolve().parent / "configs"


def find_config(name: str | Path) -> Path:
    """A config file path, or the name of a config shipped with seqlab (``dates-bahdanau``)."""
    path = Path(name)
    if path.exists() or len(path.parts) > 1:
        return path
    packaged = PACKAGED_CONFIGS / (path.name if path.suffix else f"{path.name}.yaml")
    if packaged.is_file():
        return packaged
    shipped = ", ".join(sorted(p.stem for p in PACKAGED_CONFIGS.glob("*.yaml")))
    raise ConfigError(f"config file not found: {path} (configs shipped with seqlab: {shipped})")


#: keys a config file must set itself (here or by an override): a run never trains a built-in
#: default dataset or model because a section was left out
REQUIRED_KEYS = ("data.dataset", "model.arch")
_EXAMPLES = {
    "data.dataset": "data: {dataset: text, path: my.txt}",
    "model.arch": "model: {arch: rnn_lm}",
}


def _missing_keys(raw: dict[str, Any]) -> list[str]:
    missing = []
    for key in REQUIRED_KEYS:
        node: Any = raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            missing.append(key)
    return missing


def load_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a YAML experiment file (or a shipped config by name), apply overrides, validate.

    The file (with its overrides) must name its dataset and model (:data:`REQUIRED_KEYS`); the
    other keys may be left to their defaults.
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
    missing = [
        f"  {key}: missing; a config file names its {key.split('.')[0]} itself (e.g. "
        f"{_EXAMPLES[key]}): seqlab never trains a built-in default"
        for key in _missing_keys(raw)
    ]
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
    from seqlab.storage.atomic import atomic_write_text

    atomic_write_text(Path(path), yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def __getattr__(name: str) -> type[ModelConfigBase]:
    """``seqlab.config.TransformerConfig`` and the other model configs, which live next to their
    models (:mod:`seqlab.models`): found among the registered architectures by class name, so
    code that imports them from here keeps working."""
    if name.endswith("Config") and not name.startswith("_"):
        for spec in catalog.models().values():
            if spec.config.__name__ == name:
                return spec.config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
