"""The ``data`` section of an experiment config: where the text (or images, series, audio) comes
from and how it becomes batches (:class:`DataConfig`), its SentencePiece settings
(:class:`SubwordConfig`, Kudo & Richardson 2018), and the rules of the held-out speakers of a
speech dataset (:func:`check_speakers`).

The other sections: :mod:`seqlab.config.sections`; the whole experiment, checked across its
sections: :mod:`seqlab.config.experiment`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from seqlab import catalog
from seqlab.config.strict import NonNegative, Positive, Strict


def _known_dataset(name: str) -> str:
    known = catalog.datasets()
    if name not in known:
        raise ValueError(f"Input should be {catalog.choices(sorted(known))}")
    return name


#: ``data.dataset``: a registered dataset (:class:`~seqlab.catalog.DatasetSpec`), which says
#: its task, its inputs and whether it reads the user's ``data.path``
DatasetName = Annotated[str, AfterValidator(_known_dataset)]
Language = Literal["en", "de", "fr", "zh"]
SubwordModel = Literal["bpe", "unigram", "char"]
Coverage = Annotated[float, Field(gt=0.0, le=1.0)]


class SubwordSide(Strict):
    """One side's own SentencePiece settings (``data.subword.src``, ``data.subword.tgt``): each
    key given replaces the shared one of ``data.subword`` for that side."""

    model_type: SubwordModel | None = None
    vocab_size: Positive | None = None
    character_coverage: Coverage | None = None


class SubwordConfig(Strict):
    """SentencePiece settings, used when ``data.tokenizer`` is ``subword``."""

    model_type: SubwordModel = Field(
        "bpe", description="char: one piece per character (Chinese characters, say)"
    )
    vocab_size: Positive = 8000
    character_coverage: Coverage = 1.0
    joint: bool = Field(True, description="one model for source and target (translation)")
    src: SubwordSide = Field(
        default_factory=SubwordSide,
        description="the source side's own settings, with joint: false",
    )
    tgt: SubwordSide = Field(
        default_factory=SubwordSide,
        description="the target side's own settings, with joint: false",
    )

    @model_validator(mode="after")
    def _sides_apart(self) -> SubwordConfig:
        for name in ("src", "tgt"):
            if self.joint and getattr(self, name).model_dump(exclude_none=True):
                raise ValueError(
                    f"data.subword.{name} sets one side's model, but data.subword.joint is "
                    "true (one model for both sides): set joint: false"
                )
        return self

    def side(self, name: Literal["src", "tgt"]) -> SubwordConfig:
        """The settings of side ``name``: the shared ones with that side's own laid over."""
        own = getattr(self, name).model_dump(exclude_none=True)
        return self.model_copy(update=own)


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
    normalize: Literal["none", "nmt", "letters", "simplified"] = Field(
        "none",
        description="letters: d2l Time Machine cleaning; nmt: d2l fra-eng preprocessing; "
        "simplified: Chinese in one script and layout (traditional to simplified by OpenCC, "
        "seqlab.data.chinese)",
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
    # audio (seqlab.data.audio_datasets)
    sample_rate: Annotated[int, Field(ge=1000, le=192_000)] = Field(
        8000, description="audio: clips are resampled to this rate (Hz)"
    )
    test_speaker: str | None = Field(
        None,
        description="fsdd: this speaker's 500 clips are the test split (else the dataset's "
        "own: indices 0-4 of each digit and speaker)",
    )
    val_speaker: str | None = Field(
        None,
        description="fsdd: this training speaker's clips are the validation split (else "
        "val_fraction of each digit's training clips)",
    )
    exclude_speakers: list[str] = Field(
        default_factory=list,
        description="fsdd: these speakers' clips are in no split (a further speaker held out "
        "of the run, for a choice made after validation)",
    )

    @field_validator("test_speaker", "val_speaker", "exclude_speakers", mode="before")
    @classmethod
    def _speaker_text(cls, value: object, info: ValidationInfo) -> object:
        # YAML reads 03 as the number 3: a speaker's name is text, and which text a number
        # meant (03 or 3) is not guessed
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int | float) and not isinstance(item, bool):
                raise ValueError(
                    f"speaker names are text, and YAML read {item!r} as a number: quote it "
                    f'(in a file {info.field_name}: "03"; on the command line '
                    f"'data.{info.field_name}=\"03\"')"
                )
        return value

    @model_validator(mode="after")
    def _languages_differ(self) -> DataConfig:
        datasets = catalog.datasets()
        if datasets[self.dataset].needs_path != (self.path is not None):
            with_path = catalog.choices([n for n, d in datasets.items() if d.needs_path])
            raise ValueError(
                f"data.path is required with dataset {with_path} and only allowed with them "
                f"(data.dataset={self.dataset})"
            )
        if self.tokenizer == "subword" and self.normalize in ("nmt", "letters"):
            raise ValueError(
                f"data.normalize={self.normalize} lowercases, and a subword tokenizer keeps case: "
                "choose data.normalize none or simplified with data.tokenizer: subword"
            )
        if self.src_lang == self.tgt_lang:
            raise ValueError(
                f"src_lang and tgt_lang are both {self.src_lang!r}; pick two languages"
            )
        check_speakers(self.dataset, self.test_speaker, self.val_speaker, self.exclude_speakers)
        return self


def check_speakers(
    dataset: str,
    test_speaker: str | None,
    val_speaker: str | None,
    exclude_speakers: Sequence[str] = (),
) -> None:
    """The rules of ``data.test_speaker``, ``data.val_speaker`` and ``data.exclude_speakers``
    (``ValueError`` naming the key): a dataset with speakers
    (:attr:`seqlab.catalog.DatasetSpec.speakers`), one of them each, and all different."""
    speakers = catalog.datasets()[dataset].speakers
    named = [("test_speaker", test_speaker), ("val_speaker", val_speaker)]
    named += [("exclude_speakers", s) for s in exclude_speakers]
    for key, speaker in named:
        if speaker is None:
            continue
        if not speakers:
            with_speakers = [n for n, d in catalog.datasets().items() if d.speakers]
            raise ValueError(
                f"data.{key} holds out a speaker of a speech dataset "
                f"({catalog.choices(with_speakers)}); data.dataset={dataset} has no speakers"
            )
        if speaker not in speakers:
            raise ValueError(
                f"data.{key}={speaker!r} is not a speaker of {dataset}; choose one of "
                f"{', '.join(speakers)}"
            )
    if test_speaker is not None and test_speaker == val_speaker:
        raise ValueError(
            f"data.val_speaker and data.test_speaker are both {test_speaker!r}; validation must "
            "come from the training speakers: pick another val_speaker"
        )
    for key, speaker in named[:2]:
        if speaker is not None and speaker in exclude_speakers:
            raise ValueError(
                f"data.{key}={speaker!r} is also in data.exclude_speakers; an excluded speaker "
                "is in no split"
            )
