"""The catalog's records: one frozen dataclass for each kind of thing seqlab names in a config
(a model's :class:`ModelSpec` and the :class:`Sizes` its builder reads, a dataset's
:class:`DatasetSpec` and its :class:`DataFile` downloads, a :class:`TaskSpec`, a recurrent
:class:`CellSpec`, a :class:`PositionSpec`). :mod:`seqlab.catalog` registers and reads them (and
re-exports every name here). This module imports nothing from seqlab.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: what a model reads, and what a dataset's examples are
Inputs = Literal["text", "image", "series", "audio"]
INPUTS = ("text", "image", "series", "audio")


@dataclass(frozen=True)
class Sizes:
    """What the data decides about a model's shape (vocabularies, classes, window, sample
    rate); a builder takes the ones its architecture needs with :meth:`need`.

    ``input_dim`` asks a classifier of tokens for float frames ``(B, T, input_dim)`` in their
    place (a linear projection instead of its embedding table), and ``input_frames`` a vision
    model for a one-channel ``input_dim × input_frames`` image: how the audio classifier
    (:mod:`seqlab.models.audio`) feeds its log-mel frames to the existing classifiers.
    """

    arch: str
    vocab_size: int | None = None
    src_vocab_size: int | None = None
    tgt_vocab_size: int | None = None
    num_classes: int | None = None
    window: int | None = None
    sample_rate: int | None = None
    input_dim: int | None = None
    input_frames: int | None = None

    def need(self, name: str) -> int:
        """The size called ``name``, which the caller of the builder must have given."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"model.arch={self.arch} needs {name}")
        return value


@dataclass(frozen=True)
class ModelSpec:
    """An architecture.

    Args:
        config: its config class, a :class:`seqlab.config.ModelConfigBase` whose ``arch`` field
            defaults to the architecture's name and whose ``task`` class variable names its task
            (``language_modeling``, ``translation``, ``classification``, ``forecasting``).
        build: ``build(cfg, sizes) -> nn.Module``: a fresh model from a validated config and the
            :class:`Sizes` the data decided.
        inputs: what the model reads: ``text`` (token ids), ``image``, ``series`` or ``audio``;
            a dataset must give the same (:attr:`DatasetSpec.inputs`). Unless given, what the
            config class says (its ``inputs`` class variable; ``text`` when it has none).
    """

    config: type
    build: Callable[[Any, Sizes], Any]
    inputs: Inputs = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.inputs is None:
            object.__setattr__(self, "inputs", getattr(self.config, "inputs", "text"))

    @property
    def arch(self) -> str:
        """``model.arch``: the default of the config class's ``arch`` field."""
        return self.config.model_fields["arch"].default

    @property
    def task(self) -> str:
        return self.config.task


@dataclass(frozen=True)
class DataFile:
    """One downloadable file of a dataset (:attr:`DatasetSpec.files`).

    Args:
        name: path inside the dataset's folder, e.g. ``train.en.gz``.
        url: canonical download address.
        sha256: digests accepted for the local file. The first is the canonical file's; further
            ones are known variants (for fra–eng, the 18,066-line slice kept in ``shared/data``).
        archive_member: when ``url`` is a zip, the member to extract into ``name``.
        archive_sha1: digest of the zip itself, as published by d2l.ai (``None`` if unknown).
        source_sha256: digest of the downloaded file (or archive member) itself, when the local
            copy is a transformation of it (``gzip``).
        gzip: the local file is the download gzip-compressed (mirrors keep ``.gz`` copies; a
            compressor may produce other bytes, so a local copy whose own digest is not in
            ``sha256`` is accepted when its decompressed content has ``source_sha256``).
    """

    name: str
    url: str
    sha256: tuple[str, ...]
    archive_member: str | None = None
    archive_sha1: str | None = None
    source_sha256: str | None = None
    gzip: bool = False


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset, as ``data.dataset`` names it.

    Args:
        name: the value of ``data.dataset``.
        task: the task its examples are for.
        read: ``read(data, seed)``: the examples, from the experiment's ``data`` section (a
            :class:`seqlab.config.DataConfig`) and ``train.seed``. What it returns is the task's
            format: the whole text (``language_modeling``); ``{split: [(source, target), ...]}``
            (``translation``); ``{split: [(text, label), ...]}`` or, for images, ``{split:
            (images (N, C, H, W) in [0, 1], labels (N,))}`` (``classification``), in both with
            ``train`` and the held-out ``val`` that chooses checkpoints; the series, a float
            tensor (N,) (``forecasting``).
        inputs: ``text``, ``image``, ``series`` or ``audio`` (clips,
            :mod:`seqlab.data.audio_datasets`).
        needs_path: the examples are the user's file, ``data.path`` (required with this
            dataset and refused with any other).
        labels: classification: the label names in the dataset's order (else the sorted labels
            of the training split).
        eval_split: classification: the split ``seqlab evaluate`` scores by default (``val``
            when None).
        summary: one line for ``seqlab data list``.
        natural_language: translation: both sides are natural-language sentences in
            ``data.src_lang`` / ``data.tgt_lang``, so the paper-style (Moses-tokenised) BLEU
            applies; False for generated symbol strings (dates), where it does not.
        files: the files ``seqlab data fetch`` downloads and the reader finds through
            :func:`seqlab.data.registry.resolve`, with their checksums (none for a generated
            dataset or the user's file).
        licence: the terms of the files (shown by ``seqlab data list``).
        citation: the work to cite for them.
        speakers: the speakers of a speech dataset, who ``data.test_speaker`` and
            ``data.val_speaker`` may hold out (none: those keys are refused with it).
        fetch: for a folder of files: ``fetch()`` finds or downloads it, returns its path.
        sample_rate: a speech dataset's recordings' own rate (Hz), which no resampling to a
            higher ``data.sample_rate`` adds content to (None: unknown, or the user's files).
        folder: the dataset is a folder fetched whole (true when ``fetch`` is given).

    seqlab's own records (:mod:`seqlab.builtin_records`) give neither ``read`` nor ``fetch``:
    their readers are :data:`seqlab.data.readers.READERS` and ``FOLDERS`` (so that a config
    validates, and ``seqlab data list`` lists, without importing a reader or PyTorch); a record
    from outside seqlab gives its ``read``.
    """

    name: str
    task: str
    read: Callable[[Any, int], Any] | None = None
    inputs: Inputs = "text"
    needs_path: bool = False
    labels: tuple[str, ...] = ()
    eval_split: str | None = None
    summary: str = ""
    natural_language: bool = True
    files: tuple[DataFile, ...] = ()
    licence: str = ""
    citation: str = ""
    speakers: tuple[str, ...] = ()
    fetch: Callable[[], Any] | None = None
    sample_rate: int | None = None
    folder: bool = False

    def __post_init__(self) -> None:
        if self.fetch is not None:
            object.__setattr__(self, "folder", True)


@dataclass(frozen=True)
class TaskSpec:
    """A task, as model configs name it (their ``task`` class variable), declared once: what
    trains it, what loads its runs, how it chooses checkpoints and how it is served.

    Args:
        name: the task's name (``translation``).
        build_experiment: ``build_experiment(cfg, run_dir) -> Experiment``: data, model, loss and
            metric for training (:class:`seqlab.tasks.base.Experiment`; ``run_dir`` when
            resuming, whose artefacts are then reused).
        predictors: its :class:`seqlab.tasks.base.Predictor` classes, one per kind of run (text
            and image classifiers are two kinds of one task); the first whose ``accepts(cfg)``
            is true loads a run. Their declared options make the command line's.
        select: how checkpoints are chosen (:class:`seqlab.objective.Selection`).
        artefacts: the files it writes into a run directory besides config and checkpoints.
        rules: ``rules(cfg)`` raises ``ValueError`` (naming the keys) when an
            :class:`seqlab.config.ExperimentConfig` of this task combines its sections wrongly.
        service: how it is served (:class:`seqlab.serving.service.Service`: route, request,
            response, handler, page panel), or None.
        summary: one line for listings.
    """

    name: str
    build_experiment: Callable[[Any, Any], Any]
    predictors: tuple[type, ...]
    select: Any
    artefacts: frozenset[str] = frozenset()
    rules: Callable[[Any], None] | None = None
    service: Any = None
    summary: str = ""


@dataclass(frozen=True)
class CellSpec:
    """A recurrent cell, as ``model.cell`` names it.

    Args:
        name: the value of ``model.cell``.
        cell: the from-scratch cell class, ``cell(input_size, hidden_size, **options)``; its
            ``state_size`` is the number of state tensors (1 for ``h``, 2 for ``(h, c)``).
        options: keyword arguments of ``cell`` (``nonlinearity="relu"``).
        fused: PyTorch's layer computing the same function, ``fused(input_size, hidden_size,
            num_layers, batch_first=..., dropout=..., bidirectional=...)``, or None.
        why_not_fused: when ``fused`` is None, why PyTorch has none (shown in errors).
        fusable: PyTorch has a fused layer for it (true when ``fused`` is given).

    seqlab's own records (:mod:`seqlab.builtin_records`) give neither ``cell`` nor ``fused``,
    only whether the cell is ``fusable``: the classes are bound to them by name in
    :data:`seqlab.nn.cells.CELLS` (so that a config validates without importing PyTorch), and
    :func:`seqlab.nn.cells.cell_spec` returns the whole record.
    """

    name: str
    cell: type | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    fused: Callable[..., Any] | None = None
    why_not_fused: str = ""
    fusable: bool = False

    def __post_init__(self) -> None:
        if self.fused is not None:
            object.__setattr__(self, "fusable", True)


@dataclass(frozen=True)
class PositionSpec:
    """A way a Transformer knows where each token is, as ``model.positions`` names it.

    Args:
        name: the value of ``model.positions``.
        summary: one line: what it computes and the paper.
        absolute: a vector per position added to the embeddings (a table or a formula); the
            others act inside self-attention, on the queries and keys or on the logits.
        bias: enters the attention logits as an additive bias, an ``(h, T_q, T_k)`` tensor per
            forward pass.
        causal_only: carries no order by itself; only a causal mask makes the model see it.
        linear_attention: usable with ``model.attention: linear`` (no logits to bias there).
        ctranslate2: how a CTranslate2 export writes it, or None where it cannot.
        pairs: rotates pairs of each head's dimensions: needs an even ``d_model / num_heads``.
    """

    name: str
    summary: str
    absolute: bool = False
    bias: bool = False
    causal_only: bool = False
    linear_attention: bool = True
    ctranslate2: str | None = None
    pairs: bool = False
