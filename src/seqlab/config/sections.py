"""The sections of an experiment config besides ``data``: ``model`` (the base every
architecture's config class extends), ``train`` and ``decode``, each a pydantic model that forbids
unknown keys and coerces nothing (:class:`~seqlab.config.strict.Strict`), and the checks that one
section's values make sense together (:func:`check_heads`, :func:`check_positions`).

The ``data`` section (:class:`~seqlab.config.data_section.DataConfig`,
:func:`~seqlab.config.data_section.check_speakers`): :mod:`seqlab.config.data_section`; the base
and the bounded numbers every section shares: :mod:`seqlab.config.strict`. Their names are
importable from here too. The whole experiment, checked across its sections, and the reading of
a file: :mod:`seqlab.config.experiment`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from seqlab import catalog
from seqlab.config.data_section import (  # noqa: F401 (importable from here too)
    Coverage,
    DataConfig,
    DatasetName,
    Language,
    SubwordConfig,
    SubwordModel,
    SubwordSide,
    check_speakers,
)
from seqlab.config.strict import (  # noqa: F401 (importable from here too)
    Decay,
    NonNegative,
    Positive,
    Probability,
    Strict,
)
from seqlab.deprecation import renamed_keys

#: the largest learning rate accepted (SGD on recurrent LMs uses up to ~20; beyond 100 is a typo)
MAX_LR = 100.0


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


#: ``model.cell``: a recurrent cell registered in :mod:`seqlab.nn.cells` (:class:`~seqlab.catalog.CellSpec`)
CellName = Annotated[str, AfterValidator(_known_cell)]


class ModelConfigBase(Strict):
    """Base of every ``model`` section. ``arch`` names the architecture; each architecture's
    config subclasses this (seqlab's own in :mod:`seqlab.config.models`,
    :class:`~seqlab.config.models.RNNLMConfig`, …), narrows ``arch`` to its own name, sets
    ``task`` and ``inputs`` and is registered with its builder (:class:`~seqlab.catalog.ModelSpec`).
    :class:`~seqlab.config.ExperimentConfig` validates the ``model`` section with the class of
    its ``arch`` (:func:`seqlab.config.archs.model_config`)."""

    arch: str
    #: ``language_modeling``, ``translation``, ``classification`` or ``forecasting``
    task: ClassVar[str] = ""
    #: what the model reads: ``text``, ``image``, ``series`` or ``audio``
    #: (:attr:`seqlab.catalog.ModelSpec.inputs` unless its record says otherwise)
    inputs: ClassVar[str] = "text"

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        return renamed_keys("model", data)


def _known_positions(name: str) -> str:
    known = catalog.positions()
    if name not in known:
        raise ValueError(f"Input should be {catalog.choices(known)}")
    return name


#: ``model.positions``: a scheme registered in :mod:`seqlab.nn.attention_positions`
#: (:class:`~seqlab.catalog.PositionSpec`)
PositionsName = Annotated[
    str,
    AfterValidator(_known_positions),
    Field(
        description="how attention knows where each token is: sinusoidal or learned vectors "
        "added to the embeddings, rope (rotated queries and keys), alibi or t5_bias (a bias on "
        "the logits), none (causal models: the mask alone)"
    ),
]
#: ``model.attention``: softmax, or causal linear attention (Katharopoulos et al. 2020)
AttentionName = Annotated[
    Literal["softmax", "linear"],
    Field(
        description="causal self-attention: softmax, or linear (Katharopoulos et al. 2020: a "
        "running sum, generated as an RNN with a fixed-size state)"
    ),
]


def check_positions(
    positions: str,
    attention: str = "softmax",
    causal: bool = True,
    d_model: int | None = None,
    num_heads: int | None = None,
) -> None:
    """The combinations a Transformer refuses: linear attention with a scheme that biases or
    rotates the logits, no positions in a bidirectional encoder, and a scheme that rotates
    pairs of dimensions (RoPE) with an odd head size ``d_model / num_heads``."""
    spec = catalog.positions()[positions]
    head = d_model // num_heads if d_model and num_heads and not d_model % num_heads else 0
    if spec.pairs and head % 2:
        raise ValueError(
            f"model.positions={positions} needs an even head size (it rotates pairs of "
            f"dimensions): d_model={d_model} / num_heads={num_heads} = {head} is odd; "
            + _even_heads(d_model or 0, num_heads or 1)
        )
    if attention == "linear" and not spec.linear_attention:
        linear_ok = [n for n, p in catalog.positions().items() if p.linear_attention]
        raise ValueError(
            f"positions: {positions} acts on attention logits, which linear attention has not; "
            f"use one of {', '.join(linear_ok)}"
        )
    if spec.causal_only and not causal:
        raise ValueError(
            f"positions: {positions} leaves a bidirectional encoder blind to the order of its "
            "inputs; use it for causal models (transformer_lm, transformer_forecaster) only"
        )


def _even_heads(d_model: int, num_heads: int) -> str:
    """What gives an even head size: ``d_model + num_heads``, or the number of heads nearest
    ``num_heads`` that does."""
    fits = [h for h in range(1, d_model + 1) if not d_model % h and (d_model // h) % 2 == 0]
    other = min(fits, key=lambda h: (abs(h - num_heads), h)) if fits else None
    return f"use d_model={d_model + num_heads}" + (
        f" or num_heads={other}" if other is not None else ""
    )


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
        description="auto: bf16 where the hardware runs it natively and faster (feature flags "
        "and vendor, no timing: an Intel CPU with AVX512_BF16 but no AMX gets fp32), else fp32; "
        "the resolved precision is recorded in the run and kept on --resume",
    )
    accumulate: Positive = Field(
        1, description="minibatches per optimizer step (gradient accumulation), per process"
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto",
        description="auto: a CUDA GPU when PyTorch sees one, else the CPU; the device is "
        "recorded in run.json, and the run loads on any device",
    )
    threads: NonNegative = Field(0, description="torch threads; 0 leaves PyTorch's default")
    compile: bool = Field(
        False,
        description="compile the model's forward and backward with torch.compile (fewer, "
        "fused kernels; the first steps pay the compilation); checkpoints are unchanged",
    )
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
