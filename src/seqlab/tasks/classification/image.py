"""Image classification: one label per image (the Vision Transformer of Dosovitskiy et al. 2021,
and a ConvNet).

An image is read in [0, 1] at the run's size and channels, then scaled by the training set's mean
and standard deviation (:func:`normalise`, the one scaling of training and inference). A run
directory holds ``classes.json``: the label names, the input size and those statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import torch
from torch import Tensor

from seqlab.config import ExperimentConfig
from seqlab.data.images import load_image
from seqlab.errors import SeqlabError
from seqlab.models import build_model
from seqlab.models.vit import attention_rollout
from seqlab.tasks.base import Run, load_weights
from seqlab.tasks.classifier import splits
from seqlab.tasks.classifier.base import (
    Classes,
    Classifier,
    TrainingData,
    attention_layers,
)
from seqlab.tasks.options import Option


def normalise(images: Tensor, stats: dict[str, float]) -> Tensor:
    """``(B, C, H, W)`` in [0, 1] → the model's input scale (the training set's statistics)."""
    return (images - stats["mean"]) / stats["std"]


class ImageClassifier(Classifier):
    """A trained image classifier (see :class:`~seqlab.tasks.classifier.base.Classifier`)."""

    kind = "image classification"
    item = "image file"
    images = True
    options: ClassVar[tuple[Option, ...]] = (
        *Classifier.options,
        Option("files", "image files", ("classify",), role="cli"),
        Option("--input", "one image file a line", ("classify",), role="cli", metavar="FILE"),
    )
    usage: ClassVar[dict[str, str]] = {
        "evaluate": "an image classifier is scored on a --split of its dataset",
        "classify": "give image files to classify (PNG, JPEG, ...): seqlab classify "
        "--run RUN_DIR a.png b.png, or --input LIST",
    }

    @classmethod
    def load(cls, run: Run) -> ImageClassifier:
        """The trained classifier of ``run`` (its classes, input geometry and checkpoint)."""
        classes = Classes.load(run.file("classes.json"))
        run.check_size("num_classes", len(classes.labels))
        model = build_model(run.cfg.model, num_classes=len(classes.labels))
        return cls(load_weights(model, run), run.cfg, classes, run)

    @property
    def stats(self) -> dict[str, float]:
        """Size, channels, mean and standard deviation of the training images."""
        if self.classes.image is None:
            raise SeqlabError("classes.json of an image classifier holds no image geometry")
        return self.classes.image

    @property
    def image_size(self) -> int:
        """The side, in pixels, of the square images the model reads."""
        return int(self.stats["size"])

    @property
    def attention_kinds(self) -> list[str]:
        """Each layer's ``self``-attention, and the ``rollout`` over the patches
        (:meth:`rollout`)."""
        return ["self", "rollout"] if self.has_attention else []

    # -- inputs
    def normalise(self, images: Tensor) -> Tensor:
        """``(B, C, H, W)`` in [0, 1] → the model's input scale (the training set's statistics)."""
        return normalise(images, self.stats)

    def read_image(
        self, source: str | Path | BinaryIO, max_pixels: int | None = None
    ) -> tuple[Tensor, str | None]:
        """One image (a file, or its bytes in a file object) as ``(C, H, W)`` in [0, 1] at the
        run's size and channels, and a note when it was converted (mode, size, inverted). An
        image over ``max_pixels`` (default PIL's limit), counted from its header, is refused
        before it is decoded (:func:`~seqlab.data.images.load_image`)."""
        return load_image(source, self.image_size, int(self.stats["channels"]), max_pixels)

    def read_images(self, paths: Sequence[str | Path]) -> Tensor:
        """Image files as ``(B, C, H, W)`` in [0, 1]; conversions are noted in ``self.notes``."""
        out, self.notes = [], []
        for path in paths:
            x, note = self.read_image(path)
            if note:
                self.notes.append(f"{path}: {note}")
            out.append(x)
        return torch.stack(out)

    def encode(self, items: Sequence[Any] | Tensor) -> Tensor:
        """Images ``(N, C, H, W)`` in [0, 1], or image files, normalised."""
        if isinstance(items, Tensor):
            return self.normalise(items)
        if not len(items):
            return torch.zeros(0)
        return self.normalise(self.read_images(items))

    # -- labelled examples
    def split_examples(self, split: str) -> tuple[Tensor, Tensor]:
        found = splits.image_splits(self.cfg)
        if split not in found:
            raise SeqlabError(
                f"{self.cfg.data.dataset} has no {split!r} split; choose from {', '.join(found)}"
            )
        return found[split]

    # -- attention
    @torch.no_grad()
    def attention(self, item: Any) -> tuple[list[str], list[Tensor]]:
        self._needs_attention()
        device = next(self.model.parameters()).device
        x = item if isinstance(item, Tensor) else self.read_images([item])[0]  # (C, H, W)
        weights = self.model.attention(self.normalise(x[None]).to(device))
        n = weights[0].shape[-1] - 1
        return ["[CLS]"] + [f"p{i}" for i in range(n)], attention_layers(weights)

    def rollout(self, weights: list[Tensor]) -> Tensor:
        """Attention rollout (Abnar & Zuidema 2020) of one image's weights (:meth:`attention`,
        L × ``(h, T, T)``): the class token's share of each patch ``(N,)``, a square grid of
        patches in row order."""
        return attention_rollout([w[None] for w in weights])[0]  # (N,)

    def figures_of(self, item: Any, weights: list[Tensor], stem: str) -> list[Path]:
        """The attention rollout drawn on the image (Abnar & Zuidema 2020)."""
        from seqlab.plotting_heatmaps import plot_rollout  # deferred: matplotlib

        image = item if isinstance(item, Tensor) else self.read_images([item])[0]
        share = self.rollout(weights)
        return [plot_rollout(image, share, f"{stem}-rollout.png", title=str(item))]

    # -- training
    @classmethod
    def training_data(cls, cfg: ExperimentConfig, run_dir: Path | None) -> TrainingData:
        """Normalised splits, and the labels and input statistics: the run's own when resuming,
        else measured on the training split."""
        found = splits.image_splits(cfg)
        (x_train, y_train), (x_val, y_val) = found["train"], found["val"]
        if run_dir is not None:
            classes = Classes.load(Path(run_dir) / "classes.json")
        else:
            classes = Classes(
                list(splits.known_labels(cfg)) or [str(i) for i in range(int(y_train.max()) + 1)],
                {
                    "size": x_train.shape[-1],
                    "channels": x_train.shape[1],
                    "mean": float(x_train.mean()),
                    "std": float(x_train.std()),
                },
            )
        stats = classes.image
        if stats is None:
            raise SeqlabError(f"{run_dir}/classes.json holds no image geometry")
        return TrainingData(
            classes,
            (normalise(x_train, stats), y_train.tolist()),
            (normalise(x_val, stats), y_val.tolist()),
            {"num_classes": len(classes.labels)},
            lambda directory: classes.save(Path(directory) / "classes.json"),
            lambda model: cls(model, cfg, classes),
        )
