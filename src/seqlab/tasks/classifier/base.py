"""What text and image classifiers share: the run's classes, the batched forward pass, and the
predictor (:class:`Classifier`) whose two kinds differ only in how they read their inputs.

A kind (:class:`~seqlab.tasks.classification.text.TextClassifier`,
:class:`~seqlab.tasks.classification.image.ImageClassifier`) writes how it turns its inputs into
what the model reads (``encode``), where its labelled examples come from (``split_examples``,
``file_examples``), its attention maps and its training data (``training_data``); labels,
probabilities, scores, evaluation and prediction are written once, here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from seqlab.atomic import atomic_write_json, read_format_json
from seqlab.builtin_records import RUN_FILES
from seqlab.config import ExperimentConfig
from seqlab.data.classification import ClassBatch, ClassificationBatches, label_ids
from seqlab.data.vocab import quiet_unknown
from seqlab.errors import CheckpointError, SeqlabError
from seqlab.runtime.precision import Resolved, autocast
from seqlab.storage.output_dirs import api_output_dir
from seqlab.storage.outputs import FILE_RULE, RULE, api_output_file
from seqlab.storage.text import own_data
from seqlab.tasks.base import Predictor, Run, as_batch
from seqlab.tasks.classifier import splits
from seqlab.tasks.classifier.metrics import ClassificationReport, classification_metrics
from seqlab.tasks.options import Option
from seqlab.tasks.report import Prediction

ARTEFACTS = RUN_FILES["classification"]
CLASSES_FORMAT = "seqlab.classes/1"


@dataclass
class Classes:
    """The label names and, for images, the input geometry and normalisation of the run."""

    labels: list[str]
    image: dict[str, float] | None = None  # size, channels, mean, std

    def save(self, path: Path) -> None:
        atomic_write_json(
            path, {"format": CLASSES_FORMAT, "labels": self.labels, "image": self.image}
        )

    @classmethod
    def load(cls, path: Path) -> Classes:
        data = read_format_json(path, CLASSES_FORMAT, "classes file")
        labels = data.get("labels")
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise CheckpointError(f"{path}: 'labels' must be a list of names")
        return cls(labels, data.get("image"))


@torch.no_grad()
def forward_batches(
    model: nn.Module, batches: Iterable[ClassBatch], precision: Resolved | None = None
) -> tuple[Tensor, Tensor]:
    """Logits ``(N, C)`` (float, on the CPU) and labels ``(N,)`` of every example of ``batches``,
    in batch order: the one forward pass of training's validation and of inference.
    ``precision``: autocast to it (None: as the caller set up)."""
    device = next(model.parameters()).device
    logits, labels = [], []
    for batch in batches:
        batch = batch.to(device)
        with autocast(precision, device) if precision else contextlib.nullcontext():
            logits.append(model(batch.inputs, batch.lengths).float().cpu())  # (B, C)
        labels.append(batch.labels.cpu())
    return torch.cat(logits), torch.cat(labels)


@dataclass
class TrainingData:
    """What a kind of classifier gives the trainer: the classes, encoded examples of the
    training and validation splits, the model's sizes, and how to save the artefacts and to wrap
    a model in a predictor."""

    classes: Classes
    train: tuple[Any, list[int]]  # inputs (token id lists, or images (N, C, H, W)), label ids
    val: tuple[Any, list[int]]
    sizes: dict[str, int]  # build_model's sizes; stored in every checkpoint
    save: Callable[[Path], None]
    predictor: Callable[[nn.Module], Classifier]


@dataclass
class Classifications(Prediction):
    """The most probable label of each input, with its probability."""

    items: list[str]
    found: list[tuple[str, float]]

    def lines(self) -> list[str]:
        """``LABEL<TAB>PROBABILITY<TAB>INPUT`` per input."""
        return [
            f"{label}\t{prob:.4f}\t{item}"
            for item, (label, prob) in zip(self.items, self.found, strict=True)
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "classifications": [
                {"input": item, "label": label, "probability": prob}
                for item, (label, prob) in zip(self.items, self.found, strict=True)
            ]
        }


class Classifier(Predictor):
    """A trained classifier: labels and probabilities, scores on labelled data, attention maps.

    Usable on a model being trained too (validation): a kind's ``training_data(...).predictor``.
    """

    task = "classification"
    capabilities: ClassVar[tuple[str, ...]] = (
        "classify",
        "probabilities",
        "score",
        "attention",
        "predict",
        "evaluate",
    )
    commands: ClassVar[tuple[str, ...]] = ("classify", "evaluate")
    options: ClassVar[tuple[Option, ...]] = (
        Option(
            "--png",
            f"draw the confusion matrix into FILE: {FILE_RULE}",
            ("evaluate",),
            role="figure",
            metavar="FILE",
            dest="confusion_png",
            figure="confusion matrix",
        ),
        Option(
            "--attention-png",
            "write per-head self-attention maps (and, for ViT, attention rollout on the image) "
            f"into DIR: {RULE}",
            ("classify",),
            role="figure_dir",
            metavar="DIR",
            figure="attention maps",
        ),
        Option(
            "--layer",
            "which layer's attention to draw (default: last)",
            ("classify",),
            type="int",
            default=-1,
        ),
    )
    #: whether it reads images (else text)
    images: ClassVar[bool] = False
    #: what one input is called in messages
    item: ClassVar[str] = "sentence"

    def __init__(
        self, model: nn.Module, cfg: ExperimentConfig, classes: Classes, run: Run | None = None
    ) -> None:
        super().__init__(model, cfg, run)
        self.classes = classes
        self.notes: list[str] = []  # conversions made to the last inputs (images)

    @property
    def labels(self) -> list[str]:
        return self.classes.labels

    @property
    def has_attention(self) -> bool:
        """Whether the model has self-attention to show (:meth:`attention`): the Transformer
        classifier and the ViT."""
        return hasattr(self.model, "attention")

    @property
    def attention_kinds(self) -> list[str]:
        """What :meth:`attention` gives: each layer's ``self``-attention (an image classifier
        adds its ``rollout``); none without attention."""
        return ["self"] if self.has_attention else []

    # ----------------------------------------------------------------- written by each kind
    def encode(self, items: Sequence[Any] | Tensor) -> Any:
        """What the model reads for ``items``: token id lists, or normalised images."""
        raise NotImplementedError

    def split_examples(self, split: str) -> tuple[Any, Any]:
        """The inputs and labels (names or ids) of a split of the run's dataset."""
        raise NotImplementedError

    def file_examples(self, files: Mapping[str, str]) -> tuple[Any, Any]:
        """The inputs and labels of the user's files (a kind that declares ``file`` options)."""
        raise NotImplementedError

    def attention(self, item: Any) -> tuple[list[str], list[Tensor]]:
        """Self-attention of one input: the token (or patch) names and each layer's weights
        ``(h, T, T)``. Only Transformer models have it."""
        raise NotImplementedError

    def figures_of(self, item: Any, weights: list[Tensor], stem: str) -> list[Path]:
        """Figures of one input's attention besides the per-layer maps (none by default)."""
        return []

    def report_inputs(self, items: Sequence[Any], numbers: Sequence[int]) -> None:
        """Check ``items`` and warn about what reading them changes, naming each by its input
        line (``numbers``): text classifiers report unknown tokens; nothing by default."""

    @classmethod
    def training_data(cls, cfg: ExperimentConfig, run_dir: Path | None) -> TrainingData:
        raise NotImplementedError

    @classmethod
    def accepts(cls, cfg: ExperimentConfig) -> bool:
        return splits.is_image_task(cfg) == cls.images

    # --------------------------------------------------------------------- derived, shared
    def _needs_attention(self) -> None:
        if not self.has_attention:
            raise SeqlabError(
                f"model.arch={self.cfg.model.arch} has no self-attention to draw; the "
                "transformer_classifier and vit models do"
            )

    def check(self, command: str, options: Mapping[str, Any]) -> dict[str, Any]:
        if options.get("layer", -1) != -1 and not options.get("attention_png"):
            raise SeqlabError(
                "--layer picks the layer that --attention-png draws; give --attention-png DIR too"
            )
        if options.get("attention_png") and not self.has_attention:
            raise SeqlabError(
                f"--attention-png: model.arch={self.cfg.model.arch} has no self-attention to "
                "draw (transformer_classifier and vit have)"
            )
        return dict(options)

    def probabilities(
        self, items: Sequence[str] | Sequence[Path] | str | Path | Tensor, batch_size: int = 256
    ) -> Tensor:
        """Class probabilities ``(N, C)``: sentences, image files, or images ``(N, C, H, W)`` in
        [0, 1]; ``(C,)`` for one sentence or image file (a string or path).

        A blank sentence is refused (there is nothing to classify); sentences longer than
        ``data.max_len`` tokens are cut to it, with one warning.
        """
        if not isinstance(items, Tensor):
            items, single = as_batch(items, self.item)
            if single:
                return self.probabilities(items, batch_size)[0]
        inputs = self.encode(items)
        if not len(inputs):
            return torch.zeros(0, len(self.labels))
        batches = ClassificationBatches(
            inputs, [0] * len(inputs), batch_size, shuffle=False, bucket=False
        )
        logits, _ = forward_batches(self.model, batches, self.precision)
        return logits.softmax(-1)  # (N, C)

    def classify(
        self, items: Sequence[str] | Sequence[Path] | str | Path | Tensor, batch_size: int = 256
    ) -> Any:
        """The most probable label of each sentence or image, with its probability: a list of
        ``(label, probability)``, or one pair for one sentence or image file (a string or path).
        Blank sentences are refused, long ones cut with a warning (see :meth:`probabilities`)."""
        single = isinstance(items, str | Path)
        probs = self.probabilities(items, batch_size)
        if single:
            probs = probs[None]  # (1, C)
        best = probs.argmax(-1)
        found = [(self.labels[int(i)], float(p[i])) for i, p in zip(best, probs, strict=True)]
        return found[0] if single else found

    def score(
        self, items: Sequence[str] | Tensor, labels: Sequence[str] | Tensor
    ) -> dict[str, Any]:
        """Accuracy, macro-F1 and confusion matrix of the predictions against ``labels`` (names,
        or ids for images), at least one. An unknown label name is an error."""
        if isinstance(items, str) or isinstance(labels, str):
            raise SeqlabError("score takes a list of examples and a list of labels, not a string")
        if not len(items) and not len(labels):
            raise SeqlabError("nothing to score: 0 examples and 0 labels")
        if len(items) != len(labels):
            raise SeqlabError(f"{len(items)} examples but {len(labels)} labels")
        gold = (
            labels.long()
            if isinstance(labels, Tensor)
            else torch.tensor(label_ids(labels, self.labels, "evaluation data"))
        )
        pred = self.predicted_ids(items)
        return {**classification_metrics(pred, gold, len(self.labels)), "labels": self.labels}

    def predicted_ids(self, items: Sequence[str] | Tensor) -> Tensor:
        """The most probable label's id of each example ``(N,)``, for :meth:`score`."""
        return self.probabilities(items).argmax(-1)

    def evaluate(
        self,
        split: str | None = None,
        files: Mapping[str, str | Path] | None = None,
        *,
        confusion_png: str | Path | None = None,
        force: bool = False,
    ) -> ClassificationReport:
        """Accuracy, macro-F1 and the confusion matrix on a ``split`` of the run's dataset
        (default: its evaluation split; reads the data) or on the user's ``files``; with
        ``confusion_png`` the confusion matrix drawn there, by the rule of ``--png``
        (:func:`seqlab.storage.outputs.output_file`: a file seqlab did not write is refused
        before any work unless ``force``)."""
        split, files = self._source(split, files, splits.eval_split(self.cfg))
        figure = api_output_file(confusion_png, "confusion_png", force, files)  # checked now
        if files:
            items, labels = self.file_examples(files)
            source = {"src": files["src"]}
        else:
            assert split is not None
            items, labels = self.split_examples(split)
            source = {"split": split}
        # the user's files: unknown tokens reported by line (file_examples); a split: own data
        with quiet_unknown(), own_data() if not files else contextlib.nullcontext():
            report = ClassificationReport(self.checkpoint, source, self.score(items, labels))
        report.device = str(self.device)
        report.check_finite()
        if confusion_png:
            name = str(self.run.run_dir) if self.run is not None else self.cfg.model.arch
            with figure:
                report.draw_confusion(confusion_png, name)
        return report

    def predict(
        self,
        inputs: Sequence[str] | str,
        *,
        attention_png: str | Path | None = None,
        layer: int = -1,
        numbers: Sequence[int] | None = None,
    ) -> Classifications:
        """``seqlab classify``: the label of each input (sentences, or image files); with
        ``attention_png`` the self-attention of layer ``layer`` (negative: from the last) of
        each input drawn into that directory, ``attention-NNNN-layerL.png`` after its input line
        (``numbers``, default 1, 2, …)."""
        self.check("classify", {"attention_png": attention_png})
        items, _ = as_batch(inputs, self.item)
        numbers = list(numbers) if numbers is not None else list(range(1, len(items) + 1))
        folder = api_output_dir(attention_png, "attention_png")  # checked now
        self.report_inputs(items, numbers)
        with folder, quiet_unknown():  # unknown tokens reported above, by input line
            found = self.classify(items) if items else []
            out = Classifications([str(item) for item in items], found, notes=list(self.notes))
            if attention_png:
                for number, item in zip(numbers, items, strict=True):
                    out.figures += self._draw_attention(Path(attention_png), number, item, layer)
        return out

    def _draw_attention(self, directory: Path, number: int, item: Any, layer: int) -> list[Path]:
        from seqlab.plotting_heatmaps import plot_self_attention  # deferred: matplotlib

        names, weights = self.attention(item)
        stem = str(directory / f"attention-{number:04d}")
        written = self.figures_of(item, weights, stem)
        shown = layer if layer >= 0 else len(weights) + layer
        if not 0 <= shown < len(weights):
            raise SeqlabError(f"--layer {layer}: the model has {len(weights)} layers")
        written.append(
            plot_self_attention(
                weights[shown],
                names,
                f"{stem}-layer{shown}.png",
                title=f"{str(item)[:80]} (layer {shown})",
            )
        )
        return written


def attention_layers(weights: list[Tensor]) -> list[Tensor]:
    """Each layer's weights of the first (only) example, float on the CPU: ``(h, T, T)``."""
    return [w[0].float().cpu() for w in weights]
